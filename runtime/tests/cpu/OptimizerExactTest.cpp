// The vectorized, multi-threaded optimizer updates against plain scalar
// loops, bit for bit: end-to-end runs compare parameters across world sizes
// and runs exactly, so the fast loops may not change a single rounding.
#include "TestUtil.h"

#include "autoshard/rt/abi.h"
#include "core/ThreadPool.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>

namespace autoshard::rt::test {
namespace {

// ---- The reference: the kernels as they were before they were vectorized
// and threaded, one scalar loop with the per-call choices as branches. Kept
// verbatim in their arithmetic (operation order, float scalars formed in
// double) so that any change in the kernels' per-element results shows.

inline float loadGrad(const float *g, int64_t i) { return g[i]; }
inline float loadGrad(const uint16_t *g, int64_t i) {
  return bf16ToFloat(g[i]);
}

template <typename T>
void scalarSgd(const float *param, const T *grad, float rate, const float *buf,
               const float *grad_scale, float *param_out, float *buf_out,
               int64_t n, float momentum, float weight_decay,
               int32_t nesterov) {
  const bool scaled = grad_scale != nullptr;
  const float gradScale = scaled ? grad_scale[0] : 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    float p = param[i];
    float g = loadGrad(grad, i);
    if (scaled)
      g = gradScale * g;
    if (weight_decay != 0.0f)
      g = g + weight_decay * p;
    float step = g;
    if (momentum != 0.0f) {
      float b = momentum * buf[i] + g;
      step = nesterov ? g + momentum * b : b;
      buf_out[i] = b;
    }
    param_out[i] = p - rate * step;
  }
}

template <typename T>
void scalarAdamW(const float *param, const T *grad, const float *exp_avg,
                 const float *exp_avg_sq, float lr, int32_t t,
                 const float *grad_scale, float *param_out, float *exp_avg_out,
                 float *exp_avg_sq_out, int64_t n, float beta1, float beta2,
                 float eps, float weight_decay) {
  const double rate = lr;
  const float decay = static_cast<float>(1.0 - rate * weight_decay);
  const float avgWeight = static_cast<float>(1.0 - double(beta1));
  const float sqWeight = static_cast<float>(1.0 - double(beta2));
  const double biasCorrection1 = 1.0 - std::pow(double(beta1), double(t));
  const double biasCorrection2 = 1.0 - std::pow(double(beta2), double(t));
  const float stepSize = static_cast<float>(-rate / biasCorrection1);
  const float correction2Sqrt = static_cast<float>(std::sqrt(biasCorrection2));
  const bool scaled = grad_scale != nullptr;
  const float gradScale = scaled ? grad_scale[0] : 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    float p = param[i];
    float g = loadGrad(grad, i);
    float m = exp_avg[i];
    float v = exp_avg_sq[i];
    if (scaled)
      g = gradScale * g;
    if (weight_decay != 0.0f)
      p = p * decay;
    m = avgWeight < 0.5f ? m + avgWeight * (g - m)
                         : g - (g - m) * (1.0f - avgWeight);
    v = v * beta2;
    v = v + sqWeight * g * g;
    float denom = std::sqrt(v) / correction2Sqrt + eps;
    exp_avg_out[i] = m;
    exp_avg_sq_out[i] = v;
    param_out[i] = p + stepSize * m / denom;
  }
}

// ---- Inputs --------------------------------------------------------------

/// Values over many binades (so that every rounding path of mul, div and
/// sqrt is exercised), with the specials a training run can produce near
/// its start or when it diverges sprinkled in: zeros of both signs,
/// subnormals, infinities, NaN, the largest float.
std::vector<float> wideFloats(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-24, 4);
  std::vector<float> v(n);
  for (float &x : v)
    x = std::ldexp(mantissa(rng), exponent(rng)) * scale;
  const float specials[] = {0.0f,
                            -0.0f,
                            1e-40f,
                            -1e-40f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::max()};
  // A few per size, spread over the vector (and so over threads' chunks).
  for (size_t k = 0; k < n / 97; k += 1) {
    size_t i = (k * 7919 + seed) % n;
    v[i] = specials[(k + seed) % std::size(specials)];
  }
  return v;
}

/// exp_avg_sq is a sum of squares: non-negative, sometimes zero.
std::vector<float> secondMoments(size_t n, uint32_t seed) {
  std::vector<float> v = wideFloats(n, seed, 1e-2f);
  for (float &x : v)
    x = std::isnan(x) ? x : std::fabs(x);
  return v;
}

