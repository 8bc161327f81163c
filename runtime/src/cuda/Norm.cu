// Normalization over the last dimension on the GPU: LayerNorm and RMSNorm,
// with the formulas, roundings and accumulation types of
// runtime/src/cpu/Norm.cpp.
//
// One thread block per row (a block-stride loop over rows). Row statistics
// and the backward pass's row sums accumulate in double, as on the CPU
// (in another order, and nvcc may fuse their multiply-adds into FMAs, so
// they can differ from the CPU's in the last bits of a double);
// elementwise work is in float with explicit round-to-nearest intrinsics
// (__fmul_rn, ...), which nvcc does not contract into FMAs, so that given
// the same statistics every output is the CPU's bit for bit. As on the CPU,
// the backward pass recomputes the statistics from x (the ABI saves none).
//
// Known performance limitations: a row is read from global memory two or
// three times (the first pass brings it into L1/L2 for rows of a few
// thousand elements); rows shorter than a block leave threads idle.
#include "ArgChecks.h"
#include "Cuda.h"
#include "Element.cuh"
#include "Grid.cuh"
#include "RowReduce.cuh"

namespace autoshard::rt::cuda {
namespace {

/// Blocks of the backward row kernels. Each keeps its own partial sums of
/// the parameter gradients over the rows it handles, in global scratch of
/// 2 x blocks x cols doubles (at most 16 MiB for cols = 4096), which a
/// second kernel adds up per column in block order.
constexpr int64_t kGradBlocks = 256;

struct RowStats {
  /// Double, as the CPU's: x - mean is formed in double and then rounded.
  double mean;
  float rstd; // 1 / sqrt(var + eps), rounded once from double
};

/// Mean and biased variance in two passes (the one-pass formula cancels for
/// rows with a large mean), as layerNormStats on the CPU.
template <typename T>
__device__ RowStats layerNormStats(const T *row, int64_t cols, float eps) {
  double sum = 0.0;
  for (int64_t j : blockThreads(cols))
    sum += load(row, j);
  const double mean = blockSum(sum) / static_cast<double>(cols);
  double squares = 0.0;
  for (int64_t j : blockThreads(cols)) {
    double d = static_cast<double>(load(row, j)) - mean;
    squares += d * d;
  }
  const double var = blockSum(squares) / static_cast<double>(cols);
  return {mean, static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)))};
}

template <typename T>
__device__ float rmsNormRstd(const T *row, int64_t cols, float eps) {
  double squares = 0.0;
  for (int64_t j : blockThreads(cols)) {
    double d = load(row, j);
    squares += d * d;
  }
  const double meanSquare = blockSum(squares) / static_cast<double>(cols);
  return static_cast<float>(1.0 / sqrt(meanSquare + static_cast<double>(eps)));
}

/// xhat = (x - mean) rstd: the difference in double, rounded, then scaled.
__device__ __forceinline__ float centred(float x, const RowStats &s) {
  return __fmul_rn(static_cast<float>(static_cast<double>(x) - s.mean), s.rstd);
}

template <typename T>
__global__ void layerNormFwdKernel(const T *x, const T *gamma, const T *beta,
                                   T *y, int64_t rows, int64_t cols,
                                   float eps) {
  for (int64_t r : gridBlocks(rows)) {
    const T *row = x + r * cols;
    const RowStats s = layerNormStats(row, cols, eps);
    T *dst = y + r * cols;
    for (int64_t j : blockThreads(cols))
      store(dst, j,
            __fadd_rn(__fmul_rn(centred(load(row, j), s), load(gamma, j)),
                      load(beta, j)));
  }
}

