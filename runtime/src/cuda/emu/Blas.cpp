// The CUDA emulator's cuBLAS: the handle functions and the two GEMMs the
// backend calls, as a reference column-major GEMM on the host with
// cuBLAS's documented argument rules.
//
// What it checks, so that a layout mistake fails here rather than on a GPU:
// the leading dimensions against the operands' shapes (CUBLAS_STATUS_
// INVALID_VALUE, as cuBLAS returns), the type combination (f32 or bf16 A
// and B, C of their type or f32, f32 compute: CUBLAS_STATUS_NOT_SUPPORTED
// otherwise), and that
// every element a GEMM reads or writes lies in one live device allocation
// (on a GPU an illegal address: here a sticky cudaErrorIllegalAddress and
// CUBLAS_STATUS_EXECUTION_FAILED). With beta = 0, C is not read, as in
// cuBLAS: its old contents (NaN in fresh emulated memory) cannot leak in.
// Products are summed in double and rounded once to C's type.
#include "EmuState.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

struct cublasContext {
  cudaStream_t stream = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  cublasMath_t mode = CUBLAS_DEFAULT_MATH;
};

namespace {

using asrt_emu::isDeviceRange;
using asrt_emu::setStickyError;

using asrt_emu::elementBytes;
using asrt_emu::loadElement;
using asrt_emu::storeElement;

/// A column-major operand: `rows` x `cols` stored with leading dimension ld.
struct Operand {
  const char *name;
  const void *data;
  int64_t rows, cols, ld;
};

/// Whether every element of `op` (in each of `batch` matrices `stride`
/// elements apart) lies in a device allocation; a sticky error if not.
bool inDeviceMemory(const Operand &op, cudaDataType type, int64_t stride,
                    int64_t batch, const char *call) {
  if (op.rows == 0 || op.cols == 0 || batch == 0)
    return true;
  // The elements span [first, last] over the batch: strides may be 0
  // (a broadcast operand) but are not negative in the backend's calls.
  int64_t last = (op.rows - 1) + (op.cols - 1) * op.ld;
  int64_t span = stride >= 0 ? last + (batch - 1) * stride : -1;
  if (span >= 0 && isDeviceRange(op.data, size_t(span + 1) * elementBytes(type)))
    return true;
  setStickyError(cudaErrorIllegalAddress,
                 "%s: %s (%lld x %lld, ld %lld, stride %lld, batch %lld) "
                 "reaches outside every device allocation",
                 call, op.name, (long long)op.rows, (long long)op.cols,
                 (long long)op.ld, (long long)stride, (long long)batch);
  return false;
}

/// The product itself: column-major C = alpha op(A) op(B) + beta C over
/// `batch` matrices (C not read when beta is 0).
void multiply(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
              float alphaValue, const void *a, cudaDataType aType,
              int64_t lda, long long strideA, const void *b,
              cudaDataType bType, int64_t ldb, long long strideB,
              float betaValue, void *c, cudaDataType cType, int64_t ldc,
              long long strideC, int64_t batch, bool readsAB);

cublasStatus_t gemm(cublasHandle_t handle, cublasOperation_t transa,
                    cublasOperation_t transb, int64_t m, int64_t n, int64_t k,
                    const void *alpha, const void *a, cudaDataType aType,
                    int64_t lda, long long strideA, const void *b,
                    cudaDataType bType, int64_t ldb, long long strideB,
                    const void *beta, void *c, cudaDataType cType,
                    int64_t ldc, long long strideC, int64_t batch,
                    cublasComputeType_t compute, const char *call) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (asrt_emu::stickyError() != cudaSuccess)
    return CUBLAS_STATUS_EXECUTION_FAILED;
  bool transA = transa != CUBLAS_OP_N, transB = transb != CUBLAS_OP_N;
  auto validOp = [](cublasOperation_t op) {
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
  };
  if (!validOp(transa) || !validOp(transb) || m < 0 || n < 0 || k < 0 ||
      batch < 0 || !alpha || !beta)
    return CUBLAS_STATUS_INVALID_VALUE;
  Operand opA{"A", a, transA ? k : m, transA ? m : k, lda};
  Operand opB{"B", b, transB ? n : k, transB ? k : n, ldb};
  Operand opC{"C", c, m, n, ldc};
  for (const Operand *op : {&opA, &opB, &opC})
    if (op->ld < (op->rows > 1 ? op->rows : 1))
      return CUBLAS_STATUS_INVALID_VALUE;
  // cuBLAS's f32-compute combinations of these types: A and B alike, C of
  // their type or f32.
  if (aType != bType || (aType != CUDA_R_32F && aType != CUDA_R_16BF) ||
      (cType != aType && cType != CUDA_R_32F))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (m == 0 || n == 0 || batch == 0)
    return CUBLAS_STATUS_SUCCESS;
  // Host pointer mode: alpha and beta are read before the call returns;
  // the product runs in the handle's stream order (at once on the null
  // stream, where an operand outside memory is reported as the status).
  const float alphaValue = *static_cast<const float *>(alpha);
  const float betaValue = *static_cast<const float *>(beta);
  auto run = [=]() -> cublasStatus_t {
    bool readsAB = k > 0 && alphaValue != 0.0f;
    if ((readsAB && (!inDeviceMemory(opA, aType, strideA, batch, call) ||
                     !inDeviceMemory(opB, bType, strideB, batch, call))) ||
        !inDeviceMemory(opC, cType, strideC, batch, call))
      return CUBLAS_STATUS_EXECUTION_FAILED;
    multiply(transA, transB, m, n, k, alphaValue, a, aType, lda, strideA, b,
             bType, ldb, strideB, betaValue, c, cType, ldc, strideC, batch,
             readsAB);
    return CUBLAS_STATUS_SUCCESS;
  };
  if (!handle->stream)
    return run();
  asrt_emu::enqueue(handle->stream, [run] { (void)run(); });
  return CUBLAS_STATUS_SUCCESS;
}

} // namespace

