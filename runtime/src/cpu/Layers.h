// The CPU's dense layer and GELU as functions of their own, for the ABI
// calls that chain them (asrt_linear_gelu_fwd, asrt_linear_grad_gelu) with
// one op timer.
#pragma once

#include <cstdint>

namespace autoshard::rt::cpu {

/// asrt_linear_fwd's work: y = x w^T (+ b). `op` names it in errors.
void linearForward(const char *op, int32_t dtype, const void *x,
                   const void *w, const void *b, void *y, int64_t rows,
                   int64_t in, int64_t out);
/// asrt_gelu_fwd's work over n elements.
void geluForward(const char *op, int32_t dtype, const void *x, void *y,
                 int64_t n);
/// asrt_linear_grad_input's, asrt_linear_grad_weight's, asrt_gelu_grad's
/// (dx may be dy) and asrt_bias_grad's work.
void linearGradInput(const char *op, int32_t dtype, const void *dy,
                     const void *w, void *dx, int64_t rows, int64_t in,
                     int64_t out);
void linearGradWeight(const char *op, int32_t dtype, const void *dy,
                      const void *x, void *dw, int64_t rows, int64_t in,
                      int64_t out);
void geluGrad(const char *op, int32_t dtype, const void *dy, const void *x,
              void *dx, int64_t n);
void biasGrad(const char *op, int32_t dtype, const void *dy, void *db,
              int64_t rows, int64_t out);

} // namespace autoshard::rt::cpu
