// Dense layers on the GPU: cuBLAS GEMMs over nn.Linear's [out, in] weights,
// and the bias gradient's column sums.
//
// Numerics, against runtime/src/cpu/Linear.cpp (f32 SGEMMs, bf16 operands
// widened to f32 and the output rounded once):
// - f32 runs with CUBLAS_COMPUTE_32F_PEDANTIC: no TF32 tensor cores, no
//   bf16x9 emulation, whatever the math mode or environment says, so that
//   results stay f32 GEMMs that differ from the CPU's only in summation order.
// - bf16 operands run on tensor cores with CUBLAS_COMPUTE_32F: the products
//   of bf16 values are exact in f32 and accumulate in f32, and the handle's
//   CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION keeps split-K partial
//   sums in f32, so the output is rounded to bf16 once, as on the CPU.
// - The bias is added as the CPU adds it: y is seeded with b (an exact copy,
//   b has y's dtype) and the GEMM accumulates onto it with beta = 1, rounding
//   once. Known cost: one extra write and read of y next to the GEMM; a
//   cuBLASLt CUBLASLT_EPILOGUE_BIAS matmul would fuse it (future work, once
//   it can be checked against this on a device).
//
// cuBLAS is column-major and the ABI's matrices are row-major: a row-major
// [r, c] matrix is the column-major [c, r] matrix with leading dimension c,
// so each row-major product C = A B is issued as C^T = B^T A^T.
#include "Cublas.h"
#include "Cuda.h"
#include "Element.cuh"

#include "core/ArgChecks.h"
#include "core/Context.h"

#include <cublas_v2.h>

namespace autoshard::rt::cuda {
namespace {

// A grid-stride loop over n elements.
#define ASRT_FOR_EACH(i, n)                                                    \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);    \
       i += int64_t(blockDim.x) * gridDim.x)

/// cuBLAS's workspace: 32 MiB, what NVIDIA recommends for Hopper.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

/// Column-major c[m, n] = op(a)[m, k] op(b)[k, n] + beta c, all operands of
/// one dtype; m, n, k > 0 (the callers handle empty products).
void gemm(Blas &blas, const char *op, const GemmTypes &types,
          cublasOperation_t transA, cublasOperation_t transB, int64_t m,
          int64_t n, int64_t k, const void *a, int64_t lda, const void *b,
          int64_t ldb, float beta, void *c, int64_t ldc) {
  const float alpha = 1.0f;
  checkBlas(cublasGemmEx_64(blas.handle(), transA, transB, m, n, k, &alpha, a,
                            types.data, lda, b, types.data, ldb, &beta, c,
                            types.data, ldc, types.compute,
                            CUBLAS_GEMM_DEFAULT),
            op);
}

/// y = 0 over `count` elements: all-zero bits are +0 in f32 and bf16.
void zero(cudaStream_t stream, const char *op, void *y, int64_t count,
          size_t elementBytes) {
  if (count > 0)
    check(cudaMemsetAsync(y, 0, size_t(count) * elementBytes, stream), op);
}

/// y[r, j] = b[j]: copies of b's elements, so no rounding in either dtype.
template <typename T>
__global__ void broadcastRowsKernel(const T *b, T *y, int64_t rows,
                                    int64_t out) {
  ASRT_FOR_EACH(i, rows * out) { y[i] = b[i % out]; }
}

// The bias gradient's column sums: a block owns kBiasColumns adjacent
// columns (consecutive threads read consecutive addresses of a row) and
// kBiasRowLanes lanes split the rows among them; each column's partial sums
// are added in double in a fixed order, so results are deterministic.
// Known limitation: only ceil(out / 32) blocks run, each walking all rows,
// which underuses the GPU when out is small and rows are many; splitting the
// rows over more blocks needs a second pass over double partials.
constexpr int kBiasColumns = 32;
constexpr int kBiasRowLanes = 8;

template <typename T>
__global__ void biasGradKernel(const T *dy, T *db, int64_t rows, int64_t out,
                               int64_t tiles) {
  __shared__ double partial[kBiasRowLanes][kBiasColumns];
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    int64_t j = tile * kBiasColumns + threadIdx.x;
    double sum = 0.0;
    if (j < out)
      for (int64_t r = threadIdx.y; r < rows; r += kBiasRowLanes)
        sum += load(dy, r * out + j);
    partial[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && j < out) {
      double total = 0.0;
      for (int lane = 0; lane < kBiasRowLanes; ++lane)
        total += partial[lane][threadIdx.x];
      // double -> float -> dtype, as the CPU's store(result, j, float(acc)).
      store(db, j, static_cast<float>(total));
    }
    __syncthreads(); // partial is reused by the next tile
  }
}

#undef ASRT_FOR_EACH

} // namespace

GemmTypes gemmTypes(const char *op, int32_t dtype) {
  if (dtype == ASRT_DTYPE_F32)
    return {CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC, sizeof(float)};
  if (dtype == ASRT_DTYPE_BF16)
    return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, sizeof(__nv_bfloat16)};
  badDtype(op, dtype);
  return {}; // not reached: badDtype is fatal
}

