// Seeded inputs and tolerance checks shared by the CPU kernel tests.
#pragma once

#include "core/Context.h"
#include "core/Dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

namespace autoshard::rt::test {

/// Each test owns a context, as the driver does; no communicator is needed.
class CpuKernelTest : public ::testing::Test {
protected:
  asrt_context ctx;
};

inline std::vector<float> uniformFloats(size_t n, uint32_t seed, float lo,
                                        float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// Outputs start as NaN so that a kernel which reads its output, or leaves
/// part of it unwritten, fails the comparison.
inline std::vector<float> poisoned(size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

/// Every element must satisfy |actual - expected| <= tol. Tolerances are
/// per element because the right bound for a sum is relative to the sum of
/// magnitudes of its terms, not to its (possibly cancelled) value.
template <typename T>
::testing::AssertionResult allWithin(const std::vector<T> &actual,
                                     const std::vector<double> &expected,
                                     const std::vector<double> &tol) {
  if (actual.size() != expected.size() || actual.size() != tol.size())
    return ::testing::AssertionFailure()
           << "size mismatch: " << actual.size() << " vs " << expected.size();
  std::ostringstream os;
  size_t bad = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    double err = std::fabs(static_cast<double>(actual[i]) - expected[i]);
    // Written so that NaN fails.
    if (!(err <= tol[i])) {
      if (bad < 5)
        os << "\n  [" << i << "] actual " << actual[i] << ", expected "
           << expected[i] << ", |error| " << err << " > " << tol[i];
      ++bad;
    }
  }
  if (bad == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << actual.size() << " elements differ:" << os.str();
}

/// Same check with a tolerance rtol * |expected| + atol.
template <typename T>
::testing::AssertionResult allNear(const std::vector<T> &actual,
                                   const std::vector<double> &expected,
                                   double rtol, double atol) {
  std::vector<double> tol(expected.size());
  for (size_t i = 0; i < tol.size(); ++i)
    tol[i] = rtol * std::fabs(expected[i]) + atol;
  return allWithin(actual, expected, tol);
}

/// Indices to probe with finite differences: all of them for small tensors,
/// an even spread of about `budget` (always including the last) otherwise.
inline std::vector<size_t> probeIndices(size_t n, size_t budget = 200) {
  std::vector<size_t> idx;
  size_t stride = n <= budget ? 1 : (n + budget - 1) / budget;
  for (size_t i = 0; i < n; i += stride)
    idx.push_back(i);
  if (n > 0 && idx.back() != n - 1)
    idx.push_back(n - 1);
  return idx;
}

/// Bit-for-bit equality; also true for two empty vectors.
inline bool bitwiseEqual(const std::vector<float> &a,
                         const std::vector<float> &b) {
  return a.size() == b.size() &&
         (a.empty() ||
          std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

inline std::vector<double> toDouble(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

// ---- bf16 ---------------------------------------------------------------
// bf16 buffers are vectors of raw bits. The conversions are core's
// (Dtype.h, tested there); CastTest pins the kernels' rounding with bit
// patterns written out by hand.

inline std::vector<uint16_t> toBf16(const std::vector<float> &v) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    bits[i] = floatToBf16(v[i]);
  return bits;
}

inline std::vector<float> fromBf16(const std::vector<uint16_t> &bits) {
  std::vector<float> v(bits.size());
  for (size_t i = 0; i < bits.size(); ++i)
    v[i] = bf16ToFloat(bits[i]);
  return v;
}

/// The values rounded to bf16 and back: inputs that both the f32 and the
/// bf16 kernel see exactly, so that their results differ only by how the
/// outputs are stored.
inline std::vector<float> bf16Rounded(const std::vector<float> &v) {
  return fromBf16(toBf16(v));
}

/// A bf16 NaN in every element, as poisoned() for f32.
inline std::vector<uint16_t> poisonedBf16(size_t n) {
  return std::vector<uint16_t>(n, 0x7fc0);
}

/// Kernels that compute in f32 exactly as their f32 variant does and only
/// round when storing: every bf16 output must be the f32 output rounded to
/// nearest-even, bit for bit.
inline ::testing::AssertionResult
bf16IsRoundedF32(const std::vector<uint16_t> &actual,
                 const std::vector<float> &f32) {
  if (actual.size() != f32.size())
    return ::testing::AssertionFailure()
           << "size mismatch: " << actual.size() << " vs " << f32.size();
  std::ostringstream os;
  size_t bad = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    uint16_t want = floatToBf16(f32[i]);
    if (actual[i] != want) {
      if (bad < 5)
        os << "\n  [" << i << "] bf16 0x" << std::hex << actual[i]
           << ", expected 0x" << want << std::dec << " (f32 " << f32[i] << ")";
      ++bad;
    }
  }
  if (bad == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << actual.size() << " elements differ:" << os.str();
}

/// Kernels whose bf16 variant may add f32 rounding differences before its
/// final rounding (GEMMs over differently laid-out copies): agreement with
/// the f32 output within bf16's precision, rtol * |f32| + atol * scale,
/// where `scale` is the largest |f32| output (absolute slack for elements
/// that cancel).
inline ::testing::AssertionResult
bf16CloseToF32(const std::vector<uint16_t> &actual,
               const std::vector<float> &f32, double rtol = 1e-2,
               double atol = 1e-3) {
  double scale = 0.0;
  for (float v : f32)
    scale = std::max(scale, std::fabs(static_cast<double>(v)));
  return allNear(fromBf16(actual), toDouble(f32), rtol, atol * scale);
}

// ---- Finite differences ------------------------------------------------

/// Central difference in element i of `x`, step h, of L = sum(w * y) with
/// y = forward() the f32 output of a kernel that reads `x`, divided by the
/// step that the f32 input really took. L(x+) - L(x-) is summed as
/// sum(w * (y+ - y-)) in double: the same value, without the rounding of
/// two large sums swamping it.
template <typename Forward>
double weightedDifference(Forward &&forward, std::vector<float> &x,
                          const std::vector<float> &w, size_t i, float h) {
  float xi = x[i], xp = xi + h, xm = xi - h;
  x[i] = xp;
  std::vector<float> yp = forward();
  x[i] = xm;
  std::vector<float> ym = forward();
  x[i] = xi;
  double diff = 0.0;
  for (size_t j = 0; j < yp.size(); ++j)
    diff += static_cast<double>(w[j]) *
            (static_cast<double>(yp[j]) - static_cast<double>(ym[j]));
  return diff / (static_cast<double>(xp) - static_cast<double>(xm));
}

/// Checks grad (the kernel's gradient of L = sum(w * y) with respect to
/// `x`) against weightedDifference at about `budget` probed elements, with
/// tolerance rtol * |difference| + atol.
template <typename Forward>
::testing::AssertionResult
gradMatchesDifferences(const std::vector<float> &grad, Forward &&forward,
                       std::vector<float> &x, const std::vector<float> &w,
                       float h, double rtol, double atol, size_t budget = 64) {
  std::vector<float> probed;
  std::vector<double> fd;
  for (size_t i : probeIndices(x.size(), budget)) {
    probed.push_back(grad[i]);
    fd.push_back(weightedDifference(forward, x, w, i, h));
  }
  return allNear(probed, fd, rtol, atol);
}

/// sum(w * y) in double.
inline double weightedSum(const std::vector<float> &w,
                          const std::vector<float> &y) {
  double sum = 0.0;
  for (size_t i = 0; i < y.size(); ++i)
    sum += static_cast<double>(w[i]) * y[i];
  return sum;
}

} // namespace autoshard::rt::test
