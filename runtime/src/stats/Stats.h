// What the runtime counts: time per op, bytes per collective, peak memory.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace autoshard::rt {

enum class CollectiveKind { AllReduce = 0, AllGather = 1, ReduceScatter = 2 };
constexpr int kNumCollectiveKinds = 3;
/// "all_reduce", "all_gather", "reduce_scatter".
const char *collectiveKindName(CollectiveKind kind);

/// Bytes one rank sends when `kind` runs as a ring over `groupSize` ranks on
/// a full (unsharded) buffer of `fullCount` elements of `elementBytes` each
/// (docs/RuntimeABI.md): the buffer is cut into groupSize chunks padded to
/// k = ceil(fullCount / groupSize) elements; an all-reduce sends
/// 2 (n-1) k b, an all-gather or reduce-scatter (n-1) k b, a group of one
/// nothing.
int64_t ringBytesSent(CollectiveKind kind, int64_t fullCount, int64_t groupSize,
                      int64_t elementBytes);

/// Offload traffic (docs/RuntimeABI.md, "Offload"): copies between device
/// and host memory, and whole-tensor reads and writes of NVMe files.
enum class TransferKind {
  ToHost = 0,
  ToDevice = 1,
  NvmeRead = 2,
  NvmeWrite = 3
};
constexpr int kNumTransferKinds = 4;
/// "to_host", "to_device", "nvme_read", "nvme_write".
const char *transferKindName(TransferKind kind);

struct TransferStats {
  int64_t calls = 0;
  int64_t bytes = 0;
  int64_t totalNs = 0;
};

struct OpStats {
  int64_t calls = 0;
  /// The calls' time on the calling thread: on a GPU, queuing the work.
  int64_t totalNs = 0;
  /// With --device-op-times on a GPU: the calls measured on the device,
  /// and the device's time running their work.
  int64_t deviceCalls = 0;
  int64_t deviceNs = 0;
  /// The slowest of them (the first call's one-time costs, as a rule:
  /// loading the kernels, a library's plan), which a per-call time may
  /// leave out.
  int64_t deviceMaxNs = 0;
};

struct CollectiveStats {
  int64_t calls = 0;
  int64_t bytesSent = 0;
};

/// Where a side thread's time went: the communication thread's collectives
/// (Snapshot::comm) or the offload thread's transfers (Snapshot::offload).
/// Each runs on a CommStream of its own while the main thread computes; the
/// main thread blocks only in the blocking calls (blocking collectives;
/// asrt_copy_to_host, ..., asrt_nvme_write) and in the waits for queued work
/// (asrt_wait, asrt_transfer_wait). The time it spends blocked there is the
/// *exposed* time; what overlap hides is the rest of the side thread's time.
struct SideThreadTime {
  /// Blocking calls that waited for the side thread, and the main thread's
  /// time blocked in them (exposed).
  int64_t blockingCalls = 0;
  int64_t blockingWaitNs = 0;
  /// Queued work that ran (asrt_bucket_start collectives,
  /// asrt_transfer_start transfers), and its time on the side thread (for a
  /// collective: packing, the MPI call, unpacking).
  int64_t asyncCalls = 0;
  int64_t asyncNs = 0;
  /// Waits for queued work, and the main thread's time blocked in them
  /// (exposed): 0 for work that finished during the compute.
  int64_t asyncWaits = 0;
  int64_t asyncWaitNs = 0;
  /// The side thread's time running work of either kind.
  int64_t threadNs = 0;

  int64_t exposedNs() const { return blockingWaitNs + asyncWaitNs; }
};

/// The side threads whose time a SideThreadTime splits: the context's
/// communication thread and its offload thread (CommStream's roles).
enum class SideThread { Communication, Offload };

/// One context's counters. Thread-safe: kernels may run on worker threads
/// and collectives on a communication thread.
struct Stats {
  void recordOp(std::string_view op, int64_t ns);
  /// The device's time running one call's work (--device-op-times).
  void recordDeviceOp(std::string_view op, int64_t ns);
  void recordCollective(CollectiveKind kind, int64_t bytesSent);
  void recordAlloc(int64_t bytes);
  void recordFree(int64_t bytes);
  /// Host memory (memory=host arguments, the host arena), counted apart
  /// from asrt_alloc's device memory.
  void recordHostAlloc(int64_t bytes);
  void recordHostFree(int64_t bytes);
  /// The bytes this rank keeps in NVMe files (memory=nvme arguments).
  void setNvmeBytes(int64_t bytes);
  /// One offload transfer of `bytes` bytes that took `ns`.
  void recordTransfer(TransferKind kind, int64_t bytes, int64_t ns);
  /// Work that `side`'s thread ran for `ns`; `async` when it was queued
  /// (asrt_bucket_start, asrt_transfer_start).
  void recordSideThread(SideThread side, bool async, int64_t ns);
  /// The main thread blocked `ns` on `side`'s thread: in a blocking call (a
  /// blocking collective, a synchronous transfer), or when `async` in
  /// asrt_wait or asrt_transfer_wait.
  void recordSideWait(SideThread side, bool async, int64_t ns);

