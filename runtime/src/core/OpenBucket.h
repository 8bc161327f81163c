// The open bucket of asrt_bucket_*: its collective and its members' places.
#pragma once

#include "autoshard/rt/abi.h"
#include "core/Expected.h"

#include <cstdint>
#include <vector>

namespace autoshard::rt {

/// "all_reduce", "all_gather_shards", "reduce_scatter_shards"; "?" for a
/// value that is not an asrt_bucket_kind.
const char *bucketKindName(int32_t kind);

/// One tensor of a bucket and its place in the packed buffer.
///
/// Each member is padded to n * chunk elements (chunk = ceil(numel / n), the
/// flat-shard k), so it keeps its shard boundaries inside the packed buffer:
/// rank r's block of the packed buffer holds, for every member in order,
/// that member's chunk r. The offsets are therefore the same on every rank
/// and every backend, which is what lets one collective stand for many.
struct BucketMember {
  const void *send = nullptr;
  void *recv = nullptr;
  int64_t numel = 0;
  int64_t chunk = 0;
  /// The chunks of the members added before this one: where this member's
  /// chunk starts inside each rank's block. In an all-reduce's packed
  /// buffer, whose members lie one after the other, it starts at n times
  /// this.
  int64_t chunkOffset = 0;
};

/// The bucket a context holds between asrt_bucket_begin and asrt_bucket_end.
/// Pure bookkeeping, no communication: it validates the calls and lays the
/// members out; the communication layer packs, communicates and unpacks.
/// Closing keeps the member list's capacity, so a training loop that issues
/// the same buckets every step stops allocating after the first.
class OpenBucket {
public:
  /// Opens a bucket of `kind` over a group of `groupSize` ranks. Fails when
  /// one is open, or for a kind, dtype or reduction the single-tensor
  /// function would refuse. ALL_GATHER_SHARDS ignores `reduceOp`, as
  /// asrt_all_gather_shards has none.
  Status begin(int32_t kind, int32_t dtype, int32_t reduceOp, int32_t mask,
               int64_t groupSize);
  /// Adds a member. Fails when no bucket is open, for a negative numel, or
  /// for a null buffer under numel > 0 (numel 0 may pass null buffers, as
  /// the single-tensor functions allow).
  Status add(const void *send, void *recv, int64_t numel);
  /// Packs the bucket into `buffer` (`bytes` bytes, which the caller owns
  /// until the collective completes) instead of the runtime's scratch.
  /// Fails when no bucket is open, for negative bytes, or a null buffer
  /// under bytes > 0.
  Status packInto(void *buffer, int64_t bytes);
  /// Closes the bucket; the members stay readable until the next begin.
  /// Fails when no bucket is open, it has no members, or the buffer of
  /// packInto is smaller than packedBytes() on a group of two or more, and
  /// then stays as it was. `closer` is the ABI call closing it, named in
  /// the errors.
  Status close(const char *closer = "asrt_bucket_end");

  bool isOpen() const { return open; }
  asrt_bucket_kind kind() const { return bucketKind; }
  asrt_dtype dtype() const { return elementType; }
  asrt_reduce_op reduceOp() const { return reduction; }
  int32_t mask() const { return gridMask; }
  int64_t groupSize() const { return n; }
  const std::vector<BucketMember> &members() const { return memberList; }
  /// The sum of the members' chunks: one rank's block of the packed buffer,
  /// whose whole size is groupSize() * totalChunk() elements.
  int64_t totalChunk() const { return chunkSum; }
  /// The packed buffer's bytes: groupSize() * totalChunk() elements.
  int64_t packedBytes() const;
  /// The buffer packInto gave, or null: the runtime's scratch then. Not
  /// null whenever the closed bucket communicates (close checked its size).
  void *packBuffer() const { return packTo; }

private:
  bool open = false;
  asrt_bucket_kind bucketKind = ASRT_BUCKET_ALL_REDUCE;
  asrt_dtype elementType = ASRT_DTYPE_F32;
  asrt_reduce_op reduction = ASRT_REDUCE_SUM;
  int32_t gridMask = 0;
  int64_t n = 1;
  int64_t chunkSum = 0;
  std::vector<BucketMember> memberList;
  void *packTo = nullptr;
  int64_t packToBytes = 0;
  bool packGiven = false;
};

} // namespace autoshard::rt
