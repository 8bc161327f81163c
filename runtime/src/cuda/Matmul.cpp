// Batched matrix products on the GPU (asrt_matmul) through cuBLAS: one
// GEMM when the batches stack into one matrix, strided-batched GEMMs over
// the innermost batch dim otherwise (a loop over the outer ones), the
// dtypes and numerics of the linear layers (Cublas.h: f32 without TF32,
// bf16 on tensor cores with f32 accumulation).
//
// cuBLAS is column-major and the ABI's matrices are row-major: the
// row-major y[m, n] = op(a) op(b) is issued as the column-major
// y^T[n, m] = op(b)^T op(a)^T, b first.
#include "Cublas.h"
#include "Cuda.h"

#include "core/ArgChecks.h"
#include "memory/StridedSpace.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace autoshard::rt::cuda {

void matmul(Blas &blas, int32_t dtype, const void *a, const void *b, void *y,
            int32_t batchRank, const int64_t *batchDims,
            const int64_t *aBatchStrides, const int64_t *bBatchStrides,
            int64_t m, int64_t n, int64_t k, int32_t transA, int32_t transB) {
  const char *op = "matmul";
  checkCount(op, "m", m);
  checkCount(op, "n", n);
  checkCount(op, "k", k);
  const StridedSpace batch = coalescedSpace(
      op, "batch_dims", batchRank, batchDims, {aBatchStrides, bBatchStrides});
  const GemmTypes types = gemmTypes(op, dtype);
  if (batch.count == 0 || m == 0 || n == 0)
    return;
  const int64_t mn = m * n;
  const size_t eb = types.elementBytes;
  if (k == 0) { // empty sums: y = 0 (all-zero bits in f32 and bf16)
    check(cudaMemsetAsync(y, 0, size_t(batch.count * mn) * eb, blas.stream()),
          op);
    return;
  }
  const bool ta = transA != 0, tb = transB != 0;
  // cuBLAS's first operand is b (op(b)^T: n x k), its second a.
  const cublasOperation_t opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int64_t ldb = tb ? k : n, lda = ta ? m : k;
  const float alpha = 1.0f, beta = 0.0f;
  const char *pa = static_cast<const char *>(a);
  const char *pb = static_cast<const char *>(b);
  char *py = static_cast<char *>(y);
  auto gemm = [&](int64_t rows, const void *ai, const void *bi, void *yi) {
    checkBlas(cublasGemmEx_64(blas.handle(), opB, opA, n, rows, k, &alpha, bi,
                              types.data, ldb, ai, types.data, lda, &beta, yi,
                              types.data, n, types.compute,
                              CUBLAS_GEMM_DEFAULT),
              op);
  };
  if (batch.rank == 0) { // one product
    gemm(m, a, b, y);
    return;
  }
  const int64_t inner = batch.dims[batch.rank - 1];
  const int64_t sa = batch.innerStride(0), sb = batch.innerStride(1);
  // x[B, T, K] @ w[K, N]: a's batches are one dense [B * m, k] matrix and b
  // is shared, so one GEMM of B * m rows.
  if (batch.rank == 1 && !ta && sa == m * k && sb == 0) {
    gemm(batch.count * m, a, b, y);
    return;
  }
  // cuBLAS steps batches forward from the first matrix; a negative batch
  // stride (a flipped view) takes one GEMM per matrix.
  const bool strided = sa >= 0 && sb >= 0;
  const int64_t outer = batch.count / inner;
  int64_t off[StridedSpace::kMaxOperands];
  for (int64_t o = 0; o < outer; ++o) {
    stridedOffsets(batch, o * inner, off);
    const char *a0 = pa + off[0] * int64_t(eb);
    const char *b0 = pb + off[1] * int64_t(eb);
    char *y0 = py + o * inner * mn * int64_t(eb);
    if (strided) {
      checkBlas(cublasGemmStridedBatchedEx_64(
                    blas.handle(), opB, opA, n, m, k, &alpha, b0, types.data,
                    ldb, sb, a0, types.data, lda, sa, &beta, y0, types.data, n,
                    mn, inner, types.compute, CUBLAS_GEMM_DEFAULT),
                op);
    } else {
      for (int64_t j = 0; j < inner; ++j)
        gemm(m, a0 + j * sa * int64_t(eb), b0 + j * sb * int64_t(eb),
             y0 + j * mn * int64_t(eb));
    }
  }
}

} // namespace autoshard::rt::cuda