/// dx of each row, and this block's partial sums of dgamma and dbeta over
/// its rows (partial rows blockIdx.x of dgammaPart and dbetaPart, which
/// start zeroed; thread j owns column j, so the updates do not race).
template <typename T>
__global__ void layerNormGradKernel(const T *dy, const T *x, const T *gamma,
                                    T *dx, double *dgammaPart,
                                    double *dbetaPart, int64_t rows,
                                    int64_t cols, float eps) {
  double *dgammaAcc = dgammaPart + blockIdx.x * cols;
  double *dbetaAcc = dbetaPart + blockIdx.x * cols;
  const double invCols = 1.0 / static_cast<double>(cols);
  for (int64_t r : gridBlocks(rows)) {
    const T *xRow = x + r * cols;
    const T *dyRow = dy + r * cols;
    const RowStats s = layerNormStats(xRow, cols, eps);
    // With xhat = (x - mean) rstd and g = dy gamma:
    //   dx = rstd (g - mean(g) - xhat mean(g xhat)).
    double sumG = 0.0, sumGXhat = 0.0;
    for (int64_t j : blockThreads(cols)) {
      const float xh = centred(load(xRow, j), s);
      const float d = load(dyRow, j);
      const float g = __fmul_rn(d, load(gamma, j));
      sumG += g;
      sumGXhat += static_cast<double>(g) * xh;
      dgammaAcc[j] += static_cast<double>(d) * xh;
      dbetaAcc[j] += d;
    }
    const float meanG = static_cast<float>(blockSum(sumG) * invCols);
    const float meanGXhat = static_cast<float>(blockSum(sumGXhat) * invCols);
    T *dst = dx + r * cols;
    for (int64_t j : blockThreads(cols)) {
      const float xh = centred(load(xRow, j), s);
      const float g = __fmul_rn(load(dyRow, j), load(gamma, j));
      store(dst, j,
            __fmul_rn(s.rstd, __fsub_rn(__fsub_rn(g, meanG),
                                        __fmul_rn(xh, meanGXhat))));
    }
  }
}

template <typename T>
__global__ void rmsNormFwdKernel(const T *x, const T *weight, T *y,
                                 int64_t rows, int64_t cols, float eps) {
  for (int64_t r : gridBlocks(rows)) {
    const T *row = x + r * cols;
    const float rstd = rmsNormRstd(row, cols, eps);
    T *dst = y + r * cols;
    for (int64_t j : blockThreads(cols))
      store(dst, j, __fmul_rn(__fmul_rn(load(row, j), rstd), load(weight, j)));
  }
}

/// dx of each row and this block's partial sums of dweight (as
/// layerNormGradKernel's).
template <typename T>
__global__ void rmsNormGradKernel(const T *dy, const T *x, const T *weight,
                                  T *dx, double *dweightPart, int64_t rows,
                                  int64_t cols, float eps) {
  double *dweightAcc = dweightPart + blockIdx.x * cols;
  const double invCols = 1.0 / static_cast<double>(cols);
  for (int64_t r : gridBlocks(rows)) {
    const T *xRow = x + r * cols;
    const T *dyRow = dy + r * cols;
    const float rstd = rmsNormRstd(xRow, cols, eps);
    // With xhat = x rstd and g = dy weight: dx = rstd (g - xhat mean(g
    // xhat)); the mean's term is what the shared rstd contributes.
    double sumGXhat = 0.0;
    for (int64_t j : blockThreads(cols)) {
      const float xh = __fmul_rn(load(xRow, j), rstd);
      const float d = load(dyRow, j);
      sumGXhat += static_cast<double>(__fmul_rn(d, load(weight, j))) * xh;
      dweightAcc[j] += static_cast<double>(d) * xh;
    }
    const float meanGXhat = static_cast<float>(blockSum(sumGXhat) * invCols);
    T *dst = dx + r * cols;
    for (int64_t j : blockThreads(cols)) {
      const float xh = __fmul_rn(load(xRow, j), rstd);
      const float g = __fmul_rn(load(dyRow, j), load(weight, j));
      store(dst, j, __fmul_rn(rstd, __fsub_rn(g, __fmul_rn(xh, meanGXhat))));
    }
  }
}

/// out[j] = the sum over blocks b < nParts of part[b, j], in block order,
/// rounded once.
template <typename T>
__global__ void sumPartsKernel(const double *part, T *out, int64_t nParts,
                               int64_t cols) {
  for (int64_t j : gridThreads(cols)) {
    double sum = 0.0;
    for (int64_t b = 0; b < nParts; ++b)
      sum += part[b * cols + j];
    store(out, j, static_cast<float>(sum));
  }
}

/// Zeroed device scratch of `count` doubles, allocated in stream order;
/// released with cudaFreeAsync on the same stream after its last use.
double *zeroedScratch(cudaStream_t stream, const char *op, int64_t count) {
  void *p = nullptr;
  const size_t bytes = static_cast<size_t>(count) * sizeof(double);
  check(cudaMallocAsync(&p, bytes, stream), op);
  check(cudaMemsetAsync(p, 0, bytes, stream), op); // zero bits are +0.0
  return static_cast<double *>(p);
}

} // namespace

