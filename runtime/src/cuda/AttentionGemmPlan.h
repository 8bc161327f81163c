// Causal attention as batched GEMMs (the tensor-core path of Attention.cu):
// the cuBLAS calls it makes, as plain data.
//
// The path materialises one batch row's scores, [heads, seq, seq]: the
// scores S = scale Q K^T and, in the backward pass, dP = dO V^T are GEMMs
// into f32 buffers; a row kernel turns them into probabilities P (and dS =
// P (dP - rowDot)) in the step's dtype; O = P V, dV = P^T dO, dQ = scale dS
// K and dK = scale dS^T Q are GEMMs again. Grouped-query heads: query head
// h = kvh * group + i reads key/value head kvh, so for each i one strided
// batch covers every key/value head, and dK, dV accumulate over i (in f32).
//
// Plain C++ (no CUDA): Attention.cu runs a plan with
// cublasGemmStridedBatchedEx, and AttentionGemmPlanTest runs the same plan
// with a host GEMM against the CPU backend, which checks every transpose,
// leading dimension and stride without a GPU.
#pragma once

#include <cstdint>
#include <vector>

namespace autoshard::rt::cuda {

/// The buffers a plan's GEMMs read and write. Q, K, V, Out, DOut, DQ: the
/// ABI's tensors (of the step's dtype); Scores, DProbs: f32 [heads, seq,
/// seq] scratch; Probs, DScores: the same in the step's dtype; DKAcc,
/// DVAcc: f32 [seq, kvHeads, headDim], one batch row of dk and dv.
enum class AttnBuf { Q, K, V, Out, DOut, DQ, Scores, Probs, DProbs, DScores,
                     DKAcc, DVAcc };

/// One cublasGemmStridedBatchedEx call, column-major as cuBLAS sees it:
/// for p < batch, C_p = alpha op(A_p) op(B_p) + beta C_p, with X_p the
/// matrix at element offset xOffset + p * xStride of buffer x and leading
/// dimension ldx; op(A) is m x k, op(B) k x n, C m x n.
struct AttnGemm {
  bool transA, transB;
  int64_t m, n, k;
  float alpha, beta;
  AttnBuf a;
  int64_t aOffset, lda, aStride;
  AttnBuf b;
  int64_t bOffset, ldb, bStride;
  AttnBuf c;
  int64_t cOffset, ldc, cStride;
  int64_t batch;
};

struct AttnShape {
  int64_t batch, seq, heads, kvHeads, headDim;
  float scale;
  int64_t group() const { return heads / kvHeads; }
};

/// Batch row `b`, query heads kvh * group + i for every kvh: the scores
/// GEMM (into Scores, scaled), then, once Probs holds P, the output GEMM.
std::vector<AttnGemm> attentionForwardGemms(const AttnShape &s, int64_t b,
                                            int64_t i);
/// Batch row `b`, group index `i`: first the scores and dP GEMMs (into
/// Scores and DProbs); then, once Probs and DScores hold P and dS, the dV,
/// dQ and dK GEMMs (dK and dV into DKAcc, DVAcc: overwritten for i == 0,
/// accumulated after).
std::vector<AttnGemm> attentionBackwardScoreGemms(const AttnShape &s,
                                                  int64_t b, int64_t i);
std::vector<AttnGemm> attentionBackwardGradGemms(const AttnShape &s,
                                                 int64_t b, int64_t i);

} // namespace autoshard::rt::cuda
