// Causal attention through cuBLAS's batched GEMMs: the tensor-core
// alternative to Attention.cu's flash-style kernels (which run f32 FMAs on
// CUDA cores). AttentionGemmPlan.h describes the scheme and lists the GEMMs;
// this file runs them (cublasGemmStridedBatchedEx) and the two row kernels
// between them.
//
// Per batch row it materialises [heads, seq, seq] scores in f32 and
// probabilities in the step's dtype (bf16 operands, f32 accumulation, as the
// linear layers; f32 with CUBLAS_COMPUTE_32F_PEDANTIC), computing the masked
// upper triangle too: twice the causal FLOPs, on tensor cores. lse is the
// flash kernels' (log-sum-exp of the scaled scores), so either path's
// backward takes either path's forward. Chosen by causalAttentionGemmFits
// and the ASRT_CUDA_ATTENTION environment variable (Abi.cpp).
#include "AttentionGemmPlan.h"
#include "Cublas.h"
#include "Cuda.h"
#include "Element.cuh"
#include "Grid.cuh"
#include "RowReduce.cuh"

#include "core/ArgChecks.h"
#include "core/Context.h"

#include <cublas_v2.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace autoshard::rt::cuda {
namespace {

/// The most scratch one call may take: [heads, seq, seq] twice in f32 and
/// twice in the dtype (the backward pass), about 1 GiB; longer sequences
/// use the flash kernels, which need none.
constexpr int64_t kMaxScratchBytes = int64_t(1) << 30;

/// The rows of batch row b whose query heads are kvh * group + i.
struct GroupRows {
  int64_t b, i, group, heads, seq, headDim;
  __device__ int64_t head(int64_t r) const { return (r / seq) * group + i; }
  __device__ int64_t pos(int64_t r) const { return r % seq; }
  /// Row t of head h of the [heads, seq, seq] scratch.
  __device__ int64_t scoreRow(int64_t h, int64_t t) const {
    return (h * seq + t) * seq;
  }
  /// lse and rowDot layout, [batch, heads, seq].
  __device__ int64_t stat(int64_t h, int64_t t) const {
    return (b * heads + h) * seq + t;
  }
  /// Row t of head h of a [batch, seq, heads, headDim] tensor.
  __device__ int64_t at(int64_t h, int64_t t) const {
    return ((b * seq + t) * heads + h) * headDim;
  }
};

// One block (kRowThreads) per row, the grid's blocks striding over the rows.
/// P = softmax over j <= t of the scaled scores, 0 above the diagonal, and
/// lse = max + log(sum exp(s - max)), as the flash forward forms them.
template <typename T>
__global__ void softmaxRowsKernel(GroupRows g, int64_t rows,
                                  const float *scores, T *probs, float *lse) {
  for (int64_t r : gridBlocks(rows)) {
    const int64_t h = g.head(r), t = g.pos(r);
    const float *sr = scores + g.scoreRow(h, t);
    float m = -INFINITY;
    for (int64_t j : blockThreads(t + 1))
      m = fmaxf(m, sr[j]);
    m = blockMax(m);
    float l = 0.0f;
    for (int64_t j : blockThreads(t + 1))
      l += expf(sr[j] - m);
    l = blockSum(l);
    const float rowLse = m + logf(l);
    if (threadIdx.x == 0)
      lse[g.stat(h, t)] = rowLse;
    T *pr = probs + g.scoreRow(h, t);
    for (int64_t j : blockThreads(g.seq))
      store(pr, j, j <= t ? expf(sr[j] - rowLse) : 0.0f);
  }
}

/// The backward pass's row step: P = exp(s - lse) (0 above the diagonal)
/// and dS = P (dP - rowDot), rowDot = dO[t] . O[t].
template <typename T>
__global__ void gradRowsKernel(GroupRows g, int64_t rows, const float *scores,
                               const float *dprobs, const float *lse,
                               const T *dout, const T *out, T *probs,
                               T *dscores) {
  for (int64_t r : gridBlocks(rows)) {
    const int64_t h = g.head(r), t = g.pos(r);
    const int64_t at = g.at(h, t);
    float partial = 0.0f;
    for (int64_t d : blockThreads(g.headDim))
      partial += load(dout, at + d) * load(out, at + d);
    const float rowDot = blockSum(partial);
    const float rowLse = lse[g.stat(h, t)];
    const int64_t row = g.scoreRow(h, t);
    for (int64_t j : blockThreads(g.seq)) {
      const float p = j <= t ? expf(scores[row + j] - rowLse) : 0.0f;
      store(probs, row + j, p);
      store(dscores, row + j, p * (dprobs[row + j] - rowDot));
    }
  }
}

/// The device buffers of a plan's GEMMs, and their element types.
struct Buffers {
  void *ptr[12] = {};
  cudaDataType type[12] = {};

