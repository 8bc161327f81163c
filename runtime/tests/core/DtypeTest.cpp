// Dtype names and sizes, 16-bit float conversions, reduction rules.
#include "core/Dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace autoshard::rt;

namespace {

TEST(DtypeTest, NamesAndSizesFollowTheAbi) {
  EXPECT_EQ(dtypeSize(ASRT_DTYPE_F32), 4);
  EXPECT_EQ(dtypeSize(ASRT_DTYPE_BF16), 2);
  EXPECT_EQ(dtypeSize(ASRT_DTYPE_I64), 8);
  EXPECT_EQ(dtypeSize(ASRT_DTYPE_U16), 2);
  EXPECT_EQ(dtypeSize(6), 0);
  EXPECT_STREQ(dtypeName(ASRT_DTYPE_F16), "f16");
  EXPECT_STREQ(dtypeSafetensorsName(ASRT_DTYPE_BF16), "BF16");
  asrt_dtype d;
  ASSERT_TRUE(parseDtype("i64", d));
  EXPECT_EQ(d, ASRT_DTYPE_I64);
  EXPECT_FALSE(parseDtype("float", d));
  EXPECT_TRUE(isFloatDtype(ASRT_DTYPE_BF16));
  EXPECT_TRUE(isIntegerDtype(ASRT_DTYPE_U16));
  EXPECT_FALSE(isFloatDtype(-1));
}

TEST(DtypeTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16ToFloat(0x3f80), 1.0f);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to even (1).
  EXPECT_EQ(floatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // Just above halfway rounds up.
  EXPECT_EQ(floatToBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)),
            0x3f81);
  EXPECT_TRUE(std::isnan(
      bf16ToFloat(floatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16ToFloat(floatToBf16(-3.0f)), -3.0f);
}

TEST(DtypeTest, F16Conversions) {
  EXPECT_EQ(floatToF16(1.0f), 0x3c00);
  EXPECT_EQ(floatToF16(-2.0f), 0xc000);
  EXPECT_EQ(floatToF16(65504.0f), 0x7bff);
  EXPECT_EQ(floatToF16(65520.0f), 0x7c00);              // rounds to infinity
  EXPECT_EQ(floatToF16(std::ldexp(1.0f, -24)), 0x0001); // smallest subnormal
  EXPECT_EQ(floatToF16(std::ldexp(1.0f, -14)), 0x0400); // smallest normal
  EXPECT_EQ(floatToF16(0.0f), 0x0000);
  EXPECT_EQ(f16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16ToFloat(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isinf(f16ToFloat(0x7c00)));
  EXPECT_TRUE(std::isnan(f16ToFloat(floatToF16(std::nanf("")))));
  // Normal halves keep 11 significant bits; subnormals a fixed 2^-24 step.
  for (float x : {0.1f, -7.25f, 1000.5f, 3e-4f})
    EXPECT_NEAR(f16ToFloat(floatToF16(x)), x, std::fabs(x) * 1e-3f);
  EXPECT_NEAR(f16ToFloat(floatToF16(3e-6f)), 3e-6f, std::ldexp(1.0f, -25));
}

TEST(DtypeTest, ReductionRules) {
  EXPECT_TRUE(checkReduction(ASRT_DTYPE_F32, ASRT_REDUCE_AVG).ok());
  EXPECT_TRUE(checkReduction(ASRT_DTYPE_BF16, ASRT_REDUCE_MAX).ok());
  EXPECT_TRUE(checkReduction(ASRT_DTYPE_I64, ASRT_REDUCE_SUM).ok());
  Status avgInt = checkReduction(ASRT_DTYPE_I32, ASRT_REDUCE_AVG);
  ASSERT_FALSE(avgInt.ok());
  EXPECT_EQ(avgInt.message(),
            "avg of i32 would truncate; average only f32 or bf16 (or use sum)");
  EXPECT_FALSE(checkReduction(ASRT_DTYPE_F16, ASRT_REDUCE_SUM).ok());
  EXPECT_FALSE(checkReduction(9, ASRT_REDUCE_SUM).ok());
  Status badOp = checkReduction(ASRT_DTYPE_F32, 4);
  ASSERT_FALSE(badOp.ok());
  EXPECT_NE(badOp.message().find("reduce_op 4 is not an asrt_reduce_op"),
            std::string::npos);
}

TEST(DtypeTest, LoadAndStoreElements) {
  uint16_t h[1];
  storeElement(h, ASRT_DTYPE_BF16, 0, 2.5);
  EXPECT_EQ(loadElement(h, ASRT_DTYPE_BF16, 0), 2.5);
  int64_t i[1];
  storeElement(i, ASRT_DTYPE_I64, 0, 12345678901.0);
  EXPECT_EQ(i[0], 12345678901);
}

} // namespace
