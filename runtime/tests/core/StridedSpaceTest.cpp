// StridedSpace: the checks and the coalescing every generic kernel relies on.
#include "memory/StridedSpace.h"

#include <gtest/gtest.h>

#include <vector>

using namespace autoshard::rt;

namespace {

using Dims = std::vector<int64_t>;

Dims dimsOf(const StridedSpace &s) { return Dims(s.dims, s.dims + s.rank); }
Dims stridesOf(const StridedSpace &s, int k) {
  return Dims(s.strides[k], s.strides[k] + s.rank);
}

TEST(StridedSpaceTest, DenseOperandsBecomeOneDim) {
  Dims dims = {2, 3, 4}, dense = {12, 4, 1}, scalar = {0, 0, 0};
  StridedSpace s = coalescedSpace("t", "dims", 3, dims.data(),
                                  {dense.data(), scalar.data()});
  EXPECT_EQ(s.count, 24);
  EXPECT_EQ(dimsOf(s), Dims{24});
  EXPECT_EQ(stridesOf(s, 0), Dims{1});
  EXPECT_EQ(stridesOf(s, 1), Dims{0});
}

TEST(StridedSpaceTest, BroadcastsAndTransposesKeepTheirDims) {
  // b broadcast along the middle dim: dims 0 and 1 cannot merge for b, 1
  // and 2 cannot either; a transposed merges nothing.
  Dims dims = {2, 3, 4}, a = {12, 4, 1}, b = {4, 0, 1}, t = {1, 2, 6};
  StridedSpace s =
      coalescedSpace("t", "dims", 3, dims.data(), {a.data(), b.data()});
  EXPECT_EQ(dimsOf(s), (Dims{2, 3, 4}));
  EXPECT_EQ(stridesOf(s, 1), (Dims{4, 0, 1}));
  StridedSpace u = coalescedSpace("t", "dims", 3, dims.data(), {t.data()});
  EXPECT_EQ(dimsOf(u), (Dims{2, 3, 4}));
  // A broadcast row ([2, 3] over a [3] row): the outer dim stays, stride 0.
  Dims rowDims = {2, 3}, row = {0, 1};
  StridedSpace r = coalescedSpace("t", "dims", 2, rowDims.data(), {row.data()});
  EXPECT_EQ(dimsOf(r), (Dims{2, 3}));
}

TEST(StridedSpaceTest, SizeOneDimsAreDroppedWhateverTheirStrides) {
  Dims dims = {1, 5, 1, 7}, strides = {999, 7, -3, 1};
  StridedSpace s =
      coalescedSpace("t", "dims", 4, dims.data(), {strides.data()});
  EXPECT_EQ(dimsOf(s), Dims{35});
  EXPECT_EQ(stridesOf(s, 0), Dims{1});
  Dims ones = {1, 1};
  StridedSpace one = coalescedSpace("t", "dims", 2, ones.data(), {ones.data()});
  EXPECT_EQ(one.rank, 0);
  EXPECT_EQ(one.count, 1);
}

TEST(StridedSpaceTest, RankZeroAndEmptySpaces) {
  StridedSpace scalar = coalescedSpace("t", "dims", 0, nullptr, {nullptr});
  EXPECT_EQ(scalar.rank, 0);
  EXPECT_EQ(scalar.count, 1);
  Dims dims = {4, 0, 3}, strides = {3, 3, 1};
  StridedSpace empty =
      coalescedSpace("t", "dims", 3, dims.data(), {strides.data()});
  EXPECT_EQ(empty.count, 0);
  EXPECT_EQ(dimsOf(empty), Dims{0});
}

TEST(StridedSpaceTest, OffsetsFollowTheRowMajorPosition) {
  Dims dims = {2, 3, 4}, a = {1, 2, 6}, b = {0, 1, 0};
  StridedSpace s =
      coalescedSpace("t", "dims", 3, dims.data(), {a.data(), b.data()});
  int64_t off[StridedSpace::kMaxOperands];
  stridedOffsets(s, 1 * 12 + 2 * 4 + 3, off); // index (1, 2, 3)
  EXPECT_EQ(off[0], 1 * 1 + 2 * 2 + 3 * 6);
  EXPECT_EQ(off[1], 2);
}

TEST(StridedSpaceDeathTest, BadShapesAreFatal) {
  Dims nine(9, 1), negative = {2, -1},
                   huge = {int64_t(1) << 40, int64_t(1) << 40};
  EXPECT_DEATH(checkedElementCount("op", "dims", 9, nine.data()),
               "op: the rank of dims is 9, outside \\[0, 8\\]");
  EXPECT_DEATH(checkedElementCount("op", "dims", 1, nullptr),
               "op: dims is null for rank 1");
  EXPECT_DEATH(checkedElementCount("op", "out_dims", 2, negative.data()),
               "op: out_dims\\[1\\] = -1 is negative");
  EXPECT_DEATH(checkedElementCount("op", "dims", 2, huge.data()),
               "op: the element count of dims overflows int64_t");
  Dims twoByThree = {2, 3};
  EXPECT_DEATH(coalescedSpace("op", "dims", 2, twoByThree.data(), {nullptr}),
               "op: a strides array over dims is null for rank 2");
}

} // namespace