  struct Snapshot {
    std::map<std::string, OpStats, std::less<>> ops;
    std::array<CollectiveStats, kNumCollectiveKinds> collectives{};
    SideThreadTime comm;
    std::array<TransferStats, kNumTransferKinds> transfers{};
    SideThreadTime offload;
    /// Device memory (asrt_alloc).
    int64_t currentBytes = 0;
    int64_t peakBytes = 0;
    /// Host memory (hostAlloc) and NVMe files.
    int64_t hostCurrentBytes = 0;
    int64_t hostPeakBytes = 0;
    int64_t nvmeBytes = 0;

    /// Whether the run kept anything in host memory or NVMe files or moved
    /// anything there: the reports then show offload lines.
    bool usedOffload() const;
  };
  Snapshot snapshot() const;

  /// Clears the op, collective and transfer counters; memory counts stay,
  /// since live buffers are still live.
  void resetCounters();
  /// Puts back the op, collective and transfer counters of `kept` (taken
  /// earlier); memory counts stay, so that the peak of what ran since
  /// counts. The driver keeps the evaluation steps' work out of the
  /// training steps' per-step figures this way.
  void restoreCounters(const Snapshot &kept);

private:
  mutable std::mutex mutex;
  Snapshot counters;
};

/// One in-run evaluation (--eval-every): after which training step, the
/// mean loss of its batches, their time and the bytes its collectives sent
/// from this rank (all kinds).
struct EvaluationInfo {
  int64_t afterStep = 0;
  int64_t batches = 0;
  double meanLoss = 0.0;
  double ms = 0.0;
  int64_t bytesSent = 0;
  /// Before the run's first step (--eval-at-start): a baseline, not a
  /// candidate for the best.
  bool atStart = false;
};

/// One training step's figures, for --stats-json's per-step series.
struct StepSample {
  int64_t step = 0;
  double loss = 0.0;
  double ms = 0.0;
  /// The scheduled rate (--lr-schedule); NaN when the step has none.
  double lr = NAN;
  /// The gradient norm before clipping; NaN for a step that does not clip.
  double gradNorm = NAN;
};

/// What a run adds to the counters in its reports.
struct RunInfo {
  std::string step;
  std::string strategy;
  std::string grid;
  std::string backend;
  int worldSize = 1;
  int rank = 0;
  int64_t steps = 0;
  double meanStepMs = 0.0;
  /// The median step time after the first step, which alone pays one-time
  /// setup (first-touch allocation, BLAS or cuBLAS initialisation, NCCL's
  /// group communicators): the steady state a benchmark compares. The one
  /// step's time when only one ran.
  double steadyStepMs = 0.0;
  /// FLOPs of this rank's step (the manifest's `flops`); 0: unknown.
  int64_t stepFlops = 0;
  /// Tokens of the global batch a step trains on (the elements of its
  /// integer input, token ids); 0: a step without one.
  int64_t stepTokens = 0;
  /// Samples (rows) of the global batch; 0: unknown.
  int64_t stepSamples = 0;
  /// The peak FLOP/s of one rank that MFU is measured against, and what it
  /// is ("measured: ..." or a device file's figure); 0: no MFU.
  double peakFlopPerS = 0.0;
  std::string peakSource;
  /// Every step this run ran, in order (resumed runs: from the first step
  /// after the checkpoint).
  std::vector<StepSample> series;
  /// An evaluation step (compiled --forward-only: no result updates an
  /// argument): the summary gives the mean of its losses.
  bool evaluation = false;
  double meanLoss = 0.0;
  /// The in-run evaluations of a training run, in order.
  std::vector<EvaluationInfo> evaluations;
};

/// steadyStepMs of the step times `ms`, in step order.
double steadyStepMs(std::vector<double> ms);

/// A few human-readable lines: for an evaluation step the mean loss over its
/// steps; steps, mean time per step, peak memory, the
/// step's FLOPs and the rate they ran at and the tokens per second of a
/// language model (at the steady step time), bytes
/// sent per step for each collective kind, exposed and asynchronous
/// communication time per step; when the run offloads, the host memory peak
/// and NVMe bytes, the bytes and time per step of each transfer kind, and
/// the exposed and asynchronous offload time per step.
void writeSummary(std::ostream &os, const Stats::Snapshot &stats,
                  const RunInfo &run);
/// The same and the per-op times, as one JSON object.
void writeStatsJson(std::ostream &os, const Stats::Snapshot &stats,
                    const RunInfo &run);

/// "160 B", "79.9 MiB": bytes in the largest binary unit below them.
std::string formatBytes(int64_t bytes);

} // namespace autoshard::rt
