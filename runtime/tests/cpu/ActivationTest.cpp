// Tests of the CPU activation kernels: references, differences, aliasing.
#include "TestUtil.h"

#include "autoshard/rt/abi.h"

namespace autoshard::rt::test {
namespace {

constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kCubic = 0.044715;

/// GELU exactly as abi.h writes it.
double geluRef(double x) {
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x)));
}

/// d/dx of geluRef, differentiated by hand:
///   0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2),
/// returned as its two terms so that tests can size tolerances by them.
std::pair<double, double> geluGradTerms(double x) {
  double t = std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
  return {0.5 * (1.0 + t), 0.5 * x * (1.0 - t * t) * kSqrt2OverPi *
                               (1.0 + 3.0 * kCubic * x * x)};
}

/// Inputs of `n` elements: edge values first (zeros of both signs, the GELU
/// gradient's zero near -0.75, its saturated tails, values whose cube or
/// square overflows f32), then uniform values in [-6, 6].
std::vector<float> activationInputs(size_t n, uint32_t seed) {
  const float special[] = {-0.75f, 0.0f,  -0.0f,  1e-30f, -1e-30f, 1e-3f,
                           -1e-3f, 3.0f,  -3.0f,  6.5f,   -6.5f,   9.5f,
                           -9.5f,  20.0f, -20.0f, 25.0f,  -25.0f,  1e4f,
                           -1e4f,  1e20f, -1e20f, 3e38f,  -3e38f};
  std::vector<float> v = uniformFloats(n, seed, -6.0f, 6.0f);
  for (size_t i = 0; i < n && i < std::size(special); ++i)
    v[i] = special[i];
  return v;
}

using Kernel = void (*)(asrt_context *, const float *, float *, int64_t);

/// Central difference in element i, step h, of L = sum(w * f(x)) with f the
/// f32 forward kernel, divided by the step that the f32 input really took.
/// L(x+) - L(x-) is summed as sum(w * (f(x+) - f(x-))): the same value, but
/// the huge edge inputs no longer swamp it with the rounding of a large sum.
double kernelDifference(asrt_context *ctx, Kernel fwd, std::vector<float> x,
                        const std::vector<float> &w, size_t i, float h) {
  const int64_t n = static_cast<int64_t>(x.size());
  float xi = x[i], xp = xi + h, xm = xi - h;
  std::vector<float> yp(x.size()), ym(x.size());
  x[i] = xp;
  fwd(ctx, x.data(), yp.data(), n);
  x[i] = xm;
  fwd(ctx, x.data(), ym.data(), n);
  double diff = 0.0;
  for (size_t j = 0; j < x.size(); ++j)
    diff += static_cast<double>(w[j]) *
            (static_cast<double>(yp[j]) - static_cast<double>(ym[j]));
  return diff / (static_cast<double>(xp) - static_cast<double>(xm));
}

class ActivationTest : public CpuKernelTest,
                       public ::testing::WithParamInterface<int64_t> {
protected:
  int64_t n() const { return GetParam(); }
};

TEST_P(ActivationTest, ReluForwardMatchesReference) {
  std::vector<float> x = activationInputs(n(), 1);
  std::vector<float> y = poisoned(n());
  asrt_relu_fwd_f32(&ctx, x.data(), y.data(), n());
  std::vector<double> ref(n());
  for (int64_t i = 0; i < n(); ++i)
    ref[i] = x[i] > 0.0f ? x[i] : 0.0;
  EXPECT_TRUE(allNear(y, ref, 0.0, 0.0));
}

TEST_P(ActivationTest, ReluGradMatchesReferenceAndFiniteDifferences) {
  std::vector<float> x = activationInputs(n(), 2);
  std::vector<float> dy = uniformFloats(n(), 3, -1.0f, 1.0f);
  std::vector<float> dx = poisoned(n());
  asrt_relu_grad_f32(&ctx, dy.data(), x.data(), dx.data(), n());

  // abi.h: dx = dy where x > 0, else 0 (so 0 at x == 0).
  std::vector<double> ref(n());
  for (int64_t i = 0; i < n(); ++i)
    ref[i] = x[i] > 0.0f ? dy[i] : 0.0;
  EXPECT_TRUE(allNear(dx, ref, 0.0, 0.0));

  // Away from the kink ReLU is linear, so the difference is exact up to the
  // double sum's rounding.
  std::vector<float> probedDx;
  std::vector<double> fd;
  for (size_t i : probeIndices(n())) {
    float h = 1e-2f * std::max(1.0f, std::fabs(x[i]));
    if (std::fabs(x[i]) <= 2.0f * h)
      continue;
    probedDx.push_back(dx[i]);
    fd.push_back(kernelDifference(&ctx, asrt_relu_fwd_f32, x, dy, i, h));
  }
  EXPECT_TRUE(allNear(probedDx, fd, 1e-9, 1e-12));
}

TEST_P(ActivationTest, GeluForwardMatchesReference) {
  std::vector<float> x = activationInputs(n(), 4);
  std::vector<float> y = poisoned(n());
  asrt_gelu_fwd_f32(&ctx, x.data(), y.data(), n());
  std::vector<double> ref(n());
  for (int64_t i = 0; i < n(); ++i)
    ref[i] = geluRef(x[i]);
  // The absolute part covers the reference's own cancellation in 1 + tanh
  // for x below about -6 (the left tail is checked more tightly below).
  EXPECT_TRUE(allNear(y, ref, 1e-5, 1e-12));
}

