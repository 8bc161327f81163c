// Dense layers on the CPU: OpenBLAS SGEMMs over nn.Linear's [out, in] weights.
#include "Checks.h"
#include "core/Context.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

using autoshard::rt::OpTimer;
using autoshard::rt::cpu::blasDim;

// A GEMM with K == 0 is handled before calling BLAS: its leading dimension
// would then be 0, which OpenBLAS rejects as an illegal argument instead of
// producing the (well-defined) empty-sum result.
static void zeroMatrix(float *c, int64_t rows, int64_t cols) {
  std::memset(c, 0, static_cast<size_t>(rows * cols) * sizeof(float));
}

extern "C" void asrt_linear_fwd_f32(asrt_context *ctx, const float *x,
                                    const float *w, const float *b, float *y,
                                    int64_t rows, int64_t in, int64_t out) {
  OpTimer timer(ctx, "linear_fwd_f32");
  const char *op = "linear_fwd_f32";
  blasint m = blasDim(op, "rows", rows);
  blasint k = blasDim(op, "in", in);
  blasint n = blasDim(op, "out", out);
  if (m == 0 || n == 0)
    return;
  float beta = 0.0f;
  if (b) {
    // Seeding y with the bias lets the GEMM add it (beta = 1) instead of
    // making a second pass over y.
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(y + r * out, b, static_cast<size_t>(out) * sizeof(float));
    beta = 1.0f;
  }
  if (k == 0) {
    if (!b)
      zeroMatrix(y, rows, out);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w,
              k, beta, y, n);
}

extern "C" void asrt_linear_grad_input_f32(asrt_context *ctx, const float *dy,
                                           const float *w, float *dx,
                                           int64_t rows, int64_t in,
                                           int64_t out) {
  OpTimer timer(ctx, "linear_grad_input_f32");
  const char *op = "linear_grad_input_f32";
  blasint m = blasDim(op, "rows", rows);
  blasint n = blasDim(op, "in", in);
  blasint k = blasDim(op, "out", out);
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    zeroMatrix(dx, rows, in);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, dy, k,
              w, n, 0.0f, dx, n);
}

extern "C" void asrt_linear_grad_weight_f32(asrt_context *ctx, const float *dy,
                                            const float *x, float *dw,
                                            int64_t rows, int64_t in,
                                            int64_t out) {
  OpTimer timer(ctx, "linear_grad_weight_f32");
  const char *op = "linear_grad_weight_f32";
  blasint k = blasDim(op, "rows", rows);
  blasint n = blasDim(op, "in", in);
  blasint m = blasDim(op, "out", out);
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    zeroMatrix(dw, out, in);
    return;
  }
  // dy is stored [rows, out], so dy^T is the transposed view with lda = out.
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, 1.0f, dy, m, x,
              n, 0.0f, dw, n);
}

extern "C" void asrt_bias_grad_f32(asrt_context *ctx, const float *dy,
                                   float *db, int64_t rows, int64_t out) {
  OpTimer timer(ctx, "bias_grad_f32");
  const char *op = "bias_grad_f32";
  autoshard::rt::cpu::checkCount(op, "rows", rows);
  autoshard::rt::cpu::checkCount(op, "out", out);
  // Rows are many (batch x sequence), so the column sums accumulate in
  // double; a column block of accumulators lives on the stack, which keeps
  // the pass over dy row-contiguous without a heap buffer.
  constexpr int64_t kBlock = 256;
  double acc[kBlock];
  for (int64_t j0 = 0; j0 < out; j0 += kBlock) {
    int64_t width = std::min(kBlock, out - j0);
    std::fill(acc, acc + width, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const float *row = dy + r * out + j0;
      for (int64_t j = 0; j < width; ++j)
        acc[j] += row[j];
    }
    for (int64_t j = 0; j < width; ++j)
      db[j0 + j] = static_cast<float>(acc[j]);
  }
}
