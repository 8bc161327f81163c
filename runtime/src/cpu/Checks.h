// Shape checks shared by the CPU kernels: a bad shape is a compiler bug.
#pragma once

#include "core/Context.h"

#include <cblas.h>

#include <cstdint>
#include <limits>

namespace autoshard::rt::cpu {

/// Returns `value` as OpenBLAS's index type. Negative values and values that
/// the (LP64) BLAS cannot index are fatal rather than silently truncated.
inline blasint blasDim(const char *op, const char *name, int64_t value) {
  if (value < 0)
    fatal("%s: %s = %lld is negative", op, name, static_cast<long long>(value));
  if (value > std::numeric_limits<blasint>::max())
    fatal("%s: %s = %lld exceeds the BLAS index range (%lld)", op, name,
          static_cast<long long>(value),
          static_cast<long long>(std::numeric_limits<blasint>::max()));
  return static_cast<blasint>(value);
}

/// Element counts of non-BLAS kernels only need to be non-negative.
inline void checkCount(const char *op, const char *name, int64_t value) {
  if (value < 0)
    fatal("%s: %s = %lld is negative", op, name, static_cast<long long>(value));
}

/// A pointer the ABI requires, such as a learning rate read from memory.
inline void checkNotNull(const char *op, const char *name, const void *ptr) {
  if (!ptr)
    fatal("%s: the %s pointer is null", op, name);
}

} // namespace autoshard::rt::cpu
