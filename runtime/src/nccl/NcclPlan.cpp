// The NCCL communicator's pure parts: group splits and staging plans.
#include "nccl/NcclPlan.h"

#include "comm/Comm.h"
#include "core/FlatShard.h"

#include <cstdint>

namespace autoshard::rt {

namespace {

const char *at(const void *base, int64_t elements, int64_t elemBytes) {
  return static_cast<const char *>(base) + elements * elemBytes;
}
char *at(void *base, int64_t elements, int64_t elemBytes) {
  return static_cast<char *>(base) + elements * elemBytes;
}

bool overlap(const void *a, int64_t aBytes, const void *b, int64_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + static_cast<uintptr_t>(bBytes) &&
         y < x + static_cast<uintptr_t>(aBytes);
}

NcclStep copy(void *dst, const void *src, int64_t count) {
  return {NcclStep::Kind::Copy, dst, src, count};
}
NcclStep zero(void *dst, int64_t count) {
  return {NcclStep::Kind::Zero, dst, nullptr, count};
}
NcclStep allGather(void *dst, const void *src, int64_t count) {
  return {NcclStep::Kind::AllGather, dst, src, count};
}
NcclStep reduceScatter(void *dst, const void *src, int64_t count) {
  return {NcclStep::Kind::ReduceScatter, dst, src, count};
}

/// Whether the gather can run on the caller's buffers: no padding, and
/// the shard either outside full or in its own block (NCCL's in place).
bool gatherDirect(const void *shard, const void *full, int64_t numel, int64_t b,
                  int64_t n, int64_t me) {
  FlatShardLayout layout{numel, n};
  int64_t k = layout.chunk();
  if (n * k != numel)
    return false;
  return shard == at(full, me * k, b) ||
         !overlap(shard, k * b, full, numel * b);
}

/// Whether the reduce-scatter can: no padding, and the shard either the
/// buffer itself (the ABI's in place), outside it, or its own block.
bool scatterDirect(const void *full, const void *shard, int64_t numel,
                   int64_t b, int64_t n, int64_t me) {
  FlatShardLayout layout{numel, n};
  int64_t k = layout.chunk();
  if (n * k != numel)
    return false;
  return shard == full || shard == at(full, me * k, b) ||
         !overlap(shard, k * b, full, numel * b);
}

/// The staging of a flat-shard collective that cannot run on the caller's
/// buffers: the tensor padded to n chunks of k elements.
int64_t paddedBytes(int64_t numel, int64_t elemBytes, int64_t groupSize) {
  return groupSize * FlatShardLayout{numel, groupSize}.chunk() * elemBytes;
}

} // namespace

NcclSplit ncclSplitFor(int rank, const std::vector<int64_t> &grid,
                       int32_t mask) {
  // gridGroup lists the group in increasing rank order: its first member
  // is the smallest, the same for every member and unique to the group.
  return NcclSplit{gridGroup(rank, grid, mask).front(), rank};
}

std::vector<NcclStep> planReduceScatter(const void *send, void *recv,
                                        int64_t recvCount, int64_t elemBytes,
                                        int64_t groupSize, int64_t groupIndex) {
  (void)groupSize;
  if (send != recv)
    return {reduceScatter(recv, send, recvCount)};
  // The ABI's in place reads the whole input from recv and leaves this
  // rank's block at its start; NCCL's leaves it in the block's own place.
  char *own = at(recv, groupIndex * recvCount, elemBytes);
  std::vector<NcclStep> steps{reduceScatter(own, send, recvCount)};
  if (groupIndex != 0)
    steps.push_back(copy(recv, own, recvCount));
  return steps;
}

int64_t allGatherShardsStagingBytes(const void *shard, const void *full,
                                    int64_t numel, int64_t elemBytes,
                                    int64_t groupSize, int64_t groupIndex) {
  return gatherDirect(shard, full, numel, elemBytes, groupSize, groupIndex)
             ? 0
             : paddedBytes(numel, elemBytes, groupSize);
}

std::vector<NcclStep> planAllGatherShards(const void *shard, void *full,
                                          void *scratch, int64_t numel,
                                          int64_t elemBytes, int64_t groupSize,
                                          int64_t groupIndex) {
  const int64_t b = elemBytes, n = groupSize, me = groupIndex;
  FlatShardLayout layout{numel, n};
  const int64_t k = layout.chunk();
  if (gatherDirect(shard, full, numel, b, n, me))
    return {allGather(full, shard, k)};
  // Staged: the padded layout in scratch, whose first numel elements are
  // then the tensor (padding only ever follows the last valid element).
  char *own = at(scratch, me * k, b);
  const int64_t valid = layout.validCount(me);
  std::vector<NcclStep> steps;
  if (valid > 0)
    steps.push_back(copy(own, shard, valid));
  if (k > valid)
    steps.push_back(zero(own + valid * b, k - valid));
  steps.push_back(allGather(scratch, own, k));
  steps.push_back(copy(full, scratch, numel));
  return steps;
}

int64_t reduceScatterShardsStagingBytes(const void *full, const void *shard,
                                        int64_t numel, int64_t elemBytes,
                                        int64_t groupSize, int64_t groupIndex) {
  return scatterDirect(full, shard, numel, elemBytes, groupSize, groupIndex)
             ? 0
             : paddedBytes(numel, elemBytes, groupSize);
}

std::vector<NcclStep> planReduceScatterShards(const void *full, void *shard,
                                              void *scratch, int64_t numel,
                                              int64_t elemBytes,
                                              int64_t groupSize,
                                              int64_t groupIndex) {
  const int64_t b = elemBytes, n = groupSize, me = groupIndex;
  FlatShardLayout layout{numel, n};
  const int64_t k = layout.chunk();
  if (scatterDirect(full, shard, numel, b, n, me))
    return planReduceScatter(full, shard, k, b, n, me);
  // Staged: the tensor zero-padded to n k in scratch, reduced in place
  // there, and this rank's valid elements copied out.
  std::vector<NcclStep> steps{copy(scratch, full, numel)};
  if (n * k > numel)
    steps.push_back(zero(at(scratch, numel, b), n * k - numel));
  char *own = at(scratch, me * k, b);
  steps.push_back(reduceScatter(own, scratch, k));
  if (int64_t valid = layout.validCount(me); valid > 0)
    steps.push_back(copy(shard, own, valid));
  return steps;
}

} // namespace autoshard::rt
