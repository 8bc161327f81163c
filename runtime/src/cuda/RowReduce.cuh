// Block-wide reductions for kernels that give one thread block to one row
// (norms, softmax cross-entropy): deterministic, and every thread of the
// block receives the result.
#pragma once

#include "Grid.cuh"

#include <cstdint>

namespace autoshard::rt::cuda {

/// Threads per block of the row kernels: a multiple of the warp size, which
/// blockReduce relies on. Every row kernel is launched with exactly this.
constexpr int kRowThreads = 256;

struct SumOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
/// As the CPU's rowMaximum: a comparison, so NaN is skipped here and
/// poisons the exponential sum instead.
struct MaxOp {
  __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};

/// Combines one value per thread of a block of kRowThreads threads and
/// returns the result to every thread. Fixed order (a shuffle tree within
/// each warp, then the warps in index order), so that a run repeats
/// bit for bit. Every thread of the block must call it (it synchronises).
template <typename T, typename Op> __device__ T blockReduce(T value, Op op) {
  constexpr int kWarps = kRowThreads / kWarp;
  __shared__ T warpResults[kWarps];
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    value = op(value, __shfl_down_sync(kFullMask, value, offset));
  __syncthreads(); // every thread has read the previous call's results
  if (threadIdx.x % kWarp == 0)
    warpResults[threadIdx.x / kWarp] = value;
  __syncthreads();
  T total = warpResults[0];
  for (int w = 1; w < kWarps; ++w)
    total = op(total, warpResults[w]);
  return total;
}

template <typename T> __device__ T blockSum(T value) {
  return blockReduce(value, SumOp{});
}
__device__ inline float blockMax(float value) {
  return blockReduce(value, MaxOp{});
}

} // namespace autoshard::rt::cuda
