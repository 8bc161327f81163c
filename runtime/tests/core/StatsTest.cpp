// Ring byte-count formulas, counters, and the summary and JSON reports.
#include "stats/Stats.h"

#include <gtest/gtest.h>

#include <cmath>

#include <sstream>

using namespace autoshard::rt;

namespace {

/// The plan part of a report's run: a DDP step on a grid of 2 on the CPU.
RunInfo ddpOnTwoRanks() {
  RunInfo run;
  run.step = "train_step";
  run.strategy = "ddp";
  run.grid = "2";
  run.backend = "cpu";
  run.worldSize = 2;
  return run;
}

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
  RunInfo run = ddpOnTwoRanks();
  run.steps = 3;
  run.meanStepMs = 1.5;
  run.steadyStepMs = 1.25;

  std::ostringstream summary;
  writeSummary(summary, stats.snapshot(), run);
  EXPECT_NE(summary.str().find("3 steps, ms/step: mean 1.500 over all steps, "
                               "median 1.250 after the first (warm-up); peak "
                               "memory 2048 bytes (2.0 KiB)"),
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
       {"\"steps\": 3", "\"mean_step_ms\": 1.5", "\"steady_step_ms\": 1.25",
        "\"peak_bytes\": 2048",
        "\"world_size\": 2", "\"strategy\": \"ddp\"",
        "\"all_reduce\": {\"calls\": 1, \"bytes_sent\": 300, "
        "\"bytes_sent_per_step\": 100}",
        "\"copy\": {\"calls\": 1, \"total_ms\": 2.5}"})
    EXPECT_NE(j.find(expected), std::string::npos)
        << "missing " << expected << " in\n"
        << j;
}

// MFU at the median step time against the run's peak, the throughput in
// tokens (or samples), and the per-step series with the last losses.
TEST(StatsTest, ReportsMfuThroughputAndTheSeries) {
  Stats stats;
  RunInfo run;
  run.steps = 3;
  run.meanStepMs = 3;
  run.steadyStepMs = 2; // 1 GFLOP in 2 ms: 500 GFLOP/s
  run.stepFlops = 1'000'000'000;
  run.peakFlopPerS = 2e12;
  run.peakSource = "a test's peak";
  run.stepSamples = 8;
  run.series = {{1, 2.5, 4.0, 0.001, 1.5},
                {2, 2.25, 2.0, 0.002, NAN},
                {3, 2.0, 3.0, 0.003, 0.5}};
  run.evaluations = {{3, 2, 2.125, 5.0, 0, false}};
  std::ostringstream summary;
  writeSummary(summary, stats.snapshot(), run);
  for (const char *expected :
       {"summary: compute per step on rank 0: 1 GFLOP (matrix products and "
        "attention, as compiled), 500 GFLOP/s at the median step time, MFU "
        "25% of 2000 GFLOP/s (a test's peak)\n",
        "summary: throughput: 4000 samples/s at the median step time (8 "
        "samples per step over all ranks)\n"})
    EXPECT_NE(summary.str().find(expected), std::string::npos)
        << "missing " << expected << " in\n"
        << summary.str();
  std::ostringstream json;
  writeStatsJson(json, stats.snapshot(), run);
  for (const char *expected :
       {"\"mfu\": 0.25,", "\"peak_flop_per_s\": 2e+12,",
        "\"peak_source\": \"a test's peak\",", "\"step_samples\": 8,",
        "\"final_train_loss\": 2,", "\"final_eval_loss\": 2.125,",
        "\"series\": {\n    \"step\": [1, 2, 3],\n    \"loss\": [2.5, 2.25, "
        "2],\n    \"ms\": [4.000, 2.000, 3.000],\n    \"lr\": [0.001, 0.002, "
        "0.003],\n    \"grad_norm\": [1.5, null, 0.5]\n  },"})
    EXPECT_NE(json.str().find(expected), std::string::npos)
        << "missing " << expected << " in\n"
        << json.str();
  // Without a peak: no MFU.
  run.peakFlopPerS = 0;
  std::ostringstream noPeak, noPeakJson;
  writeSummary(noPeak, stats.snapshot(), run);
  writeStatsJson(noPeakJson, stats.snapshot(), run);
  EXPECT_EQ(noPeak.str().find("MFU"), std::string::npos) << noPeak.str();
  EXPECT_NE(noPeakJson.str().find("\"mfu\": null,"), std::string::npos);
}

