// Argument checks every backend's kernels share: a bad count or a missing
// pointer is a compiler or caller bug, fatal with the op's name.
#pragma once

#include "core/Context.h"

#include <cmath>
#include <cstdint>

namespace autoshard::rt {

/// Element counts only need to be non-negative.
inline void checkCount(const char *op, const char *name, int64_t value) {
  if (value < 0)
    fatal("%s: %s = %lld is negative", op, name, static_cast<long long>(value));
}

/// asrt_dropout's shape and probability (abi.h); returns the index of
/// x's first element in the whole-batch tensor, for rank `batchRank`.
inline int64_t checkDropoutArgs(const char *op, int64_t n, int64_t rowElems,
                                int64_t rowOffset, int64_t rankRows,
                                int64_t batchRank, float p) {
  checkCount(op, "n", n);
  checkCount(op, "row_offset", rowOffset);
  checkCount(op, "rank_rows", rankRows);
  if (rowElems < 1 || n % rowElems != 0)
    fatal("%s: n = %lld is not a multiple of row_elems = %lld >= 1", op,
          static_cast<long long>(n), static_cast<long long>(rowElems));
  if (!(p >= 0.0f && p < 1.0f))
    fatal("%s: p = %g is not in [0, 1)", op, static_cast<double>(p));
  return (rowOffset + batchRank * rankRows) * rowElems;
}

/// asrt_fill's value for an i32 tensor (abi.h): an integer in the int32
/// range, so that the conversion is exact.
inline void checkIntegralFill(const char *op, float value) {
  if (!(value == std::trunc(value) && value >= -2147483648.0f &&
        value < 2147483648.0f))
    fatal("%s: value = %g is not an integer in the int32 range; an i32 "
          "tensor cannot hold it",
          op, static_cast<double>(value));
}

/// A pointer the ABI requires, such as a learning rate read from memory.
inline void checkNotNull(const char *op, const char *name, const void *ptr) {
  if (!ptr)
    fatal("%s: the %s pointer is null", op, name);
}

/// The shape of a normalization call (abi.h: layer_norm, rms_norm): counts
/// non-negative, and eps too, which keeps the denominator positive for
/// constant rows (a negative one can make it NaN).
inline void checkNormShape(const char *op, int64_t rows, int64_t cols,
                           float eps) {
  checkCount(op, "rows", rows);
  checkCount(op, "cols", cols);
  if (!(eps >= 0.0f))
    fatal("%s: eps = %g must be non-negative", op, static_cast<double>(eps));
}

/// The shape of a loss call (abi.h: softmax_xent, nll_loss): a mean over
/// zero rows and a softmax over zero classes are undefined.
inline void checkLossShape(const char *op, int64_t rows, int64_t classes) {
  if (rows < 1 || classes < 1)
    fatal("%s: rows = %lld and classes = %lld must both be at least 1", op,
          static_cast<long long>(rows), static_cast<long long>(classes));
}

/// The shape of an embedding call (abi.h): counts non-negative.
inline void checkEmbeddingShape(const char *op, int64_t nIds,
                                int64_t numEmbeddings, int64_t dim) {
  checkCount(op, "n_ids", nIds);
  checkCount(op, "num_embeddings", numEmbeddings);
  checkCount(op, "dim", dim);
}

/// Token ids, in host memory: each must index one of the table's
/// `numEmbeddings` rows.
inline void checkEmbeddingIds(const char *op, const int32_t *ids, int64_t nIds,
                              int64_t numEmbeddings) {
  for (int64_t i = 0; i < nIds; ++i)
    if (ids[i] < 0 || ids[i] >= numEmbeddings)
      fatal("%s: id %d at index %lld is outside [0, %lld)", op, ids[i],
            static_cast<long long>(i), static_cast<long long>(numEmbeddings));
}

/// Whether row `row` of a loss counts towards its mean: its label, in host
/// memory, is not the ignore index. A counted label must index a class.
inline bool labelCounts(const char *op, const int32_t *labels, int64_t row,
                        int64_t classes, int64_t ignoreIndex) {
  int32_t label = labels[row];
  if (label == ignoreIndex)
    return false;
  if (label < 0 || label >= classes)
    fatal("%s: row %lld has label %d, outside [0, %lld) for %lld classes%s", op,
          static_cast<long long>(row), label, static_cast<long long>(classes),
          static_cast<long long>(classes),
          ignoreIndex == ASRT_NO_IGNORE_INDEX ? ""
                                              : " and not the ignore index");
  return true;
}

/// The rows of a loss that count (every label checked).
inline int64_t countedLabels(const char *op, const int32_t *labels,
                             int64_t rows, int64_t classes,
                             int64_t ignoreIndex) {
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r)
    counted += labelCounts(op, labels, r, classes, ignoreIndex);
  return counted;
}

