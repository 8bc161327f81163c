// Softmax cross-entropy on the CPU, row by row with max-shifted log-sum-exp.
#include "Checks.h"
#include "core/Context.h"

#include <cmath>

using autoshard::rt::fatal;
using autoshard::rt::OpTimer;

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

/// The row maximum; NaN entries are skipped here and still poison the sum.
float rowMax(const float *z, int64_t classes) {
  float m = z[0];
  for (int64_t j = 1; j < classes; ++j)
    m = z[j] > m ? z[j] : m;
  return m;
}

} // namespace

extern "C" void asrt_softmax_xent_fwd_f32(asrt_context *ctx,
                                          const float *logits,
                                          const int32_t *labels, float *loss,
                                          int64_t rows, int64_t classes) {
  OpTimer timer(ctx, "softmax_xent_fwd_f32");
  const char *op = "softmax_xent_fwd_f32";
  checkShape(op, rows, classes);
  // Sums run in double: a vocabulary has ~5e4 classes and a batch many rows.
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float *z = logits + r * classes;
    int32_t label = checkedLabel(op, labels, r, classes);
    float m = rowMax(z, classes);
    double sum = 0.0;
    for (int64_t j = 0; j < classes; ++j)
      sum += std::exp(z[j] - m);
    // -log softmax(z)[label] = log sum_j exp(z_j - m) - (z_label - m)
    total += std::log(sum) - (static_cast<double>(z[label]) - m);
  }
  loss[0] = static_cast<float>(total / static_cast<double>(rows));
}

extern "C" void asrt_softmax_xent_grad_f32(asrt_context *ctx,
                                           const float *logits,
                                           const int32_t *labels,
                                           const float *dloss, float *dlogits,
                                           int64_t rows, int64_t classes) {
  OpTimer timer(ctx, "softmax_xent_grad_f32");
  const char *op = "softmax_xent_grad_f32";
  checkShape(op, rows, classes);
  double scale =
      (dloss ? static_cast<double>(dloss[0]) : 1.0) / static_cast<double>(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float *z = logits + r * classes;
    float *g = dlogits + r * classes;
    int32_t label = checkedLabel(op, labels, r, classes);
    float m = rowMax(z, classes);
    // The output row holds exp(z_j - m) between the two passes, so each
    // exponential is computed once and no scratch buffer is needed. Element j
    // is read before it is written, so dlogits may even alias logits.
    double sum = 0.0;
    for (int64_t j = 0; j < classes; ++j) {
      float e = std::exp(z[j] - m);
      g[j] = e;
      sum += e;
    }
    double factor = scale / sum;
    double eLabel = g[label];
    for (int64_t j = 0; j < classes; ++j)
      g[j] = static_cast<float>(g[j] * factor);
    // (p - 1) * scale in double: p is close to 1 for a confident model.
    g[label] = static_cast<float>(eLabel * factor - scale);
  }
}
