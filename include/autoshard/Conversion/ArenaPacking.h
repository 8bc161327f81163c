//===- ArenaPacking.h - offsets of a step's buffers in its arena -*- C++ -*-===//
//
// The lowering knows each temporary buffer's size and the program positions
// where it is allocated and last read; packing gives every buffer an offset
// in one arena so that buffers alive at the same position never overlap.
// Pure logic, tested on its own (test/unit/ArenaPackingTest.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_CONVERSION_ARENAPACKING_H
#define AUTOSHARD_CONVERSION_ARENAPACKING_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstddef>
#include <cstdint>

namespace autoshard {

/// One buffer of the arena: its size in bytes (already aligned) and the
/// program positions of its allocation and of its last read, inclusive.
struct ArenaBuffer {
  int64_t size = 0;
  int first = 0, last = 0;
};

/// Above this many buffers the arena is packed in program order (first
/// fit); up to it, by decreasing size (tighter).
constexpr size_t kGreedyBySizeLimit = 40000;

/// The ways to pack an arena. Each gives every buffer an offset so that two
/// buffers whose lifetimes share a position never share a byte.
enum class ArenaPacker {
  /// Greedy by size (TensorFlow Lite's arena planner): the largest buffer
  /// first (ties to the earlier buffer), each at the lowest offset free for
  /// its whole lifetime.
  BySize,
  /// The largest first, ties to the longer lifetime, each in the smallest
  /// gap between the placed buffers alive with it that holds it, else above
  /// them (best fit, as XLA's heap simulator places buffers).
  BySizeSmallestGap,
  /// Greedy by breadth (TensorFlow Lite's other planner): the positions in
  /// decreasing order of the bytes alive there, and at each, the buffers
  /// alive there not yet placed, largest first, each at the lowest offset.
  ByBreadth,
  /// The same order, each in the smallest gap.
  ByBreadthSmallestGap,
  /// In program order at the lowest free range when a buffer is allocated,
  /// given back after its last read; at one position, allocations come
  /// first. Linear time, more holes.
  FirstFit,
};

/// Packs with one packer: sets `offsets[i]` of every buffer and returns the
/// arena's size (the highest end).
int64_t packArenaWith(ArenaPacker packer, llvm::ArrayRef<ArenaBuffer> buffers,
                      llvm::SmallVectorImpl<int64_t> &offsets);

/// The most bytes alive at one position: no packing needs less.
int64_t livePeak(llvm::ArrayRef<ArenaBuffer> buffers);

/// Packs the arena of a step and returns its size. Up to
/// `greedyBySizeLimit` buffers, greedy by size; where that leaves more than
/// 1% of the arena above the live peak in holes, the others of the greedy
/// packers in turn until one leaves no more, keeping the smallest arena
/// (the first on ties), as XLA keeps the best of its heap algorithms.
/// Beyond the limit, first fit.
int64_t packArena(llvm::ArrayRef<ArenaBuffer> buffers,
                  llvm::SmallVectorImpl<int64_t> &offsets,
                  size_t greedyBySizeLimit = kGreedyBySizeLimit);

} // namespace autoshard

#endif // AUTOSHARD_CONVERSION_ARENAPACKING_H
