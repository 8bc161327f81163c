// The CUDA generic tensor kernels (unary, binary, select, reduce, strided
// copy, fill, batched matmul, softmax) against the CPU backend's, on the same
// inputs: broadcasts, transposes, rank 0, empty reductions, NaN. Label
// `gpu`: the comparisons skip without a device; the argument checks, which
// fail before any CUDA call, run everywhere.
#include "CudaTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace cuda = autoshard::rt::cuda;
using namespace autoshard::rt::cuda::test;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
using Dims = std::vector<int64_t>;

int64_t countOf(const Dims &dims) {
  int64_t count = 1;
  for (int64_t d : dims)
    count *= d;
  return count;
}

class CudaTensorOpsTest : public CudaBlasKernelTest {
protected:

  /// Every element within rel * |cpu| + abs (+ gemmRel times the element's
  /// magnitude, the sum of |terms| of a product, when given), or NaN on
  /// both: f32 within f32Rel, bf16 within one bf16 rounding.
  void expectSame(const HostTensor &gpu, const HostTensor &cpu,
                  const std::string &what, double f32Rel = 1e-5,
                  const std::vector<double> *magnitude = nullptr) {
    ASSERT_EQ(gpu.size(), cpu.size()) << what;
    bool bf16 = gpu.dtype == ASRT_DTYPE_BF16;
    double rel = bf16 ? 1e-2 : f32Rel, abs = bf16 ? 1e-3 : 1e-6;
    size_t bad = 0;
    for (size_t i = 0; i < gpu.size(); ++i) {
      double g = gpu.get(i), c = cpu.get(i);
      double tol =
          rel * std::fabs(c) + abs + (magnitude ? 1e-5 * (*magnitude)[i] : 0.0);
      bool ok =
          std::isnan(c) ? std::isnan(g) : (g == c || std::fabs(g - c) <= tol);
      if (!ok && bad++ < 5)
        ADD_FAILURE() << what << "[" << i << "]: GPU " << g << ", CPU " << c;
    }
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << gpu.size()
                       << " elements differ";
  }

  std::vector<uint8_t> downloadMask(const void *device, size_t n) {
    std::vector<uint8_t> host(n);
    downloadBytes(device, host.data(), n);
    return host;
  }
};

// ---- Unary -------------------------------------------------------------

std::vector<float> unaryInputs(int32_t fn, size_t n, uint32_t seed) {
  bool positive = fn == ASRT_UNARY_LOG || fn == ASRT_UNARY_RSQRT ||
                  fn == ASRT_UNARY_SQRT || fn == ASRT_UNARY_POW ||
                  fn == ASRT_UNARY_RECIPROCAL;
  std::vector<float> x =
      positive ? uniform(n, seed, 0.1f, 4.0f) : uniform(n, seed, -6.0f, 6.0f);
  if (!positive) {
    x[0] = 0.0f;
    x[1] = kNaN; // every function keeps NaN (ReLU included)
  }
  return x;
}

TEST_P(CudaTensorOpsTest, UnaryAndItsGradientEveryFn) {
  const int32_t t = GetParam();
  const size_t n = 10007;
  for (int32_t fn = ASRT_UNARY_NEG; fn <= ASRT_UNARY_ERF; ++fn) {
    const std::string name = "fn " + std::to_string(fn);
    HostTensor x(t, unaryInputs(fn, n, 1 + fn)), dy(t, uniform(n, 2, -2, 2));
    HostTensor cpuY(t, n), cpuDx(t, n), gpuY(t, n), gpuDx(t, n);
    asrt_unary(&ctx, t, fn, x.data(), cpuY.data(), n, 2.5f);
    asrt_unary_grad(&ctx, t, fn, dy.data(), x.data(), cpuDx.data(), n, 2.5f);
    void *dX = upload(x), *dDy = upload(dy), *dY = upload(gpuY),
         *dDx = upload(gpuDx);
    cuda::unary(stream, t, fn, dX, dY, n, 2.5f);
    cuda::unaryGrad(stream, t, fn, dDy, dX, dDx, n, 2.5f);
    download(dY, gpuY);
    download(dDx, gpuDx);
    expectSame(gpuY, cpuY, "unary " + name);
    expectSame(gpuDx, cpuDx, "unary_grad " + name);
    // In place (dx = dy): the same as out of place.
    cuda::unaryGrad(stream, t, fn, dDy, dX, dDy, n, 2.5f);
    HostTensor inPlace(t, n);
    download(dDy, inPlace);
    EXPECT_EQ(inPlace.bytes, gpuDx.bytes) << name;
  }
}