void checkBlas(cublasStatus_t status, const char *what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fatal("%s: cuBLAS failed with %s (%s)", what, cublasGetStatusName(status),
          cublasGetStatusString(status));
}

Blas::Blas(cudaStream_t stream) : stream_(stream) {
  cublasHandle_t handle = nullptr;
  checkBlas(cublasCreate(&handle), "Blas: cublasCreate");
  handle_ = handle;
  checkBlas(cublasSetStream(handle, stream), "Blas: cublasSetStream");
  // Set after the stream: cublasSetStream resets the workspace to cuBLAS's
  // default pool. A workspace of our own keeps cuBLAS from allocating on
  // first use of a stream.
  check(cudaMalloc(&workspace_, kWorkspaceBytes), "Blas: workspace");
  checkBlas(cublasSetWorkspace(handle, workspace_, kWorkspaceBytes),
            "Blas: cublasSetWorkspace");
  // No TF32 (the default math mode), and bf16 GEMMs reduce in f32.
  checkBlas(cublasSetMathMode(
                handle, static_cast<cublasMath_t>(
                            CUBLAS_DEFAULT_MATH |
                            CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
            "Blas: cublasSetMathMode");
}

Blas::~Blas() {
  // Work queued on the stream may still use the workspace: cublasDestroy
  // synchronizes the device, then the workspace can go.
  if (handle_)
    checkBlas(cublasDestroy(handle_), "Blas: cublasDestroy");
  if (workspace_)
    check(cudaFree(workspace_), "Blas: freeing the workspace");
}

void linearFwd(Blas &blas, int32_t dtype, const void *x, const void *w,
               const void *b, void *y, int64_t rows, int64_t in, int64_t out) {
  const char *op = "linear_fwd";
  checkCount(op, "rows", rows);
  checkCount(op, "in", in);
  checkCount(op, "out", out);
  const GemmTypes types = gemmTypes(op, dtype);
  cudaStream_t stream = blas.stream();
  if (rows == 0 || out == 0)
    return;
  if (b) {
    dispatchFloat(op, dtype, [&](auto tag) {
      using T = decltype(tag);
      broadcastRowsKernel<<<blocksFor(rows * out), kThreads, 0, stream>>>(
          static_cast<const T *>(b), static_cast<T *>(y), rows, out);
    });
    checkLaunch(op);
  } else if (in == 0) {
    zero(stream, op, y, rows * out, types.elementBytes);
  }
  if (in == 0)
    return; // the empty sum: y is b or 0
  // Row-major y[rows, out] = x[rows, in] w[out, in]^T is column-major
  // y^T[out, rows] = w^T^T x^T: w read as [in, out] transposed, x as
  // [in, rows].
  gemm(blas, op, types, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, w, in, x, in,
       b ? 1.0f : 0.0f, y, out);
}

void linearGradInput(Blas &blas, int32_t dtype, const void *dy, const void *w,
                     void *dx, int64_t rows, int64_t in, int64_t out) {
  const char *op = "linear_grad_input";
  checkCount(op, "rows", rows);
  checkCount(op, "in", in);
  checkCount(op, "out", out);
  const GemmTypes types = gemmTypes(op, dtype);
  if (rows == 0 || in == 0)
    return;
  if (out == 0) {
    zero(blas.stream(), op, dx, rows * in, types.elementBytes);
    return;
  }
  // Row-major dx[rows, in] = dy[rows, out] w[out, in] is column-major
  // dx^T[in, rows] = w^T[in, out] dy^T[out, rows].
  gemm(blas, op, types, CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, w, in, dy, out,
       0.0f, dx, in);
}

void linearGradWeight(Blas &blas, int32_t dtype, const void *dy, const void *x,
                      void *dw, int64_t rows, int64_t in, int64_t out) {
  const char *op = "linear_grad_weight";
  checkCount(op, "rows", rows);
  checkCount(op, "in", in);
  checkCount(op, "out", out);
  const GemmTypes types = gemmTypes(op, dtype);
  if (in == 0 || out == 0)
    return;
  if (rows == 0) {
    zero(blas.stream(), op, dw, out * in, types.elementBytes);
    return;
  }
  // Row-major dw[out, in] = dy[rows, out]^T x[rows, in] is column-major
  // dw^T[in, out] = x^T[in, rows] dy[rows, out], dy read as [out, rows]
  // transposed.
  gemm(blas, op, types, CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, x, in, dy, out,
       0.0f, dw, in);
}

void biasGrad(cudaStream_t stream, int32_t dtype, const void *dy, void *db,
              int64_t rows, int64_t out) {
  const char *op = "bias_grad";
  checkCount(op, "rows", rows);
  checkCount(op, "out", out);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    if (out == 0)
      return;
    int64_t tiles = (out + kBiasColumns - 1) / kBiasColumns;
    unsigned blocks = static_cast<unsigned>(tiles < 65535 ? tiles : 65535);
    biasGradKernel<<<blocks, dim3(kBiasColumns, kBiasRowLanes), 0, stream>>>(
        static_cast<const T *>(dy), static_cast<T *>(db), rows, out, tiles);
  });
  checkLaunch(op);
}

} // namespace autoshard::rt::cuda
