// What the runtime counts: time per op, bytes per collective, peak memory.
#include "stats/Stats.h"
#include "io/Json.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>

namespace autoshard::rt {

const char *collectiveKindName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  }
  return "?";
}

const char *transferKindName(TransferKind kind) {
  switch (kind) {
  case TransferKind::ToHost:
    return "to_host";
  case TransferKind::ToDevice:
    return "to_device";
  case TransferKind::NvmeRead:
    return "nvme_read";
  case TransferKind::NvmeWrite:
    return "nvme_write";
  }
  return "?";
}

int64_t ringBytesSent(CollectiveKind kind, int64_t fullCount, int64_t groupSize,
                      int64_t elementBytes) {
  if (groupSize <= 1 || fullCount <= 0)
    return 0;
  int64_t chunk = (fullCount + groupSize - 1) / groupSize;
  int64_t oneRing = (groupSize - 1) * chunk * elementBytes;
  // An all-reduce is a reduce-scatter ring followed by an all-gather ring.
  return kind == CollectiveKind::AllReduce ? 2 * oneRing : oneRing;
}

/// The counters of `op`, made on its first call.
static OpStats &opEntry(std::map<std::string, OpStats, std::less<>> &ops,
                        std::string_view op) {
  auto it = ops.find(op);
  if (it == ops.end())
    it = ops.emplace(std::string(op), OpStats()).first;
  return it->second;
}

void Stats::recordOp(std::string_view op, int64_t ns) {
  std::lock_guard<std::mutex> lock(mutex);
  OpStats &s = opEntry(counters.ops, op);
  s.calls += 1;
  s.totalNs += ns;
}

void Stats::recordDeviceOp(std::string_view op, int64_t ns) {
  std::lock_guard<std::mutex> lock(mutex);
  OpStats &s = opEntry(counters.ops, op);
  s.deviceCalls += 1;
  s.deviceNs += ns;
  s.deviceMaxNs = std::max(s.deviceMaxNs, ns);
}

void Stats::recordCollective(CollectiveKind kind, int64_t bytesSent) {
  std::lock_guard<std::mutex> lock(mutex);
  CollectiveStats &c = counters.collectives[static_cast<int>(kind)];
  c.calls += 1;
  c.bytesSent += bytesSent;
}

void Stats::recordAlloc(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex);
  counters.currentBytes += bytes;
  counters.peakBytes = std::max(counters.peakBytes, counters.currentBytes);
}

void Stats::recordFree(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex);
  counters.currentBytes -= bytes;
}

void Stats::recordHostAlloc(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex);
  counters.hostCurrentBytes += bytes;
  counters.hostPeakBytes =
      std::max(counters.hostPeakBytes, counters.hostCurrentBytes);
}

void Stats::recordHostFree(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex);
  counters.hostCurrentBytes -= bytes;
}

void Stats::setNvmeBytes(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex);
  counters.nvmeBytes = bytes;
}

void Stats::recordTransfer(TransferKind kind, int64_t bytes, int64_t ns) {
  std::lock_guard<std::mutex> lock(mutex);
  TransferStats &t = counters.transfers[static_cast<int>(kind)];
  t.calls += 1;
  t.bytes += bytes;
  t.totalNs += ns;
}

bool Stats::Snapshot::usedOffload() const {
  if (hostPeakBytes > 0 || nvmeBytes > 0)
    return true;
  for (const TransferStats &t : transfers)
    if (t.calls > 0)
      return true;
  return false;
}

namespace {

/// The words --stats-json and the summary name a side thread's time by.
struct SideThreadWords {
  // Keys: "<blocking>_calls", "<blocking>_wait_ms", "async_<async>_ms",
  // "<thread>_thread_ms"; summary: "(<blocking word> 1.000 ms, ...) on the
  // <thread word> thread".
  const char *blockingKey;
  const char *asyncKey;
  const char *threadKey;
  const char *blockingWord;
  const char *threadWord;
};

constexpr SideThreadWords kCommThread{"blocking", "comm", "comm", "blocking",
                                      "communication"};
constexpr SideThreadWords kOffloadThread{"sync", "transfer", "offload",
                                         "synchronous", "offload"};

/// The counters of `side` in `counters`.
SideThreadTime &timeOf(Stats::Snapshot &counters, SideThread side) {
  return side == SideThread::Offload ? counters.offload : counters.comm;
}

} // namespace

