// Tests of the CPU elementwise kernels: references, differences, aliasing.
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

using Kernel = void (*)(asrt_context *, int32_t, const void *, void *, int64_t);

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
  fwd(ctx, ASRT_DTYPE_F32, x.data(), yp.data(), n);
  x[i] = xm;
  fwd(ctx, ASRT_DTYPE_F32, x.data(), ym.data(), n);
  double diff = 0.0;
  for (size_t j = 0; j < x.size(); ++j)
    diff += static_cast<double>(w[j]) *
            (static_cast<double>(yp[j]) - static_cast<double>(ym[j]));
  return diff / (static_cast<double>(xp) - static_cast<double>(xm));
}

class ElementwiseTest : public CpuKernelTest,
                        public ::testing::WithParamInterface<int64_t> {
protected:
  int64_t n() const { return GetParam(); }
};

TEST_P(ElementwiseTest, ReluForwardMatchesReference) {
  std::vector<float> x = activationInputs(n(), 1);
  std::vector<float> y = poisoned(n());
  asrt_relu_fwd(&ctx, ASRT_DTYPE_F32, x.data(), y.data(), n());
  std::vector<double> ref(n());
  for (int64_t i = 0; i < n(); ++i)
    ref[i] = x[i] > 0.0f ? x[i] : 0.0;
  EXPECT_TRUE(allNear(y, ref, 0.0, 0.0));
}

TEST_P(ElementwiseTest, ReluGradMatchesReferenceAndFiniteDifferences) {
  std::vector<float> x = activationInputs(n(), 2);
  std::vector<float> dy = uniformFloats(n(), 3, -1.0f, 1.0f);
  std::vector<float> dx = poisoned(n());
  asrt_relu_grad(&ctx, ASRT_DTYPE_F32, dy.data(), x.data(), dx.data(), n());

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
    fd.push_back(kernelDifference(&ctx, asrt_relu_fwd, x, dy, i, h));
  }
  EXPECT_TRUE(allNear(probedDx, fd, 1e-9, 1e-12));
}

TEST_P(ElementwiseTest, GeluForwardMatchesReference) {
  std::vector<float> x = activationInputs(n(), 4);
  std::vector<float> y = poisoned(n());
  asrt_gelu_fwd(&ctx, ASRT_DTYPE_F32, x.data(), y.data(), n());
  std::vector<double> ref(n());
  for (int64_t i = 0; i < n(); ++i)
    ref[i] = geluRef(x[i]);
  // The absolute part covers the reference's own cancellation in 1 + tanh
  // for x below about -6 (the left tail is checked more tightly below).
  EXPECT_TRUE(allNear(y, ref, 1e-5, 1e-12));
}

