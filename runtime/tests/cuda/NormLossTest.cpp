// The CUDA norms, RoPE, embeddings and losses against the CPU
// backend's, on the same inputs and odd shapes (rows that are not multiples
// of a block, more rows than the gradient kernels have blocks). Label `gpu`:
// the comparisons skip without a device; the argument checks, which fail
// before any CUDA call, run everywhere.
#include "CudaTestUtil.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace cuda = autoshard::rt::cuda;
using namespace autoshard::rt::cuda::test;

namespace {

constexpr float kEps = 1e-5f;

class CudaNormLossTest : public CudaKernelTest {
protected:
  /// A device copy of int32 indices (ids, labels).
  const int32_t *uploadIndices(const std::vector<int32_t> &v) {
    return static_cast<const int32_t *>(
        uploadBytes(v.data(), v.size() * sizeof(int32_t)));
  }
};

// Rows x cols: a single element, the odd widths, rows that span
// several warps of columns, and more rows (300) than the gradient kernels'
// 256 blocks, so that a block sums several rows into its partials.
const std::pair<int64_t, int64_t> kNormShapes[] = {
    {1, 1}, {37, 96}, {37, 257}, {300, 769}};

TEST_P(CudaNormLossTest, LayerNorm) {
  const int32_t t = GetParam();
  for (auto [rows, cols] : kNormShapes) {
    SCOPED_TRACE("rows " + std::to_string(rows) + ", cols " +
                 std::to_string(cols));
    const size_t n = size_t(rows * cols);
    // An offset mean, as a residual stream has.
    HostTensor x(t, uniform(n, 11, 2.0f, 4.0f)), dy(t, uniform(n, 12, -1, 1));
    HostTensor gamma(t, uniform(cols, 13, 0.5f, 1.5f)),
        beta(t, uniform(cols, 14, -1, 1));
    HostTensor cpuY(t, n), cpuDx(t, n), cpuDg(t, cols), cpuDb(t, cols);
    asrt_layer_norm_fwd(&ctx, t, x.data(), gamma.data(), beta.data(),
                        cpuY.data(), rows, cols, kEps);
    asrt_layer_norm_grad(&ctx, t, dy.data(), x.data(), gamma.data(),
                         cpuDx.data(), cpuDg.data(), cpuDb.data(), rows, cols,
                         kEps);
    HostTensor gpuY(t, n), gpuDx(t, n), gpuDg(t, cols), gpuDb(t, cols);
    void *dX = upload(x), *dDy = upload(dy), *dGamma = upload(gamma),
         *dBeta = upload(beta);
    void *dY = upload(gpuY), *dDx = upload(gpuDx), *dDg = upload(gpuDg),
         *dDb = upload(gpuDb);
    cuda::layerNormFwd(stream, t, dX, dGamma, dBeta, dY, rows, cols, kEps);
    cuda::layerNormGrad(stream, t, dDy, dX, dGamma, dDx, dDg, dDb, rows, cols,
                        kEps);
    download(dY, gpuY);
    download(dDx, gpuDx);
    download(dDg, gpuDg);
    download(dDb, gpuDb);
    expectClose(gpuY, cpuY, "layer_norm_fwd y");
    expectClose(gpuDx, cpuDx, "layer_norm_grad dx");
    expectClose(gpuDg, cpuDg, "layer_norm_grad dgamma");
    expectClose(gpuDb, cpuDb, "layer_norm_grad dbeta");
  }
}

TEST_P(CudaNormLossTest, LayerNormOfRowsWithLargeMean) {
  // x = 1000 + O(1): a float mean would lose the centred values' accuracy.
  const int32_t t = GetParam();
  const int64_t rows = 5, cols = 300;
  const size_t n = size_t(rows * cols);
  HostTensor x(t, uniform(n, 15, 1000.0f, 1008.0f));
  HostTensor gamma(t, uniform(cols, 16, 0.5f, 1.5f)),
      beta(t, uniform(cols, 17, -1, 1)), dy(t, uniform(n, 18, -1, 1));
  HostTensor cpuY(t, n), cpuDx(t, n), cpuDg(t, cols), cpuDb(t, cols);
  asrt_layer_norm_fwd(&ctx, t, x.data(), gamma.data(), beta.data(), cpuY.data(),
                      rows, cols, kEps);
  asrt_layer_norm_grad(&ctx, t, dy.data(), x.data(), gamma.data(), cpuDx.data(),
                       cpuDg.data(), cpuDb.data(), rows, cols, kEps);
  HostTensor gpuY(t, n), gpuDx(t, n), gpuDg(t, cols), gpuDb(t, cols);
  void *dX = upload(x), *dGamma = upload(gamma), *dBeta = upload(beta),
       *dDy = upload(dy);
  void *dY = upload(gpuY), *dDx = upload(gpuDx), *dDg = upload(gpuDg),
       *dDb = upload(gpuDb);
  cuda::layerNormFwd(stream, t, dX, dGamma, dBeta, dY, rows, cols, kEps);
  cuda::layerNormGrad(stream, t, dDy, dX, dGamma, dDx, dDg, dDb, rows, cols,
                      kEps);
  download(dY, gpuY);
  download(dDx, gpuDx);
  download(dDg, gpuDg);
  download(dDb, gpuDb);
  expectClose(gpuY, cpuY, "layer_norm_fwd y");
  expectClose(gpuDx, cpuDx, "layer_norm_grad dx");
  expectClose(gpuDg, cpuDg, "layer_norm_grad dgamma");
  expectClose(gpuDb, cpuDb, "layer_norm_grad dbeta");
}

TEST_P(CudaNormLossTest, RmsNorm) {
  const int32_t t = GetParam();
  for (auto [rows, cols] : kNormShapes) {
    SCOPED_TRACE("rows " + std::to_string(rows) + ", cols " +
                 std::to_string(cols));
    const size_t n = size_t(rows * cols);
    HostTensor x(t, uniform(n, 21, -2, 2)), dy(t, uniform(n, 22, -1, 1));
    HostTensor weight(t, uniform(cols, 23, 0.5f, 1.5f));
    HostTensor cpuY(t, n), cpuDx(t, n), cpuDw(t, cols);
    asrt_rms_norm_fwd(&ctx, t, x.data(), weight.data(), cpuY.data(), rows, cols,
                      kEps);
    asrt_rms_norm_grad(&ctx, t, dy.data(), x.data(), weight.data(),
                       cpuDx.data(), cpuDw.data(), rows, cols, kEps);
    HostTensor gpuY(t, n), gpuDx(t, n), gpuDw(t, cols);
    void *dX = upload(x), *dDy = upload(dy), *dW = upload(weight);
    void *dY = upload(gpuY), *dDx = upload(gpuDx), *dDw = upload(gpuDw);
    cuda::rmsNormFwd(stream, t, dX, dW, dY, rows, cols, kEps);
    cuda::rmsNormGrad(stream, t, dDy, dX, dW, dDx, dDw, rows, cols, kEps);
    download(dY, gpuY);
    download(dDx, gpuDx);
    download(dDw, gpuDw);
    expectClose(gpuY, cpuY, "rms_norm_fwd y");
    expectClose(gpuDx, cpuDx, "rms_norm_grad dx");
    expectClose(gpuDw, cpuDw, "rms_norm_grad dweight");
  }
}

TEST_P(CudaNormLossTest, NormGradsOfNoRowsAreZero) {
  // dgamma, dbeta and dweight are sums over rows: zero rows, zero sums
  // (the outputs start as NaN).
  const int32_t t = GetParam();
  const int64_t cols = 33;
  HostTensor gamma(t, uniform(cols, 24, 0.5f, 1.5f));
  HostTensor dg(t, cols), db(t, cols), dw(t, cols);
  void *dGamma = upload(gamma), *dDg = upload(dg), *dDb = upload(db),
       *dDw = upload(dw);
  void *unused = upload(gamma); // x, dy and dx: never read with no rows
  cuda::layerNormGrad(stream, t, unused, unused, dGamma, unused, dDg, dDb, 0,
                      cols, kEps);
  cuda::rmsNormGrad(stream, t, unused, unused, dGamma, unused, dDw, 0, cols,
                    kEps);
  download(dDg, dg);
  download(dDb, db);
  download(dDw, dw);
  HostTensor zeros(t, std::vector<float>(cols, 0.0f));
  expectClose(dg, zeros, "layer_norm_grad dgamma");
  expectClose(db, zeros, "layer_norm_grad dbeta");
  expectClose(dw, zeros, "rms_norm_grad dweight");
}

struct RopeShape {
  int64_t batch, seq, heads, headDim;
  float theta;
};

TEST_P(CudaNormLossTest, Rope) {
  const int32_t t = GetParam();
  // One pair; the shape; Llama 3's theta at head_dim 64; more head
  // vectors (36) than the kernel's blocks along y; an odd number of pairs.
  const RopeShape shapes[] = {{1, 1, 1, 2, 10000.0f},
                              {2, 24, 4, 16, 10000.0f},
                              {1, 33, 2, 64, 500000.0f},
                              {3, 7, 12, 8, 10000.0f},
                              {2, 5, 4, 6, 10.0f}};
  for (const RopeShape &s : shapes) {
    SCOPED_TRACE("batch " + std::to_string(s.batch) + ", seq " +
                 std::to_string(s.seq) + ", heads " + std::to_string(s.heads) +
                 ", head_dim " + std::to_string(s.headDim));
    const size_t n = size_t(s.batch * s.seq * s.heads * s.headDim);
    HostTensor x(t, uniform(n, 31, -1, 1)), dy(t, uniform(n, 32, -1, 1));
    HostTensor cpuY(t, n), cpuDx(t, n);
    asrt_rope_fwd(&ctx, t, x.data(), cpuY.data(), s.batch, s.seq, s.heads,
                  s.headDim, s.theta);
    asrt_rope_grad(&ctx, t, dy.data(), cpuDx.data(), s.batch, s.seq, s.heads,
                   s.headDim, s.theta);
    HostTensor gpuY(t, n), gpuDx(t, n);
    void *dX = upload(x), *dDy = upload(dy), *dY = upload(gpuY),
         *dDx = upload(gpuDx);
    cuda::ropeFwd(stream, t, dX, dY, s.batch, s.seq, s.heads, s.headDim,
                  s.theta);
    cuda::ropeGrad(stream, t, dDy, dDx, s.batch, s.seq, s.heads, s.headDim,
                   s.theta);
    download(dY, gpuY);
    download(dDx, gpuDx);
    expectClose(gpuY, cpuY, "rope_fwd y");
    expectClose(gpuDx, cpuDx, "rope_grad dx");
  }
}

TEST_P(CudaNormLossTest, Embedding) {
  const int32_t t = GetParam();
  const int64_t vocab = 1000, nIds = 37 * 8;
  // Ids from a few dozen rows, so that most repeat, and the last row.
  std::mt19937 rng(41);
  std::vector<int32_t> ids(nIds);
  for (int32_t &id : ids)
    id = int32_t(rng() % 40) * 25;
  ids[17] = int32_t(vocab - 1);
  for (int64_t dim : {int64_t(96), int64_t(257)}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    const size_t tableN = size_t(vocab * dim), yN = size_t(nIds * dim);
    HostTensor table(t, uniform(tableN, 42, -1, 1)),
        dy(t, uniform(yN, 43, -1, 1));
    HostTensor cpuY(t, yN), cpuDt(t, tableN);
    asrt_embedding_fwd(&ctx, t, ids.data(), table.data(), cpuY.data(), nIds,
                       vocab, dim);
    asrt_embedding_grad(&ctx, t, dy.data(), ids.data(), cpuDt.data(), nIds,
                        vocab, dim);
    // The outputs start as NaN: rows no id selects must become zero.
    HostTensor gpuY(t, yN), gpuDt(t, tableN);
    const int32_t *dIds = uploadIndices(ids);
    void *dTable = upload(table), *dDy = upload(dy), *dY = upload(gpuY),
         *dDt = upload(gpuDt);
    cuda::embeddingFwd(stream, t, dIds, dTable, dY, nIds, vocab, dim);
    cuda::embeddingGrad(stream, t, dDy, dIds, dDt, nIds, vocab, dim);
    download(dY, gpuY);
    download(dDt, gpuDt);
    // A gather and sums in the CPU's order: equal bits, not just close.
    EXPECT_EQ(gpuY.bytes, cpuY.bytes) << "embedding_fwd y";
    expectClose(gpuDt, cpuDt, "embedding_grad dtable");
  }
}

TEST_P(CudaNormLossTest, PositionEmbedding) {
  const int32_t t = GetParam();
  const int64_t batch = 3, seq = 24, maxPositions = 32, dim = 96;
  const size_t n = size_t(batch * seq * dim), wpeN = size_t(maxPositions * dim);
  HostTensor x(t, uniform(n, 51, -1, 1)), wpe(t, uniform(wpeN, 52, -1, 1)),
      dy(t, uniform(n, 53, -1, 1));
  HostTensor cpuY(t, n), cpuDwpe(t, wpeN);
  asrt_add_position_embedding_fwd(&ctx, t, x.data(), wpe.data(), cpuY.data(),
                                  batch, seq, dim);
  asrt_add_position_embedding_grad(&ctx, t, dy.data(), cpuDwpe.data(), batch,
                                   seq, maxPositions, dim);
  HostTensor gpuY(t, n), gpuInPlace(t, n), gpuDwpe(t, wpeN);
  void *dX = upload(x), *dWpe = upload(wpe), *dDy = upload(dy),
       *dY = upload(gpuY), *dDwpe = upload(gpuDwpe);
  cuda::addPositionEmbeddingFwd(stream, t, dX, dWpe, dY, batch, seq, dim);
  cuda::addPositionEmbeddingGrad(stream, t, dDy, dDwpe, batch, seq,
                                 maxPositions, dim);
  download(dY, gpuY);
  download(dDwpe, gpuDwpe);
  expectClose(gpuY, cpuY, "add_position_embedding_fwd y");
  // Positions past seq get zero (the output started as NaN).
  expectClose(gpuDwpe, cpuDwpe, "add_position_embedding_grad dwpe");
  // y may alias x.
  cuda::addPositionEmbeddingFwd(stream, t, dX, dWpe, dX, batch, seq, dim);
  download(dX, gpuInPlace);
  expectClose(gpuInPlace, cpuY, "add_position_embedding_fwd in place");
}

TEST_P(CudaNormLossTest, SoftmaxCrossEntropy) {
  const int32_t t = GetParam();
  // One class; the vocabulary; GPT-2's, wider than a block by far.
  const std::pair<int64_t, int64_t> shapes[] = {
      {1, 1}, {7, 13}, {37, 1000}, {3, 50257}};
  // Every row counts; every third row ignored (-100, torch's padding
  // label); a valid class ignored; every row ignored.
  enum class Ignore { None, Padding, Class, All };
  for (auto [rows, classes] : shapes)
    for (Ignore ignore :
         {Ignore::None, Ignore::Padding, Ignore::Class, Ignore::All}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + ", classes " +
                   std::to_string(classes) + ", ignore mode " +
                   std::to_string(static_cast<int>(ignore)));
      const size_t n = size_t(rows * classes);
      HostTensor logits(t, uniform(n, 61, -8, 8));
      std::mt19937 rng(62);
      std::vector<int32_t> labels(rows);
      for (int32_t &label : labels)
        label = int32_t(rng() % uint32_t(classes));
      // A confident row: p(label) close to 1, where p - 1 cancels.
      logits.set(size_t(labels[0]), 30.0f);
      int64_t ignoreIndex = ASRT_NO_IGNORE_INDEX;
      if (ignore == Ignore::Padding) {
        ignoreIndex = -100;
        for (int64_t r = 1; r < rows; r += 3)
          labels[r] = -100;
      } else if (ignore == Ignore::Class) {
        ignoreIndex = labels[rows - 1];
      } else if (ignore == Ignore::All) {
        ignoreIndex = -100;
        labels.assign(rows, -100);
      }
      const float dlossValue = 0.75f;

      HostTensor cpuLoss(ASRT_DTYPE_F32, 1), cpuGrad(t, n), cpuGradOne(t, n);
      asrt_softmax_xent_fwd(&ctx, t, logits.data(), labels.data(),
                            static_cast<float *>(cpuLoss.data()), rows,
                            classes, ignoreIndex);
      asrt_softmax_xent_grad(&ctx, t, logits.data(), labels.data(),
                             &dlossValue, cpuGrad.data(), rows, classes,
                             ignoreIndex);
      asrt_softmax_xent_grad(&ctx, t, logits.data(), labels.data(), nullptr,
                             cpuGradOne.data(), rows, classes, ignoreIndex);

      HostTensor gpuLoss(ASRT_DTYPE_F32, 1), gpuGrad(t, n), gpuGradOne(t, n),
          gpuInPlace(t, n),
          dloss(ASRT_DTYPE_F32, std::vector<float>{dlossValue});
      const int32_t *dLabels = uploadIndices(labels);
      void *dLogits = upload(logits), *dLoss = upload(gpuLoss),
           *dDloss = upload(dloss), *dGrad = upload(gpuGrad),
           *dGradOne = upload(gpuGradOne), *dInPlace = upload(logits);
      cuda::softmaxXentFwd(stream, t, dLogits, dLabels,
                           static_cast<float *>(dLoss), rows, classes,
                           ignoreIndex);
      cuda::softmaxXentGrad(stream, t, dLogits, dLabels,
                            static_cast<const float *>(dDloss), dGrad, rows,
                            classes, ignoreIndex);
      cuda::softmaxXentGrad(stream, t, dLogits, dLabels, nullptr, dGradOne,
                            rows, classes, ignoreIndex);
      // dlogits may alias logits.
      cuda::softmaxXentGrad(stream, t, dInPlace, dLabels,
                            static_cast<const float *>(dDloss), dInPlace, rows,
                            classes, ignoreIndex);
      download(dLoss, gpuLoss);
      download(dGrad, gpuGrad);
      download(dGradOne, gpuGradOne);
      download(dInPlace, gpuInPlace);
      // The loss is f32 for both dtypes: the f32 tolerance applies.
      expectClose(gpuLoss, cpuLoss, "softmax_xent_fwd loss");
      expectClose(gpuGrad, cpuGrad, "softmax_xent_grad dlogits");
      expectClose(gpuGradOne, cpuGradOne, "softmax_xent_grad, dloss null");
      expectClose(gpuInPlace, cpuGrad, "softmax_xent_grad in place");
      if (ignore == Ignore::All) {
        // abi.h: no counted row gives 0 and a zero gradient, not NaN.
        EXPECT_EQ(gpuLoss.get(0), 0.0f);
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(gpuGrad.get(i), 0.0f) << "element " << i;
      }
    }
}