TEST(StatsTest, ReportsDeviceOpTimesOnlyWhenMeasured) {
  Stats stats;
  RunInfo run;
  run.steps = 2;
  stats.recordOp("linear_fwd", 100000);
  stats.recordOp("copy", 50000);
  std::ostringstream plain, plainJson;
  writeSummary(plain, stats.snapshot(), run);
  writeStatsJson(plainJson, stats.snapshot(), run);
  EXPECT_EQ(plain.str().find("on the device"), std::string::npos);
  EXPECT_EQ(plainJson.str().find("device_ms"), std::string::npos);
  // Two steps: linear_fwd 3 ms and 1 ms on the device, attention 5 ms.
  stats.recordDeviceOp("linear_fwd", 3000000);
  stats.recordDeviceOp("linear_fwd", 1000000);
  stats.recordDeviceOp("causal_attention_fwd", 5000000);
  std::ostringstream summary, json;
  writeSummary(summary, stats.snapshot(), run);
  writeStatsJson(json, stats.snapshot(), run);
  EXPECT_NE(summary.str().find("summary: compute on the device per step on "
                               "rank 0: 4.500 ms; most: causal_attention_fwd "
                               "2.500 ms, linear_fwd 2.000 ms\n"),
            std::string::npos)
      << summary.str();
  for (const char *expected :
       {"\"linear_fwd\": {\"calls\": 1, \"total_ms\": 0.1, "
        "\"device_calls\": 2, \"device_ms\": 4, \"device_max_ms\": 3}",
        "\"copy\": {\"calls\": 1, \"total_ms\": 0.05}",
        "\"causal_attention_fwd\": {\"calls\": 0, \"total_ms\": 0, "
        "\"device_calls\": 1, \"device_ms\": 5, \"device_max_ms\": 5}"})
    EXPECT_NE(json.str().find(expected), std::string::npos)
        << "missing " << expected << " in\n"
        << json.str();
}

TEST(StatsTest, EvaluationRunsReportTheirMeanLoss) {
  Stats stats;
  RunInfo run;
  run.steps = 4;
  run.meanLoss = 2.5;
  std::ostringstream training, trainingJson;
  writeSummary(training, stats.snapshot(), run);
  writeStatsJson(trainingJson, stats.snapshot(), run);
  EXPECT_EQ(training.str().find("evaluation"), std::string::npos);
  EXPECT_EQ(trainingJson.str().find("mean_loss"), std::string::npos);
  run.evaluation = true;
  std::ostringstream summary, json;
  writeSummary(summary, stats.snapshot(), run);
  writeStatsJson(json, stats.snapshot(), run);
  // The first line, before the timing.
  EXPECT_EQ(summary.str().rfind("summary: evaluation: mean loss 2.5 over 4 "
                                "steps (parameters unchanged)\n",
                                0),
            0u)
      << summary.str();
  EXPECT_NE(json.str().find("\"mean_loss\": 2.5,"), std::string::npos)
      << json.str();
}

TEST(StatsTest, RestoredCountersKeepThePeak) {
  Stats stats;
  stats.recordOp("linear_fwd_f32", 100);
  stats.recordCollective(CollectiveKind::AllReduce, 8);
  stats.recordAlloc(10);
  Stats::Snapshot kept = stats.snapshot();
  // An evaluation's work: counted, then taken out again.
  stats.recordOp("linear_fwd_f32", 40);
  stats.recordOp("relu_fwd_f32", 5);
  stats.recordCollective(CollectiveKind::AllGather, 64);
  stats.recordAlloc(90);
  stats.recordFree(90);
  stats.restoreCounters(kept);
  Stats::Snapshot s = stats.snapshot();
  EXPECT_EQ(s.ops.size(), 1u);
  EXPECT_EQ(s.ops.at("linear_fwd_f32").totalNs, 100);
  EXPECT_EQ(s.collectives[0].bytesSent, 8);
  EXPECT_EQ(s.collectives[1].bytesSent, 0);
  EXPECT_EQ(s.currentBytes, 10);
  EXPECT_EQ(s.peakBytes, 100);
}

