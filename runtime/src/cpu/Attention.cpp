// Causal self-attention with grouped-query heads on the CPU, in row blocks.
#include "Checks.h"
#include "Element.h"
#include "Gemm.h"
#include "Reduce.h"
#include "Scratch.h"

#include "core/Context.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

using autoshard::rt::fatal;
using autoshard::rt::OpTimer;
using namespace autoshard::rt::cpu;

// Each (batch, head) is computed as GEMMs over blocks of kRowBlock query
// rows: the block's scores against the keys it can see, a row softmax, and
// the block's output. Scratch memory is therefore O(kRowBlock * seq) for the
// scores (plus O(seq * head_dim) for bf16 conversions and the key/value
// gradient accumulators), never O(seq^2) per head. A block computes scores
// for the whole rectangle [r0, r1) x [0, r1) and masks the part above the
// diagonal, so the wasted work is about kRowBlock / seq of the total: more
// rows per block give OpenBLAS larger GEMMs and waste more above the
// diagonal; 64 balances the two for sequences of a few hundred and more.
//
// Query head h reads key/value head h / (heads / kv_heads). Heads are
// visited grouped by key/value head so that a group's key and value
// gradients are complete (and written once) when its last query head is
// done, and bf16 keys and values are converted once per group.

namespace {

constexpr int64_t kRowBlock = 64;

struct Shape {
  int64_t batch, seq, heads, kvHeads, headDim;
  float scale;
  int64_t qStride() const { return heads * headDim; }
  int64_t kvStride() const { return kvHeads * headDim; }
  int64_t group() const { return heads / kvHeads; }
};

Shape checkShape(const char *op, int64_t batch, int64_t seq, int64_t heads,
                 int64_t kvHeads, int64_t headDim, float scale) {
  checkAttentionShape(op, batch, seq, heads, kvHeads, headDim, scale);
  // BLAS takes int dimensions; the leading dimensions of the f32 GEMM
  // operands are the row strides.
  blasDim(op, "seq", seq);
  blasDim(op, "heads * head_dim", heads * headDim);
  return {batch, seq, heads, kvHeads, headDim, scale};
}

/// `n` rows of one head, the first at `src` and the next `stride` elements
/// further, as an f32 matrix: the tensor itself (leading dimension =
/// stride) for f32, a contiguous converted copy in `buf` for bf16.
struct F32Rows {
  const float *data;
  int64_t ld;
};

template <typename T>
F32Rows headRows(const T *src, int64_t n, int64_t stride, int64_t headDim,
                 float *buf) {
  if constexpr (std::is_same_v<T, float>) {
    (void)n;
    (void)headDim;
    (void)buf;
    return {src, stride};
  } else {
    for (int64_t i = 0; i < n; ++i)
      loadRow(src + i * stride, headDim, buf + i * headDim);
    return {buf, headDim};
  }
}

/// Where a GEMM writes rows of one head: into the tensor (f32) or into
/// `buf` (bf16), which finishHeadOutput then rounds into the tensor.
struct F32Out {
  float *data;
  int64_t ld;
};

template <typename T>
F32Out headOutput(T *dst, int64_t stride, int64_t headDim, float *buf) {
  if constexpr (std::is_same_v<T, float>) {
    (void)headDim;
    (void)buf;
    return {dst, stride};
  } else {
    (void)dst;
    (void)stride;
    return {buf, headDim};
  }
}

/// Rows [0, n) of an f32 matrix into rows of one head of a tensor.
template <typename T>
void storeHeadRows(const float *src, int64_t srcLd, T *dst, int64_t n,
                   int64_t stride, int64_t headDim) {
  for (int64_t i = 0; i < n; ++i)
    storeRow(src + i * srcLd, headDim, dst + i * stride);
}

template <typename T>
void finishHeadOutput(const F32Out &result, T *dst, int64_t n, int64_t stride,
                      int64_t headDim) {
  if constexpr (!std::is_same_v<T, float>)
    storeHeadRows(result.data, result.ld, dst, n, stride, headDim);
}

/// f32 scratch for the bf16 conversions; nothing for f32.
template <typename T> float *bf16Buffer(ScratchFrame &scratch, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    (void)scratch;
    (void)n;
    return nullptr;
  } else {
    return scratch.take<float>(n);
  }
}

