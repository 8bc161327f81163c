// The activation functions' shared pieces on the device (GELU's tanh form,
// the logistic sigmoid), for the fixed-function kernels (Elementwise.cu) and
// the generic ones (TensorOps.cu): the CPU backend's formulas (Activation.h)
// with the device's expf.
#pragma once

namespace autoshard::rt::cuda {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

/// 0.5 (1 + tanh(u)) through exp(-2|u|) (no cancellation, no overflow), and
/// its derivative in u: see geluParts in the CPU backend.
struct GeluParts {
  float s, sprime;
};
__device__ __forceinline__ GeluParts geluParts(float x) {
  float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  float e = expf(-2.0f * fabsf(u));
  float inv = 1.0f / (1.0f + e);
  float s = u >= 0.0f ? inv : e * inv;
  return {s, 2.0f * e * inv * inv};
}

/// d/dx of x * geluParts(x).s (x clamped where x^2 would overflow and the
/// tanh is saturated anyway).
__device__ __forceinline__ float geluDerivative(float x) {
  GeluParts p = geluParts(x);
  float xc = fminf(fmaxf(x, -20.0f), 20.0f);
  float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * xc * xc);
  return p.s + xc * p.sprime * du;
}

struct SigmoidParts {
  float s, oneMinusS;
};
__device__ __forceinline__ SigmoidParts sigmoidParts(float g) {
  float e = expf(-fabsf(g));
  float inv = 1.0f / (1.0f + e);
  return g >= 0.0f ? SigmoidParts{inv, e * inv} : SigmoidParts{e * inv, inv};
}

/// silu'(g) = s + g s (1 - s).
__device__ __forceinline__ float siluDerivative(float g) {
  SigmoidParts p = sigmoidParts(g);
  return p.s + g * p.s * p.oneMinusS;
}

} // namespace autoshard::rt::cuda
