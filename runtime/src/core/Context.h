// The runtime context behind the ABI's opaque asrt_context.
#pragma once

#include "autoshard/rt/abi.h"
#include "memory/Device.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace autoshard::rt {

class Comm;
struct Stats;
struct AllocationTable;
class OpenBucket;
class CommStream;
class InFlightBuckets;
class InFlightTransfers;
class Trace;
class NvmeStore;
class ThreadPool;
struct OpSite;
struct StopHook;

/// Prints "autoshard runtime error (rank R): <message>" to stderr and ends
/// the process (and, under MPI, every rank) with a non-zero exit status.
/// The runtime's only way to fail from inside an ABI call.
[[noreturn]] void fatal(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/// How fatal() ends the job once it has printed. The MPI layer installs one
/// that calls MPI_Abort, so that one failing rank does not leave the others
/// blocked in a collective; without a hook fatal() exits the process.
using FatalAbortHook = void (*)(int exitCode);
void setFatalAbortHook(FatalAbortHook hook);
/// The rank fatal() names in its message (0 until set).
void setFatalRank(int rank);
/// Best-effort cleanup fatal() runs after printing and before ending the
/// job, each hook once, in the order added: the NCCL communicator aborts
/// its communicators (ncclCommAbort, so that no collective is left
/// running on the GPU), the NVMe store removes its files, which may be
/// large, even when a step fails. Adding a hook twice adds it once; a few
/// slots.
using FatalCleanupHook = void (*)();
void addFatalCleanupHook(FatalCleanupHook hook);

/// Host memory: what memory=host arguments and the host arena live in
/// (pinned host memory on a GPU backend; plain memory on the CPU backend).
/// Like asrt_alloc (64-byte aligned, never null, exhaustion fatal) but
/// counted apart from device memory (Stats' host bytes), so that the
/// device peak the compiler plans excludes it. hostFree(null) does nothing;
/// a pointer hostAlloc did not return is fatal.
void *hostAlloc(asrt_context *ctx, int64_t bytes);
void hostFree(asrt_context *ctx, void *ptr);

/// Times one ABI call and adds it to the context's per-op statistics and,
/// while the context traces, records it as an event on the main thread's
/// track. `op` and `category` are string literals; the categories are
/// Trace's ("compute", "collective", "issue", "wait").
class OpTimer {
public:
  OpTimer(asrt_context *ctx, const char *op, const char *category = "compute");
  ~OpTimer();
  OpTimer(const OpTimer &) = delete;
  OpTimer &operator=(const OpTimer &) = delete;

  /// Ties the call's trace event to the collective it issued or waited for
  /// on the communication stream (its sequence number, and
  /// asrt_bucket_start's handle when there is one).
  void setStreamOp(uint64_t seq, int64_t handle = 0) {
    streamSeq = seq;
    streamHandle = handle;
  }

private:
  asrt_context *ctx;
  const char *op;
  const char *category;
  uint64_t streamSeq = 0;
  int64_t streamHandle = 0;
  std::chrono::steady_clock::time_point start;
  /// The compute lane's mark before the op's work, when the context times
  /// ops on the device.
  TimeMark deviceStart;
};

/// An op's work on the compute lane between two device marks, waiting for
/// the lane to pass them (asrt_context::resolveDeviceOpTimes).
struct PendingDeviceTime {
  const char *op;
  TimeMark begin, end;
};

} // namespace autoshard::rt

/// Owned by the driver (or a test); the generated code only passes it on.
struct asrt_context {
  asrt_context();
  ~asrt_context();
  asrt_context(const asrt_context &) = delete;
  asrt_context &operator=(const asrt_context &) = delete;