::testing::AssertionResult sameBits(const std::vector<float> &actual,
                                    const std::vector<float> &expected,
                                    const char *what) {
  if (bitwiseEqual(actual, expected))
    return ::testing::AssertionSuccess();
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << what << ": size " << actual.size() << " vs " << expected.size();
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < actual.size(); ++i)
    if (floatBits(actual[i]) != floatBits(expected[i]) && bad++ == 0)
      first = i;
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "%s: %zu of %zu elements differ; first [%zu]: 0x%08x (%g), "
                "expected 0x%08x (%g)",
                what, bad, actual.size(), first, floatBits(actual[first]),
                actual[first], floatBits(expected[first]), expected[first]);
  return ::testing::AssertionFailure() << buf;
}

// Odd sizes: a single element, less than a vector, and a large prime whose
// chunks end mid-vector and whose tail the vector loop leaves to scalar
// code.
const int64_t kSizes[] = {1, 7, 1000003};
// 1 is the calling thread alone; 2 and 3 split a million elements unevenly
// (the chunks are aligned); 8 is more threads than the build machine's
// cores.
const int kThreads[] = {1, 2, 3, 8};

// ---- AdamW ---------------------------------------------------------------

class AdamWExactTest
    : public CpuKernelTest,
      public ::testing::WithParamInterface<
          std::tuple<bool, bool, bool, float>> { // bf16, scaled, wd, beta1
};

