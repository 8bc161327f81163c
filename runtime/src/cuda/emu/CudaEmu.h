// The CUDA emulator's device side: what a kernel file (.cu) needs so that
// the host C++ compiler builds it into code that runs on the CPU.
//
// The emulated build compiles each of the backend's .cu files as C++ with
// this header included first, after rewrite_launches.py has turned every
// `kernel<<<grid, block, shmem, stream>>>(args)` into a call of
// asrt_emu::launchKernel. A launch is queued on its stream (Streams.cpp);
// when the stream runs it, its blocks run one after another on the host
// thread that runs the stream; the threads of a block run as fibers, each
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
#include <functional>
#include <type_traits>

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

/// Queues a grid<<<grid, block>>> on `stream` (the null stream runs it at
/// once) whose every thread runs body(); sets cudaErrorInvalidConfiguration
/// or cudaErrorInvalidResourceHandle (returned by cudaGetLastError) and
/// queues nothing when CUDA would refuse the launch.
void runGrid(std::function<void()> body, dim3 grid, dim3 block,
             size_t sharedBytes, cudaStream_t stream);

/// A launch of `body` (which may capture by reference only on the null
/// stream, where it runs before launch returns).
template <typename Body>
void launch(const Body &body, dim3 grid, dim3 block, size_t sharedBytes = 0,
            cudaStream_t stream = nullptr) {
  runGrid(std::function<void()>(body), grid, block, sharedBytes, stream);
}

/// What rewrite_launches.py makes of kernel<<<grid, block, shmem,
/// stream>>>(args...): the arguments are copied now, as CUDA copies a
/// kernel's parameters at the launch, and every thread calls kernel(args...)
/// when the stream runs the grid.
template <typename Kernel, typename... Args>
void launchKernel(Kernel kernel, dim3 grid, dim3 block, size_t sharedBytes,
                  cudaStream_t stream, Args... args) {
  runGrid([kernel, args...] { kernel(args...); }, grid, block, sharedBytes,
          stream);
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

/// A warp collective: publishes `value` for the lanes in `mask`, waits
/// until all arrive, and copies every lane's value into all[32] (0 for
/// lanes outside the mask). What the WMMA model below exchanges fragments
/// with.
void gather(unsigned mask, uint64_t value, uint64_t *all);

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
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  char unused = 0, out;
  ::asrt_emu::shuffle(mask, &unused, 1, -1, &out);
}
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

// ---- WMMA (mma.h): warp-level matrix multiply-accumulate ----
//
// A model of the nvcuda::wmma API that the tensor-core kernels use, for the
// 16 x 16 x 16 shape. CUDA leaves the mapping of a fragment's elements to
// lanes unspecified (a kernel may only apply the same operation to every
// element); here lane l holds the row-major elements [l * n, (l + 1) * n)
// of the fragment's matrix, n = num_elements. A load or store moves only
// the calling lane's elements and does not synchronize the warp (CUDA does
// not promise that it does): a kernel that reads shared memory other lanes
// wrote needs its own __syncwarp, and reads stale values here without one.
// mma_sync exchanges the lanes' fragments (asrt_emu::gather), so it waits
// for the whole warp, as on a GPU. What CUDA requires is checked: a 256-bit aligned
// pointer and a leading dimension that is a multiple of 16 bytes (a
// sticky launch failure otherwise). Products of bf16 values are exact in
// f32 and accumulate in f32 in k order; tensor cores may sum in another
// order.
namespace asrt_emu {
[[noreturn]] void wmmaMisuse(const char *what, const void *pointer,
                             unsigned ldm);
} // namespace asrt_emu

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T,
          typename Layout = void>
class fragment {
public:
  static constexpr int rows = std::is_same<Use, matrix_b>::value ? K : M;
  static constexpr int cols = std::is_same<Use, matrix_a>::value ? K : N;
  static constexpr int num_elements = rows * cols / 32;
  T x[num_elements];
};

namespace detail {
template <typename T> float toFloat(T v) { return static_cast<float>(v); }
inline float toFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> T fromFloat(float v) { return static_cast<T>(v); }
template <> inline __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <typename T> void checkMemory(const T *p, unsigned ldm) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0 || (ldm * sizeof(T)) % 16 != 0)
    ::asrt_emu::wmmaMisuse("a fragment's memory", p, ldm);
}
/// Element e of this lane's part of a rows x cols fragment: its row and
/// column.
template <typename Frag> void position(int e, int &r, int &c) {
  int i = int(::asrt_emu::current->lane) * Frag::num_elements + e;
  r = i / Frag::cols;
  c = i % Frag::cols;
}
template <typename Layout> constexpr bool isRowMajor() {
  return std::is_same<Layout, row_major>::value;
}
/// Element (r, c) of a matrix at p with leading dimension ldm.
template <typename T>
T &element(T *p, int r, int c, unsigned ldm, bool rowMajor) {
  return rowMajor ? p[size_t(r) * ldm + c] : p[r + size_t(c) * ldm];
}
} // namespace detail

