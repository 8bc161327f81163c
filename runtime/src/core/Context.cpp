// asrt_context, fatal errors, op timing and the ABI's memory functions.
#include "core/Context.h"
#include "io/Manifest.h"
#include "core/OpenBucket.h"
#include "core/CommStream.h"
#include "memory/Device.h"
#include "core/InFlightBuckets.h"
#include "memory/InFlightTransfers.h"
#include "stats/Stats.h"
#include "core/ThreadPool.h"
#include "stats/Trace.h"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

namespace autoshard::rt {

struct AllocationTable {
  std::mutex mutex;
  std::unordered_map<void *, int64_t> live;
};

namespace {
std::atomic<FatalAbortHook> fatalAbortHook{nullptr};
/// Slots for fatal()'s cleanups, filled in order, each taken (emptied) by
/// the fatal() that runs it.
constexpr int kFatalCleanupSlots = 4;
std::atomic<FatalCleanupHook> fatalCleanupHooks[kFatalCleanupSlots];
std::atomic<int> fatalRank{0};
} // namespace

void setFatalAbortHook(FatalAbortHook hook) { fatalAbortHook.store(hook); }

void setFatalRank(int rank) { fatalRank.store(rank); }

void addFatalCleanupHook(FatalCleanupHook hook) {
  for (std::atomic<FatalCleanupHook> &slot : fatalCleanupHooks) {
    FatalCleanupHook expected = nullptr;
    if (slot.load() == hook ||
        slot.compare_exchange_strong(expected, hook))
      return;
  }
  // More kinds of cleanup than slots is a programming error, but fatal()
  // must not be where it is found: the hook is dropped, loudly.
  std::fprintf(stderr,
               "autoshard runtime: no slot left for a fatal cleanup hook\n");
}

void fatal(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  int length = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string message(length > 0 ? static_cast<size_t>(length) : 0, '\0');
  if (length > 0)
    std::vsnprintf(message.data(), message.size() + 1, fmt, args);
  va_end(args);

  std::fflush(stdout);
  std::fprintf(stderr, "autoshard runtime error (rank %d): %s\n",
               fatalRank.load(), message.c_str());
  std::fflush(stderr);
  // Each once, in the order added: a cleanup that fails fatally must not
  // run itself again.
  for (std::atomic<FatalCleanupHook> &slot : fatalCleanupHooks)
    if (FatalCleanupHook cleanup = slot.exchange(nullptr))
      cleanup();
  if (FatalAbortHook hook = fatalAbortHook.load())
    hook(1);
  // _Exit, not exit: fatal() may run on a worker thread, where running
  // static destructors under the other threads' feet could crash or hang.
  std::_Exit(1);
}

/// The category of the ops whose work the compute lane runs (the others
/// issue and wait for collectives and transfers, timed on their threads).
static bool computeCategory(const char *category) {
  return std::strcmp(category, "compute") == 0;
}

OpTimer::OpTimer(asrt_context *ctx, const char *op, const char *category)
    : ctx(ctx), op(op), category(category),
      start(std::chrono::steady_clock::now()) {
  if (ctx && ctx->deviceOpTimes() && computeCategory(category))
    deviceStart = ctx->device->markTime(Lane::Compute);
}

OpTimer::~OpTimer() {
  if (!ctx || !ctx->stats)
    return;
  if (deviceStart)
    ctx->addPendingDeviceTime(
        {op, std::move(deviceStart), ctx->device->markTime(Lane::Compute)});
  auto end = std::chrono::steady_clock::now();
  ctx->stats->recordOp(
      op, std::chrono::duration_cast<std::chrono::nanoseconds>(end - start)
              .count());
  // The one test tracing costs when it is off.
  if (Trace *trace = ctx->trace()) {
    auto ns = [](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(
                 t.time_since_epoch())
          .count();
    };
    TraceEvent e;
    e.name = op;
    e.category = category;
    e.track = TraceTrack::Main;
    e.startNs = ns(start);
    e.endNs = ns(end);
    if (streamSeq > 0)
      e.seq = static_cast<int64_t>(streamSeq);
    if (streamHandle > 0)
      e.handle = streamHandle;
    e.site = ctx->currentOpSite();
    trace->record(e);
  }
}

namespace {

/// asrt_alloc and hostAlloc: a buffer of the context's device (device
/// memory, or host memory when `host`) recorded in `table`. `what` names
/// the caller in errors; the caller counts the bytes.
void *allocateIn(asrt_context *ctx, AllocationTable &table, bool host,
                 const char *what, int64_t bytes) {
  if (bytes < 0)
    fatal("%s: size %" PRId64 " bytes is negative", what, bytes);
  // A zero-byte request still gets a distinct, freeable pointer.
  int64_t request = bytes == 0 ? 1 : bytes;
  Device &device = *ctx->device;
  void *ptr =
      host ? device.allocateHost(request) : device.allocate(request);
  if (!ptr) {
    Stats::Snapshot now = ctx->stats->snapshot();
    std::string planned =
        !host && ctx->plannedPeakBytes() > 0
            ? "; the compiler planned a peak of " +
                  std::to_string(ctx->plannedPeakBytes()) + " bytes"
            : std::string();
    fatal("%s: out of memory allocating %" PRId64 " bytes of %s memory on %s "
          "(%" PRId64 " bytes already allocated by this rank, peak so far %"
          PRId64 "%s)",
          what, bytes, host ? "host" : "device", device.name(),
          host ? now.hostCurrentBytes : now.currentBytes,
          host ? now.hostPeakBytes : now.peakBytes, planned.c_str());
  }
  std::lock_guard<std::mutex> lock(table.mutex);
  table.live.emplace(ptr, bytes);
  return ptr;
}

/// Removes `ptr` from `table` and returns its size; the caller releases it.
int64_t forget(AllocationTable &table, const char *what,
               const char *allocator, void *ptr) {
  std::lock_guard<std::mutex> lock(table.mutex);
  auto it = table.live.find(ptr);
  if (it == table.live.end())
    fatal("%s: %p was not returned by %s on this context (or was already "
          "freed)",
          what, ptr, allocator);
  int64_t bytes = it->second;
  table.live.erase(it);
  return bytes;
}

} // namespace

void *hostAlloc(asrt_context *ctx, int64_t bytes) {
  if (!ctx)
    fatal("hostAlloc: context is null");
  void *ptr =
      allocateIn(ctx, *ctx->hostAllocations, /*host=*/true, "hostAlloc", bytes);
  ctx->stats->recordHostAlloc(bytes);
  return ptr;
}

void hostFree(asrt_context *ctx, void *ptr) {
  if (!ptr)
    return;
  if (!ctx)
    fatal("hostFree: context is null");
  ctx->stats->recordHostFree(
      forget(*ctx->hostAllocations, "hostFree", "hostAlloc", ptr));
  ctx->device->releaseHost(ptr);
}

} // namespace autoshard::rt

