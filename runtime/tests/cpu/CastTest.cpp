// Tests of the CPU cast: f32 <-> bf16 round trips and round-to-nearest-even.
#include "TestUtil.h"

#include "autoshard/rt/abi.h"

namespace autoshard::rt::test {
namespace {

using CastTest = CpuKernelTest;

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

float fromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

std::vector<uint16_t> castToBf16(asrt_context *ctx,
                                 const std::vector<float> &src) {
  std::vector<uint16_t> dst = poisonedBf16(src.size());
  asrt_cast(ctx, ASRT_DTYPE_F32, src.data(), ASRT_DTYPE_BF16, dst.data(),
            static_cast<int64_t>(src.size()));
  return dst;
}

std::vector<float> castToF32(asrt_context *ctx,
                             const std::vector<uint16_t> &src) {
  std::vector<float> dst = poisoned(src.size());
  asrt_cast(ctx, ASRT_DTYPE_BF16, src.data(), ASRT_DTYPE_F32, dst.data(),
            static_cast<int64_t>(src.size()));
  return dst;
}

TEST_F(CastTest, RoundsToNearestEvenWithTiesWrittenByHand) {
  // f32 bits in, expected bf16 bits out. A bf16 keeps the top 16 bits; the
  // dropped half 0x8000 is a tie, broken toward an even kept half.
  const std::pair<uint32_t, uint16_t> cases[] = {
      {0x3f800000, 0x3f80}, // 1 is exact
      {0x3f808000, 0x3f80}, // 1 + 2^-8: tie, 0x3f80 is even -> down
      {0x3f818000, 0x3f82}, // tie above odd 0x3f81 -> up to even
      {0x3f808001, 0x3f81}, // just above the tie -> up
      {0x3f807fff, 0x3f80}, // just below the tie -> down
      {0xbf808000, 0xbf80}, // signs are symmetric
      {0xbf818000, 0xbf82},
      {0x00008000, 0x0000}, // subnormal tie to even (zero)
      {0x00018000, 0x0002}, // subnormal tie up to even
      {0x80000000, 0x8000}, // -0 keeps its sign
      {0x7f7f8000, 0x7f80}, // tie at the top of the range rounds to inf
      {0x7f7f7fff, 0x7f7f}, // below it stays the largest finite bf16
      {0x7f800000, 0x7f80}, // +inf
      {0xff800000, 0xff80}, // -inf
  };
  std::vector<float> src;
  for (auto [in, out] : cases)
    src.push_back(fromBits(in));
  std::vector<uint16_t> dst = castToBf16(&ctx, src);
  for (size_t i = 0; i < std::size(cases); ++i)
    EXPECT_EQ(dst[i], cases[i].second)
        << std::hex << "f32 0x" << cases[i].first << " gave bf16 0x" << dst[i];
}

TEST_F(CastTest, NaNStaysNaN) {
  // A NaN whose payload lives only in the dropped half would truncate to
  // inf; it must stay a NaN.
  std::vector<float> src = {fromBits(0x7f800001), fromBits(0xffc00000),
                            std::numeric_limits<float>::quiet_NaN()};
  std::vector<uint16_t> dst = castToBf16(&ctx, src);
  for (uint16_t b : dst)
    EXPECT_TRUE((b & 0x7f80) == 0x7f80 && (b & 0x007f) != 0)
        << std::hex << "0x" << b;
  for (float f : castToF32(&ctx, dst))
    EXPECT_TRUE(std::isnan(f));
}

TEST_F(CastTest, EveryBf16RoundTripsExactly) {
  // bf16 -> f32 is exact, and f32 -> bf16 of an exact value gives it back:
  // all 65536 patterns (NaNs checked above).
  std::vector<uint16_t> all;
  for (uint32_t b = 0; b <= 0xffff; ++b)
    if (!((b & 0x7f80) == 0x7f80 && (b & 0x007f) != 0))
      all.push_back(static_cast<uint16_t>(b));
  std::vector<float> wide = castToF32(&ctx, all);
  for (size_t i = 0; i < all.size(); ++i)
    ASSERT_EQ(bitsOf(wide[i]), static_cast<uint32_t>(all[i]) << 16)
        << std::hex << "bf16 0x" << all[i];
  EXPECT_EQ(castToBf16(&ctx, wide), all);
}

TEST_F(CastTest, F32RoundTripIsWithinHalfAnUlp) {
  std::vector<float> src = uniformFloats(4099, 1, -100.0f, 100.0f);
  std::vector<float> back = castToF32(&ctx, castToBf16(&ctx, src));
  // bf16 has 8 significant bits: rounding to nearest errs by at most half
  // an ulp, 2^-8 relative.
  EXPECT_TRUE(allNear(back, toDouble(src), 0x1p-8, 0.0));
  // And the round trip is idempotent: rounding a bf16 value changes nothing.
  EXPECT_TRUE(bitwiseEqual(castToF32(&ctx, castToBf16(&ctx, back)), back));
}

TEST_F(CastTest, SameDtypeIsACopyAndMayBeInPlace) {
  std::vector<float> src = uniformFloats(37, 2, -1.0f, 1.0f);
  std::vector<float> dst = poisoned(src.size());
  asrt_cast(&ctx, ASRT_DTYPE_F32, src.data(), ASRT_DTYPE_F32, dst.data(), 37);
  EXPECT_TRUE(bitwiseEqual(dst, src));
  asrt_cast(&ctx, ASRT_DTYPE_F32, dst.data(), ASRT_DTYPE_F32, dst.data(), 37);
  EXPECT_TRUE(bitwiseEqual(dst, src));
  std::vector<uint16_t> b = toBf16(src), bDst = poisonedBf16(37);
  asrt_cast(&ctx, ASRT_DTYPE_BF16, b.data(), ASRT_DTYPE_BF16, bDst.data(), 37);
  EXPECT_EQ(bDst, b);
}

TEST_F(CastTest, UnsupportedDtypesAreFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float f = 0.0f;
  int32_t i = 0;
  EXPECT_DEATH(asrt_cast(&ctx, ASRT_DTYPE_I32, &i, ASRT_DTYPE_F32, &f, 1),
               "cast: dtype 1 \\(i32\\) is not supported");
  EXPECT_DEATH(asrt_cast(&ctx, ASRT_DTYPE_F32, &f, ASRT_DTYPE_F16, &i, 1),
               "cast: dtype 3 \\(f16\\) is not supported");
  EXPECT_DEATH(asrt_cast(&ctx, ASRT_DTYPE_F32, &f, ASRT_DTYPE_BF16, &i, -1),
               "cast: n = -1 is negative");
}

} // namespace
} // namespace autoshard::rt::test
