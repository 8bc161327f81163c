// Elementwise activations on the CPU: ReLU and GPT-2's tanh-approximated GELU.
#include "Checks.h"
#include "core/Context.h"

#include <algorithm>
#include <cmath>

using autoshard::rt::OpTimer;
using autoshard::rt::cpu::checkCount;

// Every loop below reads element i of each input before writing element i of
// the output, so outputs may alias inputs as the ABI allows.

extern "C" void asrt_relu_fwd_f32(asrt_context *ctx, const float *x, float *y,
                                  int64_t n) {
  OpTimer timer(ctx, "relu_fwd_f32");
  checkCount("relu_fwd_f32", "n", n);
  // Written so that a NaN input stays NaN (as torch.relu does) instead of
  // being hidden as 0 from the loss.
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

extern "C" void asrt_relu_grad_f32(asrt_context *ctx, const float *dy,
                                   const float *x, float *dx, int64_t n) {
  OpTimer timer(ctx, "relu_grad_f32");
  checkCount("relu_grad_f32", "n", n);
  for (int64_t i = 0; i < n; ++i)
    dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

/// 0.5 (1 + tanh(u)) is the logistic sigmoid of 2u. Evaluating it through
/// exp(-2|u|) avoids the cancellation of 1 + tanh(u) for negative u (the
/// left tail of GELU keeps its relative accuracy) and never overflows.
struct GeluParts {
  float s;      // 0.5 (1 + tanh(u))
  float sprime; // d s / d u = 2 s (1 - s), i.e. 0.5 (1 - tanh(u)^2)
};

inline GeluParts geluParts(float x) {
  float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  float e = std::exp(-2.0f * std::fabs(u));
  float inv = 1.0f / (1.0f + e);
  float s = u >= 0.0f ? inv : e * inv;
  return {s, 2.0f * e * inv * inv};
}

} // namespace

extern "C" void asrt_gelu_fwd_f32(asrt_context *ctx, const float *x, float *y,
                                  int64_t n) {
  OpTimer timer(ctx, "gelu_fwd_f32");
  checkCount("gelu_fwd_f32", "n", n);
  for (int64_t i = 0; i < n; ++i) {
    float xi = x[i];
    y[i] = xi * geluParts(xi).s;
  }
}

extern "C" void asrt_gelu_grad_f32(asrt_context *ctx, const float *dy,
                                   const float *x, float *dx, int64_t n) {
  OpTimer timer(ctx, "gelu_grad_f32");
  checkCount("gelu_grad_f32", "n", n);
  for (int64_t i = 0; i < n; ++i) {
    float xi = x[i];
    GeluParts p = geluParts(xi);
    // Beyond |x| = 20 the tanh is saturated (sprime is exactly 0), but x^2
    // could overflow to inf and turn 0 * inf into NaN; the clamp only keeps
    // the product finite and changes no representable result.
    float xc = std::clamp(xi, -20.0f, 20.0f);
    float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * xc * xc);
    dx[i] = dy[i] * (p.s + xc * p.sprime * du);
  }
}