  void set(AttnBuf which, const void *p, cudaDataType t) {
    ptr[static_cast<int>(which)] = const_cast<void *>(p);
    type[static_cast<int>(which)] = t;
  }
  void *at(AttnBuf which, int64_t offset) const {
    const int w = static_cast<int>(which);
    const int64_t bytes = type[w] == CUDA_R_32F ? 4 : 2;
    return static_cast<char *>(ptr[w]) + offset * bytes;
  }
  cudaDataType typeOf(AttnBuf which) const {
    return type[static_cast<int>(which)];
  }
};

void runGemm(Blas &blas, const char *op, const AttnGemm &g, const Buffers &b,
             cublasComputeType_t compute) {
  checkBlas(cublasGemmStridedBatchedEx_64(
                blas.handle(), g.transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                g.transB ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &g.alpha,
                b.at(g.a, g.aOffset), b.typeOf(g.a), g.lda, g.aStride,
                b.at(g.b, g.bOffset), b.typeOf(g.b), g.ldb, g.bStride, &g.beta,
                b.at(g.c, g.cOffset), b.typeOf(g.c), g.ldc, g.cStride, g.batch,
                compute, CUBLAS_GEMM_DEFAULT),
            op);
}

/// Stream-ordered scratch, freed (back to the pool) when it goes.
class Scratch {
public:
  Scratch(cudaStream_t stream, int64_t bytes, const char *what)
      : stream(stream) {
    if (bytes > 0)
      check(cudaMallocAsync(&ptr, static_cast<size_t>(bytes), stream), what);
  }
  ~Scratch() {
    if (ptr)
      check(cudaFreeAsync(ptr, stream), "attention: cudaFreeAsync of scratch");
  }
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  void *get() const { return ptr; }

private:
  cudaStream_t stream;
  void *ptr = nullptr;
};

/// A call's checked shape and the GEMM types of its dtype (the linear
/// layers' numerics).
struct Config {
  AttnShape shape;
  GemmTypes types;
  int64_t square() const { return shape.heads * shape.seq * shape.seq; }
};

Config configure(const char *op, int32_t dtype, int64_t batch, int64_t seq,
                 int64_t heads, int64_t kvHeads, int64_t headDim, float scale) {
  checkAttentionShape(op, batch, seq, heads, kvHeads, headDim, scale);
  return {{batch, seq, heads, kvHeads, headDim, scale}, gemmTypes(op, dtype)};
}

} // namespace

bool causalAttentionGemmFits(int64_t seq, int64_t heads) {
  const double square = double(heads) * double(seq) * double(seq);
  return square * (2 * 4 + 2 * 4) <= double(kMaxScratchBytes);
}

void causalAttentionFwdGemm(Blas &blas, int32_t dtype, const void *q,
                            const void *k, const void *v, void *out, float *lse,
                            int64_t batch, int64_t seq, int64_t heads,
                            int64_t kv_heads, int64_t head_dim, float scale) {
  const char *op = "causal_attention_fwd";
  const Config c =
      configure(op, dtype, batch, seq, heads, kv_heads, head_dim, scale);
  const AttnShape &s = c.shape;
  const int64_t eb = int64_t(c.types.elementBytes);
  if (s.batch == 0 || s.seq == 0 || s.heads == 0)
    return;
  cudaStream_t stream = blas.stream();
  Scratch scores(stream, c.square() * 4, "causal_attention_fwd: scores");
  Scratch probs(stream, c.square() * eb, "causal_attention_fwd: probabilities");
  Buffers bufs;
  bufs.set(AttnBuf::Q, q, c.types.data);
  bufs.set(AttnBuf::K, k, c.types.data);
  bufs.set(AttnBuf::V, v, c.types.data);
  bufs.set(AttnBuf::Out, out, c.types.data);
  bufs.set(AttnBuf::Scores, scores.get(), CUDA_R_32F);
  bufs.set(AttnBuf::Probs, probs.get(), c.types.data);
  const int64_t rows = s.kvHeads * s.seq;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t i = 0; i < s.group(); ++i) {
      std::vector<AttnGemm> gemms = attentionForwardGemms(s, b, i);
      runGemm(blas, op, gemms[0], bufs, c.types.compute);
      const GroupRows g{b, i, s.group(), s.heads, s.seq, s.headDim};
      dispatchFloat(op, dtype, [&](auto tag) {
        using T = decltype(tag);
        softmaxRowsKernel<T><<<rowBlocksFor(rows), kRowThreads, 0, stream>>>(
            g, rows, static_cast<const float *>(scores.get()),
            static_cast<T *>(probs.get()), lse);
      });
      checkLaunch(op);
      runGemm(blas, op, gemms[1], bufs, c.types.compute);
    }
}

