// Host-side argument checks of the CUDA kernels, the CPU backend's
// (core/ArgChecks.h) and the copy of indices they need: a bad shape or index
// is fatal and names the op.
#pragma once

#include "Cuda.h"

#include "core/ArgChecks.h"
#include "core/Context.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace autoshard::rt::cuda {

using autoshard::rt::checkCount;
using autoshard::rt::checkDropoutArgs;
using autoshard::rt::checkIntegralFill;
using autoshard::rt::checkNotNull;
using autoshard::rt::checkRopeShape;

/// The `n` indices (token ids, labels) at `indices`, device memory, copied
/// to the host so that they can be checked there, before any kernel reads
/// them, with the CPU backend's messages. This synchronises the stream: the
/// indices are ready only once the work queued before has run. The cost is
/// one round trip per call (n * 4 bytes); a device-side check that reports
/// later would avoid the stall but not be fatal at the call.
inline std::vector<int32_t> indicesToHost(cudaStream_t stream, const char *op,
                                          const int32_t *indices, int64_t n) {
  std::vector<int32_t> host(static_cast<size_t>(n));
  if (n > 0) {
    checkNotNull(op, "index", indices);
    check(cudaMemcpyAsync(host.data(), indices,
                          static_cast<size_t>(n) * sizeof(int32_t),
                          cudaMemcpyDefault, stream),
          op);
    check(cudaStreamSynchronize(stream), op);
  }
  return host;
}

} // namespace autoshard::rt::cuda
