// Devices and errors of the CUDA backend (host code).
#include "Cuda.h"
#include "Element.cuh"

#include "core/Context.h"

#include <cuda_runtime_api.h>

namespace autoshard::rt::cuda {

int deviceCount(std::string &error) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess) {
    if (count == 0)
      error = "no CUDA device: the CUDA runtime sees none";
    return count;
  }
  // No driver (a build machine) or no device: both mean "no CUDA device".
  // Clear the sticky error so that later calls report their own.
  (void)cudaGetLastError();
  error = std::string("no CUDA device: cudaGetDeviceCount failed with ") +
          cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")";
  return status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver
             ? 0
             : -1;
}

void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    fatal("%s: %s (%s)", what, cudaGetErrorName(status),
          cudaGetErrorString(status));
}

void checkLaunch(const char *op) { check(cudaGetLastError(), op); }

void badDtype(const char *op, int32_t dtype) {
  fatal("%s: dtype %d is not f32 (%d) or bf16 (%d)", op, dtype,
        ASRT_DTYPE_F32, ASRT_DTYPE_BF16);
}

void badViewDtype(const char *op, int32_t dtype) {
  fatal("%s: dtype %d is not f32 (%d), bf16 (%d) or i32 (%d)", op, dtype,
        ASRT_DTYPE_F32, ASRT_DTYPE_BF16, ASRT_DTYPE_I32);
}

} // namespace autoshard::rt::cuda
