// asrt_dropout on the CPU: the kept fraction, the scale, and one mask per
// element of the whole batch whatever the split, another per step and stream.
#include "TestUtil.h"

#include "autoshard/rt/abi.h"

namespace autoshard::rt::test {
namespace {

class DropoutTest : public CpuKernelTest {
protected:
  /// y of `x` (rows of `rowElems`), as rank `rank` with the op's attributes.
  std::vector<float> dropout(const std::vector<float> &x, int64_t rowElems,
                             float p, int64_t stream, int64_t rowOffset = 0,
                             int64_t rankRows = 0, int64_t rank = 0) {
    ctx.setBatchRank(rank);
    std::vector<float> y(x.size(), -1.0f);
    asrt_dropout(&ctx, ASRT_DTYPE_F32, x.data(), y.data(),
                 static_cast<int64_t>(x.size()), rowElems, rowOffset, rankRows,
                 p, stream);
    return y;
  }
};

TEST_F(DropoutTest, KeepsOneMinusPScaled) {
  ctx.setRandomSeed(7);
  const size_t n = 200000;
  std::vector<float> x = uniformFloats(n, 1, 0.5f, 2.0f); // never 0
  const float p = 0.2f;
  std::vector<float> y = dropout(x, 100, p, 0);
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (y[i] == 0.0f)
      continue;
    ++kept;
    ASSERT_EQ(y[i], x[i] * (1.0f / (1.0f - p))) << i;
  }
  // 4 standard deviations of a binomial(n, 0.8) fraction: 0.0036.
  EXPECT_NEAR(double(kept) / n, 0.8, 0.0036);
  // p = 0 is the identity.
  EXPECT_EQ(dropout(x, 100, 0.0f, 0), x);
  // In place, as the gradient may run.
  std::vector<float> inPlace = x;
  asrt_dropout(&ctx, ASRT_DTYPE_F32, inPlace.data(), inPlace.data(),
               static_cast<int64_t>(n), 100, 0, 0, p, 0);
  EXPECT_EQ(inPlace, y);
}

TEST_F(DropoutTest, OneMaskWhateverTheSplit) {
  ctx.setRandomSeed(3);
  ctx.setRandomStep(5);
  const int64_t rows = 24, rowElems = 13;
  std::vector<float> x = uniformFloats(rows * rowElems, 2, 0.5f, 2.0f);
  std::vector<float> whole = dropout(x, rowElems, 0.5f, 4);
  // Every split of ranks x micro-batches the compiler makes: rank r's
  // micro-batch k holds rows r * rows / R + k * rows / (R * K).
  for (int64_t ranks : {1, 2, 4})
    for (int64_t micro : {1, 2, 3}) {
      int64_t perRank = rows / ranks, perMicro = perRank / micro;
      for (int64_t r = 0; r < ranks; ++r)
        for (int64_t k = 0; k < micro; ++k) {
          int64_t first = r * perRank + k * perMicro;
          std::vector<float> part(x.begin() + first * rowElems,
                                  x.begin() + (first + perMicro) * rowElems);
          std::vector<float> expected(
              whole.begin() + first * rowElems,
              whole.begin() + (first + perMicro) * rowElems);
          EXPECT_EQ(dropout(part, rowElems, 0.5f, 4, k * perMicro,
                            ranks == 1 ? 0 : perRank, r),
                    expected)
              << ranks << " ranks, " << micro << " micro-batches, rank " << r
              << ", micro-batch " << k;
        }
    }
}

TEST_F(DropoutTest, AnotherMaskPerStepStreamAndSeed) {
  const size_t n = 4096;
  std::vector<float> x(n, 1.0f);
  auto mask = [&](uint64_t seed, int64_t step, int64_t stream) {
    ctx.setRandomSeed(seed);
    ctx.setRandomStep(step);
    return dropout(x, 64, 0.5f, stream);
  };
  auto agreement = [&](const std::vector<float> &a,
                       const std::vector<float> &b) {
    size_t same = 0;
    for (size_t i = 0; i < n; ++i)
      same += (a[i] == 0.0f) == (b[i] == 0.0f);
    return double(same) / n;
  };
  std::vector<float> base = mask(1, 0, 0);
  EXPECT_EQ(mask(1, 0, 0), base); // reproducible
  // Independent masks of p = 0.5 agree on about half the elements.
  EXPECT_NEAR(agreement(base, mask(1, 1, 0)), 0.5, 0.05);
  EXPECT_NEAR(agreement(base, mask(1, 0, 1)), 0.5, 0.05);
  EXPECT_NEAR(agreement(base, mask(2, 0, 0)), 0.5, 0.05);
}

TEST_F(DropoutTest, ThreadsDrawTheSameMask) {
  ctx.setRandomSeed(11);
  std::vector<float> x = uniformFloats(1 << 18, 4, -1.0f, 1.0f);
  std::vector<float> one = dropout(x, 256, 0.1f, 3);
  // 2^18 elements of 16 updates each: 2, 3 and 4 chunks.
  for (int threads : {2, 3, 4}) {
    ctx.setKernelThreads(threads);
    EXPECT_EQ(dropout(x, 256, 0.1f, 3), one) << threads << " threads";
  }
}

TEST_F(DropoutTest, RefusesBadArguments) {
  std::vector<float> x(12, 1.0f), y(12);
  EXPECT_DEATH(asrt_dropout(&ctx, ASRT_DTYPE_F32, x.data(), y.data(), 12, 5,
                            0, 0, 0.1f, 0),
               "dropout: n = 12 is not a multiple of row_elems = 5");
  EXPECT_DEATH(asrt_dropout(&ctx, ASRT_DTYPE_F32, x.data(), y.data(), 12, 4,
                            0, 0, 1.0f, 0),
               "dropout: p = 1 is not in \\[0, 1\\)");
}

} // namespace
} // namespace autoshard::rt::test
