// Rotary position embedding on the GPU, rotate-half pairing (GPT-NeoX,
// Llama), as runtime/src/cpu/Rope.cpp: the angle t * theta^(-2i/head_dim)
// and its cosine and sine in double, rounded to float, then the rotation in
// float with explicit round-to-nearest products (no FMA contraction), so
// that results are the CPU's bit for bit up to the last-ulp differences of
// the device's double pow/cos/sin.
#include "ArgChecks.h"
#include "Cuda.h"
#include "Element.cuh"
#include "Grid.cuh"

#include <cmath>

namespace autoshard::rt::cuda {
namespace {

/// At most this many blocks along y, each handling a strided subset of the
/// batch x heads head vectors. A thread computes the cosine and sine of its
/// (position, pair) once per y block instead of once per head vector:
/// seq * head_dim / 2 * (blocks along y) double sincos in all, next to
/// batch * seq * heads * head_dim multiply-adds.
constexpr int64_t kSliceBlocks = 32;

/// Rotates the pair (x[i], x[i + half]) of every head vector of
/// x[batch, seq, heads, head_dim] by +angle, or by -angle when `inverse`
/// (the gradient: a rotation's transpose is its inverse). Thread (t, i) of
/// the x dimension handles pair i at position t, so that neighbouring
/// threads touch neighbouring elements. Each pair is read before it is
/// written by the same thread.
template <typename T>
__global__ void ropeKernel(const T *x, T *y, int64_t batch, int64_t seq,
                           int64_t heads, int64_t headDim, float theta,
                           bool inverse) {
  const int64_t half = headDim / 2;
  const int64_t pairs = seq * half;
  const int64_t slices = batch * heads;
  for (int64_t p : gridThreads(pairs)) {
    const int64_t t = p / half, i = p % half;
    const double invFreq =
        pow(static_cast<double>(theta),
            -2.0 * static_cast<double>(i) / static_cast<double>(headDim));
    const double angle = static_cast<double>(t) * invFreq;
    const float c = static_cast<float>(cos(angle));
    const float s = static_cast<float>(inverse ? -sin(angle) : sin(angle));
    for (int64_t slice : gridBlocksY(slices)) {
      const int64_t b = slice / heads, h = slice % heads;
      const int64_t base = ((b * seq + t) * heads + h) * headDim;
      const float lo = load(x, base + i), hi = load(x, base + i + half);
      store(y, base + i, __fsub_rn(__fmul_rn(lo, c), __fmul_rn(hi, s)));
      store(y, base + i + half, __fadd_rn(__fmul_rn(hi, c), __fmul_rn(lo, s)));
    }
  }
}

void rotate(cudaStream_t stream, const char *op, int32_t dtype, const void *x,
            void *y, int64_t batch, int64_t seq, int64_t heads, int64_t headDim,
            float theta, bool inverse) {
  checkRopeShape(op, batch, seq, heads, headDim, theta);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t pairs = seq * (headDim / 2), slices = batch * heads;
    if (pairs == 0 || slices == 0)
      return;
    dim3 grid(blocksFor(pairs),
              unsigned(slices < kSliceBlocks ? slices : kSliceBlocks));
    ropeKernel<<<grid, kThreads, 0, stream>>>(static_cast<const T *>(x),
                                              static_cast<T *>(y), batch, seq,
                                              heads, headDim, theta, inverse);
    checkLaunch(op);
  });
}

} // namespace

void ropeFwd(cudaStream_t stream, int32_t dtype, const void *x, void *y,
             int64_t batch, int64_t seq, int64_t heads, int64_t headDim,
             float theta) {
  rotate(stream, "rope_fwd", dtype, x, y, batch, seq, heads, headDim, theta,
         /*inverse=*/false);
}

void ropeGrad(cudaStream_t stream, int32_t dtype, const void *dy, void *dx,
              int64_t batch, int64_t seq, int64_t heads, int64_t headDim,
              float theta) {
  rotate(stream, "rope_grad", dtype, dy, dx, batch, seq, heads, headDim, theta,
         /*inverse=*/true);
}

} // namespace autoshard::rt::cuda