TEST_P(CudaNormLossTest, NllLoss) {
  const int32_t t = GetParam();
  // One class; more rows than a block has threads (the forward is one
  // block); a vocabulary.
  const std::pair<int64_t, int64_t> shapes[] = {
      {1, 1}, {7, 13}, {300, 37}, {3, 50257}};
  for (auto [rows, classes] : shapes)
    for (bool ignoreSome : {false, true}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + ", classes " +
                   std::to_string(classes) +
                   (ignoreSome ? ", every third row ignored" : ""));
      const size_t n = size_t(rows * classes);
      HostTensor input(t, uniform(n, 71, -8, 0));
      std::mt19937 rng(72);
      std::vector<int32_t> labels(rows);
      for (int32_t &label : labels)
        label = int32_t(rng() % uint32_t(classes));
      int64_t ignoreIndex = ASRT_NO_IGNORE_INDEX;
      if (ignoreSome) {
        ignoreIndex = -100;
        for (int64_t r = 1; r < rows; r += 3)
          labels[r] = -100;
      }
      const float dlossValue = 0.75f;
      HostTensor cpuLoss(ASRT_DTYPE_F32, 1), cpuGrad(t, n), cpuGradOne(t, n);
      asrt_nll_loss_fwd(&ctx, t, input.data(), labels.data(),
                        static_cast<float *>(cpuLoss.data()), rows, classes,
                        ignoreIndex);
      asrt_nll_loss_grad(&ctx, t, labels.data(), &dlossValue, cpuGrad.data(),
                         rows, classes, ignoreIndex);
      asrt_nll_loss_grad(&ctx, t, labels.data(), nullptr, cpuGradOne.data(),
                         rows, classes, ignoreIndex);

      // The gradients start as NaN on the device: every element is written.
      HostTensor gpuLoss(ASRT_DTYPE_F32, 1),
          gpuGrad(t, std::vector<float>(n, NAN)),
          gpuGradOne(t, std::vector<float>(n, NAN)),
          dloss(ASRT_DTYPE_F32, std::vector<float>{dlossValue});
      const int32_t *dLabels = uploadIndices(labels);
      void *dInput = upload(input), *dLoss = upload(gpuLoss),
           *dDloss = upload(dloss), *dGrad = upload(gpuGrad),
           *dGradOne = upload(gpuGradOne);
      cuda::nllLossFwd(stream, t, dInput, dLabels, static_cast<float *>(dLoss),
                       rows, classes, ignoreIndex);
      cuda::nllLossGrad(stream, t, dLabels, static_cast<const float *>(dDloss),
                        dGrad, rows, classes, ignoreIndex);
      cuda::nllLossGrad(stream, t, dLabels, nullptr, dGradOne, rows, classes,
                        ignoreIndex);
      download(dLoss, gpuLoss);
      download(dGrad, gpuGrad);
      download(dGradOne, gpuGradOne);
      expectClose(gpuLoss, cpuLoss, "nll_loss_fwd loss");
      expectClose(gpuGrad, cpuGrad, "nll_loss_grad dinput");
      expectClose(gpuGradOne, cpuGradOne, "nll_loss_grad, dloss null");
    }
}