// ---- Dropout ----------------------------------------------------------------

TEST_P(CudaTensorOpsTest, DropoutDrawsTheCpuMask) {
  const int32_t t = GetParam();
  // Rows of 7 from row 5 + 3 * 1500: blocks of 4 straddle the rows and the
  // tensor's start.
  const int64_t rows = 1429, rowElems = 7, n = rows * rowElems;
  ctx.setRandomSeed(1234);
  ctx.setRandomStep(9);
  ctx.setBatchRank(3);
  HostTensor x(t, uniform(n, 5, -2.0f, 2.0f)), cpuY(t, n), gpuY(t, n);
  asrt_dropout(&ctx, t, x.data(), cpuY.data(), n, rowElems, 5, 1500, 0.3f,
               2);
  void *dX = upload(x), *dY = upload(gpuY);
  cuda::dropout(stream, t, dX, dY, n, rowElems, 5, 1500, 3,
                autoshard::rt::dropoutMask(1234, 9, 2, 0.3f));
  download(dY, gpuY);
  EXPECT_EQ(gpuY.bytes, cpuY.bytes);
  size_t dropped = 0;
  for (size_t i = 0; i < cpuY.size(); ++i)
    dropped += cpuY.get(i) == 0.0f;
  EXPECT_GT(dropped, size_t(n) / 4); // about 0.3 n: the mask was applied
  EXPECT_LT(dropped, size_t(n) / 3);
}

// ---- Binary and select ---------------------------------------------------

struct BroadcastCase {
  const char *name;
  Dims dims, aStrides, bStrides;
  size_t aSize, bSize;
};

const BroadcastCase kBroadcasts[] = {
    {"row broadcast", {37, 3, 41}, {123, 41, 1}, {0, 1, 0}, 37 * 123, 3},
    {"transposed a", {5, 6, 7}, {1, 5, 30}, {0, 0, 1}, 210, 7},
    {"scalar a", {1, 9, 1, 13}, {0, 0, 0, 0}, {117, 13, 13, 1}, 1, 117},
    {"rank 0", {}, {}, {}, 1, 1},
    {"empty", {3, 0}, {0, 1}, {0, 1}, 1, 1},
};

TEST_P(CudaTensorOpsTest, BinaryEveryFnOverBroadcasts) {
  const int32_t t = GetParam();
  for (const BroadcastCase &c : kBroadcasts) {
    const int64_t count = countOf(c.dims);
    const int32_t rank = int32_t(c.dims.size());
    std::vector<float> av = uniform(c.aSize, 3, 0.5f, 3.0f);
    std::vector<float> bv = uniform(c.bSize, 4, -2.0f, 2.0f);
    if (c.aSize > 1)
      av[0] = kNaN; // max and min propagate it; comparisons are false (NE true)
    if (c.aSize > 1 && c.bSize > 2)
      bv[2] = av[1]; // an equal pair for EQ, LE, GE
    HostTensor a(t, av), b(t, bv);
    void *dA = upload(a), *dB = upload(b);
    for (int32_t fn = ASRT_BINARY_ADD; fn <= ASRT_BINARY_NE; ++fn) {
      const std::string what =
          std::string(c.name) + ", fn " + std::to_string(fn);
      if (fn >= ASRT_BINARY_LT) {
        std::vector<uint8_t> cpuMask(count), gpuMask(count, 7);
        asrt_binary(&ctx, t, fn, a.data(), b.data(), cpuMask.data(), rank,
                    c.dims.data(), c.aStrides.data(), c.bStrides.data());
        void *dY = uploadBytes(gpuMask.data(), count);
        cuda::binary(stream, t, fn, dA, dB, dY, rank, c.dims.data(),
                     c.aStrides.data(), c.bStrides.data());
        EXPECT_EQ(downloadMask(dY, count), cpuMask) << what;
      } else {
        HostTensor cpuY(t, count), gpuY(t, count);
        asrt_binary(&ctx, t, fn, a.data(), b.data(), cpuY.data(), rank,
                    c.dims.data(), c.aStrides.data(), c.bStrides.data());
        void *dY = upload(gpuY);
        cuda::binary(stream, t, fn, dA, dB, dY, rank, c.dims.data(),
                     c.aStrides.data(), c.bStrides.data());
        download(dY, gpuY);
        expectSame(gpuY, cpuY, what);
      }
    }
  }
}

