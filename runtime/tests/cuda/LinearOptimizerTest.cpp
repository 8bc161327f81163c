// The CUDA linear layers (cuBLAS) and optimizer kernels against the CPU
// backend's, on the same inputs. Label `gpu`: the kernel tests skip without a
// CUDA device.
#include "CudaTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cuda = autoshard::rt::cuda;
using namespace autoshard::rt::cuda::test;

namespace {

/// The absolute values of t's elements, as f32 (exact for bf16 values).
HostTensor absF32(const HostTensor &t) {
  std::vector<float> v(t.size());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = std::fabs(t.get(i));
  return HostTensor(ASRT_DTYPE_F32, v);
}

// ---- Linear ----

class CudaLinearTest : public CudaBlasKernelTest {
protected:

  /// Like expectClose, with an absolute floor of 1e-5 times the element's
  /// magnitude (the sum of the absolute values of its terms, `magnitude`):
  /// the GPU sums in another order than OpenBLAS, so an element that cancels
  /// to near zero carries the rounding error of its terms, not of itself. A
  /// wrong layout or operand is off by O(magnitude).
  void expectCloseGemm(const HostTensor &gpu, const HostTensor &cpu,
                       const HostTensor &magnitude, const char *what) {
    ASSERT_EQ(gpu.size(), cpu.size());
    ASSERT_EQ(magnitude.size(), cpu.size());
    bool bf16 = gpu.dtype == ASRT_DTYPE_BF16;
    double rel = bf16 ? 1e-2 : 1e-5, abs = bf16 ? 1e-3 : 1e-6;
    size_t bad = 0;
    for (size_t i = 0; i < gpu.size(); ++i) {
      double g = gpu.get(i), c = cpu.get(i);
      double tol = rel * std::fabs(c) + abs + 1e-5 * magnitude.get(i);
      if (!(std::fabs(g - c) <= tol) && bad++ < 5)
        ADD_FAILURE() << what << "[" << i << "]: GPU " << g << ", CPU " << c
                      << ", tolerance " << tol;
    }
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << gpu.size()
                       << " elements differ";
  }

  /// linear_fwd on both backends, with or without a bias; the GPU's y
  /// `yOffset` elements into its allocation (a view off the allocation's
  /// alignment, as an arena's may be).
  void forward(int64_t rows, int64_t in, int64_t out, bool withBias,
               uint32_t seed, size_t yOffset = 0) {
    int32_t t = GetParam();
    HostTensor x(t, uniform(size_t(rows * in), seed, -1, 1));
    HostTensor w(t, uniform(size_t(out * in), seed + 1, -1, 1));
    HostTensor b(t, uniform(size_t(out), seed + 2, -2, 2));
    HostTensor cpuY(t, size_t(rows * out)), gpuY(t, size_t(rows * out));
    asrt_linear_fwd(&ctx, t, x.data(), w.data(), withBias ? b.data() : nullptr,
                    cpuY.data(), rows, in, out);
    // Magnitudes: the same product over absolute values, in f32.
    HostTensor ax = absF32(x), aw = absF32(w), ab = absF32(b);
    HostTensor mag(ASRT_DTYPE_F32, size_t(rows * out));
    asrt_linear_fwd(&ctx, ASRT_DTYPE_F32, ax.data(), aw.data(),
                    withBias ? ab.data() : nullptr, mag.data(), rows, in, out);
    HostTensor padded(t, size_t(rows * out) + yOffset);
    void *dx = upload(x), *dw = upload(w), *db = upload(b);
    void *dy = static_cast<char *>(upload(padded)) + yOffset * padded.elementSize();
    cuda::linearFwd(*blas, t, dx, dw, withBias ? db : nullptr, dy, rows, in,
                    out);
    downloadBytes(dy, gpuY.data(), gpuY.bytes.size());
    expectCloseGemm(gpuY, cpuY, mag,
                    withBias ? "linear_fwd with bias"
                             : "linear_fwd without bias");
  }

