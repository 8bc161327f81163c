// Who writes which block of a checkpoint, and where a rank's range is read.
#pragma once

#include "core/Expected.h"
#include "io/Manifest.h"

#include <cstdint>
#include <vector>

namespace autoshard::rt {

/// Global (flat, row-major) elements [begin, begin + count) of a tensor.
struct ElementRange {
  int64_t begin = 0;
  int64_t count = 0;
};

/// What world rank `rank` holds of argument `spec` under `manifest`'s grid
/// (abi.h, "Flat shards"): a replicated tensor whole; a sharded one the
/// flat shard whose index is the rank's position in its group, `valid`
/// elements from `begin` followed by `chunk - valid` elements of padding.
struct HeldBlock {
  int64_t begin = 0;
  int64_t valid = 0;
  int64_t chunk = 0;
};
HeldBlock heldBlock(const Manifest &manifest, const TensorSpec &spec, int rank);

/// One block of a checkpoint: argument `arg`'s global elements [begin,
/// begin + count), written by world rank `writer` from its buffer.
struct BlockAssignment {
  int arg = 0;
  int64_t begin = 0;
  int64_t count = 0;
  int writer = 0;
};

/// Who writes what. Every param and opt_state argument is cut into the
/// blocks the ranks hold: one per shard of a sharded argument (its valid
/// elements; an all-padding shard has none), the whole tensor for a
/// replicated one. Each block is written once, by one of the ranks that
/// hold a copy of it (its replicas: all ranks for a replicated tensor, the
/// ranks of equal group index for a sharded one); replicas take turns by
/// argument index (the writer of argument a is replica number a mod
/// replicas, in increasing world-rank order), so that the writes of a
/// replicated model spread over the ranks. Pure: every rank computes the
/// same list, in argument order and then increasing begin.
std::vector<BlockAssignment> assignCheckpointBlocks(const Manifest &manifest);

/// Success when `ranges` (sorted by begin) tile [0, numel) exactly: no gap,
/// no overlap, nothing past the end. The error says where it fails
/// ("leave elements [3, 5) uncovered", "overlap at element 7", ...).
Status checkTiling(const std::vector<ElementRange> &ranges, int64_t numel);

/// A piece of a wanted range found in one stored block: `count` elements
/// from element `blockOffset` of block number `block` go to element
/// `outOffset` of the wanted range.
struct RangePiece {
  size_t block = 0;
  int64_t blockOffset = 0;
  int64_t outOffset = 0;
  int64_t count = 0;
};

/// Resharding: the pieces of stored blocks `blocks` (sorted by begin,
/// tiling the tensor; see checkTiling) that make up the wanted range
/// `want`, in order. An empty range needs no piece; a range the blocks do
/// not cover is an error naming the uncovered elements.
Expected<std::vector<RangePiece>>
mapRange(const std::vector<ElementRange> &blocks, ElementRange want);

} // namespace autoshard::rt
