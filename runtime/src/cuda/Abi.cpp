// The ABI's compute functions on the GPU: the CUDA kernels (Cuda.h) on the
// context's compute stream.
//
// Each entry point times itself under the CPU backend's op name, so that
// the per-op statistics and traces of the two backends line up. The times
// are those of queuing the work, not of running it: the kernels return
// once launched, except the ones that read ids or labels back to check them
// (embeddings, cross-entropy), which wait for the stream first. The compute
// lane belongs to the thread that runs the step, the only caller of these.
//
// Argument checks: the kernels check shapes, counts and required pointers
// with the CPU backend's messages; the elementwise kernels and cast take
// any count, so their negative counts are checked here, as the CPU's are.
// The memory, offload and collective functions are the core's and the
// communication library's, shared by both backends, and not defined here.
#include "Cuda.h"
#include "CudaDevice.h"

#include "core/ArgChecks.h"
#include "core/Context.h"
#include "memory/Device.h"
#include "data/Dropout.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

using autoshard::rt::checkCount;
using autoshard::rt::Lane;
using autoshard::rt::OpTimer;
using autoshard::rt::cuda::CudaDevice;

namespace cuda = autoshard::rt::cuda;

namespace {

/// The context's GPU, made current on the calling thread (kernel launches
/// go to the current device); fatal when ctx is null or has no CUDA device.
CudaDevice &device(asrt_context *ctx, const char *op) {
  CudaDevice &gpu = cuda::cudaDevice(ctx, op);
  gpu.makeCurrent(op);
  return gpu;
}

cudaStream_t computeStream(asrt_context *ctx, const char *op) {
  return device(ctx, op).stream(Lane::Compute);
}

/// The compute stream of elementwise op `op` over `n` elements, once `n` is
/// checked.
cudaStream_t elementwiseStream(asrt_context *ctx, const char *op, int64_t n) {
  cudaStream_t stream = computeStream(ctx, op);
  checkCount(op, "n", n);
  return stream;
}

} // namespace

// ---- Dense layers ----

extern "C" void asrt_linear_fwd(asrt_context *ctx, int32_t dtype, const void *x,
                                const void *w, const void *b, void *y,
                                int64_t rows, int64_t in, int64_t out) {
  OpTimer timer(ctx, "linear_fwd");
  cuda::linearFwd(device(ctx, "linear_fwd").blas(), dtype, x, w, b, y, rows, in,
                  out);
}

extern "C" void asrt_linear_gelu_fwd(asrt_context *ctx, int32_t dtype,
                                     const void *x, const void *w,
                                     const void *b, void *pre, void *y,
                                     int64_t rows, int64_t in, int64_t out) {
  OpTimer timer(ctx, "linear_gelu_fwd");
  cuda::linearGeluFwd(device(ctx, "linear_gelu_fwd").blas(), dtype, x, w, b,
                      pre, y, rows, in, out);
}

extern "C" void asrt_linear_grad_gelu(asrt_context *ctx, int32_t dtype,
                                      const void *dy, const void *w,
                                      const void *pre, void *dpre, void *db,
                                      int64_t rows, int64_t in, int64_t out) {
  OpTimer timer(ctx, "linear_grad_gelu");
  cuda::linearGradGelu(device(ctx, "linear_grad_gelu").blas(), dtype, dy, w,
                       pre, dpre, db, rows, in, out);
}

extern "C" void asrt_linear_grad_weight_bias(asrt_context *ctx, int32_t dtype,
                                             const void *dy, const void *x,
                                             void *dw, void *db, int64_t rows,
                                             int64_t in, int64_t out) {
  OpTimer timer(ctx, "linear_grad_weight_bias");
  cuda::linearGradWeightBias(device(ctx, "linear_grad_weight_bias").blas(),
                             dtype, dy, x, dw, db, rows, in, out);
}

extern "C" void asrt_linear_grad_input(asrt_context *ctx, int32_t dtype,
                                       const void *dy, const void *w, void *dx,
                                       int64_t rows, int64_t in, int64_t out) {
  OpTimer timer(ctx, "linear_grad_input");
  cuda::linearGradInput(device(ctx, "linear_grad_input").blas(), dtype, dy, w,
                        dx, rows, in, out);
}

extern "C" void asrt_linear_grad_weight(asrt_context *ctx, int32_t dtype,
                                        const void *dy, const void *x, void *dw,
                                        int64_t rows, int64_t in, int64_t out) {
  OpTimer timer(ctx, "linear_grad_weight");
  cuda::linearGradWeight(device(ctx, "linear_grad_weight").blas(), dtype, dy, x,
                         dw, rows, in, out);
}