  /// linear_gelu_fwd on both backends: pre as linear_fwd's output, y as
  /// GELU's within the same bounds (in bf16 the GPU's fused epilogue takes
  /// the GELU of the f32 sum, the CPU of the rounded pre-activation: they
  /// differ by GELU's slope, at most about 1.13, times pre's rounding,
  /// under y's bf16 bound).
  void linearGelu(int64_t rows, int64_t in, int64_t out, uint32_t seed) {
    int32_t t = GetParam();
    HostTensor x(t, uniform(size_t(rows * in), seed, -1, 1));
    HostTensor w(t, uniform(size_t(out * in), seed + 1, -1, 1));
    HostTensor b(t, uniform(size_t(out), seed + 2, -2, 2));
    const size_t n = size_t(rows * out);
    HostTensor cpuPre(t, n), cpuY(t, n), gpuPre(t, n), gpuY(t, n);
    asrt_linear_gelu_fwd(&ctx, t, x.data(), w.data(), b.data(), cpuPre.data(),
                         cpuY.data(), rows, in, out);
    HostTensor ax = absF32(x), aw = absF32(w), ab = absF32(b);
    HostTensor mag(ASRT_DTYPE_F32, n);
    asrt_linear_fwd(&ctx, ASRT_DTYPE_F32, ax.data(), aw.data(), ab.data(),
                    mag.data(), rows, in, out);
    void *dx = upload(x), *dw = upload(w), *db = upload(b);
    void *dpre = upload(gpuPre), *dy = upload(gpuY);
    cuda::linearGeluFwd(*blas, t, dx, dw, db, dpre, dy, rows, in, out);
    download(dpre, gpuPre);
    download(dy, gpuY);
    expectCloseGemm(gpuPre, cpuPre, mag, "linear_gelu_fwd's pre-activation");
    expectCloseGemm(gpuY, cpuY, mag, "linear_gelu_fwd's GELU");
  }

  /// linear_grad_gelu on both backends, with and without the bias
  /// gradient. Magnitudes: the product over absolute values (GELU's slope
  /// is at most about 1.13, so its terms are within that), and its column
  /// sums for db. In bf16 the GPU's fused epilogue scales the f32 product,
  /// the CPU the rounded one.
  void linearGradGelu(int64_t rows, int64_t in, int64_t out, uint32_t seed) {
    int32_t t = GetParam();
    HostTensor dy(t, uniform(size_t(rows * out), seed, -1, 1));
    HostTensor w(t, uniform(size_t(out * in), seed + 1, -1, 1));
    HostTensor pre(t, uniform(size_t(rows * in), seed + 2, -3, 3));
    const size_t n = size_t(rows * in);
    HostTensor ady = absF32(dy), aw = absF32(w);
    HostTensor mag(ASRT_DTYPE_F32, n), dbMag(ASRT_DTYPE_F32, size_t(in));
    asrt_linear_grad_input(&ctx, ASRT_DTYPE_F32, ady.data(), aw.data(),
                           mag.data(), rows, in, out);
    asrt_bias_grad(&ctx, ASRT_DTYPE_F32, mag.data(), dbMag.data(), rows, in);
    for (bool withBias : {true, false}) {
      HostTensor cpuD(t, n), gpuD(t, n), cpuDb(t, size_t(in)),
          gpuDb(t, size_t(in));
      asrt_linear_grad_gelu(&ctx, t, dy.data(), w.data(), pre.data(),
                            cpuD.data(), withBias ? cpuDb.data() : nullptr,
                            rows, in, out);
      void *ddy = upload(dy), *dw = upload(w), *dpre = upload(pre);
      void *dd = upload(gpuD), *ddb = upload(gpuDb);
      cuda::linearGradGelu(*blas, t, ddy, dw, dpre, dd,
                           withBias ? ddb : nullptr, rows, in, out);
      download(dd, gpuD);
      expectCloseGemm(gpuD, cpuD, mag, "linear_grad_gelu's input gradient");
      if (withBias) {
        download(ddb, gpuDb);
        // The CPU sums the input gradient's rounded elements, the bf16
        // epilogue its f32 ones: each term may differ by about two bf16
        // roundings (2^-8 of itself), so db by 2^-7 of the sum of the
        // terms' magnitudes (as a multiple of expectCloseGemm's 1e-5).
        HostTensor termMag(ASRT_DTYPE_F32, size_t(in));
        HostTensor absD = absF32(cpuD);
        asrt_bias_grad(&ctx, ASRT_DTYPE_F32, absD.data(), termMag.data(),
                       rows, in);
        const float scale = t == ASRT_DTYPE_BF16 ? 0.0078125f / 1e-5f : 1.0f;
        std::vector<float> bound(static_cast<size_t>(in));
        for (size_t i = 0; i < bound.size(); ++i)
          bound[i] = std::max(dbMag.get(i), scale * termMag.get(i));
        expectCloseGemm(gpuDb, cpuDb, HostTensor(ASRT_DTYPE_F32, bound),
                        "linear_grad_gelu's bias grad");
      }
    }
  }

