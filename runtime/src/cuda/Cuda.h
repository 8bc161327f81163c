// The CUDA backend's kernels, as C++ functions over device pointers.
//
// Each function mirrors the ABI call of the same name (abi.h: the same
// arguments, dtype codes and aliasing rules) without the context, plus the
// stream it launches on; it returns once the work is queued. The extern "C"
// asrt_* entry points of a CUDA training binary wrap these; the tests call
// them directly, next to the CPU backend's asrt_* as the reference.
// Compiled by nvcc (CUDA 13, sm_90); the header itself is plain C++ and
// needs only the CUDA runtime's types.
#pragma once

#include "autoshard/rt/abi.h"
#include "data/Dropout.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace autoshard::rt::cuda {

/// CUDA devices this process can see, or -1 with `error` set when the
/// driver or runtime cannot tell (no driver: "no CUDA device").
int deviceCount(std::string &error);

/// Fatal, naming `what` and CUDA's error string, unless `status` is
/// cudaSuccess.
void check(cudaError_t status, const char *what);

// ---- Attention (Attention.cu) ----
// asrt_causal_attention_fwd / _grad. head_dim is at most 128 (fatal above).
void causalAttentionFwd(cudaStream_t stream, int32_t dtype, const void *q,
                        const void *k, const void *v, void *out, float *lse,
                        int64_t batch, int64_t seq, int64_t heads,
                        int64_t kv_heads, int64_t head_dim, float scale);
void causalAttentionGrad(cudaStream_t stream, int32_t dtype, const void *dout,
                         const void *q, const void *k, const void *v,
                         const void *out, const float *lse, void *dq, void *dk,
                         void *dv, int64_t batch, int64_t seq, int64_t heads,
                         int64_t kv_heads, int64_t head_dim, float scale);

// ---- Elementwise (Elementwise.cu) ----
void reluFwd(cudaStream_t stream, int32_t dtype, const void *x, void *y,
             int64_t n);
void reluGrad(cudaStream_t stream, int32_t dtype, const void *dy,
              const void *x, void *dx, int64_t n);
void geluFwd(cudaStream_t stream, int32_t dtype, const void *x, void *y,
             int64_t n);
void geluGrad(cudaStream_t stream, int32_t dtype, const void *dy,
              const void *x, void *dx, int64_t n);
void swigluFwd(cudaStream_t stream, int32_t dtype, const void *gate,
               const void *up, void *y, int64_t n);
void swigluGrad(cudaStream_t stream, int32_t dtype, const void *dy,
                const void *gate, const void *up, void *dgate, void *dup,
                int64_t n);
void add(cudaStream_t stream, int32_t dtype, const void *a, const void *b,
         void *y, int64_t n);
void scale(cudaStream_t stream, int32_t dtype, const void *x, void *y,
           int64_t n, float factor);
void cast(cudaStream_t stream, int32_t srcDtype, const void *src,
          int32_t dstDtype, void *dst, int64_t n);

// ---- Linear (cuBLAS) (Linear.cu) ----
} // namespace autoshard::rt::cuda
struct cublasContext;   // cuBLAS's handle type: cublasHandle_t
struct cublasLtContext; // cuBLASLt's: cublasLtHandle_t
namespace autoshard::rt::cuda {

/// A cuBLAS handle bound to one stream, with a workspace of its own and the
/// math mode the linear layers need (no TF32; bf16 GEMMs reduce in f32),
/// and a cuBLASLt handle for the fused epilogues, sharing the workspace.
/// The linear functions enqueue on its stream; the stream must outlive it.
/// A context owns one per compute stream.
class Blas {
public:
  explicit Blas(cudaStream_t stream);
  ~Blas(); // synchronizes the device (cublasDestroy, cudaFree)
  Blas(const Blas &) = delete;
  Blas &operator=(const Blas &) = delete;

