// CHECK_NCCL, CHECK_CUDA: calls whose failure is fatal, with file:line and
// the library's own text.
#include "nccl/NcclCheck.h"

#include "core/Context.h"

namespace autoshard::rt {

void checkNccl(ncclResult_t result, const char *call, const char *file,
               int line) {
  if (result == ncclSuccess || result == ncclInProgress)
    return;
  // NCCL's last error is process-wide (the argument is unused).
  const char *last = ncclGetLastError(nullptr);
  bool detailed = last && *last;
  fatal("%s:%d: %s failed: %s%s%s", file, line, call,
        ncclGetErrorString(result), detailed ? ": " : "", detailed ? last : "");
}

void checkCuda(cudaError_t status, const char *call, const char *file,
               int line) {
  if (status == cudaSuccess)
    return;
  fatal("%s:%d: %s failed: %s (%s)", file, line, call, cudaGetErrorName(status),
        cudaGetErrorString(status));
}

} // namespace autoshard::rt
