// Seeded inputs and tolerance checks shared by the CPU kernel tests.
#pragma once

#include "core/Context.h"

#include <gtest/gtest.h>

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

} // namespace autoshard::rt::test
