// The activation functions' shared pieces (GELU's tanh form, the logistic
// sigmoid), for the fixed-function kernels (Elementwise.cpp) and the generic
// ones (TensorOps.cpp), which must give the same bits.
#pragma once

#include "Exp.h"

#include <algorithm>
#include <cmath>

namespace autoshard::rt::cpu {

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
  float e = fastExp(-2.0f * std::fabs(u));
  float inv = 1.0f / (1.0f + e);
  float s = u >= 0.0f ? inv : e * inv;
  return {s, 2.0f * e * inv * inv};
}

/// d/dx of x * geluParts(x).s.
inline float geluDerivative(float x) {
  GeluParts p = geluParts(x);
  // Beyond |x| = 20 the tanh is saturated (sprime is exactly 0), but x^2
  // could overflow to inf and turn 0 * inf into NaN; the clamp only
  // keeps the product finite and changes no representable result.
  float xc = std::clamp(x, -20.0f, 20.0f);
  float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * xc * xc);
  return p.s + xc * p.sprime * du;
}

/// The logistic sigmoid and its complement 1 - sigmoid, both through
/// exp(-|g|) for the same reasons as geluParts: no overflow, and
/// silu(g) = g sigmoid(g) keeps its relative accuracy in the left tail.
struct SigmoidParts {
  float s; // sigmoid(g)
  float oneMinusS;
};

inline SigmoidParts sigmoidParts(float g) {
  float e = fastExp(-std::fabs(g));
  float inv = 1.0f / (1.0f + e);
  // Two selects rather than a select of structs, which the vectorizer
  // would not take.
  float tail = e * inv;
  return {g >= 0.0f ? inv : tail, g >= 0.0f ? tail : inv};
}

/// silu'(g) = s + g s (1 - s). For |g| beyond ~100, s (1 - s) is 0 or a
/// denormal and g is finite, so the product cannot become NaN.
inline float siluDerivative(float g) {
  SigmoidParts p = sigmoidParts(g);
  return p.s + g * p.s * p.oneMinusS;
}

} // namespace autoshard::rt::cpu