template <typename T>
void attentionForward(const char *op, const Shape &s, const T *q, const T *k,
                      const T *v, T *out, float *lse) {
  const int64_t seq = s.seq, d = s.headDim;
  ScratchFrame scratch(op);
  float *scores = scratch.take<float>(std::min(kRowBlock, seq) * seq);
  float *kBuf = bf16Buffer<T>(scratch, seq * d);
  float *vBuf = bf16Buffer<T>(scratch, seq * d);
  float *qBuf = bf16Buffer<T>(scratch, kRowBlock * d);
  float *oBuf = bf16Buffer<T>(scratch, kRowBlock * d);

  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t g = 0; g < s.kvHeads; ++g) {
      const int64_t kvBase = (b * seq * s.kvHeads + g) * d;
      F32Rows kf = headRows(k + kvBase, seq, s.kvStride(), d, kBuf);
      F32Rows vf = headRows(v + kvBase, seq, s.kvStride(), d, vBuf);
      for (int64_t h = g * s.group(); h < (g + 1) * s.group(); ++h) {
        float *lseRow = lse + (b * s.heads + h) * seq;
        for (int64_t r0 = 0; r0 < seq; r0 += kRowBlock) {
          const int64_t rows = std::min(kRowBlock, seq - r0);
          const int64_t keys = r0 + rows; // keys [0, keys) are visible
          const int64_t qBase = ((b * seq + r0) * s.heads + h) * d;
          F32Rows qf = headRows(q + qBase, rows, s.qStride(), d, qBuf);
          // scores[i, j] = scale q[r0 + i] . k[j]
          gemm(false, true, rows, keys, d, s.scale, qf.data, qf.ld, kf.data,
               kf.ld, 0.0f, scores, keys);
          for (int64_t i = 0; i < rows; ++i) {
            float *row = scores + i * keys;
            const int64_t visible = r0 + i + 1;
            // Every row sees at least its own key, so m is finite unless
            // the inputs are not; the sum is then >= 1.
            const float m = rowMaximum(row, visible);
            expShifted(row, visible, m);
            const float sum = rowSum(row, visible);
            const float inv = 1.0f / sum;
            for (int64_t j = 0; j < visible; ++j)
              row[j] *= inv;
            std::fill(row + visible, row + keys, 0.0f);
            lseRow[r0 + i] = m + std::log(sum);
          }
          F32Out of = headOutput(out + qBase, s.qStride(), d, oBuf);
          gemm(false, false, rows, d, keys, 1.0f, scores, keys, vf.data, vf.ld,
               0.0f, of.data, of.ld);
          finishHeadOutput(of, out + qBase, rows, s.qStride(), d);
        }
      }
    }
}