TEST_P(CudaNormLossTest, OutOfRangeIndicesAreFatalAndNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const int32_t t = GetParam();
  const int64_t vocab = 11, dim = 6;
  HostTensor table(t, uniform(vocab * dim, 71, -1, 1)), y(t, 3 * dim);
  void *dTable = upload(table), *dY = upload(y);
  const int32_t *tooLarge = uploadIndices({0, 10, 11});
  const int32_t *negative = uploadIndices({4, -1, 2});
  EXPECT_DEATH(
      cuda::embeddingFwd(stream, t, tooLarge, dTable, dY, 3, vocab, dim),
      "embedding_fwd: id 11 at index 2 is outside \\[0, 11\\)");
  EXPECT_DEATH(
      cuda::embeddingGrad(stream, t, dY, negative, dTable, 3, vocab, dim),
      "embedding_grad: id -1 at index 1 is outside \\[0, 11\\)");
  void *dLoss = upload(y);
  EXPECT_DEATH(cuda::softmaxXentFwd(stream, t, dTable, tooLarge,
                                    static_cast<float *>(dLoss), 3, 11,
                                    ASRT_NO_IGNORE_INDEX),
               "softmax_xent_fwd: row 2 has label 11, outside \\[0, 11\\)");
  EXPECT_DEATH(cuda::softmaxXentGrad(stream, t, dTable, negative, nullptr, dY,
                                     3, 11, ASRT_NO_IGNORE_INDEX),
               "softmax_xent_grad: row 1 has label -1, outside \\[0, 11\\)");
  // An ignore index excuses its own value only.
  EXPECT_DEATH(cuda::softmaxXentGrad(stream, t, dTable, negative, nullptr, dY,
                                     3, 11, -100),
               "softmax_xent_grad: row 1 has label -1, outside \\[0, 11\\) "
               "for 11 classes and not the ignore index");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaNormLossTest, kDtypes, dtypeName);

