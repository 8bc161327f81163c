// Argument checks every backend's kernels share: a bad count or a missing
// pointer is a compiler or caller bug, fatal with the op's name.
#pragma once

#include "core/Context.h"

#include <cstdint>

namespace autoshard::rt {

/// Element counts only need to be non-negative.
inline void checkCount(const char *op, const char *name, int64_t value) {
  if (value < 0)
    fatal("%s: %s = %lld is negative", op, name, static_cast<long long>(value));
}

/// A pointer the ABI requires, such as a learning rate read from memory.
inline void checkNotNull(const char *op, const char *name, const void *ptr) {
  if (!ptr)
    fatal("%s: the %s pointer is null", op, name);
}

} // namespace autoshard::rt
