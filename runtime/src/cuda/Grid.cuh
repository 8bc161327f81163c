// How a kernel's threads cover its work: the strided loops (the grid's
// threads over elements, the grid's blocks over rows, tiles or chunks, a
// block's threads or a warp's lanes over a row) and the launch sizes that
// go with them.
#pragma once

#include <cstdint>

namespace autoshard::rt::cuda {

/// The indices first, first + step, ... below last, for a range-for: a
/// strided loop's iteration space. `last` is read once, when the loop
/// starts (the loops here never change their bound). The step keeps the
/// type of CUDA's coordinate it comes from, so that `i += step` is the
/// arithmetic a hand-written loop `i += blockDim.x` does.
template <typename I, typename Step = I> struct Strided {
  I first, last;
  Step step;

  struct Iterator {
    I i;
    Step step;
    __device__ __forceinline__ I operator*() const { return i; }
    __device__ __forceinline__ Iterator &operator++() {
      i += step;
      return *this;
    }
    /// A loop runs while its index is below the bound: `<`, not `!=`, since
    /// the step may pass the bound.
    __device__ __forceinline__ bool operator!=(const Iterator &end) const {
      return i < end.i;
    }
  };
  __device__ __forceinline__ Iterator begin() const { return {first, step}; }
  __device__ __forceinline__ Iterator end() const { return {last, step}; }
};

/// The elements of [0, n) this thread visits when each thread of the grid
/// takes one and the grid strides over the rest (the elementwise kernels).
__device__ __forceinline__ Strided<int64_t> gridThreads(int64_t n) {
  return {blockIdx.x * int64_t(blockDim.x) + threadIdx.x, n,
          int64_t(blockDim.x) * gridDim.x};
}

/// The items of [0, n) (rows, tiles, chunks) this block visits when each
/// block of the grid takes one and the grid strides over the rest. The same
/// for every thread of a block, so the body may synchronise the block.
__device__ __forceinline__ Strided<int64_t, unsigned> gridBlocks(int64_t n) {
  return {blockIdx.x, n, gridDim.x};
}

/// Threads per warp, and the shuffle mask that names all of them.
constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

/// The elements of [0, n) lane `lane` visits when a warp's lanes stride over
/// them (a row one warp owns).
template <typename I>
__device__ __forceinline__ Strided<I, int> warpLanes(I n, int lane) {
  return {I(lane), n, kWarp};
}

/// The elements of [begin, end) this thread visits when the block's threads
/// stride over them (the columns of a block's row).
template <typename I>
__device__ __forceinline__ Strided<I, unsigned> blockThreads(I begin, I end) {
  return {I(begin + threadIdx.x), end, blockDim.x};
}
template <typename I>
__device__ __forceinline__ Strided<I, unsigned> blockThreads(I n) {
  return blockThreads(I(0), n);
}

/// The rows of [0, n) this block's y-threads visit (a block of x columns
/// by y lanes, each lane summing every blockDim.y-th row).
template <typename I>
__device__ __forceinline__ Strided<I, unsigned> blockThreadsY(I n) {
  return {I(threadIdx.y), n, blockDim.y};
}

/// The items of [0, n) this block visits along the grid's y dimension
/// (a second, independent dimension of work beside gridThreads' x).
__device__ __forceinline__ Strided<int64_t, unsigned> gridBlocksY(int64_t n) {
  return {blockIdx.y, n, gridDim.y};
}

/// The rows of [0, n) warp `warp` of this block visits when each block
/// takes `perBlock` consecutive rows, one a warp, and the grid strides over
/// the rest (a row one warp owns).
__device__ __forceinline__ Strided<int64_t> gridWarps(int64_t n, int perBlock,
                                                      int warp) {
  return {blockIdx.x * int64_t(perBlock) + warp, n,
          int64_t(gridDim.x) * perBlock};
}

/// Threads per block of the elementwise kernels.
constexpr int kThreads = 256;

/// Blocks of a grid whose blocks stride over `items` (gridBlocks): one an
/// item, at least one (a launch of none is invalid) and at most `maxBlocks`,
/// beyond which each block takes several.
inline unsigned blocksOver(int64_t items, int64_t maxBlocks) {
  return static_cast<unsigned>(items < 1           ? 1
                               : items > maxBlocks ? maxBlocks
                                                   : items);
}

/// Blocks of kThreads threads that cover `n` elements with gridThreads (at
/// most 65535 x 4 blocks unless `maxBlocks` says fewer).
inline unsigned blocksFor(int64_t n, int64_t maxBlocks = 65535 * 4) {
  return blocksOver((n + kThreads - 1) / kThreads, maxBlocks);
}

/// Blocks of a kernel that gives a block to a row (at most 65535 x 16).
inline unsigned rowBlocksFor(int64_t rows) {
  return blocksOver(rows, 65535 * 16);
}

/// Blocks of a kernel that gives a block to a tile of rows or columns (at
/// most 65535).
inline unsigned tileBlocksFor(int64_t tiles) {
  return blocksOver(tiles, 65535);
}

} // namespace autoshard::rt::cuda