template <typename T>
void attentionBackward(const char *op, const Shape &s, const T *dout,
                       const T *q, const T *k, const T *v, const T *out,
                       const float *lse, T *dq, T *dk, T *dv) {
  const int64_t seq = s.seq, d = s.headDim;
  ScratchFrame scratch(op);
  const int64_t blockRows = std::min(kRowBlock, seq);
  float *probs = scratch.take<float>(blockRows * seq);
  float *dScores = scratch.take<float>(blockRows * seq);
  float *rowDot = scratch.take<float>(blockRows);
  float *dkAcc = scratch.take<float>(seq * d);
  float *dvAcc = scratch.take<float>(seq * d);
  float *kBuf = bf16Buffer<T>(scratch, seq * d);
  float *vBuf = bf16Buffer<T>(scratch, seq * d);
  float *qBuf = bf16Buffer<T>(scratch, kRowBlock * d);
  float *doBuf = bf16Buffer<T>(scratch, kRowBlock * d);
  float *oBuf = bf16Buffer<T>(scratch, kRowBlock * d);
  float *dqBuf = bf16Buffer<T>(scratch, kRowBlock * d);

  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t g = 0; g < s.kvHeads; ++g) {
      const int64_t kvBase = (b * seq * s.kvHeads + g) * d;
      F32Rows kf = headRows(k + kvBase, seq, s.kvStride(), d, kBuf);
      F32Rows vf = headRows(v + kvBase, seq, s.kvStride(), d, vBuf);
      std::fill(dkAcc, dkAcc + seq * d, 0.0f);
      std::fill(dvAcc, dvAcc + seq * d, 0.0f);
      for (int64_t h = g * s.group(); h < (g + 1) * s.group(); ++h) {
        const float *lseRow = lse + (b * s.heads + h) * seq;
        for (int64_t r0 = 0; r0 < seq; r0 += kRowBlock) {
          const int64_t rows = std::min(kRowBlock, seq - r0);
          const int64_t keys = r0 + rows;
          const int64_t qBase = ((b * seq + r0) * s.heads + h) * d;
          F32Rows qf = headRows(q + qBase, rows, s.qStride(), d, qBuf);
          F32Rows dof = headRows(dout + qBase, rows, s.qStride(), d, doBuf);
          F32Rows of = headRows(out + qBase, rows, s.qStride(), d, oBuf);
          // p = exp(scale q . k - lse), recomputed from the forward's lse.
          gemm(false, true, rows, keys, d, s.scale, qf.data, qf.ld, kf.data,
               kf.ld, 0.0f, probs, keys);
          for (int64_t i = 0; i < rows; ++i) {
            float *row = probs + i * keys;
            const int64_t visible = r0 + i + 1;
            expShifted(row, visible, lseRow[r0 + i]);
            std::fill(row + visible, row + keys, 0.0f);
            // rowsum(dO * O) = sum_j p_j (dO . v_j): the softmax's
            // Jacobian term, from the forward output instead of a second
            // pass over the keys.
            const float *doRow = dof.data + i * dof.ld;
            const float *oRow = of.data + i * of.ld;
            float dot = 0.0f;
            for (int64_t c = 0; c < d; ++c)
              dot += doRow[c] * oRow[c];
            rowDot[i] = dot;
          }
          // dP = dO V^T; dS = P * (dP - rowsum(dO * O)), in place.
          gemm(false, true, rows, keys, d, 1.0f, dof.data, dof.ld, vf.data,
               vf.ld, 0.0f, dScores, keys);
          for (int64_t i = 0; i < rows; ++i) {
            const float *p = probs + i * keys;
            float *ds = dScores + i * keys;
            for (int64_t j = 0; j < keys; ++j)
              ds[j] = p[j] * (ds[j] - rowDot[i]);
          }
          // The scale of s = scale q . k carries into dq and dk.
          F32Out dqf = headOutput(dq + qBase, s.qStride(), d, dqBuf);
          gemm(false, false, rows, d, keys, s.scale, dScores, keys, kf.data,
               kf.ld, 0.0f, dqf.data, dqf.ld);
          finishHeadOutput(dqf, dq + qBase, rows, s.qStride(), d);
          gemm(true, false, keys, d, rows, s.scale, dScores, keys, qf.data,
               qf.ld, 1.0f, dkAcc, d);
          gemm(true, false, keys, d, rows, 1.0f, probs, keys, dof.data, dof.ld,
               1.0f, dvAcc, d);
        }
      }
      storeHeadRows(dkAcc, d, dk + kvBase, seq, s.kvStride(), d);
      storeHeadRows(dvAcc, d, dv + kvBase, seq, s.kvStride(), d);
    }
}

} // namespace

extern "C" void asrt_causal_attention_fwd(asrt_context *ctx, int32_t dtype,
                                          const void *q, const void *k,
                                          const void *v, void *out, float *lse,
                                          int64_t batch, int64_t seq,
                                          int64_t heads, int64_t kv_heads,
                                          int64_t head_dim, float scale) {
  OpTimer timer(ctx, "causal_attention_fwd");
  const char *op = "causal_attention_fwd";
  Shape s = checkShape(op, batch, seq, heads, kv_heads, head_dim, scale);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    attentionForward(op, s, static_cast<const T *>(q),
                     static_cast<const T *>(k), static_cast<const T *>(v),
                     static_cast<T *>(out), lse);
  });
}

extern "C" void asrt_causal_attention_grad(
    asrt_context *ctx, int32_t dtype, const void *dout, const void *q,
    const void *k, const void *v, const void *out, const float *lse, void *dq,
    void *dk, void *dv, int64_t batch, int64_t seq, int64_t heads,
    int64_t kv_heads, int64_t head_dim, float scale) {
  OpTimer timer(ctx, "causal_attention_grad");
  const char *op = "causal_attention_grad";
  Shape s = checkShape(op, batch, seq, heads, kv_heads, head_dim, scale);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    attentionBackward(op, s, static_cast<const T *>(dout),
                      static_cast<const T *>(q), static_cast<const T *>(k),
                      static_cast<const T *>(v), static_cast<const T *>(out),
                      lse, static_cast<T *>(dq), static_cast<T *>(dk),
                      static_cast<T *>(dv));
  });
}