/// Shapes and arguments are checked on the host before any CUDA call, so
/// these run on machines without a device too.
TEST(CudaNormLossChecks, BadArgumentsAreFatalBeforeAnyLaunch) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float v = 1.0f;
  const int32_t f32 = ASRT_DTYPE_F32;
  EXPECT_DEATH(cuda::layerNormFwd(nullptr, f32, &v, &v, &v, &v, 1, 1, -1.0f),
               "layer_norm_fwd: eps = -1 must be non-negative");
  EXPECT_DEATH(cuda::layerNormGrad(nullptr, f32, &v, &v, &v, &v, &v, nullptr, 1,
                                   1, kEps),
               "layer_norm_grad: the dbeta pointer is null");
  EXPECT_DEATH(cuda::rmsNormFwd(nullptr, f32, &v, nullptr, &v, 1, 1, kEps),
               "rms_norm_fwd: the weight pointer is null");
  EXPECT_DEATH(cuda::rmsNormGrad(nullptr, f32, &v, &v, &v, &v, &v, -2, 1, kEps),
               "rms_norm_grad: rows = -2 is negative");
  EXPECT_DEATH(
      cuda::layerNormFwd(nullptr, ASRT_DTYPE_I32, &v, &v, &v, &v, 1, 1, kEps),
      "layer_norm_fwd: dtype");
  EXPECT_DEATH(cuda::ropeFwd(nullptr, f32, &v, &v, 1, 1, 1, 3, 10000.0f),
               "rope_fwd: head_dim = 3 must be even");
  EXPECT_DEATH(cuda::ropeGrad(nullptr, f32, &v, &v, 1, 1, 1, 2, 0.0f),
               "rope_grad: theta = 0 must be positive and finite");
  EXPECT_DEATH(cuda::embeddingFwd(nullptr, f32, nullptr, &v, &v, -1, 11, 6),
               "embedding_fwd: n_ids = -1 is negative");
  EXPECT_DEATH(cuda::addPositionEmbeddingGrad(nullptr, f32, &v, &v, 1, 9, 8, 4),
               "add_position_embedding_grad: seq = 9 exceeds max_positions "
               "= 8");
  EXPECT_DEATH(cuda::softmaxXentFwd(nullptr, f32, &v, nullptr, &v, 0, 5,
                                    ASRT_NO_IGNORE_INDEX),
               "softmax_xent_fwd: rows = 0 and classes = 5 must both be at "
               "least 1");
  EXPECT_DEATH(
      cuda::softmaxXentGrad(nullptr, f32, &v, nullptr, nullptr, &v, 2, 0,
                            ASRT_NO_IGNORE_INDEX),
      "softmax_xent_grad: rows = 2 and classes = 0");
}

} // namespace