extern "C" void asrt_bias_grad(asrt_context *ctx, int32_t dtype, const void *dy,
                               void *db, int64_t rows, int64_t out) {
  OpTimer timer(ctx, "bias_grad");
  cuda::biasGrad(computeStream(ctx, "bias_grad"), dtype, dy, db, rows, out);
}

// ---- Elementwise ----

extern "C" void asrt_relu_fwd(asrt_context *ctx, int32_t dtype, const void *x,
                              void *y, int64_t n) {
  OpTimer timer(ctx, "relu_fwd");
  cuda::reluFwd(elementwiseStream(ctx, "relu_fwd", n), dtype, x, y, n);
}

extern "C" void asrt_relu_grad(asrt_context *ctx, int32_t dtype, const void *dy,
                               const void *x, void *dx, int64_t n) {
  OpTimer timer(ctx, "relu_grad");
  cuda::reluGrad(elementwiseStream(ctx, "relu_grad", n), dtype, dy, x, dx, n);
}

extern "C" void asrt_gelu_fwd(asrt_context *ctx, int32_t dtype, const void *x,
                              void *y, int64_t n) {
  OpTimer timer(ctx, "gelu_fwd");
  cuda::geluFwd(elementwiseStream(ctx, "gelu_fwd", n), dtype, x, y, n);
}

extern "C" void asrt_gelu_grad(asrt_context *ctx, int32_t dtype, const void *dy,
                               const void *x, void *dx, int64_t n) {
  OpTimer timer(ctx, "gelu_grad");
  cuda::geluGrad(elementwiseStream(ctx, "gelu_grad", n), dtype, dy, x, dx, n);
}

extern "C" void asrt_swiglu_fwd(asrt_context *ctx, int32_t dtype,
                                const void *gate, const void *up, void *y,
                                int64_t n) {
  OpTimer timer(ctx, "swiglu_fwd");
  cuda::swigluFwd(elementwiseStream(ctx, "swiglu_fwd", n), dtype, gate, up, y,
                  n);
}

extern "C" void asrt_swiglu_grad(asrt_context *ctx, int32_t dtype,
                                 const void *dy, const void *gate,
                                 const void *up, void *dgate, void *dup,
                                 int64_t n) {
  OpTimer timer(ctx, "swiglu_grad");
  cuda::swigluGrad(elementwiseStream(ctx, "swiglu_grad", n), dtype, dy, gate,
                   up, dgate, dup, n);
}

extern "C" void asrt_add(asrt_context *ctx, int32_t dtype, const void *a,
                         const void *b, void *y, int64_t n) {
  OpTimer timer(ctx, "add");
  cuda::add(elementwiseStream(ctx, "add", n), dtype, a, b, y, n);
}

extern "C" void asrt_scale(asrt_context *ctx, int32_t dtype, const void *x,
                           void *y, int64_t n, float factor) {
  OpTimer timer(ctx, "scale");
  cuda::scale(elementwiseStream(ctx, "scale", n), dtype, x, y, n, factor);
}

extern "C" void asrt_cast(asrt_context *ctx, int32_t src_dtype, const void *src,
                          int32_t dst_dtype, void *dst, int64_t n) {
  OpTimer timer(ctx, "cast");
  cuda::cast(elementwiseStream(ctx, "cast", n), src_dtype, src, dst_dtype, dst,
             n);
}

// ---- Generic tensor ops ----
// The kernels check their arguments (TensorOps.cu, Matmul.cpp) and copy the
// host's dims and strides into their launch parameters.

extern "C" void asrt_unary(asrt_context *ctx, int32_t dtype, int32_t fn,
                           const void *x, void *y, int64_t n, float alpha) {
  OpTimer timer(ctx, "unary");
  cuda::unary(computeStream(ctx, "unary"), dtype, fn, x, y, n, alpha);
}

extern "C" void asrt_dropout(asrt_context *ctx, int32_t dtype, const void *x,
                             void *y, int64_t n, int64_t row_elems,
                             int64_t row_offset, int64_t rank_rows, float p,
                             int64_t stream) {
  OpTimer timer(ctx, "dropout");
  cuda::dropout(computeStream(ctx, "dropout"), dtype, x, y, n, row_elems,
                row_offset, rank_rows, ctx->batchRank(),
                autoshard::rt::dropoutMask(ctx->randomSeed(), ctx->randomStep(),
                                           stream, p));
}

