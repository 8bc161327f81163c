// The ABI's buckets: several tensors packed into one collective on ctx->comm,
// blocking (asrt_bucket_end) or asynchronous (asrt_bucket_start, asrt_wait).
#include "core/OpenBucket.h"
#include "comm/Comm.h"
#include "core/CommStream.h"
#include "core/Context.h"
#include "memory/Device.h"
#include "core/Dtype.h"
#include "core/FlatShard.h"
#include "core/InFlightBuckets.h"
#include "stats/Stats.h"

using namespace autoshard::rt;

namespace {

OpenBucket &bucketOf(asrt_context *ctx, const char *fn) {
  if (!ctx)
    fatal("%s: context is null", fn);
  return *ctx->bucket;
}

/// Packing and unpacking: copies and zeroing in the context's device
/// memory, queued on the lane of the thread that runs the bucket (the
/// communication thread's, or the main thread's for a group of one). A
/// count of 0 touches neither pointer, which may then be null (an empty
/// member).
struct Packer {
  Device &device;
  Lane lane;

  void copy(void *dst, const void *src, int64_t count,
            int64_t elementBytes) const {
    if (count > 0)
      device.copy(lane, dst, src, count * elementBytes);
  }
  void zero(void *dst, int64_t count, int64_t elementBytes) const {
    if (count > 0)
      device.zero(lane, dst, count * elementBytes);
  }
};

/// The counter a bucket's bytes go to: the single-tensor function's, so
/// that a step's traffic reads the same bucketed or not.
CollectiveKind statsKind(asrt_bucket_kind kind) {
  switch (kind) {
  case ASRT_BUCKET_ALL_REDUCE:
    return CollectiveKind::AllReduce;
  case ASRT_BUCKET_ALL_GATHER_SHARDS:
    return CollectiveKind::AllGather;
  case ASRT_BUCKET_REDUCE_SCATTER_SHARDS:
    return CollectiveKind::ReduceScatter;
  }
  fatal("bucket kind %d has no collective", static_cast<int>(kind));
}

/// The per-op timer's name: apart from the single-tensor functions', so a
/// profile shows how much of the time went to buckets.
const char *timerName(asrt_bucket_kind kind) {
  switch (kind) {
  case ASRT_BUCKET_ALL_REDUCE:
    return "bucket_all_reduce";
  case ASRT_BUCKET_ALL_GATHER_SHARDS:
    return "bucket_all_gather_shards";
  case ASRT_BUCKET_REDUCE_SCATTER_SHARDS:
    return "bucket_reduce_scatter_shards";
  }
  return "bucket";
}

char *at(void *base, int64_t element, int64_t elementBytes) {
  return static_cast<char *>(base) + element * elementBytes;
}
const char *at(const void *base, int64_t element, int64_t elementBytes) {
  return static_cast<const char *>(base) + element * elementBytes;
}

/// Packed: the members one after the other, each zero-padded to n * k. The
/// packed count is then n * K, and a ring over it sends 2 (n-1) K b bytes:
/// exactly the members' single-tensor counts, as the stats record.
void allReduceBucket(Comm &comm, const Packer &p, const OpenBucket &b,
                     void *packed) {
  const int64_t n = b.groupSize(), eb = dtypeSize(b.dtype());
  const int64_t count = n * b.totalChunk();
  for (const BucketMember &m : b.members()) {
    char *place = at(packed, n * m.chunkOffset, eb);
    p.copy(place, m.send, m.numel, eb);
    // Zero, not stale scratch: the padding is dropped when unpacking, but
    // old bytes (NaNs, denormals) could slow the reduction down and would
    // make the packed buffer differ from the padded tensors it stands for.
    p.zero(place + m.numel * eb, n * m.chunk - m.numel, eb);
  }
  comm.allReduce(packed, packed, count, b.dtype(), b.reduceOp(), b.mask());
  // Every send was read into the packed buffer before any recv is written,
  // so a recv may alias its send (or any other member's).
  for (const BucketMember &m : b.members())
    p.copy(m.recv, at(packed, n * m.chunkOffset, eb), m.numel, eb);
}

/// Packed rank-major: block r holds every member's chunk r, zero past its
/// numel. One reduce-scatter of totalChunk elements per rank then leaves
/// this rank's block, which holds every member's shard.
void reduceScatterBucket(Comm &comm, const Packer &p, const OpenBucket &b,
                         void *packed) {
  const int64_t n = b.groupSize(), eb = dtypeSize(b.dtype());
  const int64_t block = b.totalChunk();
  for (const BucketMember &m : b.members()) {
    FlatShardLayout layout{m.numel, n};
    for (int64_t r = 0; r < n; ++r) {
      char *place = at(packed, r * block + m.chunkOffset, eb);
      int64_t valid = layout.validCount(r);
      p.copy(place, at(m.send, layout.begin(r), eb), valid, eb);
      p.zero(place + valid * eb, m.chunk - valid, eb);
    }
  }
  // In place: this rank's reduced block lands at the start of the buffer.
  comm.reduceScatter(packed, packed, block, b.dtype(), b.reduceOp(), b.mask());
  // The padding arrives as the reduction of zeros, which is zero for every
  // reduction and stays zero under AVG's division: the shards come out
  // zero-padded, as asrt_reduce_scatter_shards leaves them.
  for (const BucketMember &m : b.members())
    p.copy(m.recv, at(packed, m.chunkOffset, eb), m.chunk, eb);
}

/// Packed rank-major as the reduce-scatter: this rank contributes block
/// `me`, its members' shards whole (their padding travels and is dropped
/// when unpacking, as the single-tensor gather never writes it).
void allGatherBucket(Comm &comm, const Packer &p, const OpenBucket &b,
                     void *packed) {
  const int64_t n = b.groupSize(), eb = dtypeSize(b.dtype());
  const int64_t block = b.totalChunk();
  const int64_t me = comm.groupIndex(b.mask());
  char *own = at(packed, me * block, eb);
  for (const BucketMember &m : b.members())
    p.copy(own + m.chunkOffset * eb, m.send, m.chunk, eb);
  // In place: the send is this rank's own block of the packed buffer.
  comm.allGather(own, packed, block, b.dtype(), b.mask());
  for (const BucketMember &m : b.members()) {
    FlatShardLayout layout{m.numel, n};
    for (int64_t r = 0; r < n; ++r)
      p.copy(at(m.recv, layout.begin(r), eb),
                   at(packed, r * block + m.chunkOffset, eb),
                   layout.validCount(r), eb);
  }
}

/// Whether the bucket needs the communicator: a group of two or more and
/// something to send. Every rank adds the same members (SPMD), so every
/// rank skips the collective together.
bool communicates(const OpenBucket &b) {
  return b.groupSize() > 1 && b.totalChunk() > 0;
}

/// Counts a closed bucket's bytes under its single-tensor kind and returns
/// them: each member's single-tensor count; with every member padded to
/// n * k the packed ring sends exactly their sum.
int64_t countBucket(asrt_context *ctx, const OpenBucket &b) {
  const int64_t n = b.groupSize(), eb = dtypeSize(b.dtype());
  CollectiveKind kind = statsKind(b.kind());
  int64_t bytes = 0;
  for (const BucketMember &m : b.members())
    bytes += ringBytesSent(kind, m.numel, n, eb);
  ctx->stats->recordCollective(kind, bytes);
  return bytes;
}

StreamOpInfo streamInfo(const OpenBucket &b, int64_t bytes, int64_t handle) {
  StreamOpInfo info;
  info.name = timerName(b.kind());
  info.dtype = b.dtype();
  info.mask = b.mask();
  info.groupSize = b.groupSize();
  info.bytes = bytes;
  info.members = static_cast<int64_t>(b.members().size());
  info.handle = handle;
  return info;
}

/// The bucket's collective, on a closed bucket: one MPI call over `packed`
/// (b.packedBytes() bytes), or copies on a group of one; the
/// packing queued by `p`.
void runBucket(Comm *comm, const Packer &p, const OpenBucket &b,
               void *packed) {
  if (b.groupSize() == 1) {
    // A group of one: each result is its input (k = numel, no padding).
    const int64_t eb = dtypeSize(b.dtype());
    for (const BucketMember &m : b.members())
      if (m.recv != m.send)
        p.copy(m.recv, m.send, m.numel, eb);
    return;
  }
  if (!communicates(b))
    return;
  switch (b.kind()) {
  case ASRT_BUCKET_ALL_REDUCE:
    return allReduceBucket(*comm, p, b, packed);
  case ASRT_BUCKET_ALL_GATHER_SHARDS:
    return allGatherBucket(*comm, p, b, packed);
  case ASRT_BUCKET_REDUCE_SCATTER_SHARDS:
    return reduceScatterBucket(*comm, p, b, packed);
  }
}

/// The communication thread's work for an asrt_bucket_start bucket: after
/// the compute lane's work queued before the issue (which wrote the send
/// buffers), and complete when it returns, so that asrt_wait's return
/// means the results are in place.
void runInFlight(void *arg) {
  auto *slot = static_cast<InFlightBucket *>(arg);
  Device &device = *slot->ctx->device;
  device.waitFence(Lane::Comm, slot->issued);
  const OpenBucket &b = slot->bucket;
  void *packed = !communicates(b) ? nullptr
                 : b.packBuffer() ? b.packBuffer()
                                  : slot->packBuffer(device, b.packedBytes());
  runBucket(slot->ctx->comm, Packer{device, Lane::Comm}, slot->bucket, packed);
  device.synchronize(Lane::Comm);
}

} // namespace

