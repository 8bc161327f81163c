// Dense layers on the CPU: OpenBLAS SGEMMs over nn.Linear's [out, in] weights.
#include "Checks.h"
#include "Element.h"
#include "Gemm.h"
#include "Layers.h"
#include "Scratch.h"

#include "core/Context.h"

#include <algorithm>

using autoshard::rt::OpTimer;
using namespace autoshard::rt::cpu;

void autoshard::rt::cpu::linearForward(const char *op, int32_t dtype,
                                       const void *x, const void *w,
                                       const void *b, void *y, int64_t rows,
                                       int64_t in, int64_t out) {
  blasDim(op, "rows", rows);
  blasDim(op, "in", in);
  blasDim(op, "out", out);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    ScratchFrame scratch(op);
    const float *xf = gemmInput(scratch, static_cast<const T *>(x), rows * in);
    const float *wf = gemmInput(scratch, static_cast<const T *>(w), out * in);
    float *yf = gemmOutput(scratch, static_cast<T *>(y), rows * out);
    float beta = 0.0f;
    if (b) {
      // Seeding y with the bias lets the GEMM add it (beta = 1) instead of
      // making a second pass over y.
      const T *bias = static_cast<const T *>(b);
      for (int64_t r = 0; r < rows; ++r)
        loadRow(bias, out, yf + r * out);
      beta = 1.0f;
    }
    gemm(false, true, rows, out, in, 1.0f, xf, in, wf, in, beta, yf, out);
    finishGemmOutput(yf, static_cast<T *>(y), rows * out);
  });
}

extern "C" void asrt_linear_fwd(asrt_context *ctx, int32_t dtype, const void *x,
                                const void *w, const void *b, void *y,
                                int64_t rows, int64_t in, int64_t out) {
  OpTimer timer(ctx, "linear_fwd");
  linearForward("linear_fwd", dtype, x, w, b, y, rows, in, out);
}

// The two calls' work in sequence: the same bits as asrt_linear_fwd then
// asrt_gelu_fwd (GELU of the rounded pre-activation).
extern "C" void asrt_linear_gelu_fwd(asrt_context *ctx, int32_t dtype,
                                     const void *x, const void *w,
                                     const void *b, void *pre, void *y,
                                     int64_t rows, int64_t in, int64_t out) {
  OpTimer timer(ctx, "linear_gelu_fwd");
  const char *op = "linear_gelu_fwd";
  if (!b)
    autoshard::rt::fatal("%s: the bias is null; the fused call is for a "
                         "linear layer with a bias (asrt_linear_fwd and "
                         "asrt_gelu_fwd otherwise)",
                         op);
  linearForward(op, dtype, x, w, b, pre, rows, in, out);
  geluForward(op, dtype, pre, y, rows * out);
}

void autoshard::rt::cpu::linearGradInput(const char *op, int32_t dtype,
                                         const void *dy, const void *w,
                                         void *dx, int64_t rows, int64_t in,
                                         int64_t out) {
  blasDim(op, "rows", rows);
  blasDim(op, "in", in);
  blasDim(op, "out", out);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    ScratchFrame scratch(op);
    const float *dyf =
        gemmInput(scratch, static_cast<const T *>(dy), rows * out);
    const float *wf = gemmInput(scratch, static_cast<const T *>(w), out * in);
    float *dxf = gemmOutput(scratch, static_cast<T *>(dx), rows * in);
    gemm(false, false, rows, in, out, 1.0f, dyf, out, wf, in, 0.0f, dxf, in);
    finishGemmOutput(dxf, static_cast<T *>(dx), rows * in);
  });
}

extern "C" void asrt_linear_grad_input(asrt_context *ctx, int32_t dtype,
                                       const void *dy, const void *w, void *dx,
                                       int64_t rows, int64_t in, int64_t out) {
  OpTimer timer(ctx, "linear_grad_input");
  linearGradInput("linear_grad_input", dtype, dy, w, dx, rows, in, out);
}