  void gradInput(int64_t rows, int64_t in, int64_t out, uint32_t seed) {
    int32_t t = GetParam();
    HostTensor dy(t, uniform(size_t(rows * out), seed, -1, 1));
    HostTensor w(t, uniform(size_t(out * in), seed + 1, -1, 1));
    HostTensor cpuDx(t, size_t(rows * in)), gpuDx(t, size_t(rows * in));
    asrt_linear_grad_input(&ctx, t, dy.data(), w.data(), cpuDx.data(), rows, in,
                           out);
    HostTensor ady = absF32(dy), aw = absF32(w);
    HostTensor mag(ASRT_DTYPE_F32, size_t(rows * in));
    asrt_linear_grad_input(&ctx, ASRT_DTYPE_F32, ady.data(), aw.data(),
                           mag.data(), rows, in, out);
    void *ddy = upload(dy), *dw = upload(w), *ddx = upload(gpuDx);
    cuda::linearGradInput(*blas, t, ddy, dw, ddx, rows, in, out);
    download(ddx, gpuDx);
    expectCloseGemm(gpuDx, cpuDx, mag, "linear_grad_input");
  }

  void gradWeight(int64_t rows, int64_t in, int64_t out, uint32_t seed) {
    int32_t t = GetParam();
    HostTensor dy(t, uniform(size_t(rows * out), seed, -1, 1));
    HostTensor x(t, uniform(size_t(rows * in), seed + 1, -1, 1));
    HostTensor cpuDw(t, size_t(out * in)), gpuDw(t, size_t(out * in));
    asrt_linear_grad_weight(&ctx, t, dy.data(), x.data(), cpuDw.data(), rows,
                            in, out);
    HostTensor ady = absF32(dy), ax = absF32(x);
    HostTensor mag(ASRT_DTYPE_F32, size_t(out * in));
    asrt_linear_grad_weight(&ctx, ASRT_DTYPE_F32, ady.data(), ax.data(),
                            mag.data(), rows, in, out);
    void *ddy = upload(dy), *dx = upload(x), *ddw = upload(gpuDw);
    cuda::linearGradWeight(*blas, t, ddy, dx, ddw, rows, in, out);
    download(ddw, gpuDw);
    expectCloseGemm(gpuDw, cpuDw, mag, "linear_grad_weight");
  }

  /// linear_grad_weight_bias on both backends: dw at the GEMM bound, db
  /// at it too, its magnitude the column sums of |dy|.
  void gradWeightBias(int64_t rows, int64_t in, int64_t out, uint32_t seed) {
    int32_t t = GetParam();
    HostTensor dy(t, uniform(size_t(rows * out), seed, -1, 1));
    HostTensor x(t, uniform(size_t(rows * in), seed + 1, -1, 1));
    HostTensor cpuDw(t, size_t(out * in)), gpuDw(t, size_t(out * in));
    HostTensor cpuDb(t, size_t(out)), gpuDb(t, size_t(out));
    asrt_linear_grad_weight_bias(&ctx, t, dy.data(), x.data(), cpuDw.data(),
                                 cpuDb.data(), rows, in, out);
    HostTensor ady = absF32(dy), ax = absF32(x);
    HostTensor mag(ASRT_DTYPE_F32, size_t(out * in)),
        dbMag(ASRT_DTYPE_F32, size_t(out));
    asrt_linear_grad_weight(&ctx, ASRT_DTYPE_F32, ady.data(), ax.data(),
                            mag.data(), rows, in, out);
    asrt_bias_grad(&ctx, ASRT_DTYPE_F32, ady.data(), dbMag.data(), rows, out);
    void *ddy = upload(dy), *dx = upload(x), *ddw = upload(gpuDw),
         *ddb = upload(gpuDb);
    cuda::linearGradWeightBias(*blas, t, ddy, dx, ddw, ddb, rows, in, out);
    download(ddw, gpuDw);
    download(ddb, gpuDb);
    expectCloseGemm(gpuDw, cpuDw, mag, "linear_grad_weight_bias's dw");
    expectCloseGemm(gpuDb, cpuDb, dbMag, "linear_grad_weight_bias's db");
  }