void Stats::recordSideThread(SideThread side, bool async, int64_t ns) {
  std::lock_guard<std::mutex> lock(mutex);
  SideThreadTime &time = timeOf(counters, side);
  time.threadNs += ns;
  // A blocking call is counted by its wait (recordSideWait).
  if (async) {
    time.asyncCalls += 1;
    time.asyncNs += ns;
  }
}

void Stats::recordSideWait(SideThread side, bool async, int64_t ns) {
  std::lock_guard<std::mutex> lock(mutex);
  SideThreadTime &time = timeOf(counters, side);
  (async ? time.asyncWaits : time.blockingCalls) += 1;
  (async ? time.asyncWaitNs : time.blockingWaitNs) += ns;
}

Stats::Snapshot Stats::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex);
  return counters;
}

void Stats::resetCounters() {
  std::lock_guard<std::mutex> lock(mutex);
  counters.ops.clear();
  counters.collectives = {};
  counters.comm = {};
  counters.transfers = {};
  counters.offload = {};
}

void Stats::restoreCounters(const Snapshot &kept) {
  std::lock_guard<std::mutex> lock(mutex);
  counters.ops = kept.ops;
  counters.collectives = kept.collectives;
  counters.comm = kept.comm;
  counters.transfers = kept.transfers;
  counters.offload = kept.offload;
}

std::string formatBytes(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[64];
  if (unit == 0)
    std::snprintf(buffer, sizeof buffer, "%" PRId64 " B", bytes);
  else
    std::snprintf(buffer, sizeof buffer, "%.1f %s", value, units[unit]);
  return buffer;
}

namespace {

int64_t perStep(int64_t total, int64_t steps) {
  return steps > 0 ? total / steps : 0;
}

double toMs(int64_t ns) { return static_cast<double>(ns) / 1e6; }

double msPerStep(int64_t ns, int64_t steps) {
  return steps > 0 ? toMs(ns) / static_cast<double>(steps) : 0.0;
}

/// "exposed 1.000 ms (blocking 1.000 ms, waiting 0.000 ms), asynchronous
/// 0.000 ms on the communication thread\n", per step.
std::string exposedSummary(const SideThreadTime &time,
                           const SideThreadWords &side, int64_t steps) {
  char line[256];
  std::snprintf(line, sizeof line,
                "exposed %.3f ms (%s %.3f ms, waiting %.3f ms), asynchronous "
                "%.3f ms on the %s thread\n",
                msPerStep(time.exposedNs(), steps), side.blockingWord,
                msPerStep(time.blockingWaitNs, steps),
                msPerStep(time.asyncWaitNs, steps),
                msPerStep(time.asyncNs, steps), side.threadWord);
  return line;
}

/// "series": one array per figure, index i for the i-th step run; lr and
/// grad_norm only when some step has one. A diverged step's loss is null.
void writeSeries(JsonWriter &json, const std::vector<StepSample> &series) {
  auto column = [&](const char *name, auto write) {
    json.key(name).beginArray(JsonWriter::Layout::Spaced);
    for (const StepSample &s : series)
      write(s);
    json.end();
  };
  bool lr = false, gradNorm = false;
  for (const StepSample &s : series) {
    lr |= !std::isnan(s.lr);
    gradNorm |= !std::isnan(s.gradNorm);
  }
  json.key("series").beginObject();
  column("step", [&](const StepSample &s) { json.integer(s.step); });
  column("loss", [&](const StepSample &s) { json.number(s.loss); });
  column("ms", [&](const StepSample &s) { json.number(s.ms, "%.3f"); });
  if (lr)
    column("lr", [&](const StepSample &s) { json.number(s.lr); });
  if (gradNorm)
    column("grad_norm", [&](const StepSample &s) { json.number(s.gradNorm); });
  json.end();
}

} // namespace

