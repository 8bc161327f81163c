// The ABI's offload calls: host arena, host/device copies, NVMe reads/writes.
#include "autoshard/rt/abi.h"
#include "core/Context.h"
#include "core/NvmeStore.h"
#include "core/Stats.h"
#include "core/Trace.h"

#include <chrono>
#include <cinttypes>
#include <cstring>

using autoshard::rt::fatal;
using autoshard::rt::OpTimer;
using autoshard::rt::TransferKind;

namespace {

using Clock = std::chrono::steady_clock;

int64_t nanos(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             t.time_since_epoch())
      .count();
}

/// Counts one transfer and, while tracing, records it on the offload track.
/// Every transfer is synchronous for now: it lies inside its ABI call's
/// "transfer" event on the main thread's track.
void recordTransfer(asrt_context *ctx, TransferKind kind, int64_t bytes,
                    int32_t arg, Clock::time_point start,
                    Clock::time_point end) {
  ctx->stats->recordTransfer(kind, bytes, nanos(end) - nanos(start));
  if (autoshard::rt::Trace *trace = ctx->trace) {
    autoshard::rt::TraceEvent e;
    e.name = autoshard::rt::transferKindName(kind);
    e.category = "offload";
    e.track = autoshard::rt::TraceTrack::Offload;
    e.startNs = nanos(start);
    e.endNs = nanos(end);
    e.bytes = bytes;
    e.arg = arg;
    trace->record(e);
  }
}

/// asrt_copy_to_host and asrt_copy_to_device: on the CPU backend device
/// and host memory are both host memory, so a copy is a memcpy that counts
/// as offload traffic.
void copyAcross(asrt_context *ctx, const char *what, TransferKind kind,
                void *dst, const void *src, int64_t bytes) {
  if (!ctx)
    fatal("%s: context is null", what);
  if (bytes < 0)
    fatal("%s: size %" PRId64 " bytes is negative", what, bytes);
  if (bytes > 0 && (!dst || !src))
    fatal("%s: %s pointer is null for a copy of %" PRId64 " bytes", what,
          dst ? "source" : "destination", bytes);
  auto start = Clock::now();
  // memmove: on the CPU backend nothing stops generated code from copying
  // between overlapping views; on a GPU the two sides never overlap.
  if (bytes > 0 && dst != src)
    std::memmove(dst, src, static_cast<size_t>(bytes));
  recordTransfer(ctx, kind, bytes, -1, start, Clock::now());
}

autoshard::rt::NvmeStore &storeOf(asrt_context *ctx, const char *what) {
  if (!ctx)
    fatal("%s: context is null", what);
  if (!ctx->nvme)
    fatal("%s: this context has no NVMe store; the driver makes one under "
          "--offload-dir when the step's manifest has memory=nvme arguments",
          what);
  return *ctx->nvme;
}

} // namespace

extern "C" void *asrt_host_arena(asrt_context *ctx) {
  if (!ctx)
    fatal("asrt_host_arena: context is null");
  if (!ctx->hostArena)
    fatal("asrt_host_arena: this context has no host arena; the driver "
          "allocates the one the step's manifest asks for (memory record, "
          "host_arena=BYTES)");
  return ctx->hostArena;
}

extern "C" void asrt_copy_to_host(asrt_context *ctx, void *dst_host,
                                  const void *src_device, int64_t bytes) {
  OpTimer timer(ctx, "copy_to_host", "transfer");
  copyAcross(ctx, "asrt_copy_to_host", TransferKind::ToHost, dst_host,
             src_device, bytes);
}

extern "C" void asrt_copy_to_device(asrt_context *ctx, void *dst_device,
                                    const void *src_host, int64_t bytes) {
  OpTimer timer(ctx, "copy_to_device", "transfer");
  copyAcross(ctx, "asrt_copy_to_device", TransferKind::ToDevice, dst_device,
             src_host, bytes);
}

extern "C" void asrt_nvme_read(asrt_context *ctx, int32_t arg_index,
                               void *dst_host, int64_t bytes) {
  OpTimer timer(ctx, "nvme_read", "transfer");
  autoshard::rt::NvmeStore &store = storeOf(ctx, "asrt_nvme_read");
  if (!dst_host && bytes > 0)
    fatal("asrt_nvme_read: the destination pointer is null for argument "
          "%d's %" PRId64 " bytes",
          arg_index, bytes);
  auto start = Clock::now();
  if (autoshard::rt::Status s = store.read(arg_index, dst_host, bytes); !s)
    fatal("asrt_nvme_read: %s", s.message().c_str());
  recordTransfer(ctx, TransferKind::NvmeRead, bytes, arg_index, start,
                 Clock::now());
}

extern "C" void asrt_nvme_write(asrt_context *ctx, int32_t arg_index,
                                const void *src_host, int64_t bytes) {
  OpTimer timer(ctx, "nvme_write", "transfer");
  autoshard::rt::NvmeStore &store = storeOf(ctx, "asrt_nvme_write");
  if (!src_host && bytes > 0)
    fatal("asrt_nvme_write: the source pointer is null for argument %d's "
          "%" PRId64 " bytes",
          arg_index, bytes);
  auto start = Clock::now();
  if (autoshard::rt::Status s = store.write(arg_index, src_host, bytes); !s)
    fatal("asrt_nvme_write: %s", s.message().c_str());
  recordTransfer(ctx, TransferKind::NvmeWrite, bytes, arg_index, start,
                 Clock::now());
}