  void biasGrad(int64_t rows, int64_t out, uint32_t seed) {
    int32_t t = GetParam();
    HostTensor dy(t, uniform(size_t(rows * out), seed, -1, 1));
    HostTensor cpuDb(t, size_t(out)), gpuDb(t, size_t(out));
    asrt_bias_grad(&ctx, t, dy.data(), cpuDb.data(), rows, out);
    void *ddy = upload(dy), *ddb = upload(gpuDb);
    cuda::biasGrad(stream, t, ddy, ddb, rows, out);
    download(ddb, gpuDb);
    expectClose(gpuDb, cpuDb, "bias_grad");
  }
};

// Sizes that are no multiples of the GEMM tiles.
constexpr int64_t kRows = 37, kIn = 96, kOut = 130;

TEST_P(CudaLinearTest, ForwardWithAndWithoutBias) {
  forward(kRows, kIn, kOut, /*withBias=*/true, 1);
  forward(kRows, kIn, kOut, /*withBias=*/false, 4);
}

// y three elements into its buffer: 6 or 12 bytes off the 256-byte
// alignment cuBLASLt's heuristic assumes unless told (Linear.cu tells it).
TEST_P(CudaLinearTest, ForwardWithBiasIntoAViewOffAlignment) {
  forward(kRows, kIn, kOut, /*withBias=*/true, 11, /*yOffset=*/3);
}

// out a multiple of 8: in bf16 one cuBLASLt matmul with the GELU epilogue;
// otherwise (and in f32) the GEMM then the GELU kernel.
TEST_P(CudaLinearTest, ForwardWithGelu) {
  linearGelu(kRows, kIn, 128, 25);
  linearGelu(kRows, kIn, kOut, 26);
}

// in a multiple of 8: in bf16 one cuBLASLt matmul with the GELU-derivative
// (and bias-gradient) epilogue; otherwise the GEMM, GELU's gradient and the
// bias gradient.
TEST_P(CudaLinearTest, ForwardWithGeluRefusesANullBias) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int32_t t = GetParam();
  HostTensor x(t, size_t(kRows * kIn)), w(t, size_t(kOut * kIn)),
      y(t, size_t(kRows * kOut));
  void *dx = upload(x), *dw = upload(w), *dpre = upload(y), *dy = upload(y);
  EXPECT_DEATH(cuda::linearGeluFwd(*blas, t, dx, dw, nullptr, dpre, dy, kRows,
                                   kIn, kOut),
               "linear_gelu_fwd: the bias is null; the fused call is for a "
               "linear layer with a bias");
}

TEST_P(CudaLinearTest, GradInputThroughGelu) {
  linearGradGelu(kRows, 128, kOut, 27);
  linearGradGelu(kRows, 100, kOut, 28);
}

// In bf16 one cuBLASLt matmul with the BGRADB epilogue; otherwise the
// weight-gradient GEMM and the bias-gradient kernel.
TEST_P(CudaLinearTest, GradWeightWithBiasGrad) {
  gradWeightBias(kRows, kIn, kOut, 29);
  gradWeightBias(1000, 64, 48, 30);
}

TEST_P(CudaLinearTest, GradInput) { gradInput(kRows, kIn, kOut, 7); }

TEST_P(CudaLinearTest, GradWeight) { gradWeight(kRows, kIn, kOut, 9); }

/// A long reduction (k = rows) over a small output, where cuBLAS may split K:
/// the partial sums must stay f32 for bf16 (one rounding).
TEST_P(CudaLinearTest, GradWeightOverManyRows) {
  gradWeight(20011, 64, 48, 11);
}

TEST_P(CudaLinearTest, ForwardOverALongInnerDimension) {
  forward(19, 8192, 24, /*withBias=*/true, 13);
}

TEST_P(CudaLinearTest, BiasGrad) {
  biasGrad(kRows, kOut, 15);
  // More rows than row lanes, a partial column tile.
  biasGrad(5003, 33, 16);
  // No rows: the empty sum.
  biasGrad(0, 7, 17);
}

/// Empty inner dimensions: y is the bias (or zeros), dw and dx are zeros;
/// cuBLAS itself is not called with a zero leading dimension.
TEST_P(CudaLinearTest, EmptyInnerDimensions) {
  forward(5, 0, 6, /*withBias=*/true, 18);
  forward(5, 0, 6, /*withBias=*/false, 19);
  gradWeight(0, 4, 3, 20);
  gradInput(5, 4, 0, 21);
  // Empty outputs: nothing to do, and no failure.
  forward(0, 4, 3, /*withBias=*/true, 22);
  gradInput(0, 4, 3, 23);
  gradWeight(5, 0, 3, 24);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaLinearTest, kDtypes, dtypeName);

// ---- Optimizer ----

/// A tensor of a multi-tensor AdamW update: its size and weight decay.
struct MultiShape {
  size_t n;
  float weightDecay;
};

/// Parameterised by the gradient's dtype; parameters and states are f32.
class CudaOptimizerTest : public CudaKernelTest {
protected:
  template <typename T> T *uploadScalar(T value) {
    return static_cast<T *>(uploadBytes(&value, sizeof(T)));
  }
  template <typename T> T downloadScalar(const T *device) {
    T value{};
    downloadBytes(device, &value, sizeof(T));
    return value;
  }
  static HostTensor f32(const std::vector<float> &v) {
    return HostTensor(ASRT_DTYPE_F32, v);
  }

  struct AdamWCase {
    int32_t step;
    float beta1, beta2, weightDecay;
    bool gradScale, zeroStates;
  };

