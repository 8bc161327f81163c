// The GEMMs of the batched-GEMM attention path (AttentionGemmPlan.h).
//
// cuBLAS is column-major and the ABI's tensors are row-major: a row-major
// [r, c] matrix with row stride ld is the column-major [c, r] matrix with
// leading dimension ld. Per batch row b, query head h's Q is the row-major
// [seq, headDim] matrix at ((b * seq) * heads + h) * headDim with row
// stride heads * headDim (K, V: kvHeads * headDim); a head's scores are the
// row-major [seq, seq] matrix at h * seq * seq of the scratch, row stride
// seq.
#include "AttentionGemmPlan.h"

namespace autoshard::rt::cuda {
namespace {

struct Layout {
  const AttnShape &s;
  int64_t b, i;

  int64_t g() const { return s.group(); }
  /// Offset and row stride of query head kvh * g + i (kvh = 0) of batch
  /// row b, and the stride from one key/value head to the next.
  int64_t qOffset() const { return (b * s.seq * s.heads + i) * s.headDim; }
  int64_t qLd() const { return s.heads * s.headDim; }
  int64_t qStride() const { return g() * s.headDim; }
  int64_t kvOffset() const { return b * s.seq * s.kvHeads * s.headDim; }
  int64_t kvLd() const { return s.kvHeads * s.headDim; }
  int64_t kvStride() const { return s.headDim; }
  /// The same head's [seq, seq] block of the score scratch.
  int64_t scoreOffset() const { return i * s.seq * s.seq; }
  int64_t scoreStride() const { return g() * s.seq * s.seq; }
};

/// Row-major X[seq, seq] = alpha L[seq, d] R[seq, d]^T, L a query-side
/// tensor (Q, dO), R a key-side one (K, V): column-major X^T = R L^T.
AttnGemm scoresLike(const Layout &l, AttnBuf left, AttnBuf right, AttnBuf out,
                    float alpha) {
  const AttnShape &s = l.s;
  return {/*transA=*/true, /*transB=*/false, s.seq, s.seq, s.headDim, alpha,
          0.0f,
          right, l.kvOffset(), l.kvLd(), l.kvStride(),
          left, l.qOffset(), l.qLd(), l.qStride(),
          out, l.scoreOffset(), s.seq, l.scoreStride(),
          s.kvHeads};
}

/// Row-major Y[seq, d] = alpha P[seq, seq] R[seq, d] into a query-side
/// tensor (Out, dQ), R key-side: column-major Y^T = R^T P^T.
AttnGemm outputLike(const Layout &l, AttnBuf probs, AttnBuf right,
                    AttnBuf out, float alpha) {
  const AttnShape &s = l.s;
  return {false, false, s.headDim, s.seq, s.seq, alpha, 0.0f,
          right, l.kvOffset(), l.kvLd(), l.kvStride(),
          probs, l.scoreOffset(), s.seq, l.scoreStride(),
          out, l.qOffset(), l.qLd(), l.qStride(),
          s.kvHeads};
}

/// Row-major Z[seq, d] (+)= alpha P[seq, seq]^T L[seq, d] into a key-side
/// f32 accumulator (DKAcc, DVAcc: [seq, kvHeads, d] of batch row b), L
/// query-side: column-major Z^T = L^T P.
AttnGemm keySideLike(const Layout &l, AttnBuf probs, AttnBuf left,
                     AttnBuf acc, float alpha) {
  const AttnShape &s = l.s;
  return {false, true, s.headDim, s.seq, s.seq, alpha, l.i == 0 ? 0.0f : 1.0f,
          left, l.qOffset(), l.qLd(), l.qStride(),
          probs, l.scoreOffset(), s.seq, l.scoreStride(),
          acc, 0, l.kvLd(), l.kvStride(),
          s.kvHeads};
}

} // namespace

std::vector<AttnGemm> attentionForwardGemms(const AttnShape &s, int64_t b,
                                            int64_t i) {
  Layout l{s, b, i};
  return {scoresLike(l, AttnBuf::Q, AttnBuf::K, AttnBuf::Scores, s.scale),
          outputLike(l, AttnBuf::Probs, AttnBuf::V, AttnBuf::Out, 1.0f)};
}

std::vector<AttnGemm> attentionBackwardScoreGemms(const AttnShape &s,
                                                  int64_t b, int64_t i) {
  Layout l{s, b, i};
  return {scoresLike(l, AttnBuf::Q, AttnBuf::K, AttnBuf::Scores, s.scale),
          scoresLike(l, AttnBuf::DOut, AttnBuf::V, AttnBuf::DProbs, 1.0f)};
}

std::vector<AttnGemm> attentionBackwardGradGemms(const AttnShape &s,
                                                 int64_t b, int64_t i) {
  Layout l{s, b, i};
  return {keySideLike(l, AttnBuf::Probs, AttnBuf::DOut, AttnBuf::DVAcc, 1.0f),
          outputLike(l, AttnBuf::DScores, AttnBuf::K, AttnBuf::DQ, s.scale),
          keySideLike(l, AttnBuf::DScores, AttnBuf::Q, AttnBuf::DKAcc,
                      s.scale)};
}

} // namespace autoshard::rt::cuda
