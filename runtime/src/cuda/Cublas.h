// What the files that call cuBLAS share (Linear.cu defines them): its
// status as the runtime's error, and the GEMM types of a dtype.
#pragma once

#include <cublas_api.h>

#include <cstddef>
#include <cstdint>

namespace autoshard::rt::cuda {

/// Fatal, naming `what` and cuBLAS's status, unless it is success.
void checkBlas(cublasStatus_t status, const char *what);

/// cuBLAS's element and compute type for a dtype: f32 with
/// CUBLAS_COMPUTE_32F_PEDANTIC (no TF32, no bf16x9 emulation, whatever the
/// math mode or environment says), bf16 on tensor cores accumulating in f32
/// (CUBLAS_COMPUTE_32F). Fatal, naming `op`, for any other dtype.
struct GemmTypes {
  cudaDataType data;
  cublasComputeType_t compute;
  size_t elementBytes;
};
GemmTypes gemmTypes(const char *op, int32_t dtype);

} // namespace autoshard::rt::cuda
