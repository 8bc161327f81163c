// Tests of the CPU gradient-norm clipping: sums of squares, the coefficient.
#include "TestUtil.h"

#include "autoshard/rt/abi.h"

namespace autoshard::rt::test {
namespace {

using GradClipTest = CpuKernelTest;

double sumOfSquaresRef(const std::vector<float> &x) {
  double sum = 0.0;
  for (float v : x)
    sum += static_cast<double>(v) * v;
  return sum;
}

TEST_F(GradClipTest, SumOfSquaresMatchesReferenceAndHonoursAccumulate) {
  std::vector<float> a = uniformFloats(1001, 1, -3.0f, 3.0f);
  std::vector<float> b = uniformFloats(77, 2, -1.0f, 1.0f);
  // accumulate = 0 must ignore what acc holds, even a NaN.
  float acc = std::numeric_limits<float>::quiet_NaN();
  asrt_sum_of_squares(&ctx, ASRT_DTYPE_F32, a.data(), 1001, &acc, 0);
  EXPECT_TRUE(
      allNear(std::vector<float>{acc}, {sumOfSquaresRef(a)}, 0x1p-24, 0.0));
  // accumulate = 1 adds to it: one rounding of acc + sum(b^2).
  float first = acc;
  asrt_sum_of_squares(&ctx, ASRT_DTYPE_F32, b.data(), 77, &acc, 1);
  EXPECT_TRUE(allNear(std::vector<float>{acc},
                      {static_cast<double>(first) + sumOfSquaresRef(b)},
                      0x1p-24, 0.0));
  // An empty tensor adds nothing, or resets.
  asrt_sum_of_squares(&ctx, ASRT_DTYPE_F32, b.data(), 0, &acc, 1);
  EXPECT_TRUE(allNear(std::vector<float>{acc},
                      {static_cast<double>(first) + sumOfSquaresRef(b)},
                      0x1p-24, 0.0));
  asrt_sum_of_squares(&ctx, ASRT_DTYPE_F32, b.data(), 0, &acc, 0);
  EXPECT_EQ(acc, 0.0f);
}

TEST_F(GradClipTest, SumOfSquaresAccumulatesInDouble) {
  // 2^22 squares of ~1/3 on average: a float running sum drifts by ~1e-3
  // relative here (once the sum is large, every addend loses bits); the
  // double sum is rounded once.
  const int64_t n = int64_t(1) << 22;
  std::vector<float> x = uniformFloats(n, 3, -1.0f, 1.0f);
  float acc = 0.0f;
  asrt_sum_of_squares(&ctx, ASRT_DTYPE_F32, x.data(), n, &acc, 0);
  EXPECT_TRUE(
      allNear(std::vector<float>{acc}, {sumOfSquaresRef(x)}, 0x1p-24, 0.0));
}

TEST_F(GradClipTest, SumOfSquaresOfBf16) {
  std::vector<float> x = bf16Rounded(uniformFloats(513, 4, -2.0f, 2.0f));
  std::vector<uint16_t> xB = toBf16(x);
  float acc = 1.5f;
  asrt_sum_of_squares(&ctx, ASRT_DTYPE_BF16, xB.data(), 513, &acc, 1);
  EXPECT_TRUE(allNear(std::vector<float>{acc}, {1.5 + sumOfSquaresRef(x)},
                      0x1p-24, 0.0));
}

TEST_F(GradClipTest, ClipCoefficientIsTorchs) {
  struct Case {
    float sumsq, maxNorm;
  };
  const Case cases[] = {
      {16.0f, 1.0f},  // norm 4: clip to 1 / (4 + 1e-6)
      {16.0f, 4.0f},  // exactly at the limit: just below 1
      {16.0f, 10.0f}, // under the limit: 1
      {0.0f, 1.0f},   // zero gradient: 1, not inf
      {2.0f, 0.5f},
  };
  for (const Case &c : cases) {
    float coef = std::numeric_limits<float>::quiet_NaN();
    asrt_clip_coefficient(&ctx, &c.sumsq, &coef, c.maxNorm);
    // torch: clamp(max_norm / (total_norm + 1e-6), max=1) on f32 tensors.
    float expected = std::min(1.0f, c.maxNorm / (std::sqrt(c.sumsq) + 1e-6f));
    EXPECT_EQ(coef, expected) << "sumsq " << c.sumsq << " max " << c.maxNorm;
    EXPECT_NEAR(coef,
                std::min(1.0, c.maxNorm / (std::sqrt(double(c.sumsq)) + 1e-6)),
                1e-7);
  }
  float coef = 0.0f;
  float sumsq = 16.0f;
  asrt_clip_coefficient(&ctx, &sumsq, &coef, 1.0f);
  EXPECT_LT(coef, 0.25f);
  EXPECT_GT(coef, 0.2499999f);
}

TEST_F(GradClipTest, NonFiniteNormsPropagateAsInTorch) {
  // A NaN norm keeps NaN (the step then visibly diverges); an infinite one
  // gives 0, as torch's clamp does.
  float nan = std::numeric_limits<float>::quiet_NaN(), coef = 0.0f;
  asrt_clip_coefficient(&ctx, &nan, &coef, 1.0f);
  EXPECT_TRUE(std::isnan(coef));
  float inf = std::numeric_limits<float>::infinity();
  asrt_clip_coefficient(&ctx, &inf, &coef, 1.0f);
  EXPECT_EQ(coef, 0.0f);
}

} // namespace
} // namespace autoshard::rt::test
