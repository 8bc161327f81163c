// The ABI's collectives: validate, count ring bytes, then run on ctx->comm
// from the communication thread.
#include "comm/Comm.h"
#include "core/CommStream.h"
#include "core/Context.h"
#include "memory/Device.h"
#include "core/Dtype.h"
#include "core/FlatShard.h"
#include "stats/Stats.h"

#include <cstring>

using namespace autoshard::rt;

namespace {

/// Checks what every collective shares and returns the group size: 1 when
/// the context has no Comm (a single-process test) or the mask selects a
/// group of one.
int prepare(asrt_context *ctx, const char *op, const void *send,
            const void *recv, int64_t count, int32_t dtype, int32_t mask) {
  if (!ctx)
    fatal("%s: context is null", op);
  if (!isValidDtype(dtype))
    fatal("%s: dtype %d is not an asrt_dtype; expected 0..5 (%s)", op, dtype,
          dtypeList());
  if (count < 0)
    fatal("%s: count %lld is negative", op, static_cast<long long>(count));
  if (count > 0 && (!send || !recv))
    fatal("%s: %s buffer is null for %lld elements", op,
          send ? "receive" : "send", static_cast<long long>(count));
  if (!ctx->comm)
    return 1;
  if (Status s = checkGridMask(mask, ctx->comm->grid()); !s)
    fatal("%s: %s", op, s.message().c_str());
  return ctx->comm->groupSize(mask);
}

void checkReduceOp(const char *op, int32_t dtype, int32_t reduceOp) {
  if (Status s = checkReduction(dtype, reduceOp); !s)
    fatal("%s: %s", op, s.message().c_str());
}

/// A group of one: the result is the input (an average over one rank
/// included), so this is a copy, on the compute lane, unless the call is in
/// place.
void copyLocal(asrt_context *ctx, void *recv, const void *send, int64_t count,
               int32_t dtype) {
  if (recv != send && count > 0)
    ctx->device->copy(Lane::Compute, recv, send, count * dtypeSize(dtype));
}

/// Counts in Stats the bytes this rank sends when `kind` runs as a ring over
/// a full buffer of `fullCount` elements in a group of `n`, and describes
/// the call to the communication stream as `name`.
StreamOpInfo countCollective(asrt_context *ctx, const char *name,
                             CollectiveKind kind, int64_t fullCount,
                             int32_t dtype, int32_t mask, int64_t n) {
  StreamOpInfo info;
  info.name = name;
  info.dtype = static_cast<asrt_dtype>(dtype);
  info.mask = mask;
  info.groupSize = n;
  info.bytes = ringBytesSent(kind, fullCount, n, dtypeSize(dtype));
  ctx->stats->recordCollective(kind, info.bytes);
  return info;
}

/// Runs `collective` (a call on ctx->comm) on the communication thread,
/// after the asynchronous collectives in flight and after the compute
/// lane's work so far (which wrote its send buffer), and waits for it
/// within the collective timeout: when this returns, the result is in
/// place. Every collective goes through here, so that they run in issue
/// order on every rank.
template <typename Fn>
void runOnStream(asrt_context *ctx, OpTimer &timer, const char *op,
                 const StreamOpInfo &info, Fn &&collective) {
  Device &device = *ctx->device;
  Fence issued = device.fence(Lane::Compute);
  timer.setStreamOp(ctx->stream->runBlocking(op, info, [&] {
    device.waitFence(Lane::Comm, issued);
    collective();
    device.synchronize(Lane::Comm);
  }));
}

/// A group of one copies on the calling thread, after the collectives in
/// flight, whose order it must keep.
void copyLocalInOrder(asrt_context *ctx, const char *op,
                      const StreamOpInfo &info, void *recv, const void *send,
                      int64_t count, int32_t dtype) {
  ctx->stream->drain(op, info);
  copyLocal(ctx, recv, send, count, dtype);
}

/// Where this rank stands in a flat-shard collective: the layout over the
/// group and the index of the shard it holds.
struct ShardPlace {
  FlatShardLayout layout;
  int64_t index = 0;

  int64_t begin() const { return layout.begin(index); }
  int64_t valid() const { return layout.validCount(index); }
};

/// prepare() for the flat-shard functions, whose counts are the full
/// tensor's numel. Without a Comm the group is this rank alone.
ShardPlace prepareShards(asrt_context *ctx, const char *op, const void *in,
                         const void *out, int64_t numel, int32_t dtype,
                         int32_t mask) {
  int n = prepare(ctx, op, in, out, numel, dtype, mask);
  ShardPlace place;
  place.layout = FlatShardLayout{numel, n};
  place.index = ctx->comm ? ctx->comm->groupIndex(mask) : 0;
  return place;
}

/// The abi.h promise that a shard's padding is zero: optimizers and norms
/// run over whole shards, so stale padding would leak into real values.
void zeroPadding(asrt_context *ctx, void *shard, const ShardPlace &place,
                 int32_t dtype) {
  int64_t padding = place.layout.chunk() - place.valid();
  if (padding > 0)
    ctx->device->zero(Lane::Compute,
                      static_cast<char *>(shard) +
                          place.valid() * dtypeSize(dtype),
                      padding * dtypeSize(dtype));
}

} // namespace

