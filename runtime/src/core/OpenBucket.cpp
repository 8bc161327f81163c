// The open bucket of asrt_bucket_*: its collective and its members' places.
#include "core/OpenBucket.h"
#include "core/Dtype.h"
#include "core/FlatShard.h"

#include <string>

namespace autoshard::rt {

const char *bucketKindName(int32_t kind) {
  switch (kind) {
  case ASRT_BUCKET_ALL_REDUCE:
    return "all_reduce";
  case ASRT_BUCKET_ALL_GATHER_SHARDS:
    return "all_gather_shards";
  case ASRT_BUCKET_REDUCE_SCATTER_SHARDS:
    return "reduce_scatter_shards";
  }
  return "?";
}

namespace {

/// "the open all_reduce bucket (bf16 over grid_axes_mask 1, 3 members)",
/// so that a misuse names the bucket it ran into.
std::string describe(const OpenBucket &b) {
  return std::string("the open ") + bucketKindName(b.kind()) + " bucket (" +
         dtypeName(b.dtype()) + " over grid_axes_mask " +
         std::to_string(b.mask()) + ", " + std::to_string(b.members().size()) +
         (b.members().size() == 1 ? " member)" : " members)");
}

} // namespace

Status OpenBucket::begin(int32_t kind, int32_t dtype, int32_t reduceOp,
                         int32_t mask, int64_t groupSize) {
  if (open)
    return Error("a bucket is already open: " + describe(*this) +
                 "; end it with asrt_bucket_end (or issue it with "
                 "asrt_bucket_start) before beginning another");
  if (kind < ASRT_BUCKET_ALL_REDUCE || kind > ASRT_BUCKET_REDUCE_SCATTER_SHARDS)
    return Error("kind " + std::to_string(kind) +
                 " is not an asrt_bucket_kind; expected 0 (all_reduce), 1 "
                 "(all_gather_shards) or 2 (reduce_scatter_shards)");
  if (!isValidDtype(dtype))
    return Error("dtype " + std::to_string(dtype) +
                 " is not an asrt_dtype; expected 0..5 (" + dtypeList() + ")");
  // The single-tensor gather moves any dtype and takes no reduction; the
  // reducing kinds accept what asrt_all_reduce and
  // asrt_reduce_scatter_shards accept.
  if (kind != ASRT_BUCKET_ALL_GATHER_SHARDS)
    if (Status s = checkReduction(dtype, reduceOp); !s)
      return Error(std::string(bucketKindName(kind)) +
                   " bucket: " + s.message());
  if (groupSize < 1)
    return Error("group size " + std::to_string(groupSize) +
                 " is not a positive number of ranks");
  open = true;
  bucketKind = static_cast<asrt_bucket_kind>(kind);
  elementType = static_cast<asrt_dtype>(dtype);
  reduction = kind == ASRT_BUCKET_ALL_GATHER_SHARDS
                  ? ASRT_REDUCE_SUM
                  : static_cast<asrt_reduce_op>(reduceOp);
  gridMask = mask;
  n = groupSize;
  chunkSum = 0;
  memberList.clear(); // keeps the capacity: no allocation in steady state
  packTo = nullptr;
  packToBytes = 0;
  packGiven = false;
  return Status::success();
}

int64_t OpenBucket::packedBytes() const {
  return n * chunkSum * dtypeSize(elementType);
}

Status OpenBucket::packInto(void *buffer, int64_t bytes) {
  if (!open)
    return Error("no bucket is open; call asrt_bucket_begin before giving "
                 "it a pack buffer");
  if (bytes < 0 || (bytes > 0 && !buffer))
    return Error("the pack buffer of " + describe(*this) + " is " +
                 (bytes < 0 ? std::to_string(bytes) + " bytes"
                            : std::string("null for ") + std::to_string(bytes) +
                                  " bytes") +
                 "; expected a buffer of at least the packed size");
  packTo = buffer;
  packToBytes = bytes;
  packGiven = true;
  return Status::success();
}

Status OpenBucket::add(const void *send, void *recv, int64_t numel) {
  if (!open)
    return Error("no bucket is open; call asrt_bucket_begin before adding "
                 "tensors");
  // Built only on failure: add runs for every tensor of every step.
  auto member = [&] {
    return "member " + std::to_string(memberList.size()) + " of " +
           describe(*this);
  };
  if (numel < 0)
    return Error(member() + ": numel " + std::to_string(numel) +
                 " is negative; expected 0 or more elements");
  if (numel > 0 && (!send || !recv))
    return Error(member() + ": " + (send ? "receive" : "send") +
                 " buffer is null for " + std::to_string(numel) + " elements");
  BucketMember m;
  m.send = send;
  m.recv = recv;
  m.numel = numel;
  m.chunk = FlatShardLayout{numel, n}.chunk();
  m.chunkOffset = chunkSum;
  memberList.push_back(m);
  chunkSum += m.chunk;
  return Status::success();
}

Status OpenBucket::close(const char *closer) {
  if (!open)
    return Error(std::string("no bucket is open; ") + closer +
                 " closes the bucket asrt_bucket_begin opened");
  if (memberList.empty())
    return Error(describe(*this) +
                 " is empty; add at least one tensor with asrt_bucket_add "
                 "before " +
                 closer);
  if (packGiven && n > 1 && packToBytes < packedBytes())
    return Error("the pack buffer of " + describe(*this) + " has " +
                 std::to_string(packToBytes) + " bytes; packing " +
                 std::to_string(memberList.size()) + " members over " +
                 std::to_string(n) + " ranks takes " +
                 std::to_string(packedBytes()) +
                 " (group size x the members' chunks x the element size)");
  open = false;
  return Status::success();
}

} // namespace autoshard::rt