using autoshard::rt::AllocationTable;
using autoshard::rt::fatal;

asrt_context::asrt_context()
    : device(autoshard::rt::makeHostDevice()), stats(std::make_unique<autoshard::rt::Stats>()),
      allocations(std::make_unique<AllocationTable>()),
      bucket(std::make_unique<autoshard::rt::OpenBucket>()),
      stream(std::make_unique<autoshard::rt::CommStream>(*stats)),
      inflight(std::make_unique<autoshard::rt::InFlightBuckets>()),
      offloadStream(std::make_unique<autoshard::rt::CommStream>(
          *stats, autoshard::rt::StreamRole::Offload)),
      transfers(std::make_unique<autoshard::rt::InFlightTransfers>()),
      computePool(std::make_unique<autoshard::rt::ThreadPool>(1)),
      hostAllocations(std::make_unique<AllocationTable>()) {}

asrt_context::~asrt_context() {
  // The communication and offload threads first: they may still be
  // writing into buckets' and transfers' buffers (each runs what is
  // queued, then stops).
  stream.reset();
  offloadStream.reset();
  // Buffers the owner forgot are released here so a context never leaks.
  for (auto &[ptr, bytes] : allocations->live)
    device->release(ptr);
  for (auto &[ptr, bytes] : hostAllocations->live)
    device->releaseHost(ptr);
}