extern "C" void asrt_all_reduce(asrt_context *ctx, const void *send, void *recv,
                                int64_t count, int32_t dtype, int32_t reduce_op,
                                int32_t grid_axes_mask) {
  OpTimer timer(ctx, "all_reduce", "collective");
  const char *op = "asrt_all_reduce";
  int n = prepare(ctx, op, send, recv, count, dtype, grid_axes_mask);
  checkReduceOp(op, dtype, reduce_op);
  StreamOpInfo info =
      countCollective(ctx, "all_reduce", CollectiveKind::AllReduce, count,
                      dtype, grid_axes_mask, n);
  if (n == 1)
    return copyLocalInOrder(ctx, op, info, recv, send, count, dtype);
  runOnStream(ctx, timer, op, info, [&] {
    ctx->comm->allReduce(send, recv, count, static_cast<asrt_dtype>(dtype),
                         static_cast<asrt_reduce_op>(reduce_op),
                         grid_axes_mask);
  });
}

extern "C" void asrt_all_gather(asrt_context *ctx, const void *send, void *recv,
                                int64_t send_count, int32_t dtype,
                                int32_t grid_axes_mask) {
  OpTimer timer(ctx, "all_gather", "collective");
  const char *op = "asrt_all_gather";
  int n = prepare(ctx, op, send, recv, send_count, dtype, grid_axes_mask);
  StreamOpInfo info =
      countCollective(ctx, "all_gather", CollectiveKind::AllGather,
                      n * send_count, dtype, grid_axes_mask, n);
  if (n == 1)
    return copyLocalInOrder(ctx, op, info, recv, send, send_count, dtype);
  runOnStream(ctx, timer, op, info, [&] {
    ctx->comm->allGather(send, recv, send_count, static_cast<asrt_dtype>(dtype),
                         grid_axes_mask);
  });
}

extern "C" void asrt_reduce_scatter(asrt_context *ctx, const void *send,
                                    void *recv, int64_t recv_count,
                                    int32_t dtype, int32_t reduce_op,
                                    int32_t grid_axes_mask) {
  OpTimer timer(ctx, "reduce_scatter", "collective");
  const char *op = "asrt_reduce_scatter";
  int n = prepare(ctx, op, send, recv, recv_count, dtype, grid_axes_mask);
  checkReduceOp(op, dtype, reduce_op);
  StreamOpInfo info =
      countCollective(ctx, "reduce_scatter", CollectiveKind::ReduceScatter,
                      n * recv_count, dtype, grid_axes_mask, n);
  if (n == 1)
    return copyLocalInOrder(ctx, op, info, recv, send, recv_count, dtype);
  runOnStream(ctx, timer, op, info, [&] {
    ctx->comm->reduceScatter(
        send, recv, recv_count, static_cast<asrt_dtype>(dtype),
        static_cast<asrt_reduce_op>(reduce_op), grid_axes_mask);
  });
}

extern "C" void asrt_shard_of(asrt_context *ctx, int32_t dtype,
                              const void *full, void *shard, int64_t numel,
                              int32_t grid_axes_mask) {
  OpTimer timer(ctx, "shard_of");
  ShardPlace place = prepareShards(ctx, "asrt_shard_of", full, shard, numel,
                                   dtype, grid_axes_mask);
  const char *block =
      static_cast<const char *>(full) + place.begin() * dtypeSize(dtype);
  // Overlap allowed: a shard may alias full (the first rank's block, in
  // place).
  if (place.valid() > 0 && block != shard)
    ctx->device->copy(Lane::Compute, shard, block,
                      place.valid() * dtypeSize(dtype));
  zeroPadding(ctx, shard, place, dtype);
}

extern "C" void asrt_all_gather_shards(asrt_context *ctx, int32_t dtype,
                                       const void *shard, void *full,
                                       int64_t numel, int32_t grid_axes_mask) {
  OpTimer timer(ctx, "all_gather_shards", "collective");
  const char *op = "asrt_all_gather_shards";
  ShardPlace place =
      prepareShards(ctx, op, shard, full, numel, dtype, grid_axes_mask);
  int64_t n = place.layout.groupSize;
  // The ring moves padded chunks of k elements, as for asrt_all_gather of
  // the padded tensor.
  StreamOpInfo info =
      countCollective(ctx, "all_gather_shards", CollectiveKind::AllGather,
                      numel, dtype, grid_axes_mask, n);
  if (numel == 0)
    return;
  if (n == 1)
    return copyLocalInOrder(ctx, op, info, full, shard, numel, dtype);
  runOnStream(ctx, timer, op, info, [&] {
    ctx->comm->allGatherShards(shard, full, numel,
                               static_cast<asrt_dtype>(dtype), grid_axes_mask);
  });
}

extern "C" void asrt_reduce_scatter_shards(asrt_context *ctx, int32_t dtype,
                                           const void *full, void *shard,
                                           int64_t numel, int32_t reduce_op,
                                           int32_t grid_axes_mask) {
  OpTimer timer(ctx, "reduce_scatter_shards", "collective");
  const char *op = "asrt_reduce_scatter_shards";
  ShardPlace place =
      prepareShards(ctx, op, full, shard, numel, dtype, grid_axes_mask);
  checkReduceOp(op, dtype, reduce_op);
  int64_t n = place.layout.groupSize;
  StreamOpInfo info = countCollective(ctx, "reduce_scatter_shards",
                                      CollectiveKind::ReduceScatter, numel,
                                      dtype, grid_axes_mask, n);
  if (numel == 0)
    return;
  if (n == 1)
    return copyLocalInOrder(ctx, op, info, shard, full, numel, dtype);
  runOnStream(ctx, timer, op, info, [&] {
    ctx->comm->reduceScatterShards(
        full, shard, numel, static_cast<asrt_dtype>(dtype),
        static_cast<asrt_reduce_op>(reduce_op), grid_axes_mask);
  });
  zeroPadding(ctx, shard, place, dtype);
}
