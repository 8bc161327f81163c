// Reused scratch memory of the CPU kernels: no heap allocation per call.
#pragma once

#include <cstddef>
#include <cstdint>

namespace autoshard::rt::cpu {

/// The scratch memory of one kernel call, carved from an arena that belongs
/// to the calling thread.
///
/// Why per thread and not per asrt_context: a kernel runs on the thread that
/// calls it and returns before that thread makes its next call, so a
/// thread's arena is never used by two calls at once, needs no lock and no
/// lookup from context to buffer, and is released when its thread ends. A
/// side table keyed by context could not learn when a context dies (that
/// lives in core) and would keep its memory, or hand it to a new context
/// allocated at the same address.
///
/// The arena keeps one block and grows it to the largest frame seen: the
/// first call of a shape may allocate, and every later call that needs no
/// more memory (a training loop repeats the same shapes) allocates nothing.
/// A frame that outgrows the block gets its extra regions from the heap
/// (earlier pointers of the frame stay valid) and, when it ends, the block
/// is replaced by one that fits the whole frame.
///
/// Scratch memory is not counted in asrt_alloc's peak-memory statistics,
/// which compare against the compiler's memory plan of tensors.
class ScratchFrame {
public:
  /// Only one frame may be open per thread; a nested one is fatal (it would
  /// be a kernel calling another kernel's entry point) and names `op`.
  explicit ScratchFrame(const char *op);
  ~ScratchFrame();
  ScratchFrame(const ScratchFrame &) = delete;
  ScratchFrame &operator=(const ScratchFrame &) = delete;

  /// `count` uninitialised elements, 64-byte aligned, valid until the frame
  /// ends. A negative count or a byte size that overflows is fatal.
  template <typename T> T *take(int64_t count) {
    return static_cast<T *>(takeBytes(count, sizeof(T)));
  }

private:
  void *takeBytes(int64_t count, size_t elementSize);
  const char *op;
};

/// The calling thread's arena, for tests of the no-allocation guarantee.
struct ScratchStats {
  /// Bytes of the reusable block.
  int64_t capacityBytes = 0;
  /// Heap allocations the arena has made since the thread started.
  int64_t heapAllocations = 0;
};
ScratchStats scratchStats();

} // namespace autoshard::rt::cpu