double steadyStepMs(std::vector<double> ms) {
  if (ms.empty())
    return 0.0;
  if (ms.size() > 1)
    ms.erase(ms.begin());
  std::sort(ms.begin(), ms.end());
  size_t mid = ms.size() / 2;
  return ms.size() % 2 ? ms[mid] : (ms[mid - 1] + ms[mid]) / 2;
}

/// The step's FLOPs per second at the steady step time; 0 when unknown.
static double flopRate(const RunInfo &run) {
  return run.stepFlops > 0 && run.steadyStepMs > 0
             ? static_cast<double>(run.stepFlops) / (run.steadyStepMs * 1e-3)
             : 0.0;
}

void writeSummary(std::ostream &os, const Stats::Snapshot &stats,
                  const RunInfo &run) {
  char line[256];
  if (run.evaluation && run.steps > 0) {
    std::snprintf(line, sizeof line,
                  "summary: evaluation: mean loss %.8g over %" PRId64
                  " steps (parameters unchanged)\n",
                  run.meanLoss, run.steps);
    os << line;
  }
  if (!run.evaluations.empty()) {
    const EvaluationInfo &last = run.evaluations.back();
    // A baseline before the first step is the best only when nothing else
    // ran.
    const EvaluationInfo &best =
        *std::min_element(run.evaluations.begin(), run.evaluations.end(),
                          [](const EvaluationInfo &a, const EvaluationInfo &b) {
                            return std::make_pair(a.atStart, a.meanLoss) <
                                   std::make_pair(b.atStart, b.meanLoss);
                          });
    std::snprintf(line, sizeof line,
                  "summary: %zu %s of %" PRId64
                  " held-out %s: last mean loss %.8g (after step %" PRId64
                  "), best %.8g (after step %" PRId64
                  "); not counted in the per-step figures below\n",
                  run.evaluations.size(),
                  run.evaluations.size() == 1 ? "evaluation" : "evaluations",
                  last.batches, last.batches == 1 ? "batch" : "batches",
                  last.meanLoss, last.afterStep, best.meanLoss, best.afterStep);
    os << line;
  }
  if (run.steps > 1)
    std::snprintf(line, sizeof line,
                  "summary: %" PRId64 " steps, ms/step: mean %.3f over all "
                  "steps, median %.3f after the first (warm-up); peak memory "
                  "%" PRId64 " bytes (%s) on rank %d\n",
                  run.steps, run.meanStepMs, run.steadyStepMs, stats.peakBytes,
                  formatBytes(stats.peakBytes).c_str(), run.rank);
  else
    std::snprintf(line, sizeof line,
                  "summary: %" PRId64 " %s, ms/step: %.3f; peak memory "
                  "%" PRId64 " bytes (%s) on rank %d\n",
                  run.steps, run.steps == 1 ? "step" : "steps",
                  run.meanStepMs, stats.peakBytes,
                  formatBytes(stats.peakBytes).c_str(), run.rank);
  os << line;
  if (run.stepFlops > 0 && run.steadyStepMs > 0) {
    std::snprintf(line, sizeof line,
                  "summary: compute per step on rank %d: %.4g GFLOP (matrix "
                  "products and attention, as compiled), %.4g GFLOP/s at the "
                  "median step time",
                  run.rank, static_cast<double>(run.stepFlops) * 1e-9,
                  flopRate(run) * 1e-9);
    os << line;
    if (run.peakFlopPerS > 0) {
      std::snprintf(line, sizeof line, ", MFU %.3g%% of %.4g GFLOP/s (",
                    100 * flopRate(run) / run.peakFlopPerS,
                    run.peakFlopPerS * 1e-9);
      os << line << run.peakSource << ")";
    }
    os << "\n";
  }
  if ((run.stepTokens > 0 || run.stepSamples > 0) && run.steadyStepMs > 0) {
    const bool tokens = run.stepTokens > 0;
    const int64_t perStep = tokens ? run.stepTokens : run.stepSamples;
    const char *unit = tokens ? "tokens" : "samples";
    const double rate =
        static_cast<double>(perStep) / (run.steadyStepMs * 1e-3);
    std::snprintf(line, sizeof line,
                  rate >= 100 ? "summary: throughput: %.0f %s/s at the median "
                                "step time (%" PRId64
                                " %s per step over all ranks)\n"
                              : "summary: throughput: %.4g %s/s at the median "
                                "step time (%" PRId64
                                " %s per step over all ranks)\n",
                  rate, unit, perStep, unit);
    os << line;
  }
  if (stats.usedOffload()) {
    std::snprintf(line, sizeof line,
                  "summary: host memory peak %" PRId64 " bytes (%s), NVMe "
                  "%" PRId64 " bytes (%s) on rank %d\n",
                  stats.hostPeakBytes, formatBytes(stats.hostPeakBytes).c_str(),
                  stats.nvmeBytes, formatBytes(stats.nvmeBytes).c_str(),
                  run.rank);
    os << line;
  }
  os << "summary: bytes sent per step by rank " << run.rank << ":";
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    os << (k ? ", " : " ") << collectiveKindName(static_cast<CollectiveKind>(k))
       << " " << perStep(stats.collectives[k].bytesSent, run.steps);
  }
  os << "\n";
  os << "summary: communication per step on rank " << run.rank << ": "
     << exposedSummary(stats.comm, kCommThread, run.steps);
  if (stats.usedOffload()) {
    os << "summary: offload per step on rank " << run.rank << ":";
    for (int k = 0; k < kNumTransferKinds; ++k) {
      const TransferStats &t = stats.transfers[k];
      std::snprintf(
          line, sizeof line, "%s%s %" PRId64 " bytes %.3f ms", k ? ", " : " ",
          transferKindName(static_cast<TransferKind>(k)),
          perStep(t.bytes, run.steps), msPerStep(t.totalNs, run.steps));
      os << line;
    }
    os << "; " << exposedSummary(stats.offload, kOffloadThread, run.steps);
  }
  // --device-op-times: the device's time in the compute ops, largest first.
  std::vector<std::pair<int64_t, std::string_view>> onDevice;
  int64_t deviceNs = 0;
  for (const auto &[name, op] : stats.ops)
    if (op.deviceCalls > 0) {
      onDevice.push_back({op.deviceNs, name});
      deviceNs += op.deviceNs;
    }
  if (!onDevice.empty()) {
    std::sort(onDevice.rbegin(), onDevice.rend());
    std::snprintf(line, sizeof line,
                  "summary: compute on the device per step on rank %d: "
                  "%.3f ms; most:",
                  run.rank, msPerStep(deviceNs, run.steps));
    os << line;
    for (size_t i = 0; i < onDevice.size() && i < 5; ++i) {
      std::snprintf(line, sizeof line, "%s %.*s %.3f ms", i ? "," : "",
                    static_cast<int>(onDevice[i].second.size()),
                    onDevice[i].second.data(),
                    msPerStep(onDevice[i].first, run.steps));
      os << line;
    }
    os << "\n";
  }
}

