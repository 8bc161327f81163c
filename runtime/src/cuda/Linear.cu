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
// - A linear layer paired with its GELU (linearGeluFwd) runs in bf16 as one
//   cuBLASLt matmul with CUBLASLT_EPILOGUE_GELU_AUX_BIAS: pre-activation as
//   the auxiliary output, the GELU of the f32 sum before its rounding.
// - The bias is added as the CPU adds it, to the f32 sum before the one
//   rounding: in bf16 by cuBLASLt's CUBLASLT_EPILOGUE_BIAS (one kernel, y
//   written once), with split-K partial sums restricted to f32
//   (CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE); in f32, and in bf16 when
//   cuBLASLt offers no algorithm for the shape, y is seeded with b (an
//   exact copy) and the GEMM accumulates onto it with beta = 1.
//
// cuBLAS is column-major and the ABI's matrices are row-major: a row-major
// [r, c] matrix is the column-major [c, r] matrix with leading dimension c,
// so each row-major product C = A B is issued as C^T = B^T A^T.
#include "Cublas.h"
#include "Cuda.h"
#include "Element.cuh"
#include "Grid.cuh"

#include "core/ArgChecks.h"
#include "core/Context.h"

#include <cublasLt.h>
#include <cublas_v2.h>

namespace autoshard::rt::cuda {
namespace {

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
  for (int64_t i : gridThreads(rows * out))
    y[i] = b[i % out];
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
  for (int64_t tile : gridBlocks(tiles)) {
    int64_t j = tile * kBiasColumns + threadIdx.x;
    double sum = 0.0;
    if (j < out)
      for (int64_t r : blockThreadsY(rows))
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

/// The largest power of two up to 256 that divides p's address.
uint32_t alignmentOf(const void *p) {
  uintptr_t address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0)
    alignment /= 2;
  return alignment;
}

/// The descriptors of one cuBLASLt matmul, destroyed with it.
struct LtMatmul {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  const char *op;

  explicit LtMatmul(const char *op) : op(op) {}
  LtMatmul(const LtMatmul &) = delete;
  LtMatmul &operator=(const LtMatmul &) = delete;
  ~LtMatmul() {
    if (pref)
      checkBlas(cublasLtMatmulPreferenceDestroy(pref), op);
    for (cublasLtMatrixLayout_t layout : {a, b, d})
      if (layout)
        checkBlas(cublasLtMatrixLayoutDestroy(layout), op);
    if (desc)
      checkBlas(cublasLtMatmulDescDestroy(desc), op);
  }
  void set(cublasLtMatmulDescAttributes_t attr, const void *value,
           size_t bytes) {
    checkBlas(cublasLtMatmulDescSetAttribute(desc, attr, value, bytes), op);
  }
};

/// Runs `mm` (its descriptor and layouts set up) as D = A B with alpha 1
/// and beta 0: the preference tells the heuristic each operand's actual
/// alignment (it assumes 256 bytes otherwise, and a view into the arena may
/// have less), the workspace and f32 split-K sums; false, and nothing
/// queued, when cuBLASLt has no algorithm. Any other failure is fatal.
bool runLtMatmul(Blas &blas, LtMatmul &mm, const void *a, const void *b,
                 void *d) {
  checkBlas(cublasLtMatmulPreferenceCreate(&mm.pref), mm.op);
  // cuBLASLt's heuristic assumes 256-byte aligned operands unless told
  // otherwise; a view into the arena may be less aligned.
  const void *operands[4] = {a, b, d, d};
  for (int i = 0; i < 4; ++i) {
    const uint32_t alignment = alignmentOf(operands[i]);
    checkBlas(cublasLtMatmulPreferenceSetAttribute(
                  mm.pref,
                  cublasLtMatmulPreferenceAttributes_t(
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + i),
                  &alignment, sizeof alignment),
              mm.op);
  }
  const uint64_t workspaceBytes = kWorkspaceBytes;
  const uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  checkBlas(cublasLtMatmulPreferenceSetAttribute(
                mm.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &workspaceBytes, sizeof workspaceBytes),
            mm.op);
  checkBlas(cublasLtMatmulPreferenceSetAttribute(
                mm.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                &reductions, sizeof reductions),
            mm.op);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      blas.lt(), mm.desc, mm.a, mm.b, mm.d, mm.d, mm.pref, 1, &result, &found);
  // No algorithm for this shape: the GEMM path. Any other failure is a
  // wrong call, and fatal.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED ||
      (status == CUBLAS_STATUS_SUCCESS && found == 0))
    return false;
  checkBlas(status, mm.op);
  const float alpha = 1.0f, beta = 0.0f;
  checkBlas(cublasLtMatmul(blas.lt(), mm.desc, &alpha, a, mm.a, b, mm.b,
                           &beta, d, mm.d, d, mm.d, &result.algo,
                           blas.workspace(), kWorkspaceBytes, blas.stream()),
            mm.op);
  return true;
}