  /// One AdamW update on both backends, in place on the GPU (the outputs
  /// alias the inputs) and out of place on the CPU.
  void adamw(const AdamWCase &c, const char *what) {
    int32_t gt = GetParam();
    constexpr size_t n = 100003;
    const float lr = 1e-3f, eps = 1e-8f, scale = 0.5f;
    HostTensor param = f32(uniform(n, 31, -1, 1));
    HostTensor grad(gt, uniform(n, 32, -2, 2));
    HostTensor m = f32(c.zeroStates ? std::vector<float>(n, 0.0f)
                                    : uniform(n, 33, -0.1f, 0.1f));
    HostTensor v = f32(c.zeroStates ? std::vector<float>(n, 0.0f)
                                    : uniform(n, 34, 0.0f, 0.01f));
    HostTensor cpuP(ASRT_DTYPE_F32, n), cpuM(ASRT_DTYPE_F32, n),
        cpuV(ASRT_DTYPE_F32, n);
    asrt_adamw_update(
        &ctx, gt, static_cast<const float *>(param.data()), grad.data(),
        static_cast<const float *>(m.data()),
        static_cast<const float *>(v.data()), &lr, &c.step,
        c.gradScale ? &scale : nullptr, static_cast<float *>(cpuP.data()),
        static_cast<float *>(cpuM.data()), static_cast<float *>(cpuV.data()),
        int64_t(n), c.beta1, c.beta2, eps, c.weightDecay);
    auto *dp = static_cast<float *>(upload(param));
    auto *dm = static_cast<float *>(upload(m));
    auto *dv = static_cast<float *>(upload(v));
    void *dg = upload(grad);
    float *dlr = uploadScalar(lr);
    int32_t *dstep = uploadScalar(c.step);
    float *dscale = c.gradScale ? uploadScalar(scale) : nullptr;
    cuda::adamwUpdate(stream, gt, dp, dg, dm, dv, dlr, dstep, dscale, dp, dm,
                      dv, int64_t(n), c.beta1, c.beta2, eps, c.weightDecay);
    download(dp, param);
    download(dm, m);
    download(dv, v);
    std::string w(what);
    expectClose(param, cpuP, (w + " param").c_str());
    expectClose(m, cpuM, (w + " exp_avg").c_str());
    expectClose(v, cpuV, (w + " exp_avg_sq").c_str());
  }

  /// Every element of `got` has the bits of `want`'s (f32).
  void expectSameBits(const HostTensor &got, const HostTensor &want,
                      const std::string &what) {
    ASSERT_EQ(got.bytes.size(), want.bytes.size()) << what;
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (std::memcmp(&got.bytes[i * 4], &want.bytes[i * 4], 4) != 0 &&
          bad++ < 5)
        ADD_FAILURE() << what << "[" << i << "]: " << got.get(i) << ", not "
                      << want.get(i);
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size()
                       << " elements differ";
  }