extern "C" void asrt_unary_grad(asrt_context *ctx, int32_t dtype, int32_t fn,
                                const void *dy, const void *x, void *dx,
                                int64_t n, float alpha) {
  OpTimer timer(ctx, "unary_grad");
  cuda::unaryGrad(computeStream(ctx, "unary_grad"), dtype, fn, dy, x, dx, n,
                  alpha);
}

extern "C" void asrt_binary(asrt_context *ctx, int32_t dtype, int32_t fn,
                            const void *a, const void *b, void *y, int32_t rank,
                            const int64_t *dims, const int64_t *a_strides,
                            const int64_t *b_strides) {
  OpTimer timer(ctx, "binary");
  cuda::binary(computeStream(ctx, "binary"), dtype, fn, a, b, y, rank, dims,
               a_strides, b_strides);
}

extern "C" void asrt_select(asrt_context *ctx, int32_t dtype,
                            const uint8_t *cond, const void *a, const void *b,
                            void *y, int32_t rank, const int64_t *dims,
                            const int64_t *cond_strides,
                            const int64_t *a_strides,
                            const int64_t *b_strides) {
  OpTimer timer(ctx, "select");
  cuda::select(computeStream(ctx, "select"), dtype, cond, a, b, y, rank, dims,
               cond_strides, a_strides, b_strides);
}

extern "C" void asrt_reduce(asrt_context *ctx, int32_t dtype, int32_t reduce_op,
                            const void *x, void *y, int32_t out_rank,
                            const int64_t *out_dims, const int64_t *out_strides,
                            int32_t red_rank, const int64_t *red_dims,
                            const int64_t *red_strides) {
  OpTimer timer(ctx, "reduce");
  cuda::reduce(computeStream(ctx, "reduce"), dtype, reduce_op, x, y, out_rank,
               out_dims, out_strides, red_rank, red_dims, red_strides);
}

extern "C" void asrt_copy_strided(asrt_context *ctx, int32_t dtype,
                                  const void *x, void *y, int32_t rank,
                                  const int64_t *dims, const int64_t *x_strides,
                                  int64_t x_offset, const int64_t *y_strides,
                                  int64_t y_offset) {
  OpTimer timer(ctx, "copy_strided");
  cuda::copyStrided(computeStream(ctx, "copy_strided"), dtype, x, y, rank, dims,
                    x_strides, x_offset, y_strides, y_offset);
}

extern "C" void asrt_fill(asrt_context *ctx, int32_t dtype, void *y, int64_t n,
                          float value) {
  OpTimer timer(ctx, "fill");
  cuda::fill(computeStream(ctx, "fill"), dtype, y, n, value);
}

extern "C" void
asrt_matmul(asrt_context *ctx, int32_t dtype, const void *a, const void *b,
            void *y, int32_t batch_rank, const int64_t *batch_dims,
            const int64_t *a_batch_strides, const int64_t *b_batch_strides,
            int64_t m, int64_t n, int64_t k, int32_t trans_a, int32_t trans_b) {
  OpTimer timer(ctx, "matmul");
  cuda::matmul(device(ctx, "matmul").blas(), dtype, a, b, y, batch_rank,
               batch_dims, a_batch_strides, b_batch_strides, m, n, k, trans_a,
               trans_b);
}

extern "C" void asrt_softmax(asrt_context *ctx, int32_t dtype, const void *x,
                             void *y, int64_t rows, int64_t cols, int32_t log) {
  OpTimer timer(ctx, "softmax");
  cuda::softmax(computeStream(ctx, "softmax"), dtype, x, y, rows, cols, log);
}

extern "C" void asrt_softmax_grad(asrt_context *ctx, int32_t dtype,
                                  const void *dy, const void *y, void *dx,
                                  int64_t rows, int64_t cols, int32_t log) {
  OpTimer timer(ctx, "softmax_grad");
  cuda::softmaxGrad(computeStream(ctx, "softmax_grad"), dtype, dy, y, dx, rows,
                    cols, log);
}

// ---- Embeddings ----

extern "C" void asrt_embedding_fwd(asrt_context *ctx, int32_t dtype,
                                   const int32_t *ids, const void *table,
                                   void *y, int64_t n_ids,
                                   int64_t num_embeddings, int64_t dim) {
  OpTimer timer(ctx, "embedding_fwd");
  cuda::embeddingFwd(computeStream(ctx, "embedding_fwd"), dtype, ids, table, y,
                     n_ids, num_embeddings, dim);
}

