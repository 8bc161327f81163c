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

/// Sets `offsets[i]` of every buffer so that two buffers whose lifetimes
/// share a position never share a byte, and returns the arena's size (the
/// highest end).
///
/// Up to `greedyBySizeLimit` buffers, the largest is placed first, each at
/// the lowest offset free for its whole lifetime ("greedy by size", as
/// TensorFlow Lite's arena planner does; ties go to the earlier buffer).
/// Beyond that, buffers are placed in program order at the lowest free
/// range when they are allocated and give it back after their last read
/// (first fit); at one position, allocations come first.
int64_t packArena(llvm::ArrayRef<ArenaBuffer> buffers,
                  llvm::SmallVectorImpl<int64_t> &offsets,
                  size_t greedyBySizeLimit = kGreedyBySizeLimit);

} // namespace autoshard

#endif // AUTOSHARD_CONVERSION_ARENAPACKING_H