TEST(StatsTest, InRunEvaluationsAreReported) {
  Stats stats;
  RunInfo run;
  run.steps = 6;
  std::ostringstream none;
  writeSummary(none, stats.snapshot(), run);
  EXPECT_EQ(none.str().find("held-out"), std::string::npos);
  run.evaluations = {{3, 2, 4.5, 10.0, 128}, {6, 2, 4.25, 9.5, 128}};
  run.evaluations.push_back({9, 2, 4.375, 9.0, 128});
  std::ostringstream summary, json;
  writeSummary(summary, stats.snapshot(), run);
  writeStatsJson(json, stats.snapshot(), run);
  EXPECT_EQ(summary.str().rfind("summary: 3 evaluations of 2 held-out "
                                "batches: last mean loss 4.375 (after step "
                                "9), best 4.25 (after step 6); not counted in "
                                "the per-step figures below\n",
                                0),
            0u)
      << summary.str();
  EXPECT_NE(json.str().find("\"evaluations\": [\n    {\"after_step\": 3, "
                            "\"batches\": 2, \"mean_loss\": 4.5, \"ms\": "
                            "10, \"bytes_sent\": 128},\n"),
            std::string::npos)
      << json.str();
}

TEST(StatsTest, ABaselineEvaluationIsNotTheBest) {
  // --eval-at-start's evaluation before step 1 is the lowest here (a run
  // that got worse), but the best is among those after training steps.
  Stats stats;
  RunInfo run;
  run.steps = 6;
  EvaluationInfo start{0, 2, 4.0, 10.0, 128};
  start.atStart = true;
  run.evaluations = {start, {3, 2, 4.5, 10.0, 128}, {6, 2, 4.25, 9.5, 128}};
  std::ostringstream summary, json;
  writeSummary(summary, stats.snapshot(), run);
  writeStatsJson(json, stats.snapshot(), run);
  EXPECT_NE(summary.str().find("best 4.25 (after step 6)"), std::string::npos)
      << summary.str();
  EXPECT_NE(json.str().find("\"bytes_sent\": 128, \"at_start\": true}"),
            std::string::npos)
      << json.str();
  // Only a baseline ran (the run failed after it): it is all there is.
  run.evaluations = {start};
  std::ostringstream alone;
  writeSummary(alone, stats.snapshot(), run);
  EXPECT_NE(alone.str().find("best 4 (after step 0)"), std::string::npos)
      << alone.str();
}

TEST(StatsTest, SteadyStepTimeIsTheMedianAfterTheFirstStep) {
  EXPECT_EQ(steadyStepMs({}), 0.0);
  EXPECT_EQ(steadyStepMs({9.0}), 9.0);
  // The first step's setup cost does not count; the median resists a
  // noisy step.
  EXPECT_EQ(steadyStepMs({100.0, 2.0, 3.0, 50.0}), 3.0);
  EXPECT_EQ(steadyStepMs({100.0, 4.0, 2.0}), 3.0);
}