void layerNormFwd(cudaStream_t stream, int32_t dtype, const void *x,
                  const void *gamma, const void *beta, void *y, int64_t rows,
                  int64_t cols, float eps) {
  const char *op = "layer_norm_fwd";
  checkNormShape(op, rows, cols, eps);
  checkNotNull(op, "gamma", gamma);
  checkNotNull(op, "beta", beta);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    if (rows == 0 || cols == 0)
      return;
    layerNormFwdKernel<<<rowBlocksFor(rows), kRowThreads, 0, stream>>>(
        static_cast<const T *>(x), static_cast<const T *>(gamma),
        static_cast<const T *>(beta), static_cast<T *>(y), rows, cols, eps);
    checkLaunch(op);
  });
}

void layerNormGrad(cudaStream_t stream, int32_t dtype, const void *dy,
                   const void *x, const void *gamma, void *dx, void *dgamma,
                   void *dbeta, int64_t rows, int64_t cols, float eps) {
  const char *op = "layer_norm_grad";
  checkNormShape(op, rows, cols, eps);
  checkNotNull(op, "gamma", gamma);
  checkNotNull(op, "dgamma", dgamma);
  checkNotNull(op, "dbeta", dbeta);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    if (cols == 0)
      return;
    // With rows == 0 the one block sees no row and dgamma, dbeta become 0.
    const int64_t blocks = blocksOver(rows, kGradBlocks);
    double *parts = zeroedScratch(stream, op, 2 * blocks * cols);
    layerNormGradKernel<<<unsigned(blocks), kRowThreads, 0, stream>>>(
        static_cast<const T *>(dy), static_cast<const T *>(x),
        static_cast<const T *>(gamma), static_cast<T *>(dx), parts,
        parts + blocks * cols, rows, cols, eps);
    checkLaunch(op);
    sumPartsKernel<<<blocksFor(cols), kThreads, 0, stream>>>(
        parts, static_cast<T *>(dgamma), blocks, cols);
    checkLaunch(op);
    sumPartsKernel<<<blocksFor(cols), kThreads, 0, stream>>>(
        parts + blocks * cols, static_cast<T *>(dbeta), blocks, cols);
    checkLaunch(op);
    check(cudaFreeAsync(parts, stream), op);
  });
}

void rmsNormFwd(cudaStream_t stream, int32_t dtype, const void *x,
                const void *weight, void *y, int64_t rows, int64_t cols,
                float eps) {
  const char *op = "rms_norm_fwd";
  checkNormShape(op, rows, cols, eps);
  checkNotNull(op, "weight", weight);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    if (rows == 0 || cols == 0)
      return;
    rmsNormFwdKernel<<<rowBlocksFor(rows), kRowThreads, 0, stream>>>(
        static_cast<const T *>(x), static_cast<const T *>(weight),
        static_cast<T *>(y), rows, cols, eps);
    checkLaunch(op);
  });
}

void rmsNormGrad(cudaStream_t stream, int32_t dtype, const void *dy,
                 const void *x, const void *weight, void *dx, void *dweight,
                 int64_t rows, int64_t cols, float eps) {
  const char *op = "rms_norm_grad";
  checkNormShape(op, rows, cols, eps);
  checkNotNull(op, "weight", weight);
  checkNotNull(op, "dweight", dweight);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    if (cols == 0)
      return;
    const int64_t blocks = blocksOver(rows, kGradBlocks);
    double *parts = zeroedScratch(stream, op, blocks * cols);
    rmsNormGradKernel<<<unsigned(blocks), kRowThreads, 0, stream>>>(
        static_cast<const T *>(dy), static_cast<const T *>(x),
        static_cast<const T *>(weight), static_cast<T *>(dx), parts, rows, cols,
        eps);
    checkLaunch(op);
    sumPartsKernel<<<blocksFor(cols), kThreads, 0, stream>>>(
        parts, static_cast<T *>(dweight), blocks, cols);
    checkLaunch(op);
    check(cudaFreeAsync(parts, stream), op);
  });
}

} // namespace autoshard::rt::cuda
