// exp for the CPU kernels' inner loops, in plain float arithmetic that
// vectorizes.
#pragma once

#include <cstdint>
#include <cstring>

namespace autoshard::rt::cpu {

/// e^x to within 2 ulp of the correctly rounded result for normal
/// results (denormal ones within one unit of the least denormal), +inf
/// above 88.73, 0 below -103.98, NaN for NaN. glibc's expf is a call the
/// compiler cannot vectorize (and -fveclib=libmvec needs AVX2, Reduce.h),
/// so the softmax, GELU and SiLU loops ran one element at a time; this is
/// branch-free and inlines, and a loop of it becomes vector code on SSE2.
///
/// x = n ln 2 + r with n = round(x / ln 2) (the 1.5 * 2^23 shifter rounds
/// it, and its bits hold n) and |r| <= ln 2 / 2 (ln 2 split in two, the
/// high part short enough that n times it is exact); e^r by its Taylor
/// series to r^7/7!, whose truncation error, 5e-9 relative, is below half
/// an ulp; 2^n as the product of two normal powers of two, so that results
/// down to the denormals need no special case.
inline float fastExp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2High = 0.693359375f; // 355/512: 9 significant bits
  constexpr float kLn2Low = -2.12194440054690583e-4f; // ln 2 - kLn2High
  constexpr float kShifter = 12582912.0f;             // 1.5 * 2^23
  constexpr uint32_t kShifterBits = 0x4B400000u;
  // The clamps keep n in [-150, 128]; NaN passes both.
  x = x < -104.0f ? -104.0f : x;
  x = x > 89.0f ? 89.0f : x;
  float t = x * kLog2e + kShifter;
  float n = t - kShifter;
  float r = x - n * kLn2High;
  r = r - n * kLn2Low;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // n from t's bits, in unsigned arithmetic (NaN's bits stay defined);
  // half = n >> 1, arithmetically.
  uint32_t bits;
  std::memcpy(&bits, &t, sizeof bits);
  uint32_t whole = bits - kShifterBits;
  uint32_t half = (whole >> 1) | (whole & 0x80000000u);
  uint32_t rest = whole - half;
  uint32_t aBits = (half + 127u) << 23, bBits = (rest + 127u) << 23;
  float a, b;
  std::memcpy(&a, &aBits, sizeof a);
  std::memcpy(&b, &bBits, sizeof b);
  return p * a * b;
}

} // namespace autoshard::rt::cpu
