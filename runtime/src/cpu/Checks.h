// Shape checks shared by the CPU kernels: a bad shape is a compiler bug.
#pragma once

#include "Blas.h"
#include "core/ArgChecks.h"
#include "core/Context.h"

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

using autoshard::rt::checkAttentionShape;
using autoshard::rt::checkCount;
using autoshard::rt::checkEmbeddingIds;
using autoshard::rt::checkEmbeddingShape;
using autoshard::rt::checkLossShape;
using autoshard::rt::checkNormShape;
using autoshard::rt::checkNotNull;
using autoshard::rt::checkPositionEmbeddingGradShape;
using autoshard::rt::checkPositionEmbeddingShape;
using autoshard::rt::checkRopeShape;
using autoshard::rt::countedLabels;
using autoshard::rt::labelCounts;

} // namespace autoshard::rt::cpu