/// The counts of a [batch, seq, heads, head_dim] tensor, non-negative:
/// what attention and rotary embedding calls share.
inline void checkHeadCounts(const char *op, int64_t batch, int64_t seq,
                            int64_t heads, int64_t headDim) {
  checkCount(op, "batch", batch);
  checkCount(op, "seq", seq);
  checkCount(op, "heads", heads);
  checkCount(op, "head_dim", headDim);
}

/// The shape of a causal attention call (abi.h): counts non-negative,
/// heads a multiple of kv_heads >= 1, a finite scale. Each backend adds its
/// own limits.
inline void checkAttentionShape(const char *op, int64_t batch, int64_t seq,
                                int64_t heads, int64_t kvHeads,
                                int64_t headDim, float scale) {
  checkHeadCounts(op, batch, seq, heads, headDim);
  if (kvHeads < 1 || heads % kvHeads != 0)
    fatal("%s: heads = %lld must be a multiple of kv_heads = %lld >= 1", op,
          static_cast<long long>(heads), static_cast<long long>(kvHeads));
  if (!std::isfinite(scale))
    fatal("%s: scale = %g is not finite", op, static_cast<double>(scale));
}

/// The shape of a rotary embedding call (abi.h): counts non-negative, an
/// even head_dim (rotate-half pairs), a positive finite theta.
inline void checkRopeShape(const char *op, int64_t batch, int64_t seq,
                           int64_t heads, int64_t headDim, float theta) {
  checkHeadCounts(op, batch, seq, heads, headDim);
  if (headDim % 2 != 0)
    fatal("%s: head_dim = %lld must be even (rotate-half pairs)", op,
          static_cast<long long>(headDim));
  if (!(theta > 0.0f) || !std::isfinite(theta))
    fatal("%s: theta = %g must be positive and finite", op,
          static_cast<double>(theta));
}

/// The shape of an add_position_embedding call (abi.h): counts
/// non-negative.
inline void checkPositionEmbeddingShape(const char *op, int64_t batch,
                                        int64_t seq, int64_t dim) {
  checkCount(op, "batch", batch);
  checkCount(op, "seq", seq);
  checkCount(op, "dim", dim);
}

/// The same for its gradient, whose table must hold a row for each of the
/// `seq` positions.
inline void checkPositionEmbeddingGradShape(const char *op, int64_t batch,
                                            int64_t seq, int64_t maxPositions,
                                            int64_t dim) {
  checkPositionEmbeddingShape(op, batch, seq, dim);
  if (maxPositions < seq)
    fatal("%s: seq = %lld exceeds max_positions = %lld", op,
          static_cast<long long>(seq), static_cast<long long>(maxPositions));
}

/// The function codes of the generic kernels (abi.h): a code outside the
/// enum is a compiler bug, fatal with the op's name and the valid range.
inline void checkUnaryFn(const char *op, int32_t fn) {
  if (fn < ASRT_UNARY_NEG || fn > ASRT_UNARY_ERF)
    fatal("%s: fn = %d is not an asrt_unary_fn (%d .. %d)", op, fn,
          ASRT_UNARY_NEG, ASRT_UNARY_ERF);
}
inline void checkBinaryFn(const char *op, int32_t fn) {
  if (fn < ASRT_BINARY_ADD || fn > ASRT_BINARY_NE)
    fatal("%s: fn = %d is not an asrt_binary_fn (%d .. %d)", op, fn,
          ASRT_BINARY_ADD, ASRT_BINARY_NE);
}
/// Whether a valid asrt_binary_fn writes a mask (a comparison).
inline bool isComparison(int32_t fn) { return fn >= ASRT_BINARY_LT; }
inline void checkReduceOp(const char *op, int32_t reduceOp) {
  if (reduceOp < ASRT_REDUCE_SUM || reduceOp > ASRT_REDUCE_MIN)
    fatal("%s: reduce_op = %d is not an asrt_reduce_op (%d .. %d: SUM, AVG, "
          "MAX, MIN)",
          op, reduceOp, ASRT_REDUCE_SUM, ASRT_REDUCE_MIN);
}

} // namespace autoshard::rt