  /// One adamwUpdateMulti over tensors of `shapes` against one adamwUpdate
  /// per tensor on the GPU (the same bits) and one asrt_adamw_update per
  /// tensor on the CPU. The multi call updates in place when `inPlace` (and
  /// out of place otherwise, leaving its inputs as they were); the
  /// per-tensor calls update out of place.
  void adamwMulti(const std::vector<MultiShape> &shapes, int32_t step,
                  float beta1, bool gradScale, bool inPlace, const char *what) {
    int32_t gt = GetParam();
    const float lr = 1e-3f, beta2 = 0.999f, eps = 1e-8f, scale = 0.5f;
    float *dlr = uploadScalar(lr);
    int32_t *dstep = uploadScalar(step);
    float *dscale = gradScale ? uploadScalar(scale) : nullptr;
    struct Tensor {
      HostTensor param, grad, m, v; // the inputs
      HostTensor cpuP, cpuM, cpuV;  // the CPU's results
      // Device buffers: adamwUpdate's outputs, adamwUpdateMulti's inputs
      // and outputs.
      float *singleP = nullptr, *singleM = nullptr, *singleV = nullptr;
      float *inP = nullptr, *inM = nullptr, *inV = nullptr;
      float *outP = nullptr, *outM = nullptr, *outV = nullptr;
    };
    std::vector<Tensor> tensors;
    std::vector<asrt_adamw_tensor> descriptors;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const size_t n = shapes[i].n;
      const float wd = shapes[i].weightDecay;
      const auto seed = uint32_t(100 + 4 * i);
      Tensor t{f32(uniform(n, seed, -1, 1)),
               HostTensor(gt, uniform(n, seed + 1, -2, 2)),
               f32(uniform(n, seed + 2, -0.1f, 0.1f)),
               f32(uniform(n, seed + 3, 0.0f, 0.01f)),
               HostTensor(ASRT_DTYPE_F32, n),
               HostTensor(ASRT_DTYPE_F32, n),
               HostTensor(ASRT_DTYPE_F32, n)};
      asrt_adamw_update(&ctx, gt, static_cast<const float *>(t.param.data()),
                        t.grad.data(), static_cast<const float *>(t.m.data()),
                        static_cast<const float *>(t.v.data()), &lr, &step,
                        gradScale ? &scale : nullptr,
                        static_cast<float *>(t.cpuP.data()),
                        static_cast<float *>(t.cpuM.data()),
                        static_cast<float *>(t.cpuV.data()), int64_t(n), beta1,
                        beta2, eps, wd);
      auto *sp = static_cast<float *>(upload(t.param));
      auto *sm = static_cast<float *>(upload(t.m));
      auto *sv = static_cast<float *>(upload(t.v));
      void *sg = upload(t.grad);
      // The outputs start as NaN (HostTensor's fill): an element either
      // call leaves unwritten differs.
      HostTensor nan(ASRT_DTYPE_F32, n);
      t.singleP = static_cast<float *>(upload(nan));
      t.singleM = static_cast<float *>(upload(nan));
      t.singleV = static_cast<float *>(upload(nan));
      cuda::adamwUpdate(stream, gt, sp, sg, sm, sv, dlr, dstep, dscale,
                        t.singleP, t.singleM, t.singleV, int64_t(n), beta1,
                        beta2, eps, wd);
      t.inP = static_cast<float *>(upload(t.param));
      t.inM = static_cast<float *>(upload(t.m));
      t.inV = static_cast<float *>(upload(t.v));
      void *mg = upload(t.grad);
      t.outP = inPlace ? t.inP : static_cast<float *>(upload(nan));
      t.outM = inPlace ? t.inM : static_cast<float *>(upload(nan));
      t.outV = inPlace ? t.inV : static_cast<float *>(upload(nan));
      descriptors.push_back(asrt_adamw_tensor{t.inP, mg, t.inM, t.inV, t.outP,
                                              t.outM, t.outV, int64_t(n), wd});
      tensors.push_back(std::move(t));
    }
    cuda::adamwUpdateMulti(stream, gt, descriptors.data(),
                           int64_t(descriptors.size()), dlr, dstep, dscale,
                           beta1, beta2, eps);
    for (size_t i = 0; i < tensors.size(); ++i) {
      Tensor &t = tensors[i];
      const size_t n = shapes[i].n;
      const std::string w = std::string(what) + " tensor " + std::to_string(i) +
                            " (n " + std::to_string(n) + ")";
      const std::pair<float *, const HostTensor *> single[] = {
          {t.singleP, &t.cpuP}, {t.singleM, &t.cpuM}, {t.singleV, &t.cpuV}};
      float *multi[] = {t.outP, t.outM, t.outV};
      const char *names[] = {" param", " exp_avg", " exp_avg_sq"};
      for (int k = 0; k < 3; ++k) {
        HostTensor bySingle(ASRT_DTYPE_F32, n), byMulti(ASRT_DTYPE_F32, n);
        download(single[k].first, bySingle);
        download(multi[k], byMulti);
        expectSameBits(byMulti, bySingle, w + names[k] + " (multi vs single)");
        expectClose(byMulti, *single[k].second,
                    (w + names[k] + " (multi vs CPU)").c_str());
      }
      if (!inPlace) {
        const std::pair<float *, const HostTensor *> inputs[] = {
            {t.inP, &t.param}, {t.inM, &t.m}, {t.inV, &t.v}};
        for (int k = 0; k < 3; ++k) {
          HostTensor kept(ASRT_DTYPE_F32, n);
          download(inputs[k].first, kept);
          expectSameBits(kept, *inputs[k].second,
                         w + names[k] + " input (out of place)");
        }
      }
    }
  }

  /// One SGD update on both backends, in place on the GPU.
  void sgd(float momentum, float weightDecay, bool nesterov, bool gradScale,
           const char *what) {
    int32_t gt = GetParam();
    constexpr size_t n = 100003;
    const float lr = 0.05f, scale = 0.25f;
    bool hasBuf = momentum != 0.0f;
    HostTensor param = f32(uniform(n, 41, -1, 1));
    HostTensor grad(gt, uniform(n, 42, -2, 2));
    HostTensor buf = f32(uniform(n, 43, -0.5f, 0.5f));
    HostTensor cpuP(ASRT_DTYPE_F32, n), cpuB(ASRT_DTYPE_F32, n);
    asrt_sgd_update(
        &ctx, gt, static_cast<const float *>(param.data()), grad.data(), &lr,
        hasBuf ? static_cast<const float *>(buf.data()) : nullptr,
        gradScale ? &scale : nullptr, static_cast<float *>(cpuP.data()),
        hasBuf ? static_cast<float *>(cpuB.data()) : nullptr, int64_t(n),
        momentum, weightDecay, nesterov ? 1 : 0);
    auto *dp = static_cast<float *>(upload(param));
    auto *db = static_cast<float *>(upload(buf));
    void *dg = upload(grad);
    float *dlr = uploadScalar(lr);
    float *dscale = gradScale ? uploadScalar(scale) : nullptr;
    cuda::sgdUpdate(stream, gt, dp, dg, dlr, hasBuf ? db : nullptr, dscale, dp,
                    hasBuf ? db : nullptr, int64_t(n), momentum, weightDecay,
                    nesterov ? 1 : 0);
    download(dp, param);
    std::string w(what);
    expectClose(param, cpuP, (w + " param").c_str());
    if (hasBuf) {
      download(db, buf);
      expectClose(buf, cpuB, (w + " momentum buffer").c_str());
    }
  }

  /// sum_of_squares on both backends; the accumulator starts at `start`.
  void sumOfSquares(size_t n, int32_t accumulate, float start, uint32_t seed) {
    int32_t t = GetParam();
    HostTensor x(t, uniform(n, seed, -3, 3));
    float cpuAcc = start;
    asrt_sum_of_squares(&ctx, t, x.data(), int64_t(n), &cpuAcc, accumulate);
    void *dx = upload(x);
    float *dacc = uploadScalar(start);
    cuda::sumOfSquares(stream, t, dx, int64_t(n), dacc, accumulate);
    float gpuAcc = downloadScalar(dacc);
    EXPECT_NEAR(gpuAcc, cpuAcc, 1e-6 * std::fabs(cpuAcc) + 1e-30)
        << "sum_of_squares n " << n << ", accumulate " << accumulate;
  }
};