  /// Where tensors live (asrt_alloc) and how the runtime moves bytes in it
  /// (memory/Device.h): host memory until a backend's initBackend installs
  /// its own (the CUDA backend's GPU), before anything is allocated.
  /// Declared first so that it outlives the streams and buffers below.
  std::unique_ptr<autoshard::rt::Device> device;
  /// The communicator `comm` points to when the context owns it (the
  /// driver's): destroyed after the communication thread has stopped and
  /// before the device its buffers live in. (A shared_ptr, whose deleter
  /// the owner's code supplies, keeps core free of the communication
  /// library.)
  std::shared_ptr<autoshard::rt::Comm> ownedComm;
  /// Null in single-process tests; collectives then act on a group of one.
  autoshard::rt::Comm *comm = nullptr;
  std::unique_ptr<autoshard::rt::Stats> stats;
  /// Live asrt_alloc buffers and their sizes, for asrt_free's accounting and
  /// its check that a pointer came from asrt_alloc.
  std::unique_ptr<autoshard::rt::AllocationTable> allocations;
  /// asrt_bucket_*'s open bucket. Here rather than in the Comm because a
  /// context without one still runs buckets, as a group of one.
  std::unique_ptr<autoshard::rt::OpenBucket> bucket;
  /// The communication thread every collective runs on (its thread starts
  /// at the first collective), and the buckets asrt_bucket_start issued to
  /// it that asrt_wait has not waited yet. Declared after `stats`, which
  /// the stream records into, so that the stream is joined first.
  std::unique_ptr<autoshard::rt::CommStream> stream;
  std::unique_ptr<autoshard::rt::InFlightBuckets> inflight;
  /// The offload stream every transfer runs on (asrt_copy_to_host, ...,
  /// asrt_transfer_start): a thread of its own, apart from the
  /// communication thread, as a copy engine or an I/O queue is; and the
  /// transfers asrt_transfer_start started that asrt_transfer_wait has not
  /// waited yet. Also declared after `stats`.
  std::unique_ptr<autoshard::rt::CommStream> offloadStream;
  std::unique_ptr<autoshard::rt::InFlightTransfers> transfers;
  /// The rank's host compute threads: the calling thread and threads - 1
  /// workers, which start at the first loop large enough to split. Every
  /// CPU loop that splits (cpu/Parallel.h: the generic tensor kernels,
  /// dropout, the optimizer updates) runs on this one pool, each kind
  /// taking at most its own share of it: kernelThreads() for the kernels,
  /// optimizerThreads() for the updates; the pool has the larger of the
  /// two. One thread each (the default) keeps everything on the calling
  /// thread; change them only with setKernelThreads and
  /// setOptimizerThreads.
  std::unique_ptr<autoshard::rt::ThreadPool> computePool;
  /// Live hostAlloc buffers, apart from `allocations` (device memory).
  std::unique_ptr<autoshard::rt::AllocationTable> hostAllocations;

  /// The trace being recorded; null (the usual case) when not tracing.
  /// Owned by whoever enables it (the driver's --trace).
  autoshard::rt::Trace *trace() const { return trace_; }
  /// Starts (non-null) or stops (null) recording a trace of the calls on
  /// this context and of its communication and offload threads. Nothing
  /// may be in flight; between steps.
  void setTrace(autoshard::rt::Trace *t);

  /// The running step's `site` records (its manifest's, set by the driver
  /// for each step it runs; null: none), which the calls' trace events
  /// carry. Setting them forgets the site asrt_op_site named last.
  void setSites(const std::vector<autoshard::rt::OpSite> *sites) {
    sites_ = sites;
    currentSite_ = -1;
  }
  /// asrt_op_site: the site the calls that follow belong to (-1: none).
  void setCurrentSite(int32_t site) { currentSite_ = site; }
  /// The current site's record, or null when there is none.
  const autoshard::rt::OpSite *currentOpSite() const;

  /// The step's arena (asrt_arena) and host arena (asrt_host_arena),
  /// allocated by the driver with asrt_alloc and hostAlloc; null when the
  /// step has none.
  void *arena() const { return arena_; }
  void setArena(void *buffer) { arena_ = buffer; }
  void *hostArena() const { return hostArena_; }
  void setHostArena(void *buffer) { hostArena_ = buffer; }

  /// The compiler's planned device peak for this rank (the manifest's
  /// memory record, peak=), named by an out-of-memory error; 0 when the
  /// step has no plan.
  int64_t plannedPeakBytes() const { return plannedPeakBytes_; }
  void setPlannedPeakBytes(int64_t bytes) { plannedPeakBytes_ = bytes; }