/// y = x w^T + b as one cuBLASLt matmul with the bias epilogue, or, given
/// `pre`, y = gelu(x w^T + b) with the GELU epilogue storing x w^T + b into
/// `pre` (its leading dimension `out`, which must be a multiple of 8);
/// false (and nothing queued) when cuBLASLt has no algorithm for it. rows,
/// in, out > 0.
bool linearFwdBiasLt(Blas &blas, const GemmTypes &types, const void *x,
                     const void *w, const void *b, void *pre, void *y,
                     int64_t rows, int64_t in, int64_t out) {
  LtMatmul mm(pre ? "linear_gelu_fwd (cuBLASLt GELU and bias epilogue)"
                  : "linear_fwd (cuBLASLt bias epilogue)");
  checkBlas(cublasLtMatmulDescCreate(&mm.desc, types.compute, CUDA_R_32F),
            mm.op);
  const cublasOperation_t transA = CUBLAS_OP_T, transB = CUBLAS_OP_N;
  const cublasLtEpilogue_t epilogue =
      pre ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS;
  const cudaDataType_t biasType = types.data;
  mm.set(CUBLASLT_MATMUL_DESC_TRANSA, &transA, sizeof transA);
  mm.set(CUBLASLT_MATMUL_DESC_TRANSB, &transB, sizeof transB);
  mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
  mm.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b);
  mm.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType, sizeof biasType);
  if (pre) {
    // The auxiliary output has D's shape and type ([out, rows]
    // column-major); set before the heuristic, which reads its alignment.
    const int64_t auxLd = out;
    mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &pre, sizeof pre);
    mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &auxLd, sizeof auxLd);
  }
  // Column-major, as in linearFwd's GEMM: w as [in, out] (transposed), x
  // as [in, rows], y as [out, rows].
  checkBlas(cublasLtMatrixLayoutCreate(&mm.a, types.data, in, out, in), mm.op);
  checkBlas(cublasLtMatrixLayoutCreate(&mm.b, types.data, in, rows, in), mm.op);
  checkBlas(cublasLtMatrixLayoutCreate(&mm.d, types.data, out, rows, out),
            mm.op);
  return runLtMatmul(blas, mm, w, x, y);
}

/// dpre = (dy w) * gelu'(pre) as one cuBLASLt matmul with the DGELU
/// epilogue (pre its auxiliary input, leading dimension `in`, a multiple
/// of 8), and with DGELU_BGRAD db = the column sums of dpre when db is not
/// null; false (and nothing queued) when cuBLASLt has no algorithm for it.
/// rows, in, out > 0.
bool linearGradGeluLt(Blas &blas, const GemmTypes &types, const void *dy,
                      const void *w, const void *pre, void *dpre, void *db,
                      int64_t rows, int64_t in, int64_t out) {
  LtMatmul mm(db ? "linear_grad_gelu (cuBLASLt GELU-derivative and "
                   "bias-gradient epilogue)"
                 : "linear_grad_gelu (cuBLASLt GELU-derivative epilogue)");
  checkBlas(cublasLtMatmulDescCreate(&mm.desc, types.compute, CUDA_R_32F),
            mm.op);
  const cublasOperation_t trans = CUBLAS_OP_N;
  const cublasLtEpilogue_t epilogue =
      db ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
  const int64_t auxLd = in;
  mm.set(CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof trans);
  mm.set(CUBLASLT_MATMUL_DESC_TRANSB, &trans, sizeof trans);
  mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
  mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &pre, sizeof pre);
  mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &auxLd, sizeof auxLd);
  if (db) {
    const cudaDataType_t biasType = types.data;
    mm.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &db, sizeof db);
    mm.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType, sizeof biasType);
  }
  // Column-major, as in linearGradInput's GEMM: w as [in, out], dy as
  // [out, rows], dpre as [in, rows] (pre has its shape).
  checkBlas(cublasLtMatrixLayoutCreate(&mm.a, types.data, in, out, in), mm.op);
  checkBlas(cublasLtMatrixLayoutCreate(&mm.b, types.data, out, rows, out),
            mm.op);
  checkBlas(cublasLtMatrixLayoutCreate(&mm.d, types.data, in, rows, in),
            mm.op);
  return runLtMatmul(blas, mm, w, dy, dpre);
}

/// dw = dy^T x as one cuBLASLt matmul whose BGRADB epilogue writes db, the
/// sums of B (dy, as [rows, out] after its transpose) over the GEMM's k
/// (rows); false (and nothing queued) when cuBLASLt has no algorithm for
/// it. rows, in, out > 0.
bool linearGradWeightBiasLt(Blas &blas, const GemmTypes &types,
                            const void *dy, const void *x, void *dw, void *db,
                            int64_t rows, int64_t in, int64_t out) {
  LtMatmul mm("linear_grad_weight_bias (cuBLASLt bias-gradient epilogue)");
  checkBlas(cublasLtMatmulDescCreate(&mm.desc, types.compute, CUDA_R_32F),
            mm.op);
  const cublasOperation_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_T;
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BGRADB;
  const cudaDataType_t biasType = types.data;
  mm.set(CUBLASLT_MATMUL_DESC_TRANSA, &transA, sizeof transA);
  mm.set(CUBLASLT_MATMUL_DESC_TRANSB, &transB, sizeof transB);
  mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
  mm.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &db, sizeof db);
  mm.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType, sizeof biasType);
  // Column-major, as in linearGradWeight's GEMM: x as [in, rows], dy as
  // [out, rows] (transposed), dw as [in, out].
  checkBlas(cublasLtMatrixLayoutCreate(&mm.a, types.data, in, rows, in), mm.op);
  checkBlas(cublasLtMatrixLayoutCreate(&mm.b, types.data, out, rows, out),
            mm.op);
  checkBlas(cublasLtMatrixLayoutCreate(&mm.d, types.data, in, out, in), mm.op);
  return runLtMatmul(blas, mm, x, dy, dw);
}