TEST_P(CudaOptimizerTest, AdamWFirstStepFromZeroStates) {
  adamw({/*step=*/1, 0.9f, 0.999f, /*weightDecay=*/0.1f, /*gradScale=*/true,
         /*zeroStates=*/true},
        "adamw step 1");
}

TEST_P(CudaOptimizerTest, AdamWSeventhStep) {
  adamw({/*step=*/7, 0.9f, 0.999f, /*weightDecay=*/0.1f, /*gradScale=*/true,
         /*zeroStates=*/false},
        "adamw step 7");
}

/// beta1 < 0.5: torch's lerp computes from the end; no decay, no scale.
TEST_P(CudaOptimizerTest, AdamWOtherLerpFormWithoutDecayOrScale) {
  adamw({/*step=*/7, 0.3f, 0.99f, /*weightDecay=*/0.0f, /*gradScale=*/false,
         /*zeroStates=*/false},
        "adamw beta1 0.3");
}

/// Sizes around the multi-tensor kernel's chunk (4096 elements): empty, one
/// element, a chunk and a bit, a whole chunk, many chunks; mixed decays.
const std::vector<MultiShape> kMultiShapes = {
    {300000, 0.1f}, {0, 0.1f},   {1, 0.0f}, {4097, 0.1f},
    {4096, 0.0f},   {777, 0.1f}, {0, 0.0f}};

TEST_P(CudaOptimizerTest, AdamWMultiInPlaceMatchesPerTensorCalls) {
  adamwMulti(kMultiShapes, /*step=*/7, /*beta1=*/0.9f, /*gradScale=*/true,
             /*inPlace=*/true, "adamw_multi in place");
}

/// beta1 < 0.5 (the other lerp form), no scale, out of place.
TEST_P(CudaOptimizerTest, AdamWMultiOutOfPlaceOtherLerpWithoutScale) {
  adamwMulti(kMultiShapes, /*step=*/1, /*beta1=*/0.3f, /*gradScale=*/false,
             /*inPlace=*/false, "adamw_multi out of place");
}

/// More tensors than one launch holds (48): the host splits them into
/// groups, with empty tensors here and there.
TEST_P(CudaOptimizerTest, AdamWMultiOverSeveralLaunches) {
  std::vector<MultiShape> shapes;
  for (size_t i = 0; i < 150; ++i)
    shapes.push_back(
        {i % 9 == 4 ? 0 : 1 + (i * 397) % 5000, i % 2 ? 0.1f : 0.0f});
  adamwMulti(shapes, /*step=*/3, /*beta1=*/0.9f, /*gradScale=*/true,
             /*inPlace=*/true, "adamw_multi over several launches");
}

TEST_P(CudaOptimizerTest, Sgd) {
  sgd(0.0f, 0.0f, false, false, "sgd plain");
  sgd(0.0f, 0.01f, false, true, "sgd decay scaled");
  sgd(0.9f, 0.01f, false, true, "sgd momentum");
  sgd(0.9f, 0.01f, true, true, "sgd nesterov");
  sgd(0.9f, 0.0f, true, false, "sgd nesterov unscaled");
}