TEST(StatsTest, ReportsOffloadOnlyWhenTheRunOffloads) {
  Stats stats;
  stats.recordAlloc(1000);
  RunInfo run;
  run.steps = 2;
  std::ostringstream plain;
  writeSummary(plain, stats.snapshot(), run);
  EXPECT_EQ(plain.str().find("offload"), std::string::npos) << plain.str();
  EXPECT_EQ(plain.str().find("host memory"), std::string::npos);
  EXPECT_FALSE(stats.snapshot().usedOffload());

  stats.recordHostAlloc(4096);
  stats.recordHostAlloc(1024);
  stats.recordHostFree(4096);
  stats.setNvmeBytes(2048);
  stats.recordTransfer(TransferKind::ToHost, 300, 1000000);
  stats.recordTransfer(TransferKind::ToHost, 300, 1000000);
  stats.recordTransfer(TransferKind::NvmeWrite, 2048, 3000000);
  // 1 ms in a synchronous call, 2 ms in asrt_transfer_wait for a transfer
  // that took 4 ms on the offload thread.
  stats.recordSideWait(SideThread::Offload, false, 1000000);
  stats.recordSideThread(SideThread::Offload, true, 4000000);
  stats.recordSideWait(SideThread::Offload, true, 2000000);
  Stats::Snapshot s = stats.snapshot();
  EXPECT_TRUE(s.usedOffload());
  EXPECT_EQ(s.hostCurrentBytes, 1024);
  EXPECT_EQ(s.hostPeakBytes, 5120);
  // Host memory is not device memory.
  EXPECT_EQ(s.peakBytes, 1000);

  std::ostringstream summary;
  writeSummary(summary, s, run);
  for (const char *expected :
       {"peak memory 1000 bytes",
        "summary: host memory peak 5120 bytes (5.0 KiB), NVMe 2048 bytes "
        "(2.0 KiB) on rank 0\n",
        "summary: offload per step on rank 0: to_host 300 bytes 1.000 ms, "
        "to_device 0 bytes 0.000 ms, nvme_read 0 bytes 0.000 ms, "
        "nvme_write 1024 bytes 1.500 ms; exposed 1.500 ms (synchronous "
        "0.500 ms, waiting 1.000 ms), asynchronous 2.000 ms on the offload "
        "thread\n"})
    EXPECT_NE(summary.str().find(expected), std::string::npos)
        << "missing " << expected << " in\n"
        << summary.str();

  std::ostringstream json;
  writeStatsJson(json, s, run);
  for (const char *expected :
       {"\"peak_bytes\": 1000,", "\"host_peak_bytes\": 5120,",
        "\"nvme_bytes\": 2048,",
        "\"to_host\": {\"calls\": 2, \"bytes\": 600, \"bytes_per_step\": "
        "300, \"total_ms\": 2, \"ms_per_step\": 1}",
        "\"nvme_read\": {\"calls\": 0, \"bytes\": 0",
        "\"offload_time\": {\"exposed_ms\": 3, \"exposed_ms_per_step\": 1.5, "
        "\"sync_calls\": 1, \"sync_wait_ms\": 1, \"async_calls\": 1, "
        "\"async_transfer_ms\": 4, \"async_transfer_ms_per_step\": 2, "
        "\"async_waits\": 1, \"async_wait_ms\": 2, \"offload_thread_ms\": "
        "4},"})
    EXPECT_NE(json.str().find(expected), std::string::npos)
        << "missing " << expected << " in\n"
        << json.str();

  // Counters reset; memory stays.
  stats.resetCounters();
  s = stats.snapshot();
  EXPECT_EQ(s.transfers[0].calls, 0);
  EXPECT_EQ(s.offload.threadNs, 0);
  EXPECT_EQ(s.offload.exposedNs(), 0);
  EXPECT_EQ(s.hostPeakBytes, 5120);
  EXPECT_EQ(s.nvmeBytes, 2048);
}

// The whole file, byte for byte: tools and sweeps diff --stats-json output
// across runs and versions, so its layout is part of the format.
// Communication time is split as offload time is: every counter lands in
// its own key and summary figure.
TEST(StatsTest, ReportsCommunicationTime) {
  Stats stats;
  // 1 ms blocked in a blocking collective that ran 3 ms on the thread; 2 ms
  // in asrt_wait for a bucket that ran 4 ms there.
  stats.recordSideWait(SideThread::Communication, false, 1000000);
  stats.recordSideThread(SideThread::Communication, false, 3000000);
  stats.recordSideThread(SideThread::Communication, true, 4000000);
  stats.recordSideWait(SideThread::Communication, true, 2000000);
  RunInfo run;
  run.steps = 2;
  std::ostringstream summary;
  writeSummary(summary, stats.snapshot(), run);
  EXPECT_NE(summary.str().find(
                "summary: communication per step on rank 0: exposed 1.500 ms "
                "(blocking 0.500 ms, waiting 1.000 ms), asynchronous 2.000 ms "
                "on the communication thread\n"),
            std::string::npos)
      << summary.str();
  std::ostringstream json;
  writeStatsJson(json, stats.snapshot(), run);
  EXPECT_NE(
      json.str().find("\"communication\": {\"exposed_ms\": 3, "
                      "\"exposed_ms_per_step\": 1.5, \"blocking_calls\": 1, "
                      "\"blocking_wait_ms\": 1, \"async_calls\": 1, "
                      "\"async_comm_ms\": 4, \"async_comm_ms_per_step\": 2, "
                      "\"async_waits\": 1, \"async_wait_ms\": 2, "
                      "\"comm_thread_ms\": 7},"),
      std::string::npos)
      << json.str();
}