  /// The files of memory=nvme arguments (asrt_nvme_read, asrt_nvme_write);
  /// owned by the driver, null when the step has none.
  autoshard::rt::NvmeStore *nvme() const { return nvme_; }
  void setNvme(autoshard::rt::NvmeStore *store) { nvme_ = store; }
  /// While a training binary's evaluation step runs (--eval-every): its
  /// argument indices mapped to the training step's, whose NVMe files its
  /// shared parameters are (-1: none). Null otherwise.
  const std::vector<int> *nvmeArgIndices() const { return nvmeArgIndices_; }
  void setNvmeArgIndices(const std::vector<int> *indices) {
    nvmeArgIndices_ = indices;
  }

  /// What asrt_dropout keys its masks on (data/Dropout.h), set by the
  /// driver: the run's --seed, the 0-based optimizer step being run (the
  /// global one, which a resumed run continues from its checkpoint) and
  /// this rank's index among the ranks that split the batch (every rank:
  /// the plans are data-parallel, rank r holding block r of the batch).
  uint64_t randomSeed() const { return randomSeed_; }
  int64_t randomStep() const { return randomStep_; }
  int64_t batchRank() const { return batchRank_; }
  void setRandomSeed(uint64_t seed) { randomSeed_ = seed; }
  void setRandomStep(int64_t step) { randomStep_ = step; }
  void setBatchRank(int64_t rank) { batchRank_ = rank; }

  /// The hidden test hook --stop-rank-at when its point is an offload
  /// wait and its rank this one (null otherwise): the offload calls stop
  /// this rank at the first wait of training step randomStep() + 1.
  const autoshard::rt::StopHook *offloadStop() const { return offloadStop_; }
  void setOffloadStop(const autoshard::rt::StopHook *hook) {
    offloadStop_ = hook;
  }

  /// The threads the CPU's generic tensor kernels and dropout split over
  /// (>= 1; the driver's --threads, the count OpenBLAS gets too). Not
  /// while an ABI call runs on this context.
  void setKernelThreads(int threads);
  int kernelThreads() const { return kernelThreads_; }
  /// The threads of the CPU optimizer updates (>= 1; the driver's
  /// --optimizer-threads). Not while an ABI call runs on this context.
  void setOptimizerThreads(int threads);
  int optimizerThreads() const { return optimizerThreads_; }

  /// Device-side op times (the driver's --device-op-times): when on, each
  /// compute op's OpTimer also marks the compute lane before and after the
  /// work it queues, and resolveDeviceOpTimes, called once the lane has
  /// passed the marks (after synchronize), adds the device's time between
  /// them to the op's statistics. Only where the device marks time (a
  /// GPU); on the CPU an op's host time is its work.
  bool deviceOpTimes() const { return deviceOpTimes_; }
  void setDeviceOpTimes(bool on) { deviceOpTimes_ = on; }
  /// An op's marks, queued by its OpTimer until resolveDeviceOpTimes.
  void addPendingDeviceTime(autoshard::rt::PendingDeviceTime pending) {
    pendingDeviceTimes_.push_back(std::move(pending));
  }
  /// Whether some op's marks wait for resolveDeviceOpTimes.
  bool hasPendingDeviceTimes() const { return !pendingDeviceTimes_.empty(); }
  void resolveDeviceOpTimes();

private:
  autoshard::rt::Trace *trace_ = nullptr;
  const std::vector<autoshard::rt::OpSite> *sites_ = nullptr;
  int32_t currentSite_ = -1;
  void *arena_ = nullptr;
  void *hostArena_ = nullptr;
  int64_t plannedPeakBytes_ = 0;
  autoshard::rt::NvmeStore *nvme_ = nullptr;
  const std::vector<int> *nvmeArgIndices_ = nullptr;
  uint64_t randomSeed_ = 0;
  int64_t randomStep_ = 0;
  int64_t batchRank_ = 0;
  const autoshard::rt::StopHook *offloadStop_ = nullptr;
  bool deviceOpTimes_ = false;
  std::vector<autoshard::rt::PendingDeviceTime> pendingDeviceTimes_;
  int kernelThreads_ = 1;
  int optimizerThreads_ = 1;
  /// Gives computePool the larger of the two shares.
  void sizeComputePool();
};