/// Every element = value (of the fragment's element type, not deduced
/// from the argument, as in CUDA).
template <typename Use, int M, int N, int K, typename T, typename Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout> &f,
                   const typename std::common_type<T>::type &value) {
  for (int e = 0; e < f.num_elements; ++e)
    f.x[e] = value;
}

// matrix_a / matrix_b: the layout is the fragment's.
template <typename Use, int M, int N, int K, typename T, typename Layout>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout> &f, const T *p,
                      unsigned ldm) {
  static_assert(!std::is_same<Use, accumulator>::value,
                "an accumulator load names its layout");
  detail::checkMemory(p, ldm);
  using Frag = fragment<Use, M, N, K, T, Layout>;
  for (int e = 0; e < Frag::num_elements; ++e) {
    int r, c;
    detail::position<Frag>(e, r, c);
    f.x[e] = detail::element(p, r, c, ldm, detail::isRowMajor<Layout>());
  }
}

template <int M, int N, int K, typename T>
void load_matrix_sync(fragment<accumulator, M, N, K, T> &f, const T *p,
                      unsigned ldm, layout_t layout) {
  detail::checkMemory(p, ldm);
  using Frag = fragment<accumulator, M, N, K, T>;
  for (int e = 0; e < Frag::num_elements; ++e) {
    int r, c;
    detail::position<Frag>(e, r, c);
    f.x[e] = detail::element(p, r, c, ldm, layout == mem_row_major);
  }
}

template <int M, int N, int K, typename T>
void store_matrix_sync(T *p, const fragment<accumulator, M, N, K, T> &f,
                       unsigned ldm, layout_t layout) {
  detail::checkMemory(p, ldm);
  using Frag = fragment<accumulator, M, N, K, T>;
  for (int e = 0; e < Frag::num_elements; ++e) {
    int r, c;
    detail::position<Frag>(e, r, c);
    detail::element(p, r, c, ldm, layout == mem_row_major) = f.x[e];
  }
}

/// d = a b + c. Every lane gathers the others' a and b fragments.
template <int M, int N, int K, typename Ta, typename La, typename Lb,
          typename Tc>
void mma_sync(fragment<accumulator, M, N, K, Tc> &d,
              const fragment<matrix_a, M, N, K, Ta, La> &a,
              const fragment<matrix_b, M, N, K, Ta, Lb> &b,
              const fragment<accumulator, M, N, K, Tc> &c) {
  using FragA = fragment<matrix_a, M, N, K, Ta, La>;
  using FragB = fragment<matrix_b, M, N, K, Ta, Lb>;
  using FragC = fragment<accumulator, M, N, K, Tc>;
  uint64_t as[32], bs[32];
  ::asrt_emu::gather(0xffffffffu, reinterpret_cast<uintptr_t>(&a), as);
  ::asrt_emu::gather(0xffffffffu, reinterpret_cast<uintptr_t>(&b), bs);
  auto elementA = [&](int r, int k) {
    int i = r * K + k;
    return detail::toFloat(reinterpret_cast<const FragA *>(
        uintptr_t(as[i / FragA::num_elements]))->x[i % FragA::num_elements]);
  };
  auto elementB = [&](int k, int col) {
    int i = k * N + col;
    return detail::toFloat(reinterpret_cast<const FragB *>(
        uintptr_t(bs[i / FragB::num_elements]))->x[i % FragB::num_elements]);
  };
  Tc result[FragC::num_elements];
  for (int e = 0; e < FragC::num_elements; ++e) {
    int r, col;
    detail::position<FragC>(e, r, col);
    float sum = detail::toFloat(c.x[e]);
    for (int k = 0; k < K; ++k)
      sum += elementA(r, k) * elementB(k, col);
    result[e] = detail::fromFloat<Tc>(sum);
  }
  __syncwarp(); // every lane has read the others' fragments
  for (int e = 0; e < FragC::num_elements; ++e)
    d.x[e] = result[e];
}

} // namespace wmma
} // namespace nvcuda