extern "C" void asrt_embedding_grad(asrt_context *ctx, int32_t dtype,
                                    const void *dy, const int32_t *ids,
                                    void *dtable, int64_t n_ids,
                                    int64_t num_embeddings, int64_t dim) {
  OpTimer timer(ctx, "embedding_grad");
  cuda::embeddingGrad(computeStream(ctx, "embedding_grad"), dtype, dy, ids,
                      dtable, n_ids, num_embeddings, dim);
}

extern "C" void asrt_add_position_embedding_fwd(asrt_context *ctx,
                                                int32_t dtype, const void *x,
                                                const void *wpe, void *y,
                                                int64_t batch, int64_t seq,
                                                int64_t dim) {
  OpTimer timer(ctx, "add_position_embedding_fwd");
  cuda::addPositionEmbeddingFwd(
      computeStream(ctx, "add_position_embedding_fwd"), dtype, x, wpe, y, batch,
      seq, dim);
}

extern "C" void asrt_add_position_embedding_grad(
    asrt_context *ctx, int32_t dtype, const void *dy, void *dwpe, int64_t batch,
    int64_t seq, int64_t max_positions, int64_t dim) {
  OpTimer timer(ctx, "add_position_embedding_grad");
  cuda::addPositionEmbeddingGrad(
      computeStream(ctx, "add_position_embedding_grad"), dtype, dy, dwpe, batch,
      seq, max_positions, dim);
}

// ---- Normalization ----

extern "C" void asrt_layer_norm_fwd(asrt_context *ctx, int32_t dtype,
                                    const void *x, const void *gamma,
                                    const void *beta, void *y, int64_t rows,
                                    int64_t cols, float eps) {
  OpTimer timer(ctx, "layer_norm_fwd");
  cuda::layerNormFwd(computeStream(ctx, "layer_norm_fwd"), dtype, x, gamma,
                     beta, y, rows, cols, eps);
}

extern "C" void asrt_layer_norm_grad(asrt_context *ctx, int32_t dtype,
                                     const void *dy, const void *x,
                                     const void *gamma, void *dx, void *dgamma,
                                     void *dbeta, int64_t rows, int64_t cols,
                                     float eps) {
  OpTimer timer(ctx, "layer_norm_grad");
  cuda::layerNormGrad(computeStream(ctx, "layer_norm_grad"), dtype, dy, x,
                      gamma, dx, dgamma, dbeta, rows, cols, eps);
}

extern "C" void asrt_rms_norm_fwd(asrt_context *ctx, int32_t dtype,
                                  const void *x, const void *weight, void *y,
                                  int64_t rows, int64_t cols, float eps) {
  OpTimer timer(ctx, "rms_norm_fwd");
  cuda::rmsNormFwd(computeStream(ctx, "rms_norm_fwd"), dtype, x, weight, y,
                   rows, cols, eps);
}

extern "C" void asrt_rms_norm_grad(asrt_context *ctx, int32_t dtype,
                                   const void *dy, const void *x,
                                   const void *weight, void *dx, void *dweight,
                                   int64_t rows, int64_t cols, float eps) {
  OpTimer timer(ctx, "rms_norm_grad");
  cuda::rmsNormGrad(computeStream(ctx, "rms_norm_grad"), dtype, dy, x, weight,
                    dx, dweight, rows, cols, eps);
}

// ---- Rotary position embedding ----

extern "C" void asrt_rope_fwd(asrt_context *ctx, int32_t dtype, const void *x,
                              void *y, int64_t batch, int64_t seq,
                              int64_t heads, int64_t head_dim, float theta) {
  OpTimer timer(ctx, "rope_fwd");
  cuda::ropeFwd(computeStream(ctx, "rope_fwd"), dtype, x, y, batch, seq, heads,
                head_dim, theta);
}

extern "C" void asrt_rope_grad(asrt_context *ctx, int32_t dtype, const void *dy,
                               void *dx, int64_t batch, int64_t seq,
                               int64_t heads, int64_t head_dim, float theta) {
  OpTimer timer(ctx, "rope_grad");
  cuda::ropeGrad(computeStream(ctx, "rope_grad"), dtype, dy, dx, batch, seq,
                 heads, head_dim, theta);
}

// ---- Causal self-attention ----

