// f32 GEMMs on OpenBLAS for kernels whose operands may be bf16.
#pragma once

#include "Blas.h"
#include "Checks.h"
#include "Element.h"
#include "Scratch.h"

#include <cstring>
#include <type_traits>

namespace autoshard::rt::cpu {

/// Row-major c[m, n] = alpha op(a) op(b) + beta c with op(a) [m, k] and
/// op(b) [k, n]. Leading dimensions are in elements. Dimensions are checked
/// against the BLAS index range by the caller (blasDim).
///
/// k == 0 is handled here: OpenBLAS rejects the leading dimension 0 that an
/// empty operand has instead of computing the well-defined empty sum. With
/// beta == 0, c is written without being read, as BLAS does, so poisoned or
/// uninitialised outputs are fine.
inline void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                 float alpha, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float beta, float *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) {
      float *row = c + i * ldc;
      if (beta == 0.0f)
        std::memset(row, 0, static_cast<size_t>(n) * sizeof(float));
      else
        for (int64_t j = 0; j < n; ++j)
          row[j] *= beta;
    }
    return;
  }
#if ASRT_HAVE_CBLAS
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
#else
  referenceSgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

/// A contiguous operand of `n` elements as f32: the buffer itself for f32,
/// a converted copy in scratch for bf16 (OpenBLAS 0.3.21 has no bf16 GEMM
/// that rounds like the f32 path, and the conversion is O(n) next to the
/// GEMM's O(n * k)).
template <typename T>
const float *gemmInput(ScratchFrame &scratch, const T *src, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    (void)scratch;
    (void)n;
    return src;
  } else {
    float *dst = scratch.take<float>(n);
    loadRow(src, n, dst);
    return dst;
  }
}

/// Where a GEMM writes an output of `n` elements: the output itself for
/// f32, scratch for bf16, which finishGemmOutput then rounds into place.
template <typename T>
float *gemmOutput(ScratchFrame &scratch, T *dst, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    (void)scratch;
    (void)n;
    return dst;
  } else {
    return scratch.take<float>(n);
  }
}

template <typename T>
void finishGemmOutput(const float *result, T *dst, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    (void)result;
    (void)dst;
    (void)n;
  } else {
    storeRow(result, n, dst);
  }
}

} // namespace autoshard::rt::cpu