  cudaStream_t stream() const { return stream_; }
  cublasContext *handle() const { return handle_; }
  cublasLtContext *lt() const { return lt_; }
  void *workspace() const { return workspace_; }

private:
  cudaStream_t stream_;
  cublasContext *handle_ = nullptr;
  cublasLtContext *lt_ = nullptr;
  void *workspace_ = nullptr;
};

// y[rows, out] = x[rows, in] w[out, in]^T (+ b), db = column sums of dy: as
// asrt_linear_fwd, asrt_linear_grad_input, asrt_linear_grad_weight,
// asrt_bias_grad. The GEMMs run on blas's stream.
void linearFwd(Blas &blas, int32_t dtype, const void *x, const void *w,
               const void *b, void *y, int64_t rows, int64_t in, int64_t out);
/// asrt_linear_gelu_fwd: pre = x w^T + b, y = gelu(pre). In bf16 one
/// cuBLASLt matmul with CUBLASLT_EPILOGUE_GELU_AUX_BIAS (pre stored as the
/// epilogue's auxiliary output; the GELU taken of the f32 sum before it is
/// rounded) when cuBLASLt has an algorithm and out is a multiple of 8 (the
/// auxiliary leading dimension's rule); otherwise linearFwd then geluFwd.
void linearGeluFwd(Blas &blas, int32_t dtype, const void *x, const void *w,
                   const void *b, void *pre, void *y, int64_t rows, int64_t in,
                   int64_t out);
void linearGradInput(Blas &blas, int32_t dtype, const void *dy, const void *w,
                     void *dx, int64_t rows, int64_t in, int64_t out);
/// asrt_linear_grad_gelu: dpre = (dy w) * gelu'(pre), db = column sums of
/// dpre (when not null). In bf16 one cuBLASLt matmul with
/// CUBLASLT_EPILOGUE_DGELU_BGRAD (DGELU without db; GELU's derivative
/// applied to the f32 product before rounding) when cuBLASLt has an
/// algorithm and in is a multiple of 8; otherwise linearGradInput, geluGrad
/// in place and biasGrad.
void linearGradGelu(Blas &blas, int32_t dtype, const void *dy, const void *w,
                    const void *pre, void *dpre, void *db, int64_t rows,
                    int64_t in, int64_t out);
void linearGradWeight(Blas &blas, int32_t dtype, const void *dy, const void *x,
                      void *dw, int64_t rows, int64_t in, int64_t out);
/// asrt_linear_grad_weight_bias: dw = dy^T x and db = the column sums of
/// dy. In bf16 one cuBLASLt matmul with CUBLASLT_EPILOGUE_BGRADB (the bias
/// gradient of the GEMM's B operand, dy) when cuBLASLt has an algorithm;
/// otherwise linearGradWeight and biasGrad.
void linearGradWeightBias(Blas &blas, int32_t dtype, const void *dy,
                          const void *x, void *dw, void *db, int64_t rows,
                          int64_t in, int64_t out);
void biasGrad(cudaStream_t stream, int32_t dtype, const void *dy, void *db,
              int64_t rows, int64_t out);

// ---- Generic tensor ops (TensorOps.cu, Matmul.cpp) ----
// As asrt_unary, asrt_unary_grad, asrt_binary, asrt_select, asrt_reduce,
// asrt_copy_strided, asrt_fill, asrt_softmax, asrt_softmax_grad and
// asrt_matmul, with the CPU backend's checks and messages. Tensors are
// device pointers; dims and strides are host arrays (the generated code's
// constants), read before the function returns and passed to the kernels
// by value. matmul runs on blas's stream: one GEMM, or strided-batched
// GEMMs over the innermost batch dim after coalescing (memory/StridedSpace.h).
void unary(cudaStream_t stream, int32_t dtype, int32_t fn, const void *x,
           void *y, int64_t n, float alpha);
void unaryGrad(cudaStream_t stream, int32_t dtype, int32_t fn, const void *dy,
               const void *x, void *dx, int64_t n, float alpha);
/// As asrt_dropout, with the context's batch rank and the call's mask
/// (data/Dropout.h).
void dropout(cudaStream_t stream, int32_t dtype, const void *x, void *y,
             int64_t n, int64_t rowElems, int64_t rowOffset, int64_t rankRows,
             int64_t batchRank, const DropoutMask &mask);
void binary(cudaStream_t stream, int32_t dtype, int32_t fn, const void *a,
            const void *b, void *y, int32_t rank, const int64_t *dims,
            const int64_t *aStrides, const int64_t *bStrides);
void select(cudaStream_t stream, int32_t dtype, const uint8_t *cond,
            const void *a, const void *b, void *y, int32_t rank,
            const int64_t *dims, const int64_t *condStrides,
            const int64_t *aStrides, const int64_t *bStrides);
void reduce(cudaStream_t stream, int32_t dtype, int32_t reduceOp, const void *x,
            void *y, int32_t outRank, const int64_t *outDims,
            const int64_t *outStrides, int32_t redRank, const int64_t *redDims,
            const int64_t *redStrides);
void copyStrided(cudaStream_t stream, int32_t dtype, const void *x, void *y,
                 int32_t rank, const int64_t *dims, const int64_t *xStrides,
                 int64_t xOffset, const int64_t *yStrides, int64_t yOffset);
void fill(cudaStream_t stream, int32_t dtype, void *y, int64_t n, float value);
void softmax(cudaStream_t stream, int32_t dtype, const void *x, void *y,
             int64_t rows, int64_t cols, int32_t logSoftmax);
void softmaxGrad(cudaStream_t stream, int32_t dtype, const void *dy,
                 const void *y, void *dx, int64_t rows, int64_t cols,
                 int32_t logSoftmax);
void matmul(Blas &blas, int32_t dtype, const void *a, const void *b, void *y,
            int32_t batchRank, const int64_t *batchDims,
            const int64_t *aBatchStrides, const int64_t *bBatchStrides,
            int64_t m, int64_t n, int64_t k, int32_t transA, int32_t transB);

// Causal attention as cuBLAS batched GEMMs (AttentionGemm.cu): the same
// results as causalAttentionFwd/Grad (up to rounding; the same lse), on
// tensor cores, with [heads, seq, seq] scores materialised per batch row in
// stream-ordered scratch. causalAttentionGemmFits says whether that scratch
// stays within its bound (1 GiB); the GEMMs and kernels run on blas's stream.
bool causalAttentionGemmFits(int64_t seq, int64_t heads);
void causalAttentionFwdGemm(Blas &blas, int32_t dtype, const void *q,
                            const void *k, const void *v, void *out,
                            float *lse, int64_t batch, int64_t seq,
                            int64_t heads, int64_t kv_heads, int64_t head_dim,
                            float scale);
void causalAttentionGradGemm(Blas &blas, int32_t dtype, const void *dout,
                             const void *q, const void *k, const void *v,
                             const void *out, const float *lse, void *dq,
                             void *dk, void *dv, int64_t batch, int64_t seq,
                             int64_t heads, int64_t kv_heads,
                             int64_t head_dim, float scale);

// Causal attention on tensor cores through WMMA (AttentionWmma.cu):
// Attention.cu's flash scheme with the products as mma_sync, the same out
// and gradients (up to rounding: its probabilities and dS are rounded to
// bf16) and the same lse, so either path's backward takes either path's
// forward. Only bf16 with head_dim a multiple of 16 up to 128
// (causalAttentionWmmaSupports); fatal otherwise.
bool causalAttentionWmmaSupports(int32_t dtype, int64_t headDim);
void causalAttentionFwdWmma(cudaStream_t stream, int32_t dtype, const void *q,
                            const void *k, const void *v, void *out,
                            float *lse, int64_t batch, int64_t seq,
                            int64_t heads, int64_t kv_heads, int64_t head_dim,
                            float scale);
void causalAttentionGradWmma(cudaStream_t stream, int32_t dtype,
                             const void *dout, const void *q, const void *k,
                             const void *v, const void *out, const float *lse,
                             void *dq, void *dk, void *dv, int64_t batch,
                             int64_t seq, int64_t heads, int64_t kv_heads,
                             int64_t head_dim, float scale);

// ---- Optimizer (Optimizer.cu) ----
// As asrt_sgd_update, asrt_adamw_update, asrt_adamw_update_multi,
// asrt_increment_i32, asrt_sum_of_squares, asrt_clip_coefficient. Every
// pointer is a device pointer, the scalars lr, step, grad_scale, acc, sumsq
// included: the kernels read them on the device. The one exception is
// adamwUpdateMulti's `tensors`, a host array of descriptors (of device
// buffers) that it reads before it returns. A step below 1 (AdamW) or a counter
// at INT32_MAX (increment) cannot be fatal on the host without a
// synchronization: the kernel prints the CPU's message and traps, which makes
// the next CUDA call or synchronization fail (Optimizer.cu).
void sgdUpdate(cudaStream_t stream, int32_t gradDtype, const float *param,
               const void *grad, const float *lr, const float *buf,
               const float *gradScale, float *paramOut, float *bufOut,
               int64_t n, float momentum, float weightDecay, int32_t nesterov);
void adamwUpdate(cudaStream_t stream, int32_t gradDtype, const float *param,
                 const void *grad, const float *expAvg, const float *expAvgSq,
                 const float *lr, const int32_t *step, const float *gradScale,
                 float *paramOut, float *expAvgOut, float *expAvgSqOut,
                 int64_t n, float beta1, float beta2, float eps,
                 float weightDecay);
void adamwUpdateMulti(cudaStream_t stream, int32_t gradDtype,
                      const asrt_adamw_tensor *tensors, int64_t count,
                      const float *lr, const int32_t *step,
                      const float *gradScale, float beta1, float beta2,
                      float eps);
void incrementI32(cudaStream_t stream, const int32_t *x, int32_t *y);
void sumOfSquares(cudaStream_t stream, int32_t dtype, const void *x, int64_t n,
                  float *acc, int32_t accumulate);
void clipCoefficient(cudaStream_t stream, const float *sumsq, float *coef,
                     float maxNorm);

// ---- Norms, RoPE, embeddings, loss ----
// (Norm.cu, Rope.cu, Embedding.cu, Loss.cu.) As asrt_layer_norm_fwd/_grad,
// asrt_rms_norm_fwd/_grad, asrt_rope_fwd/_grad, asrt_embedding_fwd/_grad,
// asrt_add_position_embedding_fwd/_grad, asrt_softmax_xent_fwd/_grad. Every
// pointer is a device pointer, ids, labels, loss and dloss included. The
// embedding and cross-entropy functions read ids / labels back to check
// them on the host (fatal, with the CPU's message): they synchronise the
// stream. The norm gradients, the embedding gradient and the cross-entropy
// forward take device scratch with cudaMallocAsync and release it with
// cudaFreeAsync on the same stream.
void layerNormFwd(cudaStream_t stream, int32_t dtype, const void *x,
                  const void *gamma, const void *beta, void *y, int64_t rows,
                  int64_t cols, float eps);
void layerNormGrad(cudaStream_t stream, int32_t dtype, const void *dy,
                   const void *x, const void *gamma, void *dx, void *dgamma,
                   void *dbeta, int64_t rows, int64_t cols, float eps);
void rmsNormFwd(cudaStream_t stream, int32_t dtype, const void *x,
                const void *weight, void *y, int64_t rows, int64_t cols,
                float eps);
void rmsNormGrad(cudaStream_t stream, int32_t dtype, const void *dy,
                 const void *x, const void *weight, void *dx, void *dweight,
                 int64_t rows, int64_t cols, float eps);
void ropeFwd(cudaStream_t stream, int32_t dtype, const void *x, void *y,
             int64_t batch, int64_t seq, int64_t heads, int64_t headDim,
             float theta);
void ropeGrad(cudaStream_t stream, int32_t dtype, const void *dy, void *dx,
              int64_t batch, int64_t seq, int64_t heads, int64_t headDim,
              float theta);
void embeddingFwd(cudaStream_t stream, int32_t dtype, const int32_t *ids,
                  const void *table, void *y, int64_t nIds,
                  int64_t numEmbeddings, int64_t dim);
void embeddingGrad(cudaStream_t stream, int32_t dtype, const void *dy,
                   const int32_t *ids, void *dtable, int64_t nIds,
                   int64_t numEmbeddings, int64_t dim);
void addPositionEmbeddingFwd(cudaStream_t stream, int32_t dtype,
                             const void *x, const void *wpe, void *y,
                             int64_t batch, int64_t seq, int64_t dim);
void addPositionEmbeddingGrad(cudaStream_t stream, int32_t dtype,
                              const void *dy, void *dwpe, int64_t batch,
                              int64_t seq, int64_t maxPositions, int64_t dim);
void softmaxXentFwd(cudaStream_t stream, int32_t dtype, const void *logits,
                    const int32_t *labels, float *loss, int64_t rows,
                    int64_t classes, int64_t ignoreIndex);
void softmaxXentGrad(cudaStream_t stream, int32_t dtype, const void *logits,
                     const int32_t *labels, const float *dloss, void *dlogits,
                     int64_t rows, int64_t classes, int64_t ignoreIndex);
void nllLossFwd(cudaStream_t stream, int32_t dtype, const void *input,
                const int32_t *labels, float *loss, int64_t rows,
                int64_t classes, int64_t ignoreIndex);
void nllLossGrad(cudaStream_t stream, int32_t dtype, const int32_t *labels,
                 const float *dloss, void *dinput, int64_t rows,
                 int64_t classes, int64_t ignoreIndex);

} // namespace autoshard::rt::cuda
