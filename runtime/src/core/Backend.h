// The hooks each backend library (CPU, CUDA) implements once.
#pragma once

#include "autoshard/rt/abi.h"

namespace autoshard::rt {

struct BackendOptions {
  /// Worker threads this rank may use for kernels (BLAS included); >= 1.
  int threads = 1;
  /// Index of this rank among the ranks on its node (device selection).
  int localRank = 0;
};

/// Called by the driver once, before the first step.
void initBackend(asrt_context *ctx, const BackendOptions &options);

/// "cpu" or "cuda"; printed by the driver.
const char *backendName();

} // namespace autoshard::rt
