// Who writes which block, tiling checks, and resharding range maps.
#include "ckpt/Layout.h"
#include "TestManifests.h"

#include <gtest/gtest.h>

using namespace autoshard::rt;
using autoshard::rt::testing::modelManifest;

namespace {

struct Expect {
  int arg;
  int64_t begin, count;
  int writer;
};

void expectAssignments(const std::vector<BlockAssignment> &got,
                       const std::vector<Expect> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("block " + std::to_string(i));
    EXPECT_EQ(got[i].arg, want[i].arg);
    EXPECT_EQ(got[i].begin, want[i].begin);
    EXPECT_EQ(got[i].count, want[i].count);
    EXPECT_EQ(got[i].writer, want[i].writer);
  }
}

} // namespace

// DDP: every tensor is whole on every rank; replicas take turns by
// argument index, so the four tensors spread over the two ranks.
TEST(Layout, ReplicatedTensorsAreWrittenOnceInTurns) {
  Manifest ddp = modelManifest("2", 0, 1, "ddp");
  expectAssignments(
      assignCheckpointBlocks(ddp),
      {{0, 0, 5, 0}, {1, 0, 3, 1}, {2, 0, 5, 0}, {3, 0, 3, 1}, {4, 0, 1, 0}});
}

// ZeRO-3 on 4 ranks: 5 elements in shards of 2 (the third holds one, the
// fourth only padding and writes nothing), 3 elements in shards of 1;
// each shard is written by its only holder.
TEST(Layout, ShardsAreWrittenByTheirHolderWithoutPadding) {
  Manifest zero3 = modelManifest("4", 1, 4);
  expectAssignments(assignCheckpointBlocks(zero3), {{0, 0, 2, 0},
                                                    {0, 2, 2, 1},
                                                    {0, 4, 1, 2},
                                                    {1, 0, 3, 1},
                                                    {2, 0, 2, 0},
                                                    {2, 2, 2, 1},
                                                    {2, 4, 1, 2},
                                                    {3, 0, 1, 0},
                                                    {3, 1, 1, 1},
                                                    {3, 2, 1, 2},
                                                    {4, 0, 1, 0}});
}

// Hybrid 2x2 sharded over axis 1: shard i is held by ranks {i, i + 2};
// even arguments are written by the first replica, odd ones by the second.
TEST(Layout, HybridReplicasOfAShardTakeTurns) {
  Manifest hybrid = modelManifest("2x2", 2, 2, "hybrid");
  expectAssignments(assignCheckpointBlocks(hybrid), {{0, 0, 3, 0},
                                                     {0, 3, 2, 1},
                                                     {1, 0, 3, 1},
                                                     {2, 0, 3, 0},
                                                     {2, 3, 2, 1},
                                                     {3, 0, 2, 2},
                                                     {3, 2, 1, 3},
                                                     {4, 0, 1, 0}});
}

TEST(Layout, HeldBlockIsTheRanksFlatShard) {
  Manifest zero3 = modelManifest("4", 1, 4);
  const TensorSpec &w = zero3.args[0];
  HeldBlock third = heldBlock(zero3, w, 2);
  EXPECT_EQ(third.begin, 4);
  EXPECT_EQ(third.valid, 1);
  EXPECT_EQ(third.chunk, 2);
  HeldBlock last = heldBlock(zero3, w, 3);
  EXPECT_EQ(last.valid, 0);
  EXPECT_EQ(last.chunk, 2);
  HeldBlock whole = heldBlock(zero3, zero3.args[1], 3);
  EXPECT_EQ(whole.begin, 0);
  EXPECT_EQ(whole.valid, 3);
  EXPECT_EQ(whole.chunk, 3);
}

TEST(Layout, TilingAcceptsExactCoverOnly) {
  EXPECT_TRUE(checkTiling({{0, 3}, {3, 3}, {6, 1}}, 7));
  EXPECT_TRUE(checkTiling({}, 0));
  Status gap = checkTiling({{0, 3}, {4, 3}}, 7);
  ASSERT_FALSE(gap);
  EXPECT_EQ(gap.message(), "leave elements [3, 4) uncovered");
  Status overlap = checkTiling({{0, 3}, {2, 5}}, 7);
  ASSERT_FALSE(overlap);
  EXPECT_EQ(overlap.message(), "overlap at element 2");
  Status past = checkTiling({{0, 8}}, 7);
  ASSERT_FALSE(past);
  EXPECT_EQ(past.message(), "run to element 8, past the tensor's 7 elements");
  Status shortOfEnd = checkTiling({{0, 6}}, 7);
  ASSERT_FALSE(shortOfEnd);
  EXPECT_EQ(shortOfEnd.message(), "leave elements [6, 7) uncovered");
}

// A 7-element tensor saved as shards of 3 (3 ranks), read back as shards
// of 2 (4 ranks), whole (replicated), and as an empty all-padding shard.
TEST(Layout, MapRangeReshards) {
  std::vector<ElementRange> saved = {{0, 3}, {3, 3}, {6, 1}};
  auto pieces = mapRange(saved, {2, 2});
  ASSERT_TRUE(pieces) << pieces.message();
  ASSERT_EQ(pieces->size(), 2u);
  EXPECT_EQ((*pieces)[0].block, 0u);
  EXPECT_EQ((*pieces)[0].blockOffset, 2);
  EXPECT_EQ((*pieces)[0].outOffset, 0);
  EXPECT_EQ((*pieces)[0].count, 1);
  EXPECT_EQ((*pieces)[1].block, 1u);
  EXPECT_EQ((*pieces)[1].blockOffset, 0);
  EXPECT_EQ((*pieces)[1].outOffset, 1);
  EXPECT_EQ((*pieces)[1].count, 1);

  auto whole = mapRange(saved, {0, 7});
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->size(), 3u);
  EXPECT_EQ((*whole)[2].block, 2u);
  EXPECT_EQ((*whole)[2].outOffset, 6);
  EXPECT_EQ((*whole)[2].count, 1);

  auto inside = mapRange(saved, {4, 1});
  ASSERT_TRUE(inside);
  ASSERT_EQ(inside->size(), 1u);
  EXPECT_EQ((*inside)[0].block, 1u);
  EXPECT_EQ((*inside)[0].blockOffset, 1);

  auto empty = mapRange(saved, {7, 0});
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

TEST(Layout, MapRangeNamesWhatIsMissing) {
  auto pieces = mapRange({{0, 3}}, {2, 3});
  ASSERT_FALSE(pieces);
  EXPECT_EQ(pieces.message(), "no stored block holds elements [3, 5)");
  auto hole = mapRange({{0, 2}, {4, 3}}, {1, 5});
  ASSERT_FALSE(hole);
  EXPECT_EQ(hole.message(), "no stored block holds elements [2, 6)");
}
