// Ring byte-count formulas, counters, and the summary and JSON reports.
#include "core/Stats.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace autoshard::rt;

namespace {

TEST(StatsTest, RingBytesWhenTheGroupDividesTheBuffer) {
  // S = 1024 floats = 4096 bytes over 4 ranks: 2S(n-1)/n and S(n-1)/n.
  EXPECT_EQ(ringBytesSent(CollectiveKind::AllReduce, 1024, 4, 4), 6144);
  EXPECT_EQ(ringBytesSent(CollectiveKind::AllGather, 1024, 4, 4), 3072);
  EXPECT_EQ(ringBytesSent(CollectiveKind::ReduceScatter, 1024, 4, 4), 3072);
}

TEST(StatsTest, RingBytesPadChunks) {
  // c = 10, n = 4: k = ceil(10 / 4) = 3.
  EXPECT_EQ(ringBytesSent(CollectiveKind::AllReduce, 10, 4, 4), 2 * 3 * 3 * 4);
  EXPECT_EQ(ringBytesSent(CollectiveKind::AllGather, 10, 4, 2), 3 * 3 * 2);
  // c = 1 over 2 ranks: one padded element per chunk.
  EXPECT_EQ(ringBytesSent(CollectiveKind::AllReduce, 1, 2, 4), 8);
}

TEST(StatsTest, RingBytesOfAGroupOfOneOrNothing) {
  EXPECT_EQ(ringBytesSent(CollectiveKind::AllReduce, 1000, 1, 4), 0);
  EXPECT_EQ(ringBytesSent(CollectiveKind::AllGather, 0, 8, 4), 0);
}

TEST(StatsTest, CountersAccumulate) {
  Stats stats;
  stats.recordOp("linear_fwd_f32", 100);
  stats.recordOp("linear_fwd_f32", 50);
  stats.recordOp("relu_fwd_f32", 7);
  stats.recordCollective(CollectiveKind::AllGather, 12);
  stats.recordCollective(CollectiveKind::AllGather, 30);
  stats.recordAlloc(100);
  stats.recordAlloc(50);
  stats.recordFree(100);
  stats.recordAlloc(20);
  Stats::Snapshot s = stats.snapshot();
  EXPECT_EQ(s.ops.at("linear_fwd_f32").calls, 2);
  EXPECT_EQ(s.ops.at("linear_fwd_f32").totalNs, 150);
  EXPECT_EQ(s.ops.at("relu_fwd_f32").calls, 1);
  EXPECT_EQ(s.collectives[1].calls, 2);
  EXPECT_EQ(s.collectives[1].bytesSent, 42);
  EXPECT_EQ(s.collectives[0].calls, 0);
  EXPECT_EQ(s.currentBytes, 70);
  EXPECT_EQ(s.peakBytes, 150);

  stats.resetCounters();
  s = stats.snapshot();
  EXPECT_TRUE(s.ops.empty());
  EXPECT_EQ(s.collectives[1].bytesSent, 0);
  EXPECT_EQ(s.peakBytes, 150);
}

TEST(StatsTest, ReportsPerStepNumbers) {
  Stats stats;
  stats.recordCollective(CollectiveKind::AllReduce, 300);
  stats.recordAlloc(2048);
  stats.recordOp("copy", 2500000);
  RunInfo run;
  run.step = "train_step";
  run.strategy = "ddp";
  run.grid = "2";
  run.backend = "cpu";
  run.worldSize = 2;
  run.steps = 3;
  run.meanStepMs = 1.5;

  std::ostringstream summary;
  writeSummary(summary, stats.snapshot(), run);
  EXPECT_NE(summary.str().find("3 steps, mean 1.500 ms/step, peak memory "
                               "2048 bytes (2.0 KiB)"),
            std::string::npos)
      << summary.str();
  EXPECT_NE(summary.str().find("all_reduce 100, all_gather 0, "
                               "reduce_scatter 0"),
            std::string::npos)
      << summary.str();

  std::ostringstream json;
  writeStatsJson(json, stats.snapshot(), run);
  std::string j = json.str();
  for (const char *expected :
       {"\"steps\": 3", "\"mean_step_ms\": 1.5", "\"peak_bytes\": 2048",
        "\"world_size\": 2", "\"strategy\": \"ddp\"",
        "\"all_reduce\": {\"calls\": 1, \"bytes_sent\": 300, "
        "\"bytes_sent_per_step\": 100}",
        "\"copy\": {\"calls\": 1, \"total_ms\": 2.5}"})
    EXPECT_NE(j.find(expected), std::string::npos)
        << "missing " << expected << " in\n"
        << j;
}

TEST(StatsTest, JsonStringsAreEscaped) {
  EXPECT_EQ(jsonString("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
}

} // namespace