namespace {

/// ASRT_CUDA_ATTENTION picks the attention kernels: "flash" (the default:
/// Attention.cu's kernels), "gemm" (cuBLAS batched GEMMs on tensor cores,
/// AttentionGemm.cu, where its scratch stays within bounds) or "wmma"
/// (flash kernels on tensor cores through WMMA, AttentionWmma.cu, for bf16
/// with head_dim a multiple of 16 up to 128). Anything a choice does not
/// support runs the flash kernels.
/// Read once per process.
enum class Attention { Flash, Gemm, Wmma };

Attention attentionChoice() {
  static const Attention choice = [] {
    const char *value = std::getenv("ASRT_CUDA_ATTENTION");
    if (!value || !*value || std::strcmp(value, "flash") == 0)
      return Attention::Flash;
    if (std::strcmp(value, "gemm") == 0)
      return Attention::Gemm;
    if (std::strcmp(value, "wmma") == 0)
      return Attention::Wmma;
    autoshard::rt::fatal("ASRT_CUDA_ATTENTION=%s: expected flash (the "
                         "default), gemm or wmma",
                         value);
  }();
  return choice;
}

bool useGemmAttention(int64_t seq, int64_t heads) {
  return attentionChoice() == Attention::Gemm &&
         cuda::causalAttentionGemmFits(seq, heads);
}

bool useWmmaAttention(int32_t dtype, int64_t headDim) {
  return attentionChoice() == Attention::Wmma &&
         cuda::causalAttentionWmmaSupports(dtype, headDim);
}

} // namespace

extern "C" void asrt_causal_attention_fwd(asrt_context *ctx, int32_t dtype,
                                          const void *q, const void *k,
                                          const void *v, void *out, float *lse,
                                          int64_t batch, int64_t seq,
                                          int64_t heads, int64_t kv_heads,
                                          int64_t head_dim, float scale) {
  OpTimer timer(ctx, "causal_attention_fwd");
  if (useGemmAttention(seq, heads))
    cuda::causalAttentionFwdGemm(device(ctx, "causal_attention_fwd").blas(),
                                 dtype, q, k, v, out, lse, batch, seq, heads,
                                 kv_heads, head_dim, scale);
  else if (useWmmaAttention(dtype, head_dim))
    cuda::causalAttentionFwdWmma(computeStream(ctx, "causal_attention_fwd"),
                                 dtype, q, k, v, out, lse, batch, seq, heads,
                                 kv_heads, head_dim, scale);
  else
    cuda::causalAttentionFwd(computeStream(ctx, "causal_attention_fwd"), dtype,
                             q, k, v, out, lse, batch, seq, heads, kv_heads,
                             head_dim, scale);
}

extern "C" void asrt_causal_attention_grad(
    asrt_context *ctx, int32_t dtype, const void *dout, const void *q,
    const void *k, const void *v, const void *out, const float *lse, void *dq,
    void *dk, void *dv, int64_t batch, int64_t seq, int64_t heads,
    int64_t kv_heads, int64_t head_dim, float scale) {
  OpTimer timer(ctx, "causal_attention_grad");
  if (useGemmAttention(seq, heads))
    cuda::causalAttentionGradGemm(device(ctx, "causal_attention_grad").blas(),
                                  dtype, dout, q, k, v, out, lse, dq, dk, dv,
                                  batch, seq, heads, kv_heads, head_dim, scale);
  else if (useWmmaAttention(dtype, head_dim))
    cuda::causalAttentionGradWmma(computeStream(ctx, "causal_attention_grad"),
                                  dtype, dout, q, k, v, out, lse, dq, dk, dv,
                                  batch, seq, heads, kv_heads, head_dim, scale);
  else
    cuda::causalAttentionGrad(computeStream(ctx, "causal_attention_grad"),
                              dtype, dout, q, k, v, out, lse, dq, dk, dv, batch,
                              seq, heads, kv_heads, head_dim, scale);
}

// ---- Loss ----

extern "C" void asrt_softmax_xent_fwd(asrt_context *ctx, int32_t dtype,
                                      const void *logits, const int32_t *labels,
                                      float *loss, int64_t rows,
                                      int64_t classes, int64_t ignore_index) {
  OpTimer timer(ctx, "softmax_xent_fwd");
  cuda::softmaxXentFwd(computeStream(ctx, "softmax_xent_fwd"), dtype, logits,
                       labels, loss, rows, classes, ignore_index);
}

