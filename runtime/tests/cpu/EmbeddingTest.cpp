// Tests of the CPU embedding kernels: gathers, scatter-add grads, positions.
#include "TestUtil.h"

#include "autoshard/rt/abi.h"

namespace autoshard::rt::test {
namespace {

using EmbeddingTest = CpuKernelTest;

constexpr int64_t kVocab = 11, kDim = 6;

/// Ids with every kind of repeat: the first and last row, an id used many
/// times, ids used once, and rows (3 and 9) used by none.
const std::vector<int32_t> kIds = {0, 5, 5, 10, 2, 5,  7, 1, 5, 0,
                                   4, 6, 8, 5,  2, 10, 5, 5, 1};

std::vector<float> gather(asrt_context *ctx, const std::vector<float> &table,
                          const std::vector<int32_t> &ids) {
  std::vector<float> y = poisoned(ids.size() * kDim);
  asrt_embedding_fwd(ctx, ASRT_DTYPE_F32, ids.data(), table.data(), y.data(),
                     static_cast<int64_t>(ids.size()), kVocab, kDim);
  return y;
}

std::vector<float> scatter(asrt_context *ctx, const std::vector<float> &dy,
                           const std::vector<int32_t> &ids) {
  std::vector<float> dtable = poisoned(kVocab * kDim);
  asrt_embedding_grad(ctx, ASRT_DTYPE_F32, dy.data(), ids.data(), dtable.data(),
                      static_cast<int64_t>(ids.size()), kVocab, kDim);
  return dtable;
}

TEST_F(EmbeddingTest, ForwardGathersRows) {
  std::vector<float> table = uniformFloats(kVocab * kDim, 1, -1.0f, 1.0f);
  std::vector<float> y = gather(&ctx, table, kIds);
  std::vector<double> ref;
  for (int32_t id : kIds)
    for (int64_t j = 0; j < kDim; ++j)
      ref.push_back(table[id * kDim + j]);
  EXPECT_TRUE(allNear(y, ref, 0.0, 0.0));
}

TEST_F(EmbeddingTest, GradSumsRepeatedIds) {
  std::vector<float> dy = uniformFloats(kIds.size() * kDim, 2, -1.0f, 1.0f);
  std::vector<float> dtable = scatter(&ctx, dy, kIds);
  std::vector<double> ref(kVocab * kDim, 0.0);
  for (size_t i = 0; i < kIds.size(); ++i)
    for (int64_t j = 0; j < kDim; ++j)
      ref[kIds[i] * kDim + j] += dy[i * kDim + j];
  // Summed in double and rounded once; unused rows are exactly 0 (the
  // output started as NaN, so they were written).
  EXPECT_TRUE(allNear(dtable, ref, 0x1p-24, 0.0));
  EXPECT_EQ(dtable[3 * kDim], 0.0f);
  EXPECT_EQ(dtable[9 * kDim + kDim - 1], 0.0f);
}

TEST_F(EmbeddingTest, GradMatchesFiniteDifferencesOfForward) {
  std::vector<float> table = uniformFloats(kVocab * kDim, 3, -1.0f, 1.0f);
  std::vector<float> w = uniformFloats(kIds.size() * kDim, 4, -1.0f, 1.0f);
  std::vector<float> dtable = scatter(&ctx, w, kIds);
  auto forward = [&] { return gather(&ctx, table, kIds); };
  // A gather is linear in the table: the difference is exact up to the
  // rounding of the perturbed entries.
  EXPECT_TRUE(
      gradMatchesDifferences(dtable, forward, table, w, 0.5f, 1e-6, 1e-6, 200));
}

TEST_F(EmbeddingTest, Bf16GathersBitsAndRoundsSums) {
  std::vector<float> table =
      bf16Rounded(uniformFloats(kVocab * kDim, 5, -1.0f, 1.0f));
  std::vector<float> dy =
      bf16Rounded(uniformFloats(kIds.size() * kDim, 6, -1.0f, 1.0f));
  std::vector<uint16_t> tableB = toBf16(table), dyB = toBf16(dy);
  const int64_t n = static_cast<int64_t>(kIds.size());

  std::vector<uint16_t> yB = poisonedBf16(n * kDim);
  asrt_embedding_fwd(&ctx, ASRT_DTYPE_BF16, kIds.data(), tableB.data(),
                     yB.data(), n, kVocab, kDim);
  EXPECT_TRUE(bf16IsRoundedF32(yB, gather(&ctx, table, kIds)));

  std::vector<uint16_t> dtableB = poisonedBf16(kVocab * kDim);
  asrt_embedding_grad(&ctx, ASRT_DTYPE_BF16, dyB.data(), kIds.data(),
                      dtableB.data(), n, kVocab, kDim);
  // Id 5 appears seven times: a bf16 running sum would round after each.
  EXPECT_TRUE(bf16IsRoundedF32(dtableB, scatter(&ctx, dy, kIds)));
}

TEST_F(EmbeddingTest, OutOfRangeIdIsFatalAndNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> table(kVocab * kDim, 0.0f), y(3 * kDim);
  std::vector<int32_t> tooLarge = {0, 10, 11}, negative = {4, -1, 2};
  EXPECT_DEATH(asrt_embedding_fwd(&ctx, ASRT_DTYPE_F32, tooLarge.data(),
                                  table.data(), y.data(), 3, kVocab, kDim),
               "embedding_fwd: id 11 at index 2 is outside \\[0, 11\\)");
  EXPECT_DEATH(asrt_embedding_grad(&ctx, ASRT_DTYPE_F32, y.data(),
                                   negative.data(), table.data(), 3, kVocab,
                                   kDim),
               "embedding_grad: id -1 at index 1 is outside \\[0, 11\\)");
}

using PositionEmbeddingTest = CpuKernelTest;

constexpr int64_t kBatch = 3, kSeq = 5, kMaxPositions = 8;

std::vector<float> addPositions(asrt_context *ctx, const std::vector<float> &x,
                                const std::vector<float> &wpe) {
  std::vector<float> y = poisoned(x.size());
  asrt_add_position_embedding_fwd(ctx, ASRT_DTYPE_F32, x.data(), wpe.data(),
                                  y.data(), kBatch, kSeq, kDim);
  return y;
}

std::vector<float> positionGrad(asrt_context *ctx,
                                const std::vector<float> &dy) {
  std::vector<float> dwpe = poisoned(kMaxPositions * kDim);
  asrt_add_position_embedding_grad(ctx, ASRT_DTYPE_F32, dy.data(), dwpe.data(),
                                   kBatch, kSeq, kMaxPositions, kDim);
  return dwpe;
}

TEST_F(PositionEmbeddingTest, ForwardMatchesReferenceAndMayBeInPlace) {
  std::vector<float> x = uniformFloats(kBatch * kSeq * kDim, 7, -1.0f, 1.0f);
  std::vector<float> wpe = uniformFloats(kMaxPositions * kDim, 8, -1.0f, 1.0f);
  std::vector<float> y = addPositions(&ctx, x, wpe);
  std::vector<double> ref(x.size());
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t t = 0; t < kSeq; ++t)
      for (int64_t j = 0; j < kDim; ++j) {
        int64_t i = (b * kSeq + t) * kDim + j;
        ref[i] = static_cast<double>(x[i]) + wpe[t * kDim + j];
      }
  EXPECT_TRUE(allNear(y, ref, 0x1p-24, 0.0));
  std::vector<float> inPlace = x;
  asrt_add_position_embedding_fwd(&ctx, ASRT_DTYPE_F32, inPlace.data(),
                                  wpe.data(), inPlace.data(), kBatch, kSeq,
                                  kDim);
  EXPECT_TRUE(bitwiseEqual(inPlace, y));
}

TEST_F(PositionEmbeddingTest, GradSumsOverBatchAndZeroesUnusedPositions) {
  std::vector<float> dy = uniformFloats(kBatch * kSeq * kDim, 9, -1.0f, 1.0f);
  std::vector<float> dwpe = positionGrad(&ctx, dy);
  std::vector<double> ref(kMaxPositions * kDim, 0.0);
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t t = 0; t < kSeq; ++t)
      for (int64_t j = 0; j < kDim; ++j)
        ref[t * kDim + j] += dy[(b * kSeq + t) * kDim + j];
  // Rows kSeq .. kMaxPositions - 1 started as NaN and must be 0.
  EXPECT_TRUE(allNear(dwpe, ref, 0x1p-24, 0.0));
}