TEST_P(CudaTensorOpsTest, SelectCopiesTheChosenBits) {
  const int32_t t = GetParam();
  // y[37, 3, 41] = cond[37, 1, 41] ? a (dense) : b[3] (broadcast).
  Dims dims = {37, 3, 41}, condStrides = {41, 0, 1}, aStrides = {123, 41, 1},
       bStrides = {0, 1, 0};
  const int64_t count = countOf(dims);
  std::vector<uint8_t> cond(37 * 41);
  for (size_t i = 0; i < cond.size(); ++i)
    cond[i] = (i * 7919) % 3 == 0;
  HostTensor a(t, uniform(count, 5, -1, 1)), b(t, uniform(3, 6, -1, 1));
  HostTensor cpuY(t, count), gpuY(t, count);
  asrt_select(&ctx, t, cond.data(), a.data(), b.data(), cpuY.data(), 3,
              dims.data(), condStrides.data(), aStrides.data(),
              bStrides.data());
  const uint8_t *dCond =
      static_cast<const uint8_t *>(uploadBytes(cond.data(), cond.size()));
  void *dA = upload(a), *dB = upload(b), *dY = upload(gpuY);
  cuda::select(stream, t, dCond, dA, dB, dY, 3, dims.data(), condStrides.data(),
               aStrides.data(), bStrides.data());
  download(dY, gpuY);
  EXPECT_EQ(gpuY.bytes, cpuY.bytes);
}

// ---- Reduce --------------------------------------------------------------

struct ReduceCase {
  const char *name;
  Dims outDims, outStrides, redDims, redStrides;
  size_t xSize;
};

const ReduceCase kReductions[] = {
    // x[300, 70]: rows and columns (one thread per output), everything.
    {"rows", {300}, {70}, {70}, {1}, 21000},
    {"columns", {70}, {1}, {300}, {70}, 21000},
    {"all", {}, {}, {300, 70}, {70, 1}, 21000},
    // x[4, 33, 5, 40] over dims 1 and 3 (1320 elements: a block per output).
    {"interleaved", {4, 5}, {6600, 40}, {33, 40}, {200, 1}, 26400},
    {"empty", {6}, {1}, {0}, {1}, 6},
    {"nothing reduced", {7}, {2}, {}, {}, 14},
};

TEST_P(CudaTensorOpsTest, ReduceEveryOpBothKernels) {
  const int32_t t = GetParam();
  for (const ReduceCase &c : kReductions) {
    std::vector<float> xv = uniform(c.xSize, 7, -4, 4);
    if (c.xSize > 100)
      xv[42] = kNaN; // in one output of each case: MAX and MIN keep it
    HostTensor x(t, xv);
    void *dX = upload(x);
    const int64_t outCount = countOf(c.outDims);
    for (int32_t reduceOp = ASRT_REDUCE_SUM; reduceOp <= ASRT_REDUCE_MIN;
         ++reduceOp) {
      HostTensor cpuY(t, outCount), gpuY(t, outCount);
      asrt_reduce(&ctx, t, reduceOp, x.data(), cpuY.data(),
                  int32_t(c.outDims.size()), c.outDims.data(),
                  c.outStrides.data(), int32_t(c.redDims.size()),
                  c.redDims.data(), c.redStrides.data());
      void *dY = upload(gpuY);
      cuda::reduce(stream, t, reduceOp, dX, dY, int32_t(c.outDims.size()),
                   c.outDims.data(), c.outStrides.data(),
                   int32_t(c.redDims.size()), c.redDims.data(),
                   c.redStrides.data());
      download(dY, gpuY);
      // Both sum in double: only the order differs.
      expectSame(gpuY, cpuY,
                 std::string(c.name) + ", reduce_op " +
                     std::to_string(reduceOp),
                 1e-6);
    }
  }
}