extern "C" void asrt_bucket_begin(asrt_context *ctx, int32_t kind,
                                  int32_t dtype, int32_t reduce_op,
                                  int32_t grid_axes_mask) {
  const char *fn = "asrt_bucket_begin";
  OpenBucket &bucket = bucketOf(ctx, fn);
  // Without a Comm every group is this rank alone, as for the
  // single-tensor collectives.
  int64_t n = 1;
  if (ctx->comm) {
    if (Status s = checkGridMask(grid_axes_mask, ctx->comm->grid()); !s)
      fatal("%s: %s", fn, s.message().c_str());
    n = ctx->comm->groupSize(grid_axes_mask);
  }
  if (Status s = bucket.begin(kind, dtype, reduce_op, grid_axes_mask, n); !s)
    fatal("%s: %s", fn, s.message().c_str());
}

extern "C" void asrt_bucket_add(asrt_context *ctx, const void *send, void *recv,
                                int64_t numel) {
  const char *fn = "asrt_bucket_add";
  if (Status s = bucketOf(ctx, fn).add(send, recv, numel); !s)
    fatal("%s: %s", fn, s.message().c_str());
}

extern "C" void asrt_bucket_pack_buffer(asrt_context *ctx, void *buffer,
                                        int64_t bytes) {
  const char *fn = "asrt_bucket_pack_buffer";
  if (Status s = bucketOf(ctx, fn).packInto(buffer, bytes); !s)
    fatal("%s: %s", fn, s.message().c_str());
}

