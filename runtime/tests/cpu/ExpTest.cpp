// fastExp (cpu/Exp.h) against the double-precision exponential.
#include "cpu/Exp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

using autoshard::rt::cpu::fastExp;

namespace {

/// A float's position on the number line, in ulps.
int64_t ordinal(float f) {
  int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : i;
}

} // namespace

TEST(FastExp, WithinOneUlpOverItsRange) {
  // Every 61st float from -104 to 89: normal and denormal results, and
  // arguments near 0 where r is the whole argument.
  int64_t worst = 0;
  float worstAt = 0;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 61) {
    uint32_t b = static_cast<uint32_t>(bits);
    float x;
    std::memcpy(&x, &b, sizeof x);
    if (!(x >= -104.0f && x <= 88.7f))
      continue;
    float exact = static_cast<float>(std::exp(static_cast<double>(x)));
    int64_t ulps = std::abs(ordinal(exact) - ordinal(fastExp(x)));
    if (ulps > worst) {
      worst = ulps;
      worstAt = x;
    }
  }
  EXPECT_LE(worst, 1) << "at x = " << worstAt;
}

TEST(FastExp, EdgesOfTheRange) {
  EXPECT_EQ(fastExp(0.0f), 1.0f);
  EXPECT_EQ(fastExp(-0.0f), 1.0f);
  EXPECT_EQ(fastExp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(fastExp(-200.0f), 0.0f);
  EXPECT_EQ(fastExp(89.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fastExp(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fastExp(std::numeric_limits<float>::quiet_NaN())));
  // The least denormal's neighbourhood: e^-103.28 is 1.4e-45.
  EXPECT_GT(fastExp(-103.0f), 0.0f);
  EXPECT_EQ(fastExp(88.0f), static_cast<float>(std::exp(88.0)));
}
