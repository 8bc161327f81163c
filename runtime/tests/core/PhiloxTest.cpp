// Philox-4x32-10 against Random123's known answers; FNV-1a; the stream helpers.
#include "data/Philox.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace autoshard::rt;

namespace {

// Random123 tests/kat_vectors, the three "philox4x32 10" lines:
// counter (4 words), key (2 words), expected output (4 words).
TEST(PhiloxTest, KnownAnswerZeros) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
}

TEST(PhiloxTest, KnownAnswerOnes) {
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                          {0xffffffff, 0xffffffff}),
            (PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
}

TEST(PhiloxTest, KnownAnswerPi) {
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                          {0xa4093822, 0x299f31d0}),
            (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(PhiloxTest, Fnv1aKnownValues) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  // Hashing in pieces equals hashing the concatenation.
  EXPECT_EQ(fnv1a64("bar", fnv1a64("foo")), fnv1a64("foobar"));
  EXPECT_NE(fnv1a64(uint64_t(1), kFnv1aOffset),
            fnv1a64(uint64_t(2), kFnv1aOffset));
}

TEST(PhiloxTest, StreamWordsComeFromTheCounter) {
  // Block b is Philox of the counter {b low, b high, nonce low, nonce high}
  // under the 64-bit key split low word first.
  PhiloxStream stream(0x299f31d0a4093822ull, 0x0370734413198a2eull);
  PhiloxCounter expected =
      philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                    {0xa4093822, 0x299f31d0});
  EXPECT_EQ(stream.block(0x85a308d3243f6a88ull), expected);
  // Words 4b..4b+3 are block b.
  PhiloxCounter five = stream.block(5);
  for (unsigned i = 0; i < 4; ++i)
    EXPECT_EQ(stream.word(20 + i), five[i]);
  EXPECT_NE(stream.block(5), stream.block(6));
}

TEST(PhiloxTest, UniformIsInUnitIntervalAndUnbiased) {
  EXPECT_EQ(uniformFromBits(0), 0.0f);
  EXPECT_LT(uniformFromBits(0xffffffffu), 1.0f);
  PhiloxStream stream(42, 7);
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    float u = stream.uniform(i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
}

TEST(PhiloxTest, NormalHasUnitMoments) {
  EXPECT_TRUE(std::isfinite(normalFromBits(0, 0)));
  EXPECT_TRUE(std::isfinite(normalFromBits(0xffffffffu, 0xffffffffu)));
  PhiloxStream stream(1234, 0);
  double sum = 0, sumSq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double z = stream.normal(i);
    sum += z;
    sumSq += z * z;
  }
  double mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sumSq / n - mean * mean), 1.0, 0.01);
}

TEST(PhiloxTest, UniformIntCoversItsRange) {
  PhiloxStream stream(5, 5);
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < 30000; ++i) {
    int64_t v = stream.uniformInt(i, 3);
    ASSERT_GE(v, 0);
    ASSERT_LT(v, 3);
    ++counts[v];
  }
  for (int c : counts)
    EXPECT_NEAR(c, 10000, 500);
  // Bounds beyond 32 bits stay in range.
  int64_t big = int64_t(1) << 40;
  for (int i = 0; i < 100; ++i) {
    int64_t v = stream.uniformInt(i, big);
    EXPECT_GE(v, 0);
    EXPECT_LT(v, big);
  }
}

} // namespace
