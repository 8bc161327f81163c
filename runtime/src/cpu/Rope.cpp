// Rotary position embedding on the CPU, rotate-half pairing (GPT-NeoX, Llama).
#include "Checks.h"
#include "Element.h"
#include "Scratch.h"

#include "core/Context.h"

#include <cmath>

using autoshard::rt::fatal;
using autoshard::rt::OpTimer;
using namespace autoshard::rt::cpu;

namespace {

/// Rotates every pair (x[i], x[i + half]) of every head vector of
/// x[batch, seq, heads, head_dim] by +angle (forward) or -angle (gradient:
/// the transpose of a rotation is its inverse).
///
/// The cos/sin table [seq, half] is built once per call with the angle
/// t * theta^(-2i/head_dim) and its cosine and sine in double, then rounded
/// to float: in float the angle alone is off by ~t * 6e-8 rad, which at
/// t = 8192 is a 5e-4 relative error in the rotated values. The table costs
/// seq * head_dim / 2 sincos next to batch * seq * heads * head_dim
/// multiply-adds.
template <typename T>
void rotate(const char *op, const T *x, T *y, int64_t batch, int64_t seq,
            int64_t heads, int64_t headDim, float theta, bool inverse) {
  const int64_t half = headDim / 2;
  ScratchFrame scratch(op);
  float *cosTable = scratch.take<float>(seq * half);
  float *sinTable = scratch.take<float>(seq * half);
  for (int64_t i = 0; i < half; ++i) {
    double invFreq =
        std::pow(static_cast<double>(theta),
                 -2.0 * static_cast<double>(i) / static_cast<double>(headDim));
    for (int64_t t = 0; t < seq; ++t) {
      double angle = static_cast<double>(t) * invFreq;
      cosTable[t * half + i] = static_cast<float>(std::cos(angle));
      sinTable[t * half + i] =
          static_cast<float>(inverse ? -std::sin(angle) : std::sin(angle));
    }
  }
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t) {
      const float *c = cosTable + t * half;
      const float *s = sinTable + t * half;
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t base = ((b * seq + t) * heads + h) * headDim;
        const T *src = x + base;
        T *dst = y + base;
        // Both halves are read before either is written, so even y == x
        // would be safe (abi.h asks for distinct buffers anyway).
        for (int64_t i = 0; i < half; ++i) {
          float lo = load(src, i), hi = load(src, i + half);
          store(dst, i, lo * c[i] - hi * s[i]);
          store(dst, i + half, hi * c[i] + lo * s[i]);
        }
      }
    }
}

} // namespace

extern "C" void asrt_rope_fwd(asrt_context *ctx, int32_t dtype, const void *x,
                              void *y, int64_t batch, int64_t seq,
                              int64_t heads, int64_t head_dim, float theta) {
  OpTimer timer(ctx, "rope_fwd");
  const char *op = "rope_fwd";
  checkRopeShape(op, batch, seq, heads, head_dim, theta);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    rotate(op, static_cast<const T *>(x), static_cast<T *>(y), batch, seq,
           heads, head_dim, theta, /*inverse=*/false);
  });
}

extern "C" void asrt_rope_grad(asrt_context *ctx, int32_t dtype, const void *dy,
                               void *dx, int64_t batch, int64_t seq,
                               int64_t heads, int64_t head_dim, float theta) {
  OpTimer timer(ctx, "rope_grad");
  const char *op = "rope_grad";
  checkRopeShape(op, batch, seq, heads, head_dim, theta);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    rotate(op, static_cast<const T *>(dy), static_cast<T *>(dx), batch, seq,
           heads, head_dim, theta, /*inverse=*/true);
  });
}