// ---- Copy and fill ---------------------------------------------------------

TEST_P(CudaTensorOpsTest, CopyStridedAndFill) {
  const int32_t t = GetParam();
  // x[30, 40] transposed into rows 5..45, columns 2..32 of y[50, 36].
  HostTensor x(t, uniform(1200, 8, -1, 1));
  HostTensor cpuY(t, uniform(1800, 9, 5, 6));
  HostTensor gpuY = cpuY;
  Dims dims = {40, 30}, xStrides = {1, 40}, yStrides = {36, 1};
  asrt_copy_strided(&ctx, t, x.data(), cpuY.data(), 2, dims.data(),
                    xStrides.data(), 0, yStrides.data(), 5 * 36 + 2);
  void *dX = upload(x), *dY = upload(gpuY);
  cuda::copyStrided(stream, t, dX, dY, 2, dims.data(), xStrides.data(), 0,
                    yStrides.data(), 5 * 36 + 2);
  download(dY, gpuY);
  EXPECT_EQ(gpuY.bytes, cpuY.bytes) << "copy_strided";
  // Rank 0 with offsets, then a fill.
  cuda::copyStrided(stream, t, dX, dY, 0, nullptr, nullptr, 17, nullptr, 3);
  download(dY, gpuY);
  EXPECT_EQ(gpuY.get(3), x.get(17));
  HostTensor cpuF(t, 1001), gpuF(t, 1001);
  asrt_fill(&ctx, t, cpuF.data(), 1001, 0.1f);
  void *dF = upload(gpuF);
  cuda::fill(stream, t, dF, 1001, 0.1f);
  download(dF, gpuF);
  EXPECT_EQ(gpuF.bytes, cpuF.bytes) << "fill";
}

TEST_P(CudaTensorOpsTest, CopyStridedAndFillMoveI32) {
  // The labels of a HuggingFace step: padded with -100 (a fill and a
  // copy), then sliced (a strided copy); the same bits as the CPU's.
  if (GetParam() != ASRT_DTYPE_F32)
    GTEST_SKIP() << "i32 only; runs in the f32 instance";
  std::vector<int32_t> labels = {16777217, 1, 2, 3, 4, 5};
  Dims dims = {2, 3}, in = {3, 1}, out = {4, 1};
  std::vector<int32_t> cpuPadded(8), cpuShifted(6);
  asrt_fill(&ctx, ASRT_DTYPE_I32, cpuPadded.data(), 8, -100.0f);
  asrt_copy_strided(&ctx, ASRT_DTYPE_I32, labels.data(), cpuPadded.data(), 2,
                    dims.data(), in.data(), 0, out.data(), 0);
  asrt_copy_strided(&ctx, ASRT_DTYPE_I32, cpuPadded.data(), cpuShifted.data(),
                    2, dims.data(), out.data(), 1, in.data(), 0);
  ASSERT_EQ(cpuShifted, (std::vector<int32_t>{1, 2, -100, 4, 5, -100}));

  void *dLabels = uploadBytes(labels.data(), 24);
  std::vector<int32_t> gpuPadded(8, 7), gpuShifted(6, 7);
  void *dPadded = uploadBytes(gpuPadded.data(), 32),
       *dShifted = uploadBytes(gpuShifted.data(), 24);
  cuda::fill(stream, ASRT_DTYPE_I32, dPadded, 8, -100.0f);
  cuda::copyStrided(stream, ASRT_DTYPE_I32, dLabels, dPadded, 2, dims.data(),
                    in.data(), 0, out.data(), 0);
  cuda::copyStrided(stream, ASRT_DTYPE_I32, dPadded, dShifted, 2, dims.data(),
                    out.data(), 1, in.data(), 0);
  downloadBytes(dPadded, gpuPadded.data(), 32);
  downloadBytes(dShifted, gpuShifted.data(), 24);
  EXPECT_EQ(gpuPadded, cpuPadded);
  EXPECT_EQ(gpuShifted, cpuShifted);
}

// ---- Matmul ----------------------------------------------------------------