TEST(StatsTest, JsonKeepsItsExactLayout) {
  Stats stats;
  stats.recordOp("matmul", 1500000);
  stats.recordDeviceOp("matmul", 1250000);
  stats.recordCollective(CollectiveKind::AllReduce, 4096);
  stats.recordAlloc(1 << 20);
  stats.recordSideWait(SideThread::Communication, false, 250000);
  RunInfo run = ddpOnTwoRanks();
  run.rank = 1;
  run.steps = 2;
  run.meanStepMs = 2.5;
  run.steadyStepMs = 2;
  run.series = {{1, 2.5, 3.0, NAN, NAN}, {2, NAN, 2.0, NAN, NAN}};
  run.evaluations = {{0, 2, 2.75, 1.5, 64, true}};
  std::ostringstream json;
  writeStatsJson(json, stats.snapshot(), run);
  EXPECT_EQ(json.str(), R"({
  "step": "train_step",
  "strategy": "ddp",
  "grid": "2",
  "backend": "cpu",
  "world_size": 2,
  "rank": 1,
  "steps": 2,
  "mean_step_ms": 2.5,
  "steady_step_ms": 2,
  "step_flops": 0,
  "flop_per_s": 0,
  "step_tokens": 0,
  "step_samples": 0,
  "peak_flop_per_s": 0,
  "peak_source": "",
  "mfu": null,
  "final_train_loss": null,
  "final_eval_loss": 2.75,
  "series": {
    "step": [1, 2],
    "loss": [2.5, null],
    "ms": [3.000, 2.000]
  },
  "evaluations": [
    {"after_step": 0, "batches": 2, "mean_loss": 2.75, "ms": 1.5, "bytes_sent": 64, "at_start": true}
  ],
  "peak_bytes": 1048576,
  "host_peak_bytes": 0,
  "nvme_bytes": 0,
  "collectives": {
    "all_reduce": {"calls": 1, "bytes_sent": 4096, "bytes_sent_per_step": 2048},
    "all_gather": {"calls": 0, "bytes_sent": 0, "bytes_sent_per_step": 0},
    "reduce_scatter": {"calls": 0, "bytes_sent": 0, "bytes_sent_per_step": 0}
  },
  "communication": {"exposed_ms": 0.25, "exposed_ms_per_step": 0.125, "blocking_calls": 1, "blocking_wait_ms": 0.25, "async_calls": 0, "async_comm_ms": 0, "async_comm_ms_per_step": 0, "async_waits": 0, "async_wait_ms": 0, "comm_thread_ms": 0},
  "offload": {
    "to_host": {"calls": 0, "bytes": 0, "bytes_per_step": 0, "total_ms": 0, "ms_per_step": 0},
    "to_device": {"calls": 0, "bytes": 0, "bytes_per_step": 0, "total_ms": 0, "ms_per_step": 0},
    "nvme_read": {"calls": 0, "bytes": 0, "bytes_per_step": 0, "total_ms": 0, "ms_per_step": 0},
    "nvme_write": {"calls": 0, "bytes": 0, "bytes_per_step": 0, "total_ms": 0, "ms_per_step": 0}
  },
  "offload_time": {"exposed_ms": 0, "exposed_ms_per_step": 0, "sync_calls": 0, "sync_wait_ms": 0, "async_calls": 0, "async_transfer_ms": 0, "async_transfer_ms_per_step": 0, "async_waits": 0, "async_wait_ms": 0, "offload_thread_ms": 0},
  "ops": {
    "matmul": {"calls": 1, "total_ms": 1.5, "device_calls": 1, "device_ms": 1.25, "device_max_ms": 1.25}
  }
}
)");
}

} // namespace