TEST_F(PositionEmbeddingTest, GradMatchesFiniteDifferencesOfForward) {
  std::vector<float> x = uniformFloats(kBatch * kSeq * kDim, 10, -1.0f, 1.0f);
  std::vector<float> wpe = uniformFloats(kMaxPositions * kDim, 11, -1.0f, 1.0f);
  std::vector<float> w = uniformFloats(x.size(), 12, -1.0f, 1.0f);
  std::vector<float> dwpe = positionGrad(&ctx, w);
  std::vector<float> dx = w; // the gradient with respect to x is dy itself
  auto forward = [&] { return addPositions(&ctx, x, wpe); };
  // Every entry, the positions beyond seq (no effect, gradient 0) included.
  // Linear: exact up to the rounding of y (half an ulp of ~2 over a step).
  EXPECT_TRUE(
      gradMatchesDifferences(dwpe, forward, wpe, w, 0.5f, 1e-6, 1e-6, 200));
  EXPECT_TRUE(gradMatchesDifferences(dx, forward, x, w, 0.5f, 1e-6, 1e-6));
}

TEST_F(PositionEmbeddingTest, Bf16IsRoundedF32) {
  std::vector<float> x =
      bf16Rounded(uniformFloats(kBatch * kSeq * kDim, 13, -1.0f, 1.0f));
  std::vector<float> wpe =
      bf16Rounded(uniformFloats(kMaxPositions * kDim, 14, -1.0f, 1.0f));
  std::vector<uint16_t> xB = toBf16(x), wpeB = toBf16(wpe);
  std::vector<uint16_t> yB = poisonedBf16(x.size());
  asrt_add_position_embedding_fwd(&ctx, ASRT_DTYPE_BF16, xB.data(), wpeB.data(),
                                  yB.data(), kBatch, kSeq, kDim);
  EXPECT_TRUE(bf16IsRoundedF32(yB, addPositions(&ctx, x, wpe)));
  std::vector<uint16_t> dwpeB = poisonedBf16(kMaxPositions * kDim);
  asrt_add_position_embedding_grad(&ctx, ASRT_DTYPE_BF16, xB.data(),
                                   dwpeB.data(), kBatch, kSeq, kMaxPositions,
                                   kDim);
  EXPECT_TRUE(bf16IsRoundedF32(dwpeB, positionGrad(&ctx, x)));
}

TEST_F(PositionEmbeddingTest, SequenceLongerThanTableIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> dy(2 * 9 * kDim), dwpe(kMaxPositions * kDim);
  EXPECT_DEATH(asrt_add_position_embedding_grad(&ctx, ASRT_DTYPE_F32, dy.data(),
                                                dwpe.data(), 2, 9,
                                                kMaxPositions, kDim),
               "add_position_embedding_grad: seq = 9 exceeds max_positions = "
               "8");
}

} // namespace
} // namespace autoshard::rt::test