struct MatmulCase {
  const char *name;
  Dims batch, aStrides, bStrides;
  int64_t m, n, k;
  bool ta, tb;
  size_t aSize, bSize;
  int64_t aBase = 0, bBase = 0; // where a[0] and b[0] are in their storage
};

std::vector<MatmulCase> matmulCases() {
  const int64_t m = 19, n = 23, k = 37;
  const int64_t mk = m * k, kn = k * n;
  return {
      {"plain", {}, {}, {}, m, n, k, false, false, size_t(mk), size_t(kn)},
      {"trans a", {}, {}, {}, m, n, k, true, false, size_t(mk), size_t(kn)},
      {"trans both", {}, {}, {}, m, n, k, true, true, size_t(mk), size_t(kn)},
      // x[2, 3, m, k] @ w[k, n]: one GEMM of 6 m rows.
      {"broadcast b",
       {2, 3},
       {3 * mk, mk},
       {0, 0},
       m,
       n,
       k,
       false,
       true,
       size_t(6 * mk),
       size_t(kn)},
      // a shared along the inner batch dim: strided batches of 3, twice.
      {"broadcast a",
       {2, 3},
       {mk, 0},
       {3 * kn, kn},
       m,
       n,
       k,
       true,
       false,
       size_t(2 * mk),
       size_t(6 * kn)},
      // Batch dims swapped relative to the storage.
      {"permuted batch",
       {3, 2},
       {mk, 3 * mk},
       {kn, 3 * kn},
       m,
       n,
       k,
       false,
       false,
       size_t(6 * mk),
       size_t(6 * kn)},
      // A flipped batch (negative stride): one GEMM per matrix.
      {"flipped batch",
       {4},
       {-mk},
       {kn},
       m,
       n,
       k,
       false,
       false,
       size_t(4 * mk),
       size_t(4 * kn),
       3 * mk,
       0},
      {"k = 0", {2}, {0}, {0}, m, n, 0, false, false, 1, 1},
  };
}

TEST_P(CudaTensorOpsTest, MatmulAgreesWithTheCpu) {
  const int32_t t = GetParam();
  for (const MatmulCase &c : matmulCases()) {
    HostTensor a(t, uniform(c.aSize, 10, -1, 1)),
        b(t, uniform(c.bSize, 11, -1, 1));
    const int64_t count = countOf(c.batch), mn = c.m * c.n;
    const int32_t rank = int32_t(c.batch.size());
    HostTensor cpuY(t, count * mn), gpuY(t, count * mn);
    const size_t eb = a.elementSize();
    asrt_matmul(&ctx, t, a.bytes.data() + c.aBase * eb,
                b.bytes.data() + c.bBase * eb, cpuY.data(), rank,
                c.batch.data(), c.aStrides.data(), c.bStrides.data(), c.m, c.n,
                c.k, c.ta, c.tb);
    // Each element's magnitude (sum of |a| |b|) bounds the rounding of a
    // sum in another order.
    std::vector<double> magnitude(count * mn, 0.0);
    for (int64_t i = 0; i < count; ++i) {
      int64_t ao = c.aBase, bo = c.bBase, rest = i;
      for (size_t d = c.batch.size(); d-- > 0;) {
        ao += rest % c.batch[d] * c.aStrides[d];
        bo += rest % c.batch[d] * c.bStrides[d];
        rest /= c.batch[d];
      }
      for (int64_t r = 0; r < c.m; ++r)
        for (int64_t col = 0; col < c.n; ++col)
          for (int64_t p = 0; p < c.k; ++p)
            magnitude[i * mn + r * c.n + col] +=
                std::fabs(a.get(ao + (c.ta ? p * c.m + r : r * c.k + p)) *
                          b.get(bo + (c.tb ? col * c.k + p : p * c.n + col)));
    }
    char *dA = static_cast<char *>(upload(a)),
         *dB = static_cast<char *>(upload(b));
    void *dY = upload(gpuY);
    cuda::matmul(*blas, t, dA + c.aBase * eb, dB + c.bBase * eb, dY, rank,
                 c.batch.data(), c.aStrides.data(), c.bStrides.data(), c.m, c.n,
                 c.k, c.ta, c.tb);
    download(dY, gpuY);
    expectSame(gpuY, cpuY, c.name, 1e-5, &magnitude);
  }
}

