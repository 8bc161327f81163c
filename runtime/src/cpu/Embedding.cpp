// Embedding lookups on the CPU: token tables and learned position embeddings.
#include "Checks.h"
#include "Element.h"
#include "Scratch.h"

#include "core/Context.h"

#include <algorithm>
#include <cstring>

using autoshard::rt::OpTimer;
using namespace autoshard::rt::cpu;

extern "C" void asrt_embedding_fwd(asrt_context *ctx, int32_t dtype,
                                   const int32_t *ids, const void *table,
                                   void *y, int64_t n_ids,
                                   int64_t num_embeddings, int64_t dim) {
  OpTimer timer(ctx, "embedding_fwd");
  const char *op = "embedding_fwd";
  checkEmbeddingShape(op, n_ids, num_embeddings, dim);
  // Checked before any row is written, so a bad batch changes nothing.
  checkEmbeddingIds(op, ids, n_ids, num_embeddings);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *rows = static_cast<const T *>(table);
    T *out = static_cast<T *>(y);
    // A gather of whole rows: no arithmetic, so bf16 rows copy bit for bit.
    for (int64_t i = 0; i < n_ids; ++i)
      std::memcpy(out + i * dim, rows + static_cast<int64_t>(ids[i]) * dim,
                  static_cast<size_t>(dim) * sizeof(T));
  });
}

extern "C" void asrt_embedding_grad(asrt_context *ctx, int32_t dtype,
                                    const void *dy, const int32_t *ids,
                                    void *dtable, int64_t n_ids,
                                    int64_t num_embeddings, int64_t dim) {
  OpTimer timer(ctx, "embedding_grad");
  const char *op = "embedding_grad";
  checkEmbeddingShape(op, n_ids, num_embeddings, dim);
  checkEmbeddingIds(op, ids, n_ids, num_embeddings);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *g = static_cast<const T *>(dy);
    T *out = static_cast<T *>(dtable);
    // Zero bits are +0 in both f32 and bf16.
    std::memset(out, 0, static_cast<size_t>(num_embeddings * dim) * sizeof(T));
    // Token positions sorted by (id, position): each id's rows then sum in
    // one accumulator, in double and in a fixed order, and its table row is
    // rounded and written once. Accumulating into the table directly would
    // round a bf16 row after every repeated id; an f32 copy of the table
    // would cost num_embeddings * dim scratch (150 MB for GPT-2's vocab).
    ScratchFrame scratch(op);
    int64_t *order = scratch.take<int64_t>(n_ids);
    double *acc = scratch.take<double>(dim);
    for (int64_t i = 0; i < n_ids; ++i)
      order[i] = i;
    std::sort(order, order + n_ids, [ids](int64_t a, int64_t b) {
      return ids[a] != ids[b] ? ids[a] < ids[b] : a < b;
    });
    for (int64_t first = 0; first < n_ids;) {
      const int32_t id = ids[order[first]];
      std::fill(acc, acc + dim, 0.0);
      int64_t last = first;
      for (; last < n_ids && ids[order[last]] == id; ++last) {
        const T *row = g + order[last] * dim;
        for (int64_t j = 0; j < dim; ++j)
          acc[j] += load(row, j);
      }
      T *dst = out + static_cast<int64_t>(id) * dim;
      for (int64_t j = 0; j < dim; ++j)
        store(dst, j, static_cast<float>(acc[j]));
      first = last;
    }
  });
}

extern "C" void asrt_add_position_embedding_fwd(asrt_context *ctx,
                                                int32_t dtype, const void *x,
                                                const void *wpe, void *y,
                                                int64_t batch, int64_t seq,
                                                int64_t dim) {
  OpTimer timer(ctx, "add_position_embedding_fwd");
  const char *op = "add_position_embedding_fwd";
  checkPositionEmbeddingShape(op, batch, seq, dim);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x);
    const T *pos = static_cast<const T *>(wpe);
    T *out = static_cast<T *>(y);
    // Elementwise over x, so y may alias x: element i is read, then written.
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < seq; ++t) {
        const int64_t base = (b * seq + t) * dim;
        const T *p = pos + t * dim;
        for (int64_t j = 0; j < dim; ++j)
          store(out, base + j, load(in, base + j) + load(p, j));
      }
  });
}

extern "C" void asrt_add_position_embedding_grad(
    asrt_context *ctx, int32_t dtype, const void *dy, void *dwpe, int64_t batch,
    int64_t seq, int64_t max_positions, int64_t dim) {
  OpTimer timer(ctx, "add_position_embedding_grad");
  const char *op = "add_position_embedding_grad";
  checkPositionEmbeddingGradShape(op, batch, seq, max_positions, dim);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *g = static_cast<const T *>(dy);
    T *out = static_cast<T *>(dwpe);
    ScratchFrame scratch(op);
    double *acc = scratch.take<double>(dim);
    for (int64_t t = 0; t < seq; ++t) {
      std::fill(acc, acc + dim, 0.0);
      for (int64_t b = 0; b < batch; ++b) {
        const T *row = g + (b * seq + t) * dim;
        for (int64_t j = 0; j < dim; ++j)
          acc[j] += load(row, j);
      }
      for (int64_t j = 0; j < dim; ++j)
        store(out, t * dim + j, static_cast<float>(acc[j]));
    }
    // Positions the sequence does not reach get no gradient.
    std::memset(out + seq * dim, 0,
                static_cast<size_t>((max_positions - seq) * dim) * sizeof(T));
  });
}
