// Normalization over the last dimension on the CPU: LayerNorm and RMSNorm.
#include "Checks.h"
#include "Element.h"
#include "Reduce.h"
#include "Scratch.h"

#include "core/Context.h"

#include <algorithm>
#include <cmath>

using autoshard::rt::fatal;
using autoshard::rt::OpTimer;
using namespace autoshard::rt::cpu;

// Row statistics (mean, variance, mean square) and the reductions of the
// backward pass accumulate in double: a row is a few thousand elements and
// the parameter gradients sum over batch x sequence rows. Elementwise work
// is in float. The ABI passes no saved statistics, so the backward pass
// recomputes them from x exactly as the forward pass did.

namespace {

struct RowStats {
  /// Kept in double: x - mean is formed in double and then rounded, so a
  /// row with a large mean and a small spread (activations offset by a
  /// residual stream) keeps the relative accuracy of its centred values;
  /// a float mean would be off by half an ulp of the mean.
  double mean;
  float rstd; // 1 / sqrt(var + eps)
};

/// Mean and reciprocal standard deviation (biased variance) of one row that
/// has been loaded as float. Two passes: the one-pass formula E[x^2] - E[x]^2
/// cancels badly for rows with a large mean.
RowStats layerNormStats(const float *x, int64_t cols, float eps) {
  double mean = rowSumDouble(x, cols) / static_cast<double>(cols);
  double var = rowSumSquares(x, cols, mean) / static_cast<double>(cols);
  return {mean,
          static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)))};
}

float rmsNormRstd(const float *x, int64_t cols, float eps) {
  double meanSquare = rowSumSquares(x, cols, 0.0) / static_cast<double>(cols);
  return static_cast<float>(1.0 /
                            std::sqrt(meanSquare + static_cast<double>(eps)));
}

} // namespace

extern "C" void asrt_layer_norm_fwd(asrt_context *ctx, int32_t dtype,
                                    const void *x, const void *gamma,
                                    const void *beta, void *y, int64_t rows,
                                    int64_t cols, float eps) {
  OpTimer timer(ctx, "layer_norm_fwd");
  const char *op = "layer_norm_fwd";
  checkNormShape(op, rows, cols, eps);
  checkNotNull(op, "gamma", gamma);
  checkNotNull(op, "beta", beta);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x);
    const T *scale = static_cast<const T *>(gamma);
    const T *shift = static_cast<const T *>(beta);
    T *out = static_cast<T *>(y);
    ScratchFrame scratch(op);
    // gamma and beta as float once, instead of converting them per row.
    float *row = scratch.take<float>(cols);
    float *gammaF = scratch.take<float>(cols);
    float *betaF = scratch.take<float>(cols);
    loadRow(scale, cols, gammaF);
    loadRow(shift, cols, betaF);
    for (int64_t r = 0; r < rows; ++r) {
      loadRow(in + r * cols, cols, row);
      RowStats s = layerNormStats(row, cols, eps);
      T *dst = out + r * cols;
      for (int64_t j = 0; j < cols; ++j)
        store(dst, j,
              static_cast<float>(row[j] - s.mean) * s.rstd * gammaF[j] +
                  betaF[j]);
    }
  });
}

extern "C" void asrt_layer_norm_grad(asrt_context *ctx, int32_t dtype,
                                     const void *dy, const void *x,
                                     const void *gamma, void *dx, void *dgamma,
                                     void *dbeta, int64_t rows, int64_t cols,
                                     float eps) {
  OpTimer timer(ctx, "layer_norm_grad");
  const char *op = "layer_norm_grad";
  checkNormShape(op, rows, cols, eps);
  checkNotNull(op, "gamma", gamma);
  checkNotNull(op, "dgamma", dgamma);
  checkNotNull(op, "dbeta", dbeta);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *g = static_cast<const T *>(dy);
    const T *in = static_cast<const T *>(x);
    T *dIn = static_cast<T *>(dx);
    ScratchFrame scratch(op);
    float *gammaF = scratch.take<float>(cols);
    float *xhat = scratch.take<float>(cols);
    float *dyRow = scratch.take<float>(cols);
    double *dgammaAcc = scratch.take<double>(cols);
    double *dbetaAcc = scratch.take<double>(cols);
    loadRow(static_cast<const T *>(gamma), cols, gammaF);
    std::fill(dgammaAcc, dgammaAcc + cols, 0.0);
    std::fill(dbetaAcc, dbetaAcc + cols, 0.0);
    const double invCols = 1.0 / static_cast<double>(cols);
    for (int64_t r = 0; r < rows; ++r) {
      loadRow(in + r * cols, cols, xhat);
      loadRow(g + r * cols, cols, dyRow);
      RowStats s = layerNormStats(xhat, cols, eps);
      // With xhat = (x - mean) rstd and g = dy gamma:
      //   dx = rstd (g - mean(g) - xhat mean(g xhat)).
      double sumG = 0.0, sumGXhat = 0.0;
      for (int64_t j = 0; j < cols; ++j) {
        float xh = static_cast<float>(xhat[j] - s.mean) * s.rstd;
        xhat[j] = xh;
        float gj = dyRow[j] * gammaF[j];
        sumG += gj;
        sumGXhat += static_cast<double>(gj) * xh;
        dgammaAcc[j] += static_cast<double>(dyRow[j]) * xh;
        dbetaAcc[j] += dyRow[j];
      }
      const float meanG = static_cast<float>(sumG * invCols);
      const float meanGXhat = static_cast<float>(sumGXhat * invCols);
      T *dst = dIn + r * cols;
      for (int64_t j = 0; j < cols; ++j)
        store(dst, j,
              s.rstd * (dyRow[j] * gammaF[j] - meanG - xhat[j] * meanGXhat));
    }
    T *dGamma = static_cast<T *>(dgamma);
    T *dBeta = static_cast<T *>(dbeta);
    for (int64_t j = 0; j < cols; ++j) {
      store(dGamma, j, static_cast<float>(dgammaAcc[j]));
      store(dBeta, j, static_cast<float>(dbetaAcc[j]));
    }
  });
}

