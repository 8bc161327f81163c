// The CUDA emulator's device side: what a kernel file (.cu) needs so that
// the host C++ compiler builds it into code that runs on the CPU.
//
// The emulated build compiles each of the backend's .cu files as C++ with
// this header included first, after rewrite_launches.py has turned every
// `kernel<<<grid, block, shmem, stream>>>(args)` into a call of
// asrt_emu::launch. A launch runs its blocks one after another on the
// calling thread; the threads of a block run as fibers (ucontext), each
// until it finishes or reaches a barrier (__syncthreads, a warp shuffle),
// where the emulator switches to the next. So block barriers, warp
// shuffles and shared memory (`__shared__` becomes a thread-local static:
// one copy per OS thread, shared by the fibers of the block that runs) mean
// what they mean on a GPU, and a kernel's results can be compared with the
// CPU backend's without a GPU (docs/CudaBackend.md, "Emulated build").
//
// What it does not model: the GPU's floating-point units (host expf, tanhf,
// ... differ from the device's in the last bits), timing, memory spaces (a
// kernel may dereference a host pointer here), and races that no schedule
// of whole inter-barrier segments exposes. ASRT_CUDA_EMU_SCHEDULE=reverse
// runs each block's threads in the reverse order, which changes the result
// of a kernel whose threads race between two barriers.
#pragma once

// Keep CUDA's host_defines.h from defining __shared__ as nothing.
#define __shared__ static thread_local

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

// Host compilers see CUDA's launch bounds as an attribute they do not know.
// (__noinline__ cannot be a macro here, libstdc++ spells the GNU attribute
// that way: rewrite_launches.py replaces it in the kernel files.)
#undef __launch_bounds__
#define __launch_bounds__(...)

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace asrt_emu {

/// The fiber being run: its thread and block coordinates.
struct ThreadCoords {
  uint3 thread;
  uint3 block;
  dim3 blockSize;
  dim3 gridSize;
  unsigned lane; // linear thread index % 32
};
extern thread_local const ThreadCoords *current;

/// Runs body() as every thread of a grid<<<grid, block>>> on `stream`: sets
/// cudaErrorInvalidConfiguration (returned by cudaGetLastError) and runs
/// nothing when the configuration is one CUDA refuses.
void runGrid(void (*body)(const void *), const void *closure, dim3 grid,
             dim3 block, size_t sharedBytes, cudaStream_t stream);

template <typename Body>
void launch(const Body &body, dim3 grid, dim3 block, size_t sharedBytes = 0,
            cudaStream_t stream = nullptr) {
  runGrid([](const void *closure) { (*static_cast<const Body *>(closure))(); },
          &body, grid, block, sharedBytes, stream);
}

/// Runs each block's threads in reverse order (true) or in index order,
/// as ASRT_CUDA_EMU_SCHEDULE=reverse does for the whole process.
void setReverseSchedule(bool reverse);

/// __syncthreads: waits until every thread of the block that has not exited
/// arrives.
void syncThreads();

/// A warp shuffle: publishes `value` (up to 8 bytes) for the lanes in
/// `mask`, waits until all of them arrive, and copies lane `source`'s value
/// into `out` (its own value when source is -1). A lane of `mask` that has
/// exited or does not exist is an emulation error.
void shuffle(unsigned mask, const void *value, size_t bytes, int source,
             void *out);

/// __trap: ends the launch with a sticky cudaErrorLaunchFailure.
[[noreturn]] void trap();

template <typename T>
T shuffleFrom(unsigned mask, T value, int lane, int width, int source) {
  static_assert(sizeof(T) <= 8, "a warp shuffle moves up to 8 bytes");
  // Outside the caller's width-lane segment: the caller's own value.
  int segment = lane / width * width;
  if (source < segment || source >= segment + width)
    source = -1;
  T out;
  shuffle(mask, &value, sizeof(T), source, &out);
  return out;
}

} // namespace asrt_emu

#define threadIdx (::asrt_emu::current->thread)
#define blockIdx (::asrt_emu::current->block)
#define blockDim (::asrt_emu::current->blockSize)
#define gridDim (::asrt_emu::current->gridSize)
constexpr int warpSize = 32;

inline void __syncthreads() { ::asrt_emu::syncThreads(); }
[[noreturn]] inline void __trap() { ::asrt_emu::trap(); }

template <typename T>
T __shfl_sync(unsigned mask, T value, int srcLane, int width = warpSize) {
  int lane = int(::asrt_emu::current->lane);
  int source = lane / width * width + ((srcLane % width) + width) % width;
  return ::asrt_emu::shuffleFrom(mask, value, lane, width, source);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int laneMask, int width = warpSize) {
  int lane = int(::asrt_emu::current->lane);
  return ::asrt_emu::shuffleFrom(mask, value, lane, width, lane ^ laneMask);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta,
                   int width = warpSize) {
  int lane = int(::asrt_emu::current->lane);
  return ::asrt_emu::shuffleFrom(mask, value, lane, width, lane + int(delta));
}

// Correctly rounded IEEE arithmetic: the host's, with no contraction across
// these calls (each is its own rounded operation, as on the device).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