TEST_P(AdamWExactTest, MatchesScalarLoopBitForBit) {
  auto [bf16, scaled, decayed, beta1] = GetParam();
  const float beta2 = 0.999f, eps = 1e-8f, lr = 3e-3f, scale = 0.37f;
  const float weightDecay = decayed ? 0.1f : 0.0f;
  const int32_t step = 3;
  const float *gradScale = scaled ? &scale : nullptr;
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const size_t count = static_cast<size_t>(n);
    const std::vector<float> param = wideFloats(count, 1, 1.0f);
    const std::vector<float> m = wideFloats(count, 2, 1e-2f);
    const std::vector<float> v = secondMoments(count, 3);
    const std::vector<float> gradF = wideFloats(count, 4, 1.0f);
    const std::vector<uint16_t> gradB = toBf16(gradF);
    const void *grad = bf16 ? static_cast<const void *>(gradB.data())
                            : static_cast<const void *>(gradF.data());

    std::vector<float> wantP(count), wantM(count), wantV(count);
    if (bf16)
      scalarAdamW(param.data(), gradB.data(), m.data(), v.data(), lr, step,
                  gradScale, wantP.data(), wantM.data(), wantV.data(), n, beta1,
                  beta2, eps, weightDecay);
    else
      scalarAdamW(param.data(), gradF.data(), m.data(), v.data(), lr, step,
                  gradScale, wantP.data(), wantM.data(), wantV.data(), n, beta1,
                  beta2, eps, weightDecay);

    for (int threads : kThreads) {
      SCOPED_TRACE("threads = " + std::to_string(threads));
      ctx.setOptimizerThreads(threads);
      const int32_t dtype = bf16 ? ASRT_DTYPE_BF16 : ASRT_DTYPE_F32;
      // Out of place: the inputs must come through untouched.
      std::vector<float> p = poisoned(count), mo = poisoned(count),
                         vo = poisoned(count);
      asrt_adamw_update(&ctx, dtype, param.data(), grad, m.data(), v.data(),
                        &lr, &step, gradScale, p.data(), mo.data(), vo.data(),
                        n, beta1, beta2, eps, weightDecay);
      EXPECT_TRUE(sameBits(p, wantP, "param (out of place)"));
      EXPECT_TRUE(sameBits(mo, wantM, "exp_avg (out of place)"));
      EXPECT_TRUE(sameBits(vo, wantV, "exp_avg_sq (out of place)"));
      // In place, as the compiler usually emits it.
      std::vector<float> pi = param, mi = m, vi = v;
      asrt_adamw_update(&ctx, dtype, pi.data(), grad, mi.data(), vi.data(), &lr,
                        &step, gradScale, pi.data(), mi.data(), vi.data(), n,
                        beta1, beta2, eps, weightDecay);
      EXPECT_TRUE(sameBits(pi, wantP, "param (in place)"));
      EXPECT_TRUE(sameBits(mi, wantM, "exp_avg (in place)"));
      EXPECT_TRUE(sameBits(vi, wantV, "exp_avg_sq (in place)"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Settings, AdamWExactTest,
    // beta1 0.9 interpolates from the start (weight 0.1 < 0.5), 0.3 from
    // the end: torch's two lerp forms.
    ::testing::Combine(::testing::Bool(), ::testing::Bool(), ::testing::Bool(),
                       ::testing::Values(0.9f, 0.3f)),
    [](const ::testing::TestParamInfo<std::tuple<bool, bool, bool, float>> &p) {
      return std::string(std::get<0>(p.param) ? "bf16" : "f32") +
             (std::get<1>(p.param) ? "_scaled" : "") +
             (std::get<2>(p.param) ? "_decay" : "") +
             (std::get<3>(p.param) > 0.5f ? "_lerpFromStart" : "_lerpFromEnd");
    });

// ---- SGD -----------------------------------------------------------------

class SgdExactTest
    : public CpuKernelTest,
      public ::testing::WithParamInterface<
          std::tuple<bool, bool, bool, int>> { // bf16, scaled, wd, momentum
};

TEST_P(SgdExactTest, MatchesScalarLoopBitForBit) {
  // momentumKind: 0 none, 1 heavy ball, 2 Nesterov.
  auto [bf16, scaled, decayed, momentumKind] = GetParam();
  const float lr = 0.05f, scale = 0.37f;
  const float weightDecay = decayed ? 0.01f : 0.0f;
  const float momentum = momentumKind == 0 ? 0.0f : 0.9f;
  const int32_t nesterov = momentumKind == 2 ? 1 : 0;
  const float *gradScale = scaled ? &scale : nullptr;
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const size_t count = static_cast<size_t>(n);
    const std::vector<float> param = wideFloats(count, 5, 1.0f);
    const std::vector<float> buf =
        momentum != 0.0f ? wideFloats(count, 6, 1.0f) : std::vector<float>();
    const std::vector<float> gradF = wideFloats(count, 7, 1.0f);
    const std::vector<uint16_t> gradB = toBf16(gradF);
    const void *grad = bf16 ? static_cast<const void *>(gradB.data())
                            : static_cast<const void *>(gradF.data());
    const float *bufIn = buf.empty() ? nullptr : buf.data();

    std::vector<float> wantP(count), wantB(buf.size());
    float *wantBuf = buf.empty() ? nullptr : wantB.data();
    if (bf16)
      scalarSgd(param.data(), gradB.data(), lr, bufIn, gradScale, wantP.data(),
                wantBuf, n, momentum, weightDecay, nesterov);
    else
      scalarSgd(param.data(), gradF.data(), lr, bufIn, gradScale, wantP.data(),
                wantBuf, n, momentum, weightDecay, nesterov);

    for (int threads : kThreads) {
      SCOPED_TRACE("threads = " + std::to_string(threads));
      ctx.setOptimizerThreads(threads);
      const int32_t dtype = bf16 ? ASRT_DTYPE_BF16 : ASRT_DTYPE_F32;
      std::vector<float> p = poisoned(count), b = poisoned(buf.size());
      asrt_sgd_update(&ctx, dtype, param.data(), grad, &lr, bufIn, gradScale,
                      p.data(), bufIn ? b.data() : nullptr, n, momentum,
                      weightDecay, nesterov);
      EXPECT_TRUE(sameBits(p, wantP, "param (out of place)"));
      EXPECT_TRUE(sameBits(b, wantB, "momentum buffer (out of place)"));
      std::vector<float> pi = param, bi = buf;
      float *bufInPlace = bi.empty() ? nullptr : bi.data();
      asrt_sgd_update(&ctx, dtype, pi.data(), grad, &lr, bufInPlace, gradScale,
                      pi.data(), bufInPlace, n, momentum, weightDecay,
                      nesterov);
      EXPECT_TRUE(sameBits(pi, wantP, "param (in place)"));
      EXPECT_TRUE(sameBits(bi, wantB, "momentum buffer (in place)"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Settings, SgdExactTest,
    ::testing::Combine(::testing::Bool(), ::testing::Bool(), ::testing::Bool(),
                       ::testing::Values(0, 1, 2)),
    [](const ::testing::TestParamInfo<std::tuple<bool, bool, bool, int>> &p) {
      // No braced list here: its commas would split the macro argument.
      int kind = std::get<3>(p.param);
      return std::string(std::get<0>(p.param) ? "bf16" : "f32") +
             (std::get<1>(p.param) ? "_scaled" : "") +
             (std::get<2>(p.param) ? "_decay" : "") +
             (kind == 0   ? "_plain"
              : kind == 1 ? "_momentum"
                          : "_nesterov");
    });

} // namespace
} // namespace autoshard::rt::test
