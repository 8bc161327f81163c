// Softmax cross-entropy on the CPU, row by row with max-shifted log-sum-exp.
#include "Checks.h"
#include "Element.h"
#include "Reduce.h"
#include "Scratch.h"

#include "core/Context.h"

#include <cmath>
#include <type_traits>

using autoshard::rt::fatal;
using autoshard::rt::OpTimer;
using namespace autoshard::rt::cpu;

namespace {

void checkShape(const char *op, int64_t rows, int64_t classes) {
  // A mean over zero rows and a softmax over zero classes are undefined.
  if (rows < 1 || classes < 1)
    fatal("%s: rows = %lld and classes = %lld must both be at least 1", op,
          static_cast<long long>(rows), static_cast<long long>(classes));
}

int32_t checkedLabel(const char *op, const int32_t *labels, int64_t row,
                     int64_t classes) {
  int32_t label = labels[row];
  if (label < 0 || label >= classes)
    fatal("%s: row %lld has label %d, outside [0, %lld) for %lld classes", op,
          static_cast<long long>(row), label, static_cast<long long>(classes),
          static_cast<long long>(classes));
  return label;
}

} // namespace

extern "C" void asrt_softmax_xent_fwd(asrt_context *ctx, int32_t dtype,
                                      const void *logits, const int32_t *labels,
                                      float *loss, int64_t rows,
                                      int64_t classes) {
  OpTimer timer(ctx, "softmax_xent_fwd");
  const char *op = "softmax_xent_fwd";
  checkShape(op, rows, classes);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *all = static_cast<const T *>(logits);
    // Each row is copied to f32 scratch and exponentiated there (see
    // Reduce.h); sums run in double: a vocabulary has ~5e4 classes and a
    // batch many rows.
    ScratchFrame scratch(op);
    float *e = scratch.take<float>(classes);
    double total = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      int32_t label = checkedLabel(op, labels, r, classes);
      loadRow(all + r * classes, classes, e);
      const float zLabel = e[label];
      const float m = rowMaximum(e, classes);
      expShifted(e, classes, m);
      double sum = rowSumDouble(e, classes);
      // -log softmax(z)[label] = log sum_j exp(z_j - m) - (z_label - m)
      total += std::log(sum) - (static_cast<double>(zLabel) - m);
    }
    loss[0] = static_cast<float>(total / static_cast<double>(rows));
  });
}

extern "C" void asrt_softmax_xent_grad(asrt_context *ctx, int32_t dtype,
                                       const void *logits,
                                       const int32_t *labels,
                                       const float *dloss, void *dlogits,
                                       int64_t rows, int64_t classes) {
  OpTimer timer(ctx, "softmax_xent_grad");
  const char *op = "softmax_xent_grad";
  checkShape(op, rows, classes);
  double scale =
      (dloss ? static_cast<double>(dloss[0]) : 1.0) / static_cast<double>(rows);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *all = static_cast<const T *>(logits);
    T *grads = static_cast<T *>(dlogits);
    ScratchFrame scratch(op);
    // The row is copied to f32 and exponentiated in the f32 output row
    // itself, or for bf16 in an f32 row of scratch (a bf16 output row would
    // round the exponentials before they are normalised). The copy reads
    // the whole logits row before any gradient is written, so dlogits may
    // alias logits.
    float *bf16Exps =
        std::is_same_v<T, float> ? nullptr : scratch.take<float>(classes);
    for (int64_t r = 0; r < rows; ++r) {
      T *g = grads + r * classes;
      float *e = bf16Exps ? bf16Exps : reinterpret_cast<float *>(g);
      int32_t label = checkedLabel(op, labels, r, classes);
      loadRow(all + r * classes, classes, e);
      const float m = rowMaximum(e, classes);
      expShifted(e, classes, m);
      double sum = rowSumDouble(e, classes);
      double factor = scale / sum;
      double eLabel = e[label];
      for (int64_t j = 0; j < classes; ++j)
        store(g, j, static_cast<float>(e[j] * factor));
      // (p - 1) * scale in double: p is close to 1 for a confident model.
      store(g, label, static_cast<float>(eLabel * factor - scale));
    }
  });
}
