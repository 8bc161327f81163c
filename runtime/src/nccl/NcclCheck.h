// CHECK_NCCL, CHECK_CUDA: calls whose failure is fatal, with file:line and
// the library's own text.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

namespace autoshard::rt {

/// Reports a failed NCCL call through fatal(): where, which call, NCCL's
/// text for the result and its last error message. For calls outside a
/// communicator's collectives (ncclGetUniqueId, ...); the communicator
/// reports its own failures with the collective and the group. A
/// nonblocking communicator's ncclInProgress is not a failure.
void checkNccl(ncclResult_t result, const char *call, const char *file,
               int line);
/// The same for the CUDA runtime: cudaGetErrorName and cudaGetErrorString.
void checkCuda(cudaError_t status, const char *call, const char *file,
               int line);

} // namespace autoshard::rt

#define CHECK_NCCL(call)                                                       \
  ::autoshard::rt::checkNccl((call), #call, __FILE__, __LINE__)
#ifndef CHECK_CUDA
#define CHECK_CUDA(call)                                                       \
  ::autoshard::rt::checkCuda((call), #call, __FILE__, __LINE__)
#endif