void writeStatsJson(std::ostream &os, const Stats::Snapshot &stats,
                    const RunInfo &run) {
  using Layout = JsonWriter::Layout;
  JsonWriter json(Layout::Lines);
  // Durations and rates with six significant digits.
  auto figure = [&](std::string_view name, double value) {
    json.key(name).number(value, "%.6g");
  };
  auto sideThreadJson = [&](const char *key, const SideThreadTime &time,
                            const SideThreadWords &side) {
    const std::string async = std::string("async_") + side.asyncKey + "_ms";
    json.key(key).beginObject(Layout::Spaced);
    figure("exposed_ms", toMs(time.exposedNs()));
    figure("exposed_ms_per_step", msPerStep(time.exposedNs(), run.steps));
    json.key(std::string(side.blockingKey) + "_calls")
        .integer(time.blockingCalls);
    figure(std::string(side.blockingKey) + "_wait_ms",
           toMs(time.blockingWaitNs));
    json.key("async_calls").integer(time.asyncCalls);
    figure(async, toMs(time.asyncNs));
    figure(async + "_per_step", msPerStep(time.asyncNs, run.steps));
    json.key("async_waits").integer(time.asyncWaits);
    figure("async_wait_ms", toMs(time.asyncWaitNs));
    figure(std::string(side.threadKey) + "_thread_ms", toMs(time.threadNs));
    json.end();
  };
  json.beginObject();
  json.key("step").string(run.step);
  json.key("strategy").string(run.strategy);
  json.key("grid").string(run.grid);
  json.key("backend").string(run.backend);
  json.key("world_size").integer(run.worldSize);
  json.key("rank").integer(run.rank);
  json.key("steps").integer(run.steps);
  figure("mean_step_ms", run.meanStepMs);
  figure("steady_step_ms", run.steadyStepMs);
  json.key("step_flops").integer(run.stepFlops);
  figure("flop_per_s", flopRate(run));
  json.key("step_tokens").integer(run.stepTokens);
  json.key("step_samples").integer(run.stepSamples);
  figure("peak_flop_per_s", run.peakFlopPerS);
  json.key("peak_source").string(run.peakSource);
  // Model FLOPs utilisation at the median step time; null without a peak.
  if (run.peakFlopPerS > 0 && flopRate(run) > 0)
    figure("mfu", flopRate(run) / run.peakFlopPerS);
  else
    json.key("mfu").null();
  // The last training step's loss and the last evaluation's: what a sweep
  // compares runs by.
  if (!run.evaluation && !run.series.empty())
    json.key("final_train_loss").number(run.series.back().loss);
  if (!run.evaluations.empty())
    json.key("final_eval_loss").number(run.evaluations.back().meanLoss);
  writeSeries(json, run.series);
  if (run.evaluation)
    figure("mean_loss", run.meanLoss);
  if (!run.evaluations.empty()) {
    json.key("evaluations").beginArray();
    for (const EvaluationInfo &e : run.evaluations) {
      json.beginObject(Layout::Spaced);
      json.key("after_step").integer(e.afterStep);
      json.key("batches").integer(e.batches);
      figure("mean_loss", e.meanLoss);
      figure("ms", e.ms);
      json.key("bytes_sent").integer(e.bytesSent);
      if (e.atStart)
        json.key("at_start").boolean(true);
      json.end();
    }
    json.end();
  }
  json.key("peak_bytes").integer(stats.peakBytes);
  json.key("host_peak_bytes").integer(stats.hostPeakBytes);
  json.key("nvme_bytes").integer(stats.nvmeBytes);
  json.key("collectives").beginObject();
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    const CollectiveStats &c = stats.collectives[k];
    json.key(collectiveKindName(static_cast<CollectiveKind>(k)))
        .beginObject(Layout::Spaced);
    json.key("calls").integer(c.calls);
    json.key("bytes_sent").integer(c.bytesSent);
    json.key("bytes_sent_per_step").integer(perStep(c.bytesSent, run.steps));
    json.end();
  }
  json.end();
  sideThreadJson("communication", stats.comm, kCommThread);
  json.key("offload").beginObject();
  for (int k = 0; k < kNumTransferKinds; ++k) {
    const TransferStats &t = stats.transfers[k];
    json.key(transferKindName(static_cast<TransferKind>(k)))
        .beginObject(Layout::Spaced);
    json.key("calls").integer(t.calls);
    json.key("bytes").integer(t.bytes);
    json.key("bytes_per_step").integer(perStep(t.bytes, run.steps));
    figure("total_ms", toMs(t.totalNs));
    figure("ms_per_step", msPerStep(t.totalNs, run.steps));
    json.end();
  }
  json.end();
  sideThreadJson("offload_time", stats.offload, kOffloadThread);
  json.key("ops").beginObject();
  for (const auto &[name, op] : stats.ops) {
    json.key(name).beginObject(Layout::Spaced);
    json.key("calls").integer(op.calls);
    figure("total_ms", toMs(op.totalNs));
    if (op.deviceCalls > 0) {
      json.key("device_calls").integer(op.deviceCalls);
      figure("device_ms", toMs(op.deviceNs));
      figure("device_max_ms", toMs(op.deviceMaxNs));
    }
    json.end();
  }
  json.end();
  json.end();
  os << json.text() << "\n";
}

} // namespace autoshard::rt