extern "C" void asrt_softmax_xent_grad(asrt_context *ctx, int32_t dtype,
                                       const void *logits,
                                       const int32_t *labels,
                                       const float *dloss, void *dlogits,
                                       int64_t rows, int64_t classes,
                                       int64_t ignore_index) {
  OpTimer timer(ctx, "softmax_xent_grad");
  cuda::softmaxXentGrad(computeStream(ctx, "softmax_xent_grad"), dtype, logits,
                        labels, dloss, dlogits, rows, classes, ignore_index);
}

extern "C" void asrt_nll_loss_fwd(asrt_context *ctx, int32_t dtype,
                                  const void *input, const int32_t *labels,
                                  float *loss, int64_t rows, int64_t classes,
                                  int64_t ignore_index) {
  OpTimer timer(ctx, "nll_loss_fwd");
  cuda::nllLossFwd(computeStream(ctx, "nll_loss_fwd"), dtype, input, labels,
                   loss, rows, classes, ignore_index);
}

extern "C" void asrt_nll_loss_grad(asrt_context *ctx, int32_t dtype,
                                   const int32_t *labels, const float *dloss,
                                   void *dinput, int64_t rows, int64_t classes,
                                   int64_t ignore_index) {
  OpTimer timer(ctx, "nll_loss_grad");
  cuda::nllLossGrad(computeStream(ctx, "nll_loss_grad"), dtype, labels, dloss,
                    dinput, rows, classes, ignore_index);
}

// ---- Optimizers ----
// The scalars (lr, step, grad_scale, acc, sumsq, coef) are device memory,
// read by the kernels: no host round trip per parameter.

extern "C" void asrt_sgd_update(asrt_context *ctx, int32_t grad_dtype,
                                const float *param, const void *grad,
                                const float *lr, const float *buf,
                                const float *grad_scale, float *param_out,
                                float *buf_out, int64_t n, float momentum,
                                float weight_decay, int32_t nesterov) {
  OpTimer timer(ctx, "sgd_update");
  cuda::sgdUpdate(computeStream(ctx, "sgd_update"), grad_dtype, param, grad, lr,
                  buf, grad_scale, param_out, buf_out, n, momentum,
                  weight_decay, nesterov);
}

extern "C" void asrt_adamw_update(asrt_context *ctx, int32_t grad_dtype,
                                  const float *param, const void *grad,
                                  const float *exp_avg, const float *exp_avg_sq,
                                  const float *lr, const int32_t *step,
                                  const float *grad_scale, float *param_out,
                                  float *exp_avg_out, float *exp_avg_sq_out,
                                  int64_t n, float beta1, float beta2,
                                  float eps, float weight_decay) {
  OpTimer timer(ctx, "adamw_update");
  cuda::adamwUpdate(computeStream(ctx, "adamw_update"), grad_dtype, param, grad,
                    exp_avg, exp_avg_sq, lr, step, grad_scale, param_out,
                    exp_avg_out, exp_avg_sq_out, n, beta1, beta2, eps,
                    weight_decay);
}

extern "C" void asrt_adamw_update_multi(asrt_context *ctx, int32_t grad_dtype,
                                        const asrt_adamw_tensor *tensors,
                                        int64_t count, const float *lr,
                                        const int32_t *step,
                                        const float *grad_scale, float beta1,
                                        float beta2, float eps) {
  // Timed under the single call's name: the same work, in fewer calls.
  OpTimer timer(ctx, "adamw_update");
  cuda::adamwUpdateMulti(computeStream(ctx, "adamw_update_multi"), grad_dtype,
                         tensors, count, lr, step, grad_scale, beta1, beta2,
                         eps);
}

extern "C" void asrt_increment_i32(asrt_context *ctx, const int32_t *x,
                                   int32_t *y) {
  OpTimer timer(ctx, "increment_i32");
  cuda::incrementI32(computeStream(ctx, "increment_i32"), x, y);
}

extern "C" void asrt_sum_of_squares(asrt_context *ctx, int32_t dtype,
                                    const void *x, int64_t n, float *acc,
                                    int32_t accumulate) {
  OpTimer timer(ctx, "sum_of_squares");
  cuda::sumOfSquares(computeStream(ctx, "sum_of_squares"), dtype, x, n, acc,
                     accumulate);
}

extern "C" void asrt_clip_coefficient(asrt_context *ctx, const float *sumsq,
                                      float *coef, float max_norm) {
  OpTimer timer(ctx, "clip_coefficient");
  cuda::clipCoefficient(computeStream(ctx, "clip_coefficient"), sumsq, coef,
                        max_norm);
}