TEST_P(ActivationTest, GeluGradMatchesAnalyticReference) {
  std::vector<float> x = activationInputs(n(), 5);
  std::vector<float> dy = uniformFloats(n(), 6, -1.0f, 1.0f);
  std::vector<float> dx = poisoned(n());
  asrt_gelu_grad_f32(&ctx, dy.data(), x.data(), dx.data(), n());
  std::vector<double> ref(n()), tol(n());
  for (int64_t i = 0; i < n(); ++i) {
    auto [first, second] = geluGradTerms(x[i]);
    ref[i] = dy[i] * (first + second);
    // Relative to the terms, not to their sum, which vanishes near -0.75.
    tol[i] = 1e-5 * std::fabs(dy[i]) * (std::fabs(first) + std::fabs(second)) +
             1e-12;
  }
  EXPECT_TRUE(allWithin(dx, ref, tol));
}

TEST_P(ActivationTest, GeluGradMatchesFiniteDifferencesOfReference) {
  std::vector<float> x = activationInputs(n(), 7);
  std::vector<float> w = uniformFloats(n(), 8, -1.0f, 1.0f);
  std::vector<float> dx = poisoned(n());
  asrt_gelu_grad_f32(&ctx, w.data(), x.data(), dx.data(), n());
  // L = sum(w * gelu(x)) in double; elementwise, so dL/dx_i only involves
  // element i.
  std::vector<double> fd(n()), tol(n());
  for (int64_t i = 0; i < n(); ++i) {
    double xi = x[i], h = 1e-6 * std::max(1.0, std::fabs(xi));
    fd[i] = w[i] * (geluRef(xi + h) - geluRef(xi - h)) / (2.0 * h);
    auto [first, second] = geluGradTerms(xi);
    tol[i] =
        1e-5 * std::fabs(w[i]) * (std::fabs(first) + std::fabs(second)) + 1e-8;
  }
  EXPECT_TRUE(allWithin(dx, fd, tol));
}

TEST_P(ActivationTest, GeluGradMatchesFiniteDifferencesOfKernelForward) {
  std::vector<float> x = activationInputs(n(), 9);
  std::vector<float> w = uniformFloats(n(), 10, -1.0f, 1.0f);
  std::vector<float> dx = poisoned(n());
  asrt_gelu_grad_f32(&ctx, w.data(), x.data(), dx.data(), n());
  std::vector<float> probedDx;
  std::vector<double> fd;
  for (size_t i : probeIndices(n(), 64)) {
    // f32 forward: a step near cbrt(eps) balances truncation (h^2 gelu'''/6)
    // against rounding (ulp(y) / h); both stay under the tolerance below.
    float h = 1e-2f * std::max(1.0f, std::fabs(x[i]));
    probedDx.push_back(dx[i]);
    fd.push_back(kernelDifference(&ctx, asrt_gelu_fwd_f32, x, w, i, h));
  }
  EXPECT_TRUE(allNear(probedDx, fd, 1e-3, 2e-4));
}

TEST_P(ActivationTest, OutputsMayAliasInputs) {
  std::vector<float> x = activationInputs(n(), 11);
  std::vector<float> dy = uniformFloats(n(), 12, -1.0f, 1.0f);
  for (Kernel fwd : {asrt_relu_fwd_f32, asrt_gelu_fwd_f32}) {
    std::vector<float> y(n()), inPlace = x;
    fwd(&ctx, x.data(), y.data(), n());
    fwd(&ctx, inPlace.data(), inPlace.data(), n());
    EXPECT_TRUE(bitwiseEqual(inPlace, y));
  }
  using Grad =
      void (*)(asrt_context *, const float *, const float *, float *, int64_t);
  for (Grad grad : {asrt_relu_grad_f32, asrt_gelu_grad_f32}) {
    std::vector<float> dx(n()), overDy = dy, overX = x;
    grad(&ctx, dy.data(), x.data(), dx.data(), n());
    grad(&ctx, overDy.data(), x.data(), overDy.data(), n());
    grad(&ctx, dy.data(), overX.data(), overX.data(), n());
    EXPECT_TRUE(bitwiseEqual(overDy, dx));
    EXPECT_TRUE(bitwiseEqual(overX, dx));
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, ActivationTest,
                         ::testing::Values(1, 7, 23, 1027),
                         [](const ::testing::TestParamInfo<int64_t> &p) {
                           return "n" + std::to_string(p.param);
                         });

using ActivationEdgeTest = CpuKernelTest;

TEST_F(ActivationEdgeTest, GeluLeftTailKeepsRelativeAccuracy) {
  // For x in [-9.5, -3], 1 + tanh(u) cancels to a few bits in f32; the
  // kernel must not lose them. Reference through 1 + tanh(u) = 2/(1+e^{-2u}),
  // evaluated in double without cancellation.
  std::vector<float> x;
  for (float v = -9.5f; v <= -3.0f; v += 0.125f)
    x.push_back(v);
  std::vector<float> y = poisoned(x.size());
  asrt_gelu_fwd_f32(&ctx, x.data(), y.data(), static_cast<int64_t>(x.size()));
  std::vector<double> ref;
  for (float v : x) {
    double u = kSqrt2OverPi * (v + kCubic * double(v) * v * v);
    ref.push_back(v / (1.0 + std::exp(-2.0 * u)));
  }
  EXPECT_TRUE(allNear(y, ref, 1e-5, 0.0));
}

TEST_F(ActivationEdgeTest, ReluPropagatesNaN) {
  float x = std::numeric_limits<float>::quiet_NaN(), y = 0.0f;
  asrt_relu_fwd_f32(&ctx, &x, &y, 1);
  EXPECT_TRUE(std::isnan(y));
}

} // namespace
} // namespace autoshard::rt::test