// ---- Softmax ---------------------------------------------------------------

TEST_P(CudaTensorOpsTest, SoftmaxAndLogSoftmaxWithGradients) {
  const int32_t t = GetParam();
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {37, 257}, {300, 1500}};
  for (auto [rows, cols] : shapes)
    for (int32_t log : {0, 1}) {
      const std::string what = (log ? "log_softmax " : "softmax ") +
                               std::to_string(rows) + "x" +
                               std::to_string(cols);
      const size_t n = size_t(rows * cols);
      std::vector<float> xv = uniform(n, 12, -8, 8);
      xv[0] += 500.0f; // stability: a row far from 0
      if (rows > 1)
        xv[cols + 1] = kNaN; // row 1 is NaN
      HostTensor x(t, xv), dy(t, uniform(n, 13, -1, 1));
      HostTensor cpuY(t, n), cpuDx(t, n), gpuY(t, n), gpuDx(t, n);
      asrt_softmax(&ctx, t, x.data(), cpuY.data(), rows, cols, log);
      asrt_softmax_grad(&ctx, t, dy.data(), cpuY.data(), cpuDx.data(), rows,
                        cols, log);
      void *dX = upload(x), *dDy = upload(dy), *dY = upload(gpuY),
           *dDx = upload(gpuDx);
      cuda::softmax(stream, t, dX, dY, rows, cols, log);
      download(dY, gpuY);
      expectSame(gpuY, cpuY, what);
      // The gradient from the CPU's y, so that only the gradient differs.
      void *dCpuY = upload(cpuY);
      cuda::softmaxGrad(stream, t, dDy, dCpuY, dDx, rows, cols, log);
      download(dDx, gpuDx);
      expectSame(gpuDx, cpuDx, what + " grad");
    }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaTensorOpsTest, kDtypes, dtypeName);

// ---- Argument checks (before any CUDA call: run everywhere) ----------------

TEST(CudaTensorOpsDeathTest, BadCodesAndShapesAreFatal) {
  // Re-executes the binary rather than forking a process with CUDA threads.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Dims nine(9, 1), negative = {3, -2};
  EXPECT_DEATH(cuda::unary(nullptr, ASRT_DTYPE_F32, 19, nullptr, nullptr, 1, 0),
               "unary: fn = 19 is not an asrt_unary_fn \\(0 \\.\\. 18\\)");
  EXPECT_DEATH(cuda::binary(nullptr, ASRT_DTYPE_F32, 13, nullptr, nullptr,
                            nullptr, 0, nullptr, nullptr, nullptr),
               "binary: fn = 13 is not an asrt_binary_fn");
  EXPECT_DEATH(cuda::binary(nullptr, ASRT_DTYPE_F32, ASRT_BINARY_ADD, nullptr,
                            nullptr, nullptr, 9, nine.data(), nine.data(),
                            nine.data()),
               "binary: the rank of dims is 9, outside \\[0, 8\\]");
  EXPECT_DEATH(cuda::reduce(nullptr, ASRT_DTYPE_F32, 7, nullptr, nullptr, 0,
                            nullptr, nullptr, 0, nullptr, nullptr),
               "reduce: reduce_op = 7 is not an asrt_reduce_op");
  EXPECT_DEATH(cuda::copyStrided(nullptr, ASRT_DTYPE_F32, nullptr, nullptr, 2,
                                 negative.data(), nine.data(), 0, nine.data(),
                                 0),
               "copy_strided: dims\\[1\\] = -2 is negative");
  EXPECT_DEATH(
      cuda::softmax(nullptr, ASRT_DTYPE_I32, nullptr, nullptr, 1, 1, 0),
      "softmax: dtype 1");
  EXPECT_DEATH(cuda::fill(nullptr, ASRT_DTYPE_I32, nullptr, 1, 0.5f),
               "fill: value = 0.5 is not an integer in the int32 range");
  EXPECT_DEATH(cuda::copyStrided(nullptr, ASRT_DTYPE_I64, nullptr, nullptr, 0,
                                 nullptr, nullptr, 0, nullptr, 0),
               "copy_strided: dtype 4 is not f32 \\(0\\), bf16 \\(2\\) or "
               "i32 \\(1\\)");
}

} // namespace