TEST_P(ElementwiseTest, GeluGradMatchesAnalyticReference) {
  std::vector<float> x = activationInputs(n(), 5);
  std::vector<float> dy = uniformFloats(n(), 6, -1.0f, 1.0f);
  std::vector<float> dx = poisoned(n());
  asrt_gelu_grad(&ctx, ASRT_DTYPE_F32, dy.data(), x.data(), dx.data(), n());
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

TEST_P(ElementwiseTest, GeluGradMatchesFiniteDifferencesOfReference) {
  std::vector<float> x = activationInputs(n(), 7);
  std::vector<float> w = uniformFloats(n(), 8, -1.0f, 1.0f);
  std::vector<float> dx = poisoned(n());
  asrt_gelu_grad(&ctx, ASRT_DTYPE_F32, w.data(), x.data(), dx.data(), n());
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

TEST_P(ElementwiseTest, GeluGradMatchesFiniteDifferencesOfKernelForward) {
  std::vector<float> x = activationInputs(n(), 9);
  std::vector<float> w = uniformFloats(n(), 10, -1.0f, 1.0f);
  std::vector<float> dx = poisoned(n());
  asrt_gelu_grad(&ctx, ASRT_DTYPE_F32, w.data(), x.data(), dx.data(), n());
  std::vector<float> probedDx;
  std::vector<double> fd;
  for (size_t i : probeIndices(n(), 64)) {
    // f32 forward: a step near cbrt(eps) balances truncation (h^2 gelu'''/6)
    // against rounding (ulp(y) / h); both stay under the tolerance below.
    float h = 1e-2f * std::max(1.0f, std::fabs(x[i]));
    probedDx.push_back(dx[i]);
    fd.push_back(kernelDifference(&ctx, asrt_gelu_fwd, x, w, i, h));
  }
  EXPECT_TRUE(allNear(probedDx, fd, 1e-3, 2e-4));
}

TEST_P(ElementwiseTest, OutputsMayAliasInputs) {
  std::vector<float> x = activationInputs(n(), 11);
  std::vector<float> dy = uniformFloats(n(), 12, -1.0f, 1.0f);
  for (Kernel fwd : {asrt_relu_fwd, asrt_gelu_fwd}) {
    std::vector<float> y(n()), inPlace = x;
    fwd(&ctx, ASRT_DTYPE_F32, x.data(), y.data(), n());
    fwd(&ctx, ASRT_DTYPE_F32, inPlace.data(), inPlace.data(), n());
    EXPECT_TRUE(bitwiseEqual(inPlace, y));
  }
  using Grad = void (*)(asrt_context *, int32_t, const void *, const void *,
                        void *, int64_t);
  for (Grad grad : {asrt_relu_grad, asrt_gelu_grad}) {
    std::vector<float> dx(n()), overDy = dy, overX = x;
    grad(&ctx, ASRT_DTYPE_F32, dy.data(), x.data(), dx.data(), n());
    grad(&ctx, ASRT_DTYPE_F32, overDy.data(), x.data(), overDy.data(), n());
    grad(&ctx, ASRT_DTYPE_F32, dy.data(), overX.data(), overX.data(), n());
    EXPECT_TRUE(bitwiseEqual(overDy, dx));
    EXPECT_TRUE(bitwiseEqual(overX, dx));
  }
}

/// sigmoid(g) and 1 - sigmoid(g) in double, neither through a subtraction
/// that would cancel in the tails.
std::pair<double, double> sigmoidRef(double g) {
  return {1.0 / (1.0 + std::exp(-g)), 1.0 / (1.0 + std::exp(g))};
}

TEST_P(ElementwiseTest, SwigluForwardMatchesReference) {
  std::vector<float> gate = activationInputs(n(), 21);
  std::vector<float> up = uniformFloats(n(), 22, -1.0f, 1.0f);
  std::vector<float> y = poisoned(n());
  asrt_swiglu_fwd(&ctx, ASRT_DTYPE_F32, gate.data(), up.data(), y.data(), n());
  std::vector<double> ref(n());
  for (int64_t i = 0; i < n(); ++i)
    ref[i] = gate[i] * sigmoidRef(gate[i]).first * up[i];
  // Relative everywhere, the left tail included (silu(-25) ~ -3.5e-10).
  EXPECT_TRUE(allNear(y, ref, 1e-5, 1e-37));
}

TEST_P(ElementwiseTest, SwigluGradMatchesAnalyticReference) {
  std::vector<float> gate = activationInputs(n(), 23);
  std::vector<float> up = uniformFloats(n(), 24, -1.0f, 1.0f);
  std::vector<float> dy = uniformFloats(n(), 25, -1.0f, 1.0f);
  std::vector<float> dgate = poisoned(n()), dup = poisoned(n());
  asrt_swiglu_grad(&ctx, ASRT_DTYPE_F32, dy.data(), gate.data(), up.data(),
                   dgate.data(), dup.data(), n());
  std::vector<double> refGate(n()), refUp(n()), tolGate(n()), tolUp(n());
  for (int64_t i = 0; i < n(); ++i) {
    double g = gate[i];
    auto [s, oneMinusS] = sigmoidRef(g);
    // silu'(g) = s + g s (1 - s); tolerance relative to its two terms,
    // since their sum vanishes near g = -1.28.
    double first = s, second = g * s * oneMinusS;
    refGate[i] = static_cast<double>(dy[i]) * up[i] * (first + second);
    tolGate[i] = 1e-5 * std::fabs(dy[i] * up[i]) *
                     (std::fabs(first) + std::fabs(second)) +
                 1e-37;
    refUp[i] = static_cast<double>(dy[i]) * g * s;
    tolUp[i] = 1e-5 * std::fabs(refUp[i]) + 1e-37;
  }
  EXPECT_TRUE(allWithin(dgate, refGate, tolGate)) << "dgate";
  EXPECT_TRUE(allWithin(dup, refUp, tolUp)) << "dup";
}

TEST_P(ElementwiseTest, SwigluGradMatchesFiniteDifferencesOfKernelForward) {
  std::vector<float> gate = activationInputs(n(), 26);
  std::vector<float> up = uniformFloats(n(), 27, -1.0f, 1.0f);
  std::vector<float> w = uniformFloats(n(), 28, -1.0f, 1.0f);
  std::vector<float> dgate = poisoned(n()), dup = poisoned(n());
  asrt_swiglu_grad(&ctx, ASRT_DTYPE_F32, w.data(), gate.data(), up.data(),
                   dgate.data(), dup.data(), n());
  auto forward = [&] {
    std::vector<float> y(n());
    asrt_swiglu_fwd(&ctx, ASRT_DTYPE_F32, gate.data(), up.data(), y.data(),
                    n());
    return y;
  };
  // Steps relative to the probed value; huge gates then take huge steps,
  // over which silu is linear.
  std::vector<float> probedGate;
  std::vector<double> fdGate;
  for (size_t i : probeIndices(n(), 64)) {
    float h = 1e-2f * std::max(1.0f, std::fabs(gate[i]));
    probedGate.push_back(dgate[i]);
    fdGate.push_back(weightedDifference(forward, gate, w, i, h));
  }
  EXPECT_TRUE(allNear(probedGate, fdGate, 1e-3, 2e-4)) << "dgate";
  // Linear in up: the difference is exact up to f32 rounding of y.
  EXPECT_TRUE(gradMatchesDifferences(dup, forward, up, w, 0.25f, 1e-5, 1e-6))
      << "dup";
}

TEST_P(ElementwiseTest, AddMatchesReference) {
  std::vector<float> a = activationInputs(n(), 29);
  std::vector<float> b = uniformFloats(n(), 30, -6.0f, 6.0f);
  std::vector<float> y = poisoned(n());
  asrt_add(&ctx, ASRT_DTYPE_F32, a.data(), b.data(), y.data(), n());
  std::vector<double> ref(n());
  for (int64_t i = 0; i < n(); ++i)
    ref[i] = static_cast<double>(a[i]) + b[i];
  // One f32 rounding: half an ulp.
  EXPECT_TRUE(allNear(y, ref, 0x1p-24, 0.0));
}

TEST_P(ElementwiseTest, ScaleMatchesReferenceInPlaceAndInBf16) {
  std::vector<float> x = activationInputs(n(), 34);
  std::vector<float> y = poisoned(n());
  asrt_scale(&ctx, ASRT_DTYPE_F32, x.data(), y.data(), n(), 0.3f);
  std::vector<double> ref(n());
  for (int64_t i = 0; i < n(); ++i)
    ref[i] = 0.3f * static_cast<double>(x[i]);
  EXPECT_TRUE(allNear(y, ref, 0x1p-24, 0.0));

  std::vector<float> inPlace = x;
  asrt_scale(&ctx, ASRT_DTYPE_F32, inPlace.data(), inPlace.data(), n(), 0.3f);
  EXPECT_EQ(inPlace, y);

  std::vector<uint16_t> xb = toBf16(x), yb = poisonedBf16(n());
  asrt_scale(&ctx, ASRT_DTYPE_BF16, xb.data(), yb.data(), n(), 0.3f);
  std::vector<float> fromRounded = poisoned(n());
  std::vector<float> xr = fromBf16(xb);
  asrt_scale(&ctx, ASRT_DTYPE_F32, xr.data(), fromRounded.data(), n(), 0.3f);
  EXPECT_TRUE(bf16IsRoundedF32(yb, fromRounded));
}

TEST_P(ElementwiseTest, SwigluAndAddOutputsMayAliasInputs) {
  std::vector<float> gate = activationInputs(n(), 31);
  std::vector<float> up = uniformFloats(n(), 32, -1.0f, 1.0f);
  std::vector<float> dy = uniformFloats(n(), 33, -1.0f, 1.0f);

  std::vector<float> y(n()), overGate = gate, overUp = up;
  asrt_swiglu_fwd(&ctx, ASRT_DTYPE_F32, gate.data(), up.data(), y.data(), n());
  asrt_swiglu_fwd(&ctx, ASRT_DTYPE_F32, overGate.data(), up.data(),
                  overGate.data(), n());
  asrt_swiglu_fwd(&ctx, ASRT_DTYPE_F32, gate.data(), overUp.data(),
                  overUp.data(), n());
  EXPECT_TRUE(bitwiseEqual(overGate, y));
  EXPECT_TRUE(bitwiseEqual(overUp, y));

  // The two gradients written over the inputs they are taken from.
  std::vector<float> dgate(n()), dup(n());
  asrt_swiglu_grad(&ctx, ASRT_DTYPE_F32, dy.data(), gate.data(), up.data(),
                   dgate.data(), dup.data(), n());
  std::vector<float> g2 = gate, u2 = up;
  asrt_swiglu_grad(&ctx, ASRT_DTYPE_F32, dy.data(), g2.data(), u2.data(),
                   g2.data(), u2.data(), n());
  EXPECT_TRUE(bitwiseEqual(g2, dgate));
  EXPECT_TRUE(bitwiseEqual(u2, dup));
  std::vector<float> d3 = dy, u3 = up;
  asrt_swiglu_grad(&ctx, ASRT_DTYPE_F32, d3.data(), gate.data(), u3.data(),
                   d3.data(), u3.data(), n());
  EXPECT_TRUE(bitwiseEqual(d3, dgate));
  EXPECT_TRUE(bitwiseEqual(u3, dup));

  std::vector<float> sum(n()), overA = gate, overB = up;
  asrt_add(&ctx, ASRT_DTYPE_F32, gate.data(), up.data(), sum.data(), n());
  asrt_add(&ctx, ASRT_DTYPE_F32, overA.data(), up.data(), overA.data(), n());
  asrt_add(&ctx, ASRT_DTYPE_F32, gate.data(), overB.data(), overB.data(), n());
  EXPECT_TRUE(bitwiseEqual(overA, sum));
  EXPECT_TRUE(bitwiseEqual(overB, sum));
}

TEST_P(ElementwiseTest, Bf16IsRoundedF32) {
  // Inputs bf16 holds exactly: the f32 kernel then computes the very values
  // the bf16 kernel computes before rounding its outputs.
  std::vector<float> x = bf16Rounded(activationInputs(n(), 34));
  std::vector<float> u = bf16Rounded(uniformFloats(n(), 35, -1.0f, 1.0f));
  std::vector<float> dy = bf16Rounded(uniformFloats(n(), 36, -1.0f, 1.0f));
  std::vector<uint16_t> xb = toBf16(x), ub = toBf16(u), dyb = toBf16(dy);

  for (Kernel fwd : {asrt_relu_fwd, asrt_gelu_fwd}) {
    std::vector<float> y = poisoned(n());
    std::vector<uint16_t> yb = poisonedBf16(n()), inPlace = xb;
    fwd(&ctx, ASRT_DTYPE_F32, x.data(), y.data(), n());
    fwd(&ctx, ASRT_DTYPE_BF16, xb.data(), yb.data(), n());
    fwd(&ctx, ASRT_DTYPE_BF16, inPlace.data(), inPlace.data(), n());
    EXPECT_TRUE(bf16IsRoundedF32(yb, y));
    EXPECT_EQ(inPlace, yb);
  }
  using Grad = void (*)(asrt_context *, int32_t, const void *, const void *,
                        void *, int64_t);
  for (Grad grad : {asrt_relu_grad, asrt_gelu_grad}) {
    std::vector<float> dx = poisoned(n());
    std::vector<uint16_t> dxb = poisonedBf16(n());
    grad(&ctx, ASRT_DTYPE_F32, dy.data(), x.data(), dx.data(), n());
    grad(&ctx, ASRT_DTYPE_BF16, dyb.data(), xb.data(), dxb.data(), n());
    EXPECT_TRUE(bf16IsRoundedF32(dxb, dx));
  }

  std::vector<float> y = poisoned(n()), dgate = poisoned(n()),
                     dup = poisoned(n()), sum = poisoned(n());
  std::vector<uint16_t> yb = poisonedBf16(n()), dgateb = poisonedBf16(n()),
                        dupb = poisonedBf16(n()), sumb = poisonedBf16(n());
  asrt_swiglu_fwd(&ctx, ASRT_DTYPE_F32, x.data(), u.data(), y.data(), n());
  asrt_swiglu_fwd(&ctx, ASRT_DTYPE_BF16, xb.data(), ub.data(), yb.data(), n());
  EXPECT_TRUE(bf16IsRoundedF32(yb, y)) << "swiglu";
  asrt_swiglu_grad(&ctx, ASRT_DTYPE_F32, dy.data(), x.data(), u.data(),
                   dgate.data(), dup.data(), n());
  asrt_swiglu_grad(&ctx, ASRT_DTYPE_BF16, dyb.data(), xb.data(), ub.data(),
                   dgateb.data(), dupb.data(), n());
  EXPECT_TRUE(bf16IsRoundedF32(dgateb, dgate)) << "swiglu dgate";
  EXPECT_TRUE(bf16IsRoundedF32(dupb, dup)) << "swiglu dup";
  asrt_add(&ctx, ASRT_DTYPE_F32, x.data(), u.data(), sum.data(), n());
  asrt_add(&ctx, ASRT_DTYPE_BF16, xb.data(), ub.data(), sumb.data(), n());
  EXPECT_TRUE(bf16IsRoundedF32(sumb, sum)) << "add";
  // And the rounded results stay within bf16's precision of f32.
  EXPECT_TRUE(bf16CloseToF32(sumb, sum, 1.0 / 256, 0.0)) << "add";
}

INSTANTIATE_TEST_SUITE_P(Sizes, ElementwiseTest,
                         ::testing::Values(1, 7, 23, 1027),
                         [](const ::testing::TestParamInfo<int64_t> &p) {
                           return "n" + std::to_string(p.param);
                         });

using ElementwiseEdgeTest = CpuKernelTest;

TEST_F(ElementwiseEdgeTest, GeluLeftTailKeepsRelativeAccuracy) {
  // For x in [-9.5, -3], 1 + tanh(u) cancels to a few bits in f32; the
  // kernel must not lose them. Reference through 1 + tanh(u) = 2/(1+e^{-2u}),
  // evaluated in double without cancellation.
  std::vector<float> x;
  for (float v = -9.5f; v <= -3.0f; v += 0.125f)
    x.push_back(v);
  std::vector<float> y = poisoned(x.size());
  asrt_gelu_fwd(&ctx, ASRT_DTYPE_F32, x.data(), y.data(),
                static_cast<int64_t>(x.size()));
  std::vector<double> ref;
  for (float v : x) {
    double u = kSqrt2OverPi * (v + kCubic * double(v) * v * v);
    ref.push_back(v / (1.0 + std::exp(-2.0 * u)));
  }
  EXPECT_TRUE(allNear(y, ref, 1e-5, 0.0));
}

TEST_F(ElementwiseEdgeTest, NegativeCountIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float dummy = 0.0f;
  EXPECT_DEATH(
      asrt_swiglu_fwd(&ctx, ASRT_DTYPE_F32, &dummy, &dummy, &dummy, -2),
      "swiglu_fwd: n = -2 is negative");
  EXPECT_DEATH(asrt_add(&ctx, ASRT_DTYPE_I32, &dummy, &dummy, &dummy, 1),
               "add: dtype 1 \\(i32\\) is not supported");
}

TEST_F(ElementwiseEdgeTest, ReluPropagatesNaN) {
  float x = std::numeric_limits<float>::quiet_NaN(), y = 0.0f;
  asrt_relu_fwd(&ctx, ASRT_DTYPE_F32, &x, &y, 1);
  EXPECT_TRUE(std::isnan(y));
}

} // namespace
} // namespace autoshard::rt::test
