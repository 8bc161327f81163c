// Tests of the CPU rotary position embedding: rotate-half pairs, inverse.
#include "TestUtil.h"

#include "autoshard/rt/abi.h"

#include <string>

namespace autoshard::rt::test {
namespace {

struct RopeShape {
  int64_t batch, seq, heads, headDim;
  float theta;
  size_t size() const { return batch * seq * heads * headDim; }
};

/// abi.h's rotation in double: for i < d/2 the pair (x[i], x[i + d/2]) at
/// position t turns by t * theta^(-2i/d); `sign` -1 turns it back.
std::vector<double> ropeRef(const std::vector<float> &x, const RopeShape &s,
                            double sign) {
  std::vector<double> y(x.size());
  const int64_t half = s.headDim / 2;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t t = 0; t < s.seq; ++t)
      for (int64_t h = 0; h < s.heads; ++h) {
        int64_t base = ((b * s.seq + t) * s.heads + h) * s.headDim;
        for (int64_t i = 0; i < half; ++i) {
          double angle = sign * static_cast<double>(t) *
                         std::pow(static_cast<double>(s.theta),
                                  -2.0 * i / static_cast<double>(s.headDim));
          double lo = x[base + i], hi = x[base + i + half];
          y[base + i] = lo * std::cos(angle) - hi * std::sin(angle);
          y[base + i + half] = hi * std::cos(angle) + lo * std::sin(angle);
        }
      }
  return y;
}

/// Per element, the magnitude |lo| + |hi| of its pair: the scale of a
/// rotation's rounding error.
std::vector<double> pairMagnitudes(const std::vector<float> &x,
                                   int64_t headDim) {
  std::vector<double> m(x.size());
  const int64_t half = headDim / 2;
  for (size_t base = 0; base < x.size(); base += headDim)
    for (int64_t i = 0; i < half; ++i) {
      double mag = std::fabs(x[base + i]) + std::fabs(x[base + i + half]);
      m[base + i] = m[base + i + half] = mag;
    }
  return m;
}

class RopeTest : public CpuKernelTest,
                 public ::testing::WithParamInterface<RopeShape> {
protected:
  std::vector<float> rope(const std::vector<float> &x, bool grad) {
    const RopeShape &s = GetParam();
    std::vector<float> y = poisoned(x.size());
    if (grad)
      asrt_rope_grad(&ctx, ASRT_DTYPE_F32, x.data(), y.data(), s.batch, s.seq,
                     s.heads, s.headDim, s.theta);
    else
      asrt_rope_fwd(&ctx, ASRT_DTYPE_F32, x.data(), y.data(), s.batch, s.seq,
                    s.heads, s.headDim, s.theta);
    return y;
  }

  /// A few f32 roundings of each rotated value, relative to its pair.
  std::vector<double> tolerances(const std::vector<float> &x) {
    std::vector<double> tol = pairMagnitudes(x, GetParam().headDim);
    for (double &t : tol)
      t = 4e-7 * t + 1e-30;
    return tol;
  }
};

TEST_P(RopeTest, ForwardMatchesReference) {
  std::vector<float> x = uniformFloats(GetParam().size(), 1, -2.0f, 2.0f);
  EXPECT_TRUE(
      allWithin(rope(x, false), ropeRef(x, GetParam(), 1.0), tolerances(x)));
}

TEST_P(RopeTest, GradIsTheInverseRotation) {
  std::vector<float> dy = uniformFloats(GetParam().size(), 2, -2.0f, 2.0f);
  // The analytic gradient of a rotation is its transpose, a rotation by
  // the opposite angle.
  EXPECT_TRUE(
      allWithin(rope(dy, true), ropeRef(dy, GetParam(), -1.0), tolerances(dy)));
}

TEST_P(RopeTest, GradUndoesForward) {
  std::vector<float> x = uniformFloats(GetParam().size(), 3, -2.0f, 2.0f);
  std::vector<float> back = rope(rope(x, false), true);
  std::vector<double> tol = tolerances(x);
  for (double &t : tol)
    t *= 2.0;
  EXPECT_TRUE(allWithin(back, toDouble(x), tol));
}

TEST_P(RopeTest, GradMatchesFiniteDifferencesOfKernelForward) {
  std::vector<float> x = uniformFloats(GetParam().size(), 4, -2.0f, 2.0f);
  std::vector<float> w = uniformFloats(x.size(), 5, -1.0f, 1.0f);
  std::vector<float> dx = rope(w, true);
  auto forward = [&] { return rope(x, false); };
  // Linear in x: exact up to the rounding of the two outputs the probed
  // entry feeds (an ulp of ~3 each) over the step.
  EXPECT_TRUE(gradMatchesDifferences(dx, forward, x, w, 0.5f, 1e-5, 1e-6, 128));
}

TEST_P(RopeTest, Bf16IsRoundedF32) {
  const RopeShape &s = GetParam();
  std::vector<float> x = bf16Rounded(uniformFloats(s.size(), 6, -2.0f, 2.0f));
  std::vector<uint16_t> xB = toBf16(x), yB = poisonedBf16(x.size()),
                        dxB = poisonedBf16(x.size());
  asrt_rope_fwd(&ctx, ASRT_DTYPE_BF16, xB.data(), yB.data(), s.batch, s.seq,
                s.heads, s.headDim, s.theta);
  asrt_rope_grad(&ctx, ASRT_DTYPE_BF16, xB.data(), dxB.data(), s.batch, s.seq,
                 s.heads, s.headDim, s.theta);
  EXPECT_TRUE(bf16IsRoundedF32(yB, rope(x, false)));
  EXPECT_TRUE(bf16IsRoundedF32(dxB, rope(x, true)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeTest,
                         ::testing::Values(RopeShape{1, 1, 1, 2, 10000.0f},
                                           RopeShape{2, 7, 3, 8, 10000.0f},
                                           RopeShape{1, 33, 2, 64, 500000.0f},
                                           RopeShape{2, 5, 4, 6, 10.0f}),
                         [](const ::testing::TestParamInfo<RopeShape> &p) {
                           const RopeShape &s = p.param;
                           return "b" + std::to_string(s.batch) + "_t" +
                                  std::to_string(s.seq) + "_h" +
                                  std::to_string(s.heads) + "_d" +
                                  std::to_string(s.headDim) + "_theta" +
                                  std::to_string(static_cast<int64_t>(s.theta));
                         });

using RopeEdgeTest = CpuKernelTest;

TEST_F(RopeEdgeTest, PairsAreRotateHalfWorkedByHand) {
  // One head of 4 at positions 0 and 1, theta 100: pair (x0, x2) turns by
  // t rad, pair (x1, x3) by t * 100^(-1/2) = t / 10 rad. An interleaved
  // pairing ((x0, x1), (x2, x3)) would give different numbers.
  std::vector<float> x = {1, 2, 3, 4, 1, 2, 3, 4};
  std::vector<float> y = poisoned(8);
  asrt_rope_fwd(&ctx, ASRT_DTYPE_F32, x.data(), y.data(), 1, 2, 1, 4, 100.0f);
  const double c1 = std::cos(1.0), s1 = std::sin(1.0);
  const double c01 = std::cos(0.1), s01 = std::sin(0.1);
  std::vector<double> expected = {1,
                                  2,
                                  3,
                                  4, // position 0: identity
                                  1 * c1 - 3 * s1,
                                  2 * c01 - 4 * s01,
                                  3 * c1 + 1 * s1,
                                  4 * c01 + 2 * s01};
  EXPECT_TRUE(allNear(y, expected, 1e-6, 1e-7));
}

TEST_F(RopeEdgeTest, FarPositionsKeepAccuracy) {
  // At t = 8191 the angle itself must be formed accurately: in f32,
  // t * inv_freq is off by ~5e-4 rad, far above the tolerance here.
  RopeShape s{1, 8192, 1, 16, 10000.0f};
  std::vector<float> x = uniformFloats(s.size(), 7, -1.0f, 1.0f);
  std::vector<float> y = poisoned(x.size());
  asrt_rope_fwd(&ctx, ASRT_DTYPE_F32, x.data(), y.data(), s.batch, s.seq,
                s.heads, s.headDim, s.theta);
  std::vector<double> tol = pairMagnitudes(x, s.headDim);
  for (double &t : tol)
    t = 4e-7 * t + 1e-30;
  EXPECT_TRUE(allWithin(y, ropeRef(x, s, 1.0), tol));
}

TEST_F(RopeEdgeTest, BadShapesAreFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float v[6] = {};
  EXPECT_DEATH(
      asrt_rope_fwd(&ctx, ASRT_DTYPE_F32, v, v + 3, 1, 1, 1, 3, 10000.0f),
      "rope_fwd: head_dim = 3 must be even");
  EXPECT_DEATH(asrt_rope_grad(&ctx, ASRT_DTYPE_F32, v, v + 2, 1, 1, 1, 2, 0.0f),
               "rope_grad: theta = 0 must be positive and finite");
}

} // namespace
} // namespace autoshard::rt::test
