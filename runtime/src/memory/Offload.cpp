// The ABI's offload calls: host arena, host/device copies, NVMe reads/writes,
// synchronous and asynchronous, all run on the context's offload stream.
#include "autoshard/rt/abi.h"
#include "core/CommStream.h"
#include "core/Context.h"
#include "core/StopHook.h"
#include "memory/Device.h"
#include "memory/InFlightTransfers.h"
#include "memory/NvmeStore.h"
#include "stats/Stats.h"

#include <cinttypes>
#include <string>

using autoshard::rt::Device;
using autoshard::rt::fatal;
using autoshard::rt::Fence;
using autoshard::rt::InFlightTransfer;
using autoshard::rt::Lane;
using autoshard::rt::OpTimer;
using autoshard::rt::StreamOpInfo;
using autoshard::rt::Transfer;
using autoshard::rt::TransferKind;

namespace {

bool isNvme(TransferKind kind) {
  return kind == TransferKind::NvmeRead || kind == TransferKind::NvmeWrite;
}

autoshard::rt::NvmeStore &storeOf(asrt_context *ctx, const char *what) {
  if (!ctx->nvme())
    fatal("%s: this context has no NVMe store; the driver makes one under "
          "--offload-dir when the step's manifest has memory=nvme arguments",
          what);
  return *ctx->nvme();
}

/// Every check a transfer passes before it is issued to the offload
/// stream, on the calling thread, so that misuse is reported where it
/// happens; `what` names the call in the messages. The I/O errors only the
/// transfer itself can find come from the offload thread.
void checkTransfer(asrt_context *ctx, const char *what, const Transfer &t) {
  if (!isNvme(t.kind)) {
    if (t.bytes < 0)
      fatal("%s: size %" PRId64 " bytes is negative", what, t.bytes);
    if (t.bytes > 0 && (!t.dst || !t.src))
      fatal("%s: %s pointer is null for a copy of %" PRId64 " bytes", what,
            t.dst ? "source" : "destination", t.bytes);
    return;
  }
  autoshard::rt::NvmeStore &store = storeOf(ctx, what);
  bool read = t.kind == TransferKind::NvmeRead;
  if (t.bytes > 0 && !(read ? t.dst : t.src))
    fatal(read ? "%s: the destination pointer is null for argument %d's "
                 "%" PRId64 " bytes"
               : "%s: the source pointer is null for argument %d's %" PRId64
                 " bytes",
          what, t.arg, t.bytes);
  if (autoshard::rt::Status s = store.check(t.arg, t.bytes); !s)
    fatal("%s: %s", what, s.message().c_str());
}

/// What the offload stream's messages, statistics and trace say about `t`.
StreamOpInfo transferInfo(asrt_context *ctx, const Transfer &t,
                          int64_t handle) {
  StreamOpInfo info;
  info.name = autoshard::rt::transferKindName(t.kind);
  info.bytes = t.bytes;
  info.handle = handle;
  if (isNvme(t.kind)) {
    info.arg = t.arg;
    // The store's own string: it outlives every transfer.
    info.argName = ctx->nvme()->nameOf(t.arg).c_str();
  }
  return info;
}

/// Runs on the offload thread: moves the bytes, after the compute lane's
/// work queued before the transfer was issued (`issued`), and counts them
/// under the transfer's kind. Done when it returns. `caller` names the ABI
/// call in an I/O error.
void runTransfer(asrt_context *ctx, const Transfer &t, const Fence &issued,
                 const StreamOpInfo &info, const char *caller) {
  int64_t start = autoshard::rt::steadyClockNs();
  autoshard::rt::Status status;
  Device &device = *ctx->device;
  switch (t.kind) {
  case TransferKind::ToHost:
    device.waitFence(Lane::Offload, issued);
    device.toHost(Lane::Offload, t.dst, t.src, t.bytes);
    break;
  case TransferKind::ToDevice:
    // After the kernels that last read the destination, too.
    device.waitFence(Lane::Offload, issued);
    device.toDevice(Lane::Offload, t.dst, t.src, t.bytes);
    break;
  case TransferKind::NvmeRead:
  case TransferKind::NvmeWrite:
    // The file I/O is the host's, so the host waits for the compute lane's
    // work queued before the transfer (a copy into or out of the host
    // buffer, on a GPU) before it touches the buffer.
    device.waitFence(Lane::Offload, issued);
    device.synchronize(Lane::Offload);
    status = t.kind == TransferKind::NvmeRead
                 ? ctx->nvme()->read(t.arg, t.dst, t.bytes)
                 : ctx->nvme()->write(t.arg, t.src, t.bytes);
    break;
  }
  if (!status) {
    if (info.async())
      fatal("%s: %s failed on the offload thread: %s", caller,
            autoshard::rt::describeTransfer(info).c_str(),
            status.message().c_str());
    fatal("%s: %s", caller, status.message().c_str());
  }
  ctx->stats->recordTransfer(t.kind, t.bytes,
                             autoshard::rt::steadyClockNs() - start);
}

/// The hidden test hook: a rank that hangs at its first offload wait of
/// training step STEP (--stop-rank-at STEP:RANK:offload), once.
void stopIfDue(asrt_context *ctx) {
  const autoshard::rt::StopHook *hook = ctx->offloadStop();
  if (hook && hook->due(autoshard::rt::StopPoint::Offload,
                        ctx->randomStep() + 1, hook->rank)) {
    ctx->setOffloadStop(nullptr);
    autoshard::rt::stopThisRank();
  }
}

/// The synchronous calls: checked here, run on the offload stream behind
/// the transfers in flight, waited for. The main thread's time blocked in
/// them is exposed offload time.
void runSynchronous(asrt_context *ctx, OpTimer &timer, const char *fn,
                    const Transfer &t) {
  if (!ctx)
    fatal("%s: context is null", fn);
  checkTransfer(ctx, fn, t);
  StreamOpInfo info = transferInfo(ctx, t, 0);
  Fence issued = ctx->device->fence(Lane::Compute);
  stopIfDue(ctx);
  timer.setStreamOp(ctx->offloadStream->runBlocking(
      fn, info, [&] { runTransfer(ctx, t, issued, info, fn); }));
}

/// The offload thread's work for an asrt_transfer_start transfer.
void runInFlight(void *arg) {
  auto *slot = static_cast<InFlightTransfer *>(arg);
  runTransfer(slot->ctx, slot->transfer, slot->issued, slot->info,
              "asrt_transfer_start");
}

} // namespace

