// The NCCL communicator's pure parts: group splits and staging plans.
#pragma once

#include <cstdint>
#include <vector>

namespace autoshard::rt {

/// ncclCommSplit's arguments that make `rank`'s group for `mask` out of the
/// world: the color is the group's lowest world rank, which exactly its
/// members share; the key is the world rank, so that ranks within the
/// group are numbered in gridGroup's (increasing rank) order and a rank's
/// NCCL rank in it is gridGroupIndex. `mask` must be valid for `grid`.
struct NcclSplit {
  int color = 0;
  int key = 0;
};
NcclSplit ncclSplitFor(int rank, const std::vector<int64_t> &grid,
                       int32_t mask);

/// One step of a collective as the NCCL communicator runs it, in order, on
/// the communication stream. Counts are elements of the collective's
/// dtype. The collective steps have NCCL's meaning for the group:
///   AllGather:     dst (n * count) = every member's src (count), in order;
///                  in place when src == dst + me * count.
///   ReduceScatter: dst (count) = the reduction of block `me` of every
///                  member's src (n * count); in place when
///                  dst == src + me * count.
/// Every rank of a group gets the same sequence of step kinds and counts,
/// so that the collectives match across ranks.
struct NcclStep {
  enum class Kind { Copy, Zero, AllGather, ReduceScatter };
  Kind kind = Kind::Copy;
  void *dst = nullptr;
  const void *src = nullptr; // null for Zero
  int64_t count = 0;
};

/// Comm::reduceScatter: the ABI's in place (send == recv, the result at
/// the start of the buffer) is NCCL's in place followed by moving this
/// rank's block to the start; NCCL's own in-place form and disjoint
/// buffers go straight through.
std::vector<NcclStep> planReduceScatter(const void *send, void *recv,
                                        int64_t recvCount, int64_t elemBytes,
                                        int64_t groupSize, int64_t groupIndex);

/// Comm::allGatherShards and reduceScatterShards over NCCL's equal-block
/// collectives: the flat-shard layout pads the tensor to n k elements, so
/// when that is more than numel (or the buffers overlap other than in
/// NCCL's in-place way) the collective runs on a staging buffer of n k
/// elements: a shard's valid part is copied into its block (padding
/// zeroed), the tensor into its first numel elements (the rest zeroed),
/// and only valid elements are copied out, so that nothing is written past
/// numel in full, nor into a shard's padding, and nothing is read from a
/// shard past its valid part. Otherwise the collective runs on the
/// caller's buffers.
///
/// The staging bytes a call needs (0: none); the plan then takes a scratch
/// buffer of at least that many bytes (null when 0).
int64_t allGatherShardsStagingBytes(const void *shard, const void *full,
                                    int64_t numel, int64_t elemBytes,
                                    int64_t groupSize, int64_t groupIndex);
std::vector<NcclStep> planAllGatherShards(const void *shard, void *full,
                                          void *scratch, int64_t numel,
                                          int64_t elemBytes, int64_t groupSize,
                                          int64_t groupIndex);
int64_t reduceScatterShardsStagingBytes(const void *full, const void *shard,
                                        int64_t numel, int64_t elemBytes,
                                        int64_t groupSize, int64_t groupIndex);
std::vector<NcclStep> planReduceScatterShards(const void *full, void *shard,
                                              void *scratch, int64_t numel,
                                              int64_t elemBytes,
                                              int64_t groupSize,
                                              int64_t groupIndex);

} // namespace autoshard::rt
