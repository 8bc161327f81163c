// The plan report's traffic counter: a call per collective, each member's
// ring bytes with its chunk padded, as the runtime counts them.
#include "autoshard/Conversion/MemoryPlan.h"

#include <gtest/gtest.h>

using namespace autoshard;
using cost::CollectiveKind;

TEST(StepTraffic, OneCallPerCollectiveAndEachMembersRingBytes) {
  StepTraffic traffic;
  // 5 f32 elements over 2 ranks: chunks of 3, an all-reduce's two rings.
  traffic.addCollective(CollectiveKind::AllReduce, 2, {5}, 4);
  EXPECT_EQ(traffic.collectives[0].calls, 1);
  EXPECT_EQ(traffic.collectives[0].bytes, 2 * 1 * 3 * 4);
  // A bucket of two bf16 members over 4 ranks is one call; each member is
  // padded on its own: ceil(10/4) = 3 and ceil(1/4) = 1 elements a chunk.
  traffic.addCollective(CollectiveKind::AllGather, 4, {10, 1}, 2);
  EXPECT_EQ(traffic.collectives[1].calls, 1);
  EXPECT_EQ(traffic.collectives[1].bytes, 3 * 3 * 2 + 3 * 1 * 2);
  traffic.addCollective(CollectiveKind::ReduceScatter, 4, {8}, 4);
  traffic.addCollective(CollectiveKind::ReduceScatter, 4, {8}, 4);
  EXPECT_EQ(traffic.collectives[2].calls, 2);
  EXPECT_EQ(traffic.collectives[2].bytes, 2 * 3 * 2 * 4);
  EXPECT_EQ(traffic.collectiveBytes(), 24 + 24 + 48);
}

TEST(StepTraffic, TransferKindsAreTheRuntimes) {
  EXPECT_EQ(transferKindName(0), "to_host");
  EXPECT_EQ(transferKindName(1), "to_device");
  EXPECT_EQ(transferKindName(2), "nvme_read");
  EXPECT_EQ(transferKindName(3), "nvme_write");
}
