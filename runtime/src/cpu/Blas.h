// The CPU backend's BLAS: OpenBLAS, or a plain reference GEMM where the
// runtime was built without one (a GPU machine's CUDA-only build, whose CPU
// kernels only serve as the reference of the CUDA kernels' tests).
#pragma once

#if ASRT_HAVE_CBLAS
#include <cblas.h>
#else
#include <cstdint>

namespace autoshard::rt::cpu {

/// OpenBLAS's LP64 index type, so that shape checks read the same.
using blasint = int;

/// Row-major c = alpha op(a) op(b) + beta c, one f32 dot product per
/// element in k order: correct and slow (no blocking, no threads). With
/// beta == 0, c is written without being read, as BLAS does.
inline void referenceSgemm(bool transA, bool transB, int64_t m, int64_t n,
                           int64_t k, float alpha, const float *a, int64_t lda,
                           const float *b, int64_t ldb, float beta, float *c,
                           int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int64_t p = 0; p < k; ++p)
        sum += (transA ? a[p * lda + i] : a[i * lda + p]) *
               (transB ? b[j * ldb + p] : b[p * ldb + j]);
      float &out = c[i * ldc + j];
      out = beta == 0.0f ? alpha * sum : alpha * sum + beta * out;
    }
}

} // namespace autoshard::rt::cpu
#endif