extern "C" void asrt_bucket_end(asrt_context *ctx) {
  const char *fn = "asrt_bucket_end";
  OpenBucket &bucket = bucketOf(ctx, fn);
  if (Status s = bucket.close(fn); !s)
    fatal("%s: %s", fn, s.message().c_str());
  OpTimer timer(ctx, timerName(bucket.kind()), "collective");
  StreamOpInfo info = streamInfo(bucket, countBucket(ctx, bucket), 0);
  if (!communicates(bucket)) {
    // Copies (or nothing) on this thread, after the collectives in flight.
    ctx->stream->drain(fn, info);
    return runBucket(ctx->comm, Packer{*ctx->device, Lane::Compute}, bucket,
                     nullptr);
  }
  // The communication thread runs it, behind the buckets in flight and
  // after the compute lane's work so far; the blocking pack buffer is that
  // thread's alone.
  Device &device = *ctx->device;
  Fence issued = device.fence(Lane::Compute);
  timer.setStreamOp(ctx->stream->runBlocking(fn, info, [&] {
    device.waitFence(Lane::Comm, issued);
    void *packed = bucket.packBuffer();
    if (!packed)
      packed = ctx->inflight->blockingPackBuffer(device, bucket.packedBytes());
    runBucket(ctx->comm, Packer{device, Lane::Comm}, bucket, packed);
    device.synchronize(Lane::Comm);
  }));
}

extern "C" int64_t asrt_bucket_start(asrt_context *ctx) {
  const char *fn = "asrt_bucket_start";
  OpenBucket &bucket = bucketOf(ctx, fn);
  OpTimer timer(ctx, "bucket_start", "issue");
  if (Status s = bucket.close(fn); !s)
    fatal("%s: %s", fn, s.message().c_str());
  // Counted when issued, as blocking buckets are: the same bytes either way.
  int64_t bytes = countBucket(ctx, bucket);
  // The slot takes the bucket's members; the context's bucket gets the
  // slot's old (empty-to-be, grown) member list for the next begin.
  InFlightBucket &slot = ctx->inflight->issue(bucket);
  slot.ctx = ctx;
  slot.info = streamInfo(slot.bucket, bytes, slot.handle);
  return issueOnStream(*ctx->stream, timer, &runInFlight, slot);
}

extern "C" void asrt_wait(asrt_context *ctx, int64_t handle) {
  const char *fn = "asrt_wait";
  if (!ctx)
    fatal("%s: context is null", fn);
  OpTimer timer(ctx, "wait", "wait");
  InFlightBucket &slot = inFlightSlot(*ctx->inflight, handle, fn);
  waitOnStream(*ctx->stream, timer, fn, slot);
  ctx->inflight->release(slot);
}