/// A linear entry point's checks: its three extents and its dtype.
GemmTypes linearTypes(const char *op, int32_t dtype, int64_t rows, int64_t in,
                      int64_t out) {
  checkCount(op, "rows", rows);
  checkCount(op, "in", in);
  checkCount(op, "out", out);
  return gemmTypes(op, dtype);
}

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
  cublasLtHandle_t lt = nullptr;
  checkBlas(cublasLtCreate(&lt), "Blas: cublasLtCreate");
  lt_ = lt;
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
  if (lt_)
    checkBlas(cublasLtDestroy(lt_), "Blas: cublasLtDestroy");
  if (workspace_)
    check(cudaFree(workspace_), "Blas: freeing the workspace");
}

void linearFwd(Blas &blas, int32_t dtype, const void *x, const void *w,
               const void *b, void *y, int64_t rows, int64_t in, int64_t out) {
  const char *op = "linear_fwd";
  const GemmTypes types = linearTypes(op, dtype, rows, in, out);
  cudaStream_t stream = blas.stream();
  if (rows == 0 || out == 0)
    return;
  if (b && in > 0 && dtype == ASRT_DTYPE_BF16 &&
      linearFwdBiasLt(blas, types, x, w, b, nullptr, y, rows, in, out))
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

void linearGeluFwd(Blas &blas, int32_t dtype, const void *x, const void *w,
                   const void *b, void *pre, void *y, int64_t rows, int64_t in,
                   int64_t out) {
  const char *op = "linear_gelu_fwd";
  if (!b)
    fatal("%s: the bias is null; the fused call is for a linear layer with a "
          "bias (asrt_linear_fwd and asrt_gelu_fwd otherwise)",
          op);
  const GemmTypes types = linearTypes(op, dtype, rows, in, out);
  if (rows == 0 || out == 0)
    return;
  if (in > 0 && dtype == ASRT_DTYPE_BF16 && out % 8 == 0 &&
      linearFwdBiasLt(blas, types, x, w, b, pre, y, rows, in, out))
    return;
  linearFwd(blas, dtype, x, w, b, pre, rows, in, out);
  geluFwd(blas.stream(), dtype, pre, y, rows * out);
}

void linearGradGelu(Blas &blas, int32_t dtype, const void *dy, const void *w,
                    const void *pre, void *dpre, void *db, int64_t rows,
                    int64_t in, int64_t out) {
  const char *op = "linear_grad_gelu";
  const GemmTypes types = linearTypes(op, dtype, rows, in, out);
  if (rows > 0 && in > 0 && out > 0 && dtype == ASRT_DTYPE_BF16 &&
      in % 8 == 0 &&
      linearGradGeluLt(blas, types, dy, w, pre, dpre, db, rows, in, out))
    return;
  linearGradInput(blas, dtype, dy, w, dpre, rows, in, out);
  geluGrad(blas.stream(), dtype, dpre, pre, dpre, rows * in);
  if (db)
    biasGrad(blas.stream(), dtype, dpre, db, rows, in);
}

void linearGradInput(Blas &blas, int32_t dtype, const void *dy, const void *w,
                     void *dx, int64_t rows, int64_t in, int64_t out) {
  const char *op = "linear_grad_input";
  const GemmTypes types = linearTypes(op, dtype, rows, in, out);
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
  const GemmTypes types = linearTypes(op, dtype, rows, in, out);
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

void linearGradWeightBias(Blas &blas, int32_t dtype, const void *dy,
                          const void *x, void *dw, void *db, int64_t rows,
                          int64_t in, int64_t out) {
  const char *op = "linear_grad_weight_bias";
  const GemmTypes types = linearTypes(op, dtype, rows, in, out);
  if (rows > 0 && in > 0 && out > 0 && dtype == ASRT_DTYPE_BF16 &&
      linearGradWeightBiasLt(blas, types, dy, x, dw, db, rows, in, out))
    return;
  linearGradWeight(blas, dtype, dy, x, dw, rows, in, out);
  biasGrad(blas.stream(), dtype, dy, db, rows, out);
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
    biasGradKernel<<<tileBlocksFor(tiles), dim3(kBiasColumns, kBiasRowLanes), 0,
                     stream>>>(static_cast<const T *>(dy), static_cast<T *>(db),
                               rows, out, tiles);
  });
  checkLaunch(op);
}

} // namespace autoshard::rt::cuda