void causalAttentionGradGemm(Blas &blas, int32_t dtype, const void *dout,
                             const void *q, const void *k, const void *v,
                             const void *out, const float *lse, void *dq,
                             void *dk, void *dv, int64_t batch, int64_t seq,
                             int64_t heads, int64_t kv_heads, int64_t head_dim,
                             float scale) {
  const char *op = "causal_attention_grad";
  const Config c =
      configure(op, dtype, batch, seq, heads, kv_heads, head_dim, scale);
  const AttnShape &s = c.shape;
  const int64_t eb = int64_t(c.types.elementBytes);
  cudaStream_t stream = blas.stream();
  const int64_t kvRow = s.seq * s.kvHeads * s.headDim;
  if (s.batch == 0 || s.seq == 0)
    return;
  if (s.heads == 0) {
    // No query reads a key: dk and dv are zero, as the CPU's.
    check(cudaMemsetAsync(dk, 0, size_t(s.batch * kvRow * eb), stream),
          "causal_attention_grad: zeroing dk");
    check(cudaMemsetAsync(dv, 0, size_t(s.batch * kvRow * eb), stream),
          "causal_attention_grad: zeroing dv");
    return;
  }
  Scratch scores(stream, c.square() * 4, "causal_attention_grad: scores");
  Scratch dprobs(stream, c.square() * 4, "causal_attention_grad: dP");
  Scratch probs(stream, c.square() * eb,
                "causal_attention_grad: probabilities");
  Scratch dscores(stream, c.square() * eb, "causal_attention_grad: dS");
  // dk and dv accumulate over a key/value head's query heads in f32, one
  // batch row at a time, then are cast to the dtype.
  Scratch dkAcc(stream, kvRow * 4, "causal_attention_grad: dk accumulator");
  Scratch dvAcc(stream, kvRow * 4, "causal_attention_grad: dv accumulator");
  Buffers bufs;
  bufs.set(AttnBuf::Q, q, c.types.data);
  bufs.set(AttnBuf::K, k, c.types.data);
  bufs.set(AttnBuf::V, v, c.types.data);
  bufs.set(AttnBuf::DOut, dout, c.types.data);
  bufs.set(AttnBuf::DQ, dq, c.types.data);
  bufs.set(AttnBuf::Scores, scores.get(), CUDA_R_32F);
  bufs.set(AttnBuf::DProbs, dprobs.get(), CUDA_R_32F);
  bufs.set(AttnBuf::Probs, probs.get(), c.types.data);
  bufs.set(AttnBuf::DScores, dscores.get(), c.types.data);
  bufs.set(AttnBuf::DKAcc, dkAcc.get(), CUDA_R_32F);
  bufs.set(AttnBuf::DVAcc, dvAcc.get(), CUDA_R_32F);
  const int64_t rows = s.kvHeads * s.seq;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t i = 0; i < s.group(); ++i) {
      for (const AttnGemm &g : attentionBackwardScoreGemms(s, b, i))
        runGemm(blas, op, g, bufs, c.types.compute);
      const GroupRows g{b, i, s.group(), s.heads, s.seq, s.headDim};
      dispatchFloat(op, dtype, [&](auto tag) {
        using T = decltype(tag);
        gradRowsKernel<T><<<rowBlocksFor(rows), kRowThreads, 0, stream>>>(
            g, rows, static_cast<const float *>(scores.get()),
            static_cast<const float *>(dprobs.get()), lse,
            static_cast<const T *>(dout), static_cast<const T *>(out),
            static_cast<T *>(probs.get()), static_cast<T *>(dscores.get()));
      });
      checkLaunch(op);
      for (const AttnGemm &g : attentionBackwardGradGemms(s, b, i))
        runGemm(blas, op, g, bufs, c.types.compute);
    }
    cast(stream, ASRT_DTYPE_F32, dkAcc.get(), dtype,
         static_cast<char *>(dk) + b * kvRow * eb, kvRow);
    cast(stream, ASRT_DTYPE_F32, dvAcc.get(), dtype,
         static_cast<char *>(dv) + b * kvRow * eb, kvRow);
  }
}

} // namespace autoshard::rt::cuda
