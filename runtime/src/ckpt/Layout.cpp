// Who writes which block of a checkpoint, and where a rank's range is read.
#include "ckpt/Layout.h"
#include "comm/Comm.h"
#include "core/FlatShard.h"

#include <algorithm>
#include <string>

namespace autoshard::rt {

namespace {

std::string range(int64_t begin, int64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

} // namespace

HeldBlock heldBlock(const Manifest &manifest, const TensorSpec &spec,
                    int rank) {
  if (!spec.isSharded()) {
    int64_t numel = spec.numElements();
    return {0, numel, numel};
  }
  FlatShardLayout layout{spec.globalElements(),
                         manifest.groupSize(spec.shardAxes)};
  int64_t index = gridGroupIndex(rank, manifest.grid, spec.shardAxes);
  return {layout.begin(index), layout.validCount(index), layout.chunk()};
}

std::vector<BlockAssignment> assignCheckpointBlocks(const Manifest &manifest) {
  std::vector<BlockAssignment> blocks;
  const auto world = static_cast<int>(manifest.worldSize());
  for (const TensorSpec &arg : manifest.args) {
    if (arg.role != Role::Param && arg.role != Role::OptState)
      continue;
    int64_t shards = arg.isSharded() ? manifest.groupSize(arg.shardAxes) : 1;
    // The replicas of each shard, in increasing world-rank order.
    std::vector<std::vector<int>> replicas(static_cast<size_t>(shards));
    for (int rank = 0; rank < world; ++rank) {
      int64_t index = arg.isSharded()
                          ? gridGroupIndex(rank, manifest.grid, arg.shardAxes)
                          : 0;
      replicas[static_cast<size_t>(index)].push_back(rank);
    }
    for (int64_t i = 0; i < shards; ++i) {
      const std::vector<int> &holders = replicas[static_cast<size_t>(i)];
      HeldBlock held = heldBlock(manifest, arg, holders.front());
      if (held.valid == 0)
        continue;
      int writer = holders[static_cast<size_t>(arg.index) % holders.size()];
      blocks.push_back({arg.index, held.begin, held.valid, writer});
    }
  }
  return blocks;
}

Status checkTiling(const std::vector<ElementRange> &ranges, int64_t numel) {
  int64_t next = 0;
  for (const ElementRange &r : ranges) {
    if (r.count < 1)
      return Error("hold an empty block at element " + std::to_string(r.begin));
    if (r.begin > next)
      return Error("leave elements " + range(next, r.begin) + " uncovered");
    if (r.begin < next)
      return Error("overlap at element " + std::to_string(r.begin));
    next = r.begin + r.count;
  }
  if (next > numel)
    return Error("run to element " + std::to_string(next) +
                 ", past the tensor's " + std::to_string(numel) + " elements");
  if (next < numel)
    return Error("leave elements " + range(next, numel) + " uncovered");
  return Status::success();
}

Expected<std::vector<RangePiece>>
mapRange(const std::vector<ElementRange> &blocks, ElementRange want) {
  std::vector<RangePiece> pieces;
  int64_t end = want.begin + want.count;
  int64_t next = want.begin;
  // The first block that ends after `want.begin`.
  auto first = std::upper_bound(blocks.begin(), blocks.end(), want.begin,
                                [](int64_t value, const ElementRange &b) {
                                  return value < b.begin + b.count;
                                });
  for (auto it = first; it != blocks.end() && next < end; ++it) {
    if (it->begin > next)
      break;
    int64_t pieceEnd = std::min(end, it->begin + it->count);
    pieces.push_back({static_cast<size_t>(it - blocks.begin()),
                      next - it->begin, next - want.begin, pieceEnd - next});
    next = pieceEnd;
  }
  if (next < end)
    return Error("no stored block holds elements " + range(next, end));
  return pieces;
}

} // namespace autoshard::rt