extern "C" void *asrt_host_arena(asrt_context *ctx) {
  if (!ctx)
    fatal("asrt_host_arena: context is null");
  if (!ctx->hostArena())
    fatal("asrt_host_arena: this context has no host arena; the driver "
          "allocates the one the step's manifest asks for (memory record, "
          "host_arena=BYTES)");
  return ctx->hostArena();
}

extern "C" void asrt_copy_to_host(asrt_context *ctx, void *dst_host,
                                  const void *src_device, int64_t bytes) {
  OpTimer timer(ctx, "copy_to_host", "transfer");
  runSynchronous(ctx, timer, "asrt_copy_to_host",
                 {TransferKind::ToHost, -1, dst_host, src_device, bytes});
}

extern "C" void asrt_copy_to_device(asrt_context *ctx, void *dst_device,
                                    const void *src_host, int64_t bytes) {
  OpTimer timer(ctx, "copy_to_device", "transfer");
  runSynchronous(ctx, timer, "asrt_copy_to_device",
                 {TransferKind::ToDevice, -1, dst_device, src_host, bytes});
}

/// The NVMe store's index of the calling step's argument `argIndex`: its
/// own, or, in a training binary's evaluation step, the training step's
/// argument it shares (Context::nvmeArgIndices).
static int32_t storeIndex(const asrt_context *ctx, int32_t argIndex) {
  const std::vector<int> *map = ctx ? ctx->nvmeArgIndices() : nullptr;
  if (!map || argIndex < 0 || argIndex >= static_cast<int32_t>(map->size()))
    return argIndex;
  return (*map)[argIndex];
}

