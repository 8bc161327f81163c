// Deterministic init: pure in (seed, name, index), sliceable, right moments.
#include "core/Init.h"
#include "core/Dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace autoshard::rt;

namespace {

std::vector<float> fill(const InitSpec &init, int64_t count, uint64_t seed,
                        const char *name, int64_t offset = 0) {
  std::vector<float> out(static_cast<size_t>(count));
  Status s =
      fillInit(out.data(), ASRT_DTYPE_F32, count, init, seed, name, offset);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

const InitSpec kNormal{InitKind::Normal, 0.25};
const InitSpec kUniform{InitKind::Uniform, 0.5};

TEST(InitTest, SameSeedAndNameGiveSameValues) {
  EXPECT_EQ(fill(kNormal, 1000, 3, "fc1.weight"),
            fill(kNormal, 1000, 3, "fc1.weight"));
  EXPECT_NE(fill(kNormal, 1000, 3, "fc1.weight"),
            fill(kNormal, 1000, 4, "fc1.weight"));
  EXPECT_NE(fill(kNormal, 1000, 3, "fc1.weight"),
            fill(kNormal, 1000, 3, "fc2.weight"));
  // Seeds that differ only in the high 32 bits differ too.
  EXPECT_NE(fill(kUniform, 100, 1, "w"),
            fill(kUniform, 100, 1 | (1ull << 32), "w"));
}

TEST(InitTest, SlicesConcatenateToTheWhole) {
  // Odd boundaries cut through Philox blocks (2 normals, 4 uniforms each).
  const int64_t n = 1001;
  const int64_t cuts[] = {0, 1, 3, 250, 501, 998, n};
  for (const InitSpec &init : {kNormal, kUniform}) {
    std::vector<float> whole = fill(init, n, 9, "layer.w");
    std::vector<float> pieces;
    for (size_t i = 0; i + 1 < std::size(cuts); ++i) {
      std::vector<float> part =
          fill(init, cuts[i + 1] - cuts[i], 9, "layer.w", cuts[i]);
      pieces.insert(pieces.end(), part.begin(), part.end());
    }
    EXPECT_EQ(whole, pieces) << formatInitSpec(init);
    for (int64_t i : {int64_t(0), int64_t(7), int64_t(1000)})
      EXPECT_FLOAT_EQ(whole[i],
                      static_cast<float>(initValue(init, 9, "layer.w", i)));
  }
}

TEST(InitTest, SlicesOfBf16MatchTheWhole) {
  std::vector<uint16_t> whole(64), tail(40);
  ASSERT_TRUE(
      fillInit(whole.data(), ASRT_DTYPE_BF16, 64, kNormal, 1, "e").ok());
  ASSERT_TRUE(
      fillInit(tail.data(), ASRT_DTYPE_BF16, 40, kNormal, 1, "e", 24).ok());
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), whole.begin() + 24));
  EXPECT_EQ(whole[5],
            floatToBf16(static_cast<float>(initValue(kNormal, 1, "e", 5))));
}

TEST(InitTest, NormalHasTheRequestedStd) {
  const int64_t n = 400000;
  std::vector<float> v = fill(kNormal, n, 0, "big");
  double sum = 0, sumSq = 0;
  for (float x : v) {
    sum += x;
    sumSq += double(x) * x;
  }
  double mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(std::sqrt(sumSq / n - mean * mean), 0.25, 0.0025);
}

TEST(InitTest, UniformStaysInsideItsBound) {
  std::vector<float> v = fill(kUniform, 100000, 0, "u");
  float lo = 1, hi = -1;
  for (float x : v) {
    ASSERT_GE(x, -0.5f);
    ASSERT_LT(x, 0.5f);
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  EXPECT_LT(lo, -0.49f);
  EXPECT_GT(hi, 0.49f);
  // In bf16, values just below the bound round onto it; they must not
  // stay there.
  std::vector<uint16_t> h(100000);
  ASSERT_TRUE(fillInit(h.data(), ASRT_DTYPE_BF16, 100000,
                       InitSpec{InitKind::Uniform, 1.0}, 0, "u")
                  .ok());
  for (uint16_t x : h)
    ASSERT_LT(bf16ToFloat(x), 1.0f);
}

TEST(InitTest, ConstantsAndIntegers) {
  EXPECT_EQ(fill(InitSpec{InitKind::Zeros, 0}, 3, 0, "z"),
            (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(fill(InitSpec{InitKind::Ones, 0}, 2, 0, "o"),
            (std::vector<float>{1, 1}));
  EXPECT_EQ(fill(InitSpec{InitKind::Constant, 0.1}, 2, 0, "c"),
            (std::vector<float>{0.1f, 0.1f}));
  std::vector<int64_t> steps(4, -1);
  ASSERT_TRUE(fillInit(steps.data(), ASRT_DTYPE_I64, 4,
                       InitSpec{InitKind::Constant, 7}, 0, "step")
                  .ok());
  EXPECT_EQ(steps, (std::vector<int64_t>{7, 7, 7, 7}));
  // init=load: zeros until a file replaces them, whatever the buffer held
  // and for any dtype.
  std::vector<float> loaded(3, 5.0f);
  ASSERT_TRUE(fillInit(loaded.data(), ASRT_DTYPE_F32, 3,
                       InitSpec{InitKind::Load, 0}, 0, "w")
                  .ok());
  EXPECT_EQ(loaded, (std::vector<float>{0, 0, 0}));
  EXPECT_TRUE(
      checkInitForDtype(InitSpec{InitKind::Load, 0}, ASRT_DTYPE_I32).ok());
}

TEST(InitTest, RejectsWhatTheDtypeCannotHold) {
  int32_t buffer[4];
  Status normal = fillInit(buffer, ASRT_DTYPE_I32, 4, kNormal, 0, "counter");
  ASSERT_FALSE(normal.ok());
  EXPECT_NE(normal.message().find("cannot initialise 'counter': "
                                  "init=normal:0.25 needs a float dtype"),
            std::string::npos)
      << normal.message();
  Status fraction = fillInit(buffer, ASRT_DTYPE_I32, 4,
                             InitSpec{InitKind::Constant, 1.5}, 0, "c");
  EXPECT_FALSE(fraction.ok());
  EXPECT_FALSE(fillInit(nullptr, ASRT_DTYPE_F32, 4, kNormal, 0, "w").ok());
  EXPECT_FALSE(fillInit(buffer, ASRT_DTYPE_F32, -1, kNormal, 0, "w").ok());
  EXPECT_TRUE(checkInitForDtype(kNormal, ASRT_DTYPE_BF16).ok());
  EXPECT_TRUE(
      checkInitForDtype(InitSpec{InitKind::Ones, 0}, ASRT_DTYPE_U16).ok());
}

} // namespace