namespace {
void multiply(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
              float alphaValue, const void *a, cudaDataType aType,
              int64_t lda, long long strideA, const void *b,
              cudaDataType bType, int64_t ldb, long long strideB,
              float betaValue, void *c, cudaDataType cType, int64_t ldc,
              long long strideC, int64_t batch, bool readsAB) {
  for (int64_t p = 0; p < batch; ++p) {
    const char *pa = static_cast<const char *>(a) +
                     p * strideA * int64_t(elementBytes(aType));
    const char *pb = static_cast<const char *>(b) +
                     p * strideB * int64_t(elementBytes(bType));
    char *pc = static_cast<char *>(c) + p * strideC * int64_t(elementBytes(cType));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        double sum = 0.0;
        if (readsAB)
          for (int64_t l = 0; l < k; ++l)
            sum += loadElement(pa, aType, transA ? l + i * lda : i + l * lda) *
                   loadElement(pb, bType, transB ? j + l * ldb : l + j * ldb);
        double result = double(alphaValue) * sum;
        if (betaValue != 0.0f)
          result += double(betaValue) * loadElement(pc, cType, i + j * ldc);
        storeElement(pc, cType, i + j * ldc, float(result));
      }
  }
}

} // namespace

namespace asrt_emu {
size_t elementBytes(cudaDataType type) { return type == CUDA_R_32F ? 4 : 2; }

double loadElement(const void *base, cudaDataType type, int64_t i) {
  if (type == CUDA_R_32F)
    return static_cast<const float *>(base)[i];
  return __bfloat162float(static_cast<const __nv_bfloat16 *>(base)[i]);
}

void storeElement(void *base, cudaDataType type, int64_t i, float v) {
  if (type == CUDA_R_32F)
    static_cast<float *>(base)[i] = v;
  else
    static_cast<__nv_bfloat16 *>(base)[i] = __float2bfloat16_rn(v);
}
} // namespace asrt_emu

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
  if (!handle)
    return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!asrt_emu::validStream(stream))
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->stream = stream;
  // As cuBLAS does: a new stream drops a user workspace.
  handle->workspace = nullptr;
  handle->workspaceBytes = 0;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace,
                                     size_t bytes) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (bytes > 0 && (!workspace || !isDeviceRange(workspace, bytes)))
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->workspace = workspace;
  handle->workspaceBytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

const char *cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS: return "success";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
  case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
  default: return "unknown error";
  }
}

cublasStatus_t cublasGemmEx_64(cublasHandle_t handle, cublasOperation_t transa,
                               cublasOperation_t transb, int64_t m, int64_t n,
                               int64_t k, const void *alpha, const void *A,
                               cudaDataType Atype, int64_t lda, const void *B,
                               cudaDataType Btype, int64_t ldb,
                               const void *beta, void *C, cudaDataType Ctype,
                               int64_t ldc, cublasComputeType_t computeType,
                               cublasGemmAlgo_t) {
  return gemm(handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B,
              Btype, ldb, 0, beta, C, Ctype, ldc, 0, 1, computeType,
              "cublasGemmEx_64");
}

cublasStatus_t cublasGemmStridedBatchedEx_64(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
    int64_t m, int64_t n, int64_t k, const void *alpha, const void *A,
    cudaDataType Atype, int64_t lda, long long strideA, const void *B,
    cudaDataType Btype, int64_t ldb, long long strideB, const void *beta,
    void *C, cudaDataType Ctype, int64_t ldc, long long strideC,
    int64_t batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t) {
  return gemm(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA,
              B, Btype, ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount,
              computeType, "cublasGemmStridedBatchedEx_64");
}
