// The losses on the CPU: softmax cross-entropy, row by row with max-shifted
// log-sum-exp, and the negative log-likelihood of log-probabilities.
#include "Checks.h"
#include "Element.h"
#include "Reduce.h"
#include "Scratch.h"

#include "core/Context.h"

#include <cmath>
#include <cstring>
#include <type_traits>

using autoshard::rt::OpTimer;
using namespace autoshard::rt::cpu;

extern "C" void asrt_softmax_xent_fwd(asrt_context *ctx, int32_t dtype,
                                      const void *logits, const int32_t *labels,
                                      float *loss, int64_t rows,
                                      int64_t classes, int64_t ignore_index) {
  OpTimer timer(ctx, "softmax_xent_fwd");
  const char *op = "softmax_xent_fwd";
  checkLossShape(op, rows, classes);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *all = static_cast<const T *>(logits);
    // Each row is copied to f32 scratch and exponentiated there (see
    // Reduce.h); sums run in double: a vocabulary has ~5e4 classes and a
    // batch many rows.
    ScratchFrame scratch(op);
    float *e = scratch.take<float>(classes);
    double total = 0.0;
    int64_t counted = 0;
    for (int64_t r = 0; r < rows; ++r) {
      if (!labelCounts(op, labels, r, classes, ignore_index))
        continue;
      ++counted;
      int32_t label = labels[r];
      loadRow(all + r * classes, classes, e);
      const float zLabel = e[label];
      const float m = rowMaximum(e, classes);
      expShifted(e, classes, m);
      double sum = rowSumDouble(e, classes);
      // -log softmax(z)[label] = log sum_j exp(z_j - m) - (z_label - m)
      total += std::log(sum) - (static_cast<double>(zLabel) - m);
    }
    // No counted row: 0, not torch's 0 / 0 (abi.h).
    loss[0] = counted ? static_cast<float>(total / static_cast<double>(counted))
                      : 0.0f;
  });
}

extern "C" void asrt_softmax_xent_grad(asrt_context *ctx, int32_t dtype,
                                       const void *logits,
                                       const int32_t *labels,
                                       const float *dloss, void *dlogits,
                                       int64_t rows, int64_t classes,
                                       int64_t ignore_index) {
  OpTimer timer(ctx, "softmax_xent_grad");
  const char *op = "softmax_xent_grad";
  checkLossShape(op, rows, classes);
  const int64_t counted =
      countedLabels(op, labels, rows, classes, ignore_index);
  double scale = counted ? (dloss ? static_cast<double>(dloss[0]) : 1.0) /
                               static_cast<double>(counted)
                         : 0.0;
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
      if (labels[r] == ignore_index) {
        for (int64_t j = 0; j < classes; ++j)
          store(g, j, 0.0f);
        continue;
      }
      float *e = bf16Exps ? bf16Exps : reinterpret_cast<float *>(g);
      int32_t label = labels[r];
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

extern "C" void asrt_nll_loss_fwd(asrt_context *ctx, int32_t dtype,
                                  const void *input, const int32_t *labels,
                                  float *loss, int64_t rows, int64_t classes,
                                  int64_t ignore_index) {
  OpTimer timer(ctx, "nll_loss_fwd");
  const char *op = "nll_loss_fwd";
  checkLossShape(op, rows, classes);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *all = static_cast<const T *>(input);
    // The sum in double and in row order, as the cross-entropy's.
    double total = 0.0;
    int64_t counted = 0;
    for (int64_t r = 0; r < rows; ++r) {
      if (!labelCounts(op, labels, r, classes, ignore_index))
        continue;
      ++counted;
      total -= static_cast<double>(load(all + r * classes, labels[r]));
    }
    // No counted row: 0, not torch's 0 / 0 (abi.h).
    loss[0] = counted ? static_cast<float>(total / static_cast<double>(counted))
                      : 0.0f;
  });
}

extern "C" void asrt_nll_loss_grad(asrt_context *ctx, int32_t dtype,
                                   const int32_t *labels, const float *dloss,
                                   void *dinput, int64_t rows, int64_t classes,
                                   int64_t ignore_index) {
  OpTimer timer(ctx, "nll_loss_grad");
  const char *op = "nll_loss_grad";
  checkLossShape(op, rows, classes);
  const int64_t counted =
      countedLabels(op, labels, rows, classes, ignore_index);
  const double scale = counted ? (dloss ? static_cast<double>(dloss[0]) : 1.0) /
                                     static_cast<double>(counted)
                               : 0.0;
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    T *grads = static_cast<T *>(dinput);
    // Zero in f32 and bf16 alike is all bits clear.
    std::memset(grads, 0, static_cast<size_t>(rows * classes) * sizeof(T));
    for (int64_t r = 0; r < rows; ++r)
      if (labels[r] != ignore_index)
        store(grads + r * classes, labels[r], static_cast<float>(-scale));
  });
}