extern "C" void asrt_rms_norm_fwd(asrt_context *ctx, int32_t dtype,
                                  const void *x, const void *weight, void *y,
                                  int64_t rows, int64_t cols, float eps) {
  OpTimer timer(ctx, "rms_norm_fwd");
  const char *op = "rms_norm_fwd";
  checkNormShape(op, rows, cols, eps);
  checkNotNull(op, "weight", weight);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x);
    T *out = static_cast<T *>(y);
    ScratchFrame scratch(op);
    float *row = scratch.take<float>(cols);
    float *weightF = scratch.take<float>(cols);
    loadRow(static_cast<const T *>(weight), cols, weightF);
    for (int64_t r = 0; r < rows; ++r) {
      loadRow(in + r * cols, cols, row);
      float rstd = rmsNormRstd(row, cols, eps);
      T *dst = out + r * cols;
      for (int64_t j = 0; j < cols; ++j)
        store(dst, j, row[j] * rstd * weightF[j]);
    }
  });
}

extern "C" void asrt_rms_norm_grad(asrt_context *ctx, int32_t dtype,
                                   const void *dy, const void *x,
                                   const void *weight, void *dx, void *dweight,
                                   int64_t rows, int64_t cols, float eps) {
  OpTimer timer(ctx, "rms_norm_grad");
  const char *op = "rms_norm_grad";
  checkNormShape(op, rows, cols, eps);
  checkNotNull(op, "weight", weight);
  checkNotNull(op, "dweight", dweight);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *g = static_cast<const T *>(dy);
    const T *in = static_cast<const T *>(x);
    T *dIn = static_cast<T *>(dx);
    ScratchFrame scratch(op);
    float *weightF = scratch.take<float>(cols);
    float *xhat = scratch.take<float>(cols);
    float *dyRow = scratch.take<float>(cols);
    double *dweightAcc = scratch.take<double>(cols);
    loadRow(static_cast<const T *>(weight), cols, weightF);
    std::fill(dweightAcc, dweightAcc + cols, 0.0);
    const double invCols = 1.0 / static_cast<double>(cols);
    for (int64_t r = 0; r < rows; ++r) {
      loadRow(in + r * cols, cols, xhat);
      loadRow(g + r * cols, cols, dyRow);
      float rstd = rmsNormRstd(xhat, cols, eps);
      // With xhat = x rstd and g = dy weight: dx = rstd (g - xhat mean(g
      // xhat)); the mean's term is what the shared rstd contributes.
      double sumGXhat = 0.0;
      for (int64_t j = 0; j < cols; ++j) {
        float xh = xhat[j] * rstd;
        xhat[j] = xh;
        sumGXhat += static_cast<double>(dyRow[j] * weightF[j]) * xh;
        dweightAcc[j] += static_cast<double>(dyRow[j]) * xh;
      }
      const float meanGXhat = static_cast<float>(sumGXhat * invCols);
      T *dst = dIn + r * cols;
      for (int64_t j = 0; j < cols; ++j)
        store(dst, j, rstd * (dyRow[j] * weightF[j] - xhat[j] * meanGXhat));
    }
    T *dWeight = static_cast<T *>(dweight);
    for (int64_t j = 0; j < cols; ++j)
      store(dWeight, j, static_cast<float>(dweightAcc[j]));
  });
}