void asrt_context::setTrace(autoshard::rt::Trace *t) {
  stream->setTrace(t);
  offloadStream->setTrace(t);
  trace_ = t;
}

void asrt_context::setKernelThreads(int threads) {
  if (threads < 1)
    fatal("kernel threads: %d must be at least 1", threads);
  kernelThreads_ = threads;
  sizeComputePool();
}

void asrt_context::setOptimizerThreads(int threads) {
  if (threads < 1)
    fatal("optimizer threads: %d must be at least 1", threads);
  optimizerThreads_ = threads;
  sizeComputePool();
}

void asrt_context::sizeComputePool() {
  int threads = std::max(kernelThreads_, optimizerThreads_);
  // The old pool's workers are joined here, between steps.
  if (threads != computePool->threads())
    computePool = std::make_unique<autoshard::rt::ThreadPool>(threads);
}

void asrt_context::resolveDeviceOpTimes() {
  for (const autoshard::rt::PendingDeviceTime &t : pendingDeviceTimes_)
    stats->recordDeviceOp(t.op, device->elapsedNs(t.begin, t.end));
  // The marks go back to the device's pool for the next step.
  pendingDeviceTimes_.clear();
}

extern "C" void *asrt_alloc(asrt_context *ctx, int64_t bytes) {
  if (!ctx)
    fatal("asrt_alloc: context is null");
  void *ptr = autoshard::rt::allocateIn(ctx, *ctx->allocations, /*host=*/false,
                                        "asrt_alloc", bytes);
  // Requested bytes, not rounded ones: that is what the compiler's memory
  // plan counts, so planned and measured peaks stay comparable.
  ctx->stats->recordAlloc(bytes);
  return ptr;
}

const autoshard::rt::OpSite *asrt_context::currentOpSite() const {
  return sites_ && currentSite_ >= 0 &&
                 static_cast<size_t>(currentSite_) < sites_->size()
             ? &(*sites_)[static_cast<size_t>(currentSite_)]
             : nullptr;
}

extern "C" void asrt_op_site(asrt_context *ctx, int32_t site) {
  if (!ctx)
    fatal("asrt_op_site: context is null");
  ctx->setCurrentSite(site);
}

extern "C" void *asrt_arena(asrt_context *ctx) {
  if (!ctx)
    fatal("asrt_arena: context is null");
  if (!ctx->arena())
    fatal("asrt_arena: this context has no arena; the driver allocates the "
          "one the step's manifest asks for (memory record, arena=BYTES)");
  return ctx->arena();
}

extern "C" void asrt_free(asrt_context *ctx, void *ptr) {
  if (!ptr)
    return;
  if (!ctx)
    fatal("asrt_free: context is null");
  ctx->stats->recordFree(
      autoshard::rt::forget(*ctx->allocations, "asrt_free", "asrt_alloc", ptr));
  ctx->device->release(ptr);
}

extern "C" void asrt_copy(asrt_context *ctx, void *dst, const void *src,
                          int64_t bytes) {
  autoshard::rt::OpTimer timer(ctx, "copy");
  if (bytes < 0)
    fatal("asrt_copy: size %" PRId64 " bytes is negative", bytes);
  if (dst == src || bytes == 0)
    return;
  if (!dst || !src)
    fatal("asrt_copy: %s pointer is null for a copy of %" PRId64 " bytes",
          dst ? "source" : "destination", bytes);
  // Overlap allowed: generated code may copy between views of one arena.
  ctx->device->copy(autoshard::rt::Lane::Compute, dst, src, bytes);
}

extern "C" void asrt_load_constant(asrt_context *ctx, void *dst,
                                   const void *src_host, int64_t bytes) {
  autoshard::rt::OpTimer timer(ctx, "load_constant");
  if (bytes < 0)
    fatal("asrt_load_constant: size %" PRId64 " bytes is negative", bytes);
  if (bytes == 0)
    return;
  if (!dst || !src_host)
    fatal("asrt_load_constant: %s pointer is null for a constant of %" PRId64
          " bytes",
          dst ? "source" : "destination", bytes);
  // The constant is read-only data of the generated object: host memory.
  ctx->device->toDevice(autoshard::rt::Lane::Compute, dst, src_host, bytes);
}
