// The per-thread scratch arena behind ScratchFrame.
#include "Scratch.h"

#include "core/Context.h"

#include <cstdlib>
#include <limits>
#include <vector>

namespace autoshard::rt::cpu {

namespace {

// Regions start on a cache line and an AVX-512 vector, like asrt_alloc's.
constexpr size_t kAlignment = 64;

void *alignedAllocOrDie(const char *op, size_t bytes) {
  void *ptr = std::aligned_alloc(kAlignment, bytes);
  if (!ptr)
    fatal("%s: out of memory allocating %zu bytes of kernel scratch", op,
          bytes);
  return ptr;
}

struct Arena {
  ~Arena() {
    std::free(block);
    for (void *p : overflow)
      std::free(p);
  }

  char *block = nullptr;
  size_t capacity = 0;
  /// Bytes of `block` handed out in the open frame.
  size_t used = 0;
  /// Bytes the open frame has asked for, in the block or not.
  size_t frameBytes = 0;
  /// Regions of the open frame that did not fit in `block`.
  std::vector<void *> overflow;
  bool open = false;
  int64_t heapAllocations = 0;
};

thread_local Arena arena;

} // namespace

ScratchFrame::ScratchFrame(const char *op) : op(op) {
  if (arena.open)
    fatal("%s: kernel scratch frame opened inside another one", op);
  arena.open = true;
  arena.used = 0;
  arena.frameBytes = 0;
}

ScratchFrame::~ScratchFrame() {
  if (!arena.overflow.empty()) {
    for (void *p : arena.overflow)
      std::free(p);
    arena.overflow.clear();
    // Grow once to the whole frame so that the next call of this shape fits.
    std::free(arena.block);
    arena.block = static_cast<char *>(alignedAllocOrDie(op, arena.frameBytes));
    arena.capacity = arena.frameBytes;
    ++arena.heapAllocations;
  }
  arena.open = false;
}

void *ScratchFrame::takeBytes(int64_t count, size_t elementSize) {
  if (count < 0)
    fatal("%s: scratch request of %lld elements is negative", op,
          static_cast<long long>(count));
  const size_t maxBytes = std::numeric_limits<size_t>::max() / 2;
  if (static_cast<uint64_t>(count) > maxBytes / elementSize)
    fatal("%s: scratch request of %lld elements of %zu bytes overflows", op,
          static_cast<long long>(count), elementSize);
  // Rounded up so that every region starts aligned; an empty request still
  // gets a distinct, aligned pointer.
  size_t bytes = static_cast<size_t>(count) * elementSize;
  bytes = bytes == 0 ? kAlignment
                     : (bytes + kAlignment - 1) / kAlignment * kAlignment;
  arena.frameBytes += bytes;
  if (arena.used + bytes <= arena.capacity) {
    void *ptr = arena.block + arena.used;
    arena.used += bytes;
    return ptr;
  }
  void *ptr = alignedAllocOrDie(op, bytes);
  ++arena.heapAllocations;
  arena.overflow.push_back(ptr);
  return ptr;
}

ScratchStats scratchStats() {
  ScratchStats stats;
  stats.capacityBytes = static_cast<int64_t>(arena.capacity);
  stats.heapAllocations = arena.heapAllocations;
  return stats;
}

} // namespace autoshard::rt::cpu