TEST_P(CudaOptimizerTest, SumOfSquares) {
  sumOfSquares(100003, /*accumulate=*/0, 123.0f, 51);
  sumOfSquares(100003, /*accumulate=*/1, 3.5f, 52);
  // More blocks than the partials' grid: the grid-stride loop.
  sumOfSquares((size_t(1) << 20) + 7, /*accumulate=*/1, 0.25f, 53);
  // No elements: acc is kept, or zeroed.
  sumOfSquares(0, /*accumulate=*/1, 3.5f, 54);
  sumOfSquares(0, /*accumulate=*/0, 3.5f, 55);
}

INSTANTIATE_TEST_SUITE_P(GradDtypes, CudaOptimizerTest, kDtypes, dtypeName);

/// The arguments are checked on the host before any CUDA call, so these run
/// on machines without a device too.
TEST(CudaOptimizerChecks, AdamWMultiBadArgumentsAreFatalBeforeAnyLaunch) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float v = 1.0f;
  const float lr = 1e-3f;
  const int32_t step = 1, f32 = ASRT_DTYPE_F32;
  const asrt_adamw_tensor ok{&v, &v, &v, &v, &v, &v, &v, 1, 0.0f};
  const asrt_adamw_tensor negative{&v, &v, &v, &v, &v, &v, &v, -3, 0.0f};
  const asrt_adamw_tensor tensors[] = {ok, negative};
  EXPECT_DEATH(cuda::adamwUpdateMulti(nullptr, f32, tensors, 0, &lr, &step,
                                      nullptr, 0.9f, 0.999f, 1e-8f),
               "adamw_update_multi: count = 0; a multi-tensor update needs "
               "at least one tensor");
  EXPECT_DEATH(cuda::adamwUpdateMulti(nullptr, f32, nullptr, 1, &lr, &step,
                                      nullptr, 0.9f, 0.999f, 1e-8f),
               "adamw_update_multi: the tensors pointer is null");
  EXPECT_DEATH(cuda::adamwUpdateMulti(nullptr, f32, tensors, 2, &lr, &step,
                                      nullptr, 0.9f, 0.999f, 1e-8f),
               "adamw_update_multi: tensor 1: n = -3 is negative");
  EXPECT_DEATH(cuda::adamwUpdateMulti(nullptr, f32, tensors, 1, nullptr, &step,
                                      nullptr, 0.9f, 0.999f, 1e-8f),
               "adamw_update_multi: the learning-rate pointer is null");
  EXPECT_DEATH(cuda::adamwUpdateMulti(nullptr, f32, tensors, 1, &lr, nullptr,
                                      nullptr, 0.9f, 0.999f, 1e-8f),
               "adamw_update_multi: the step pointer is null");
  EXPECT_DEATH(cuda::adamwUpdateMulti(nullptr, ASRT_DTYPE_I32, tensors, 1, &lr,
                                      &step, nullptr, 0.9f, 0.999f, 1e-8f),
               "adamw_update_multi: dtype");
}

/// The scalar kernels have no dtype: one fixture instance.
class CudaOptimizerScalarTest : public CudaOptimizerTest {};

TEST_P(CudaOptimizerScalarTest, IncrementInPlace) {
  int32_t *dstep = uploadScalar<int32_t>(41);
  cuda::incrementI32(stream, dstep, dstep);
  cuda::incrementI32(stream, dstep, dstep);
  EXPECT_EQ(downloadScalar(dstep), 43);
  int32_t *dout = uploadScalar<int32_t>(-1);
  cuda::incrementI32(stream, dstep, dout);
  EXPECT_EQ(downloadScalar(dout), 44);
}

TEST_P(CudaOptimizerScalarTest, ClipCoefficientAsTheCpu) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float sumsq : {4.0f, 1e-4f, 0.0f, 2.25f, inf, nan}) {
    float cpuCoef = -1.0f;
    asrt_clip_coefficient(&ctx, &sumsq, &cpuCoef, 1.5f);
    float *dsumsq = uploadScalar(sumsq);
    float *dcoef = uploadScalar(-1.0f);
    cuda::clipCoefficient(stream, dsumsq, dcoef, 1.5f);
    float gpuCoef = downloadScalar(dcoef);
    // Bit for bit: the same f32 operations, NaN kept as NaN.
    uint32_t g, c;
    std::memcpy(&g, &gpuCoef, 4);
    std::memcpy(&c, &cpuCoef, 4);
    if (std::isnan(cpuCoef))
      EXPECT_TRUE(std::isnan(gpuCoef)) << "sumsq " << sumsq;
    else
      EXPECT_EQ(g, c) << "sumsq " << sumsq << ": GPU " << gpuCoef << ", CPU "
                      << cpuCoef;
  }
}

INSTANTIATE_TEST_SUITE_P(NoDtype, CudaOptimizerScalarTest,
                         ::testing::Values(ASRT_DTYPE_F32));

} // namespace