void autoshard::rt::cpu::linearGradWeight(const char *op, int32_t dtype,
                                          const void *dy, const void *x,
                                          void *dw, int64_t rows, int64_t in,
                                          int64_t out) {
  blasDim(op, "rows", rows);
  blasDim(op, "in", in);
  blasDim(op, "out", out);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    ScratchFrame scratch(op);
    const float *dyf =
        gemmInput(scratch, static_cast<const T *>(dy), rows * out);
    const float *xf = gemmInput(scratch, static_cast<const T *>(x), rows * in);
    float *dwf = gemmOutput(scratch, static_cast<T *>(dw), out * in);
    // dy is stored [rows, out], so dy^T is the transposed view with
    // lda = out.
    gemm(true, false, out, in, rows, 1.0f, dyf, out, xf, in, 0.0f, dwf, in);
    finishGemmOutput(dwf, static_cast<T *>(dw), out * in);
  });
}

extern "C" void asrt_linear_grad_weight(asrt_context *ctx, int32_t dtype,
                                        const void *dy, const void *x, void *dw,
                                        int64_t rows, int64_t in, int64_t out) {
  OpTimer timer(ctx, "linear_grad_weight");
  linearGradWeight("linear_grad_weight", dtype, dy, x, dw, rows, in, out);
}

extern "C" void asrt_linear_grad_weight_bias(asrt_context *ctx, int32_t dtype,
                                             const void *dy, const void *x,
                                             void *dw, void *db, int64_t rows,
                                             int64_t in, int64_t out) {
  OpTimer timer(ctx, "linear_grad_weight_bias");
  const char *op = "linear_grad_weight_bias";
  linearGradWeight(op, dtype, dy, x, dw, rows, in, out);
  biasGrad(op, dtype, dy, db, rows, out);
}

void autoshard::rt::cpu::biasGrad(const char *op, int32_t dtype,
                                  const void *dy, void *db, int64_t rows,
                                  int64_t out) {
  checkCount(op, "rows", rows);
  checkCount(op, "out", out);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *g = static_cast<const T *>(dy);
    T *result = static_cast<T *>(db);
    // Rows are many (batch x sequence), so the column sums accumulate in
    // double; a column block of accumulators lives on the stack, which keeps
    // the pass over dy row-contiguous without a scratch buffer.
    constexpr int64_t kBlock = 256;
    double acc[kBlock];
    for (int64_t j0 = 0; j0 < out; j0 += kBlock) {
      int64_t width = std::min(kBlock, out - j0);
      std::fill(acc, acc + width, 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        const T *row = g + r * out + j0;
        for (int64_t j = 0; j < width; ++j)
          acc[j] += load(row, j);
      }
      for (int64_t j = 0; j < width; ++j)
        store(result, j0 + j, static_cast<float>(acc[j]));
    }
  });
}

extern "C" void asrt_bias_grad(asrt_context *ctx, int32_t dtype, const void *dy,
                               void *db, int64_t rows, int64_t out) {
  OpTimer timer(ctx, "bias_grad");
  biasGrad("bias_grad", dtype, dy, db, rows, out);
}

// The three calls' work in sequence, dpre holding the input gradient
// before GELU's derivative scales it in place: the unfused bits.
extern "C" void asrt_linear_grad_gelu(asrt_context *ctx, int32_t dtype,
                                      const void *dy, const void *w,
                                      const void *pre, void *dpre, void *db,
                                      int64_t rows, int64_t in, int64_t out) {
  OpTimer timer(ctx, "linear_grad_gelu");
  const char *op = "linear_grad_gelu";
  linearGradInput(op, dtype, dy, w, dpre, rows, in, out);
  geluGrad(op, dtype, dpre, pre, dpre, rows * in);
  if (db)
    biasGrad(op, dtype, dpre, db, rows, in);
}
