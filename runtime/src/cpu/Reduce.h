// Row reductions (softmax, norms) and the shifted exponential, CPU kernels.
#pragma once

#include "cpu/Exp.h"

#include <cmath>
#include <cstdint>

namespace autoshard::rt::cpu {

// A softmax row is a max, an exp and a sum, written as three loops. The
// reductions keep eight independent partial results, which hides the add
// latency and lets the compiler use vector registers without reassociating
// a single chain (which it may not do for floats). The exp loop has no
// loop-carried dependence and calls fastExp (Exp.h), which vectorizes;
// clang 22's -fveclib=libmvec is not used because, without -mavx2, it
// calls glibc's 8-wide AVX2 variant with SSE register halves (wrong
// results).

constexpr int kPartials = 8;

/// The maximum of x[0, n), n >= 1. NaN elements are skipped here (a
/// comparison with NaN is false) and still poison the exp sum.
inline float rowMaximum(const float *x, int64_t n) {
  float part[kPartials];
  for (int k = 0; k < kPartials; ++k)
    part[k] = x[0];
  int64_t j = 0;
  for (; j + kPartials <= n; j += kPartials)
    for (int k = 0; k < kPartials; ++k)
      part[k] = x[j + k] > part[k] ? x[j + k] : part[k];
  float m = part[0];
  for (int k = 1; k < kPartials; ++k)
    m = part[k] > m ? part[k] : m;
  for (; j < n; ++j)
    m = x[j] > m ? x[j] : m;
  return m;
}

/// x[j] = exp(x[j] - shift) for j < n.
inline void expShifted(float *x, int64_t n, float shift) {
  for (int64_t j = 0; j < n; ++j)
    x[j] = fastExp(x[j] - shift);
}

/// sum of x[0, n) with float partial sums: for attention rows, whose terms
/// are at most 1 and at most a few thousand.
inline float rowSum(const float *x, int64_t n) {
  float part[kPartials] = {};
  int64_t j = 0;
  for (; j + kPartials <= n; j += kPartials)
    for (int k = 0; k < kPartials; ++k)
      part[k] += x[j + k];
  float sum = 0.0f;
  for (; j < n; ++j)
    sum += x[j];
  for (int k = 0; k < kPartials; ++k)
    sum += part[k];
  return sum;
}

/// sum of x[0, n) with double partial sums: for vocabulary-sized rows.
inline double rowSumDouble(const float *x, int64_t n) {
  double part[kPartials] = {};
  int64_t j = 0;
  for (; j + kPartials <= n; j += kPartials)
    for (int k = 0; k < kPartials; ++k)
      part[k] += x[j + k];
  double sum = 0.0;
  for (; j < n; ++j)
    sum += x[j];
  for (int k = 0; k < kPartials; ++k)
    sum += part[k];
  return sum;
}

/// sum of (x - shift)^2 over x[0, n), in double with partial sums: the
/// variance (shift = mean) and mean square (shift = 0) of norm rows.
inline double rowSumSquares(const float *x, int64_t n, double shift) {
  double part[kPartials] = {};
  int64_t j = 0;
  for (; j + kPartials <= n; j += kPartials)
    for (int k = 0; k < kPartials; ++k) {
      double d = x[j + k] - shift;
      part[k] += d * d;
    }
  double sum = 0.0;
  for (; j < n; ++j) {
    double d = x[j] - shift;
    sum += d * d;
  }
  for (int k = 0; k < kPartials; ++k)
    sum += part[k];
  return sum;
}

} // namespace autoshard::rt::cpu