extern "C" void asrt_nvme_read(asrt_context *ctx, int32_t arg_index,
                               void *dst_host, int64_t bytes) {
  OpTimer timer(ctx, "nvme_read", "transfer");
  runSynchronous(ctx, timer, "asrt_nvme_read",
                 {TransferKind::NvmeRead, storeIndex(ctx, arg_index), dst_host,
                  nullptr, bytes});
}

extern "C" void asrt_nvme_write(asrt_context *ctx, int32_t arg_index,
                                const void *src_host, int64_t bytes) {
  OpTimer timer(ctx, "nvme_write", "transfer");
  runSynchronous(ctx, timer, "asrt_nvme_write",
                 {TransferKind::NvmeWrite, storeIndex(ctx, arg_index), nullptr,
                  src_host, bytes});
}

extern "C" int64_t asrt_transfer_start(asrt_context *ctx, int32_t kind,
                                       int32_t arg_index, void *dst,
                                       const void *src, int64_t bytes) {
  const char *fn = "asrt_transfer_start";
  if (!ctx)
    fatal("%s: context is null", fn);
  OpTimer timer(ctx, "transfer_start", "issue");
  Transfer t;
  switch (kind) {
  case ASRT_TRANSFER_TO_HOST:
    t.kind = TransferKind::ToHost;
    break;
  case ASRT_TRANSFER_TO_DEVICE:
    t.kind = TransferKind::ToDevice;
    break;
  case ASRT_TRANSFER_NVME_READ:
    t.kind = TransferKind::NvmeRead;
    break;
  case ASRT_TRANSFER_NVME_WRITE:
    t.kind = TransferKind::NvmeWrite;
    break;
  default:
    fatal("%s: transfer kind %d is none of ASRT_TRANSFER_TO_HOST (0), "
          "ASRT_TRANSFER_TO_DEVICE (1), ASRT_TRANSFER_NVME_READ (2) and "
          "ASRT_TRANSFER_NVME_WRITE (3)",
          fn, kind);
  }
  // A copy ignores arg_index (-1 by convention).
  t.arg = isNvme(t.kind) ? storeIndex(ctx, arg_index) : -1;
  t.dst = dst;
  t.src = src;
  t.bytes = bytes;
  // "asrt_transfer_start (nvme_read)": the synchronous call's checks and
  // messages, under this call's name.
  std::string what =
      std::string(fn) + " (" + autoshard::rt::transferKindName(t.kind) + ")";
  // An NVMe transfer has one host buffer; a pointer on the other side is a
  // mix-up of the two directions, not something to ignore.
  if (t.kind == TransferKind::NvmeRead && src)
    fatal("%s: a read from argument %d's NVMe file takes no source pointer "
          "(src must be null; the file is the source)",
          what.c_str(), arg_index);
  if (t.kind == TransferKind::NvmeWrite && dst)
    fatal("%s: a write to argument %d's NVMe file takes no destination "
          "pointer (dst must be null; the file is the destination)",
          what.c_str(), arg_index);
  checkTransfer(ctx, what.c_str(), t);

  InFlightTransfer &slot = ctx->transfers->start();
  slot.transfer = t;
  slot.ctx = ctx;
  slot.info = transferInfo(ctx, t, slot.handle);
  return issueOnStream(*ctx->offloadStream, timer, &runInFlight, slot);
}

extern "C" void asrt_transfer_wait(asrt_context *ctx, int64_t handle) {
  const char *fn = "asrt_transfer_wait";
  if (!ctx)
    fatal("%s: context is null", fn);
  OpTimer timer(ctx, "transfer_wait", "wait");
  InFlightTransfer &slot = inFlightSlot(*ctx->transfers, handle, fn);
  stopIfDue(ctx);
  waitOnStream(*ctx->offloadStream, timer, fn, slot);
  ctx->transfers->release(slot);
}
