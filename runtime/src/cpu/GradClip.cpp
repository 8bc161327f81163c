// Global gradient-norm clipping on the CPU: sums of squares and the
// coefficient.
#include "Checks.h"
#include "Element.h"

#include "core/Context.h"

#include <algorithm>
#include <cmath>

using autoshard::rt::OpTimer;
using namespace autoshard::rt::cpu;

extern "C" void asrt_sum_of_squares(asrt_context *ctx, int32_t dtype,
                                    const void *x, int64_t n, float *acc,
                                    int32_t accumulate) {
  OpTimer timer(ctx, "sum_of_squares");
  const char *op = "sum_of_squares";
  checkCount(op, "n", n);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *values = static_cast<const T *>(x);
    // A parameter has up to ~1e8 elements; a float sum would lose ~1e-4 of
    // it. The running total across calls is f32 (acc), as the ABI fixes,
    // so each call's sum is rounded once when it is added.
    double sum = accumulate ? static_cast<double>(acc[0]) : 0.0;
    // Independent partial sums: a single double chain would wait on the
    // add latency at every element.
    constexpr int kPartials = 8;
    double part[kPartials] = {};
    int64_t i = 0;
    for (; i + kPartials <= n; i += kPartials)
      for (int k = 0; k < kPartials; ++k) {
        double v = load(values, i + k);
        part[k] += v * v;
      }
    double local = 0.0;
    for (; i < n; ++i) {
      double v = load(values, i);
      local += v * v;
    }
    for (int k = 0; k < kPartials; ++k)
      local += part[k];
    acc[0] = static_cast<float>(sum + local);
  });
}

extern "C" void asrt_clip_coefficient(asrt_context *ctx, const float *sumsq,
                                      float *coef, float max_norm) {
  OpTimer timer(ctx, "clip_coefficient");
  // As torch.nn.utils.clip_grad_norm_, in float: total_norm is an f32
  // tensor, max_norm / (total_norm + 1e-6) is clamped to at most 1. A NaN or
  // inf norm gives NaN or 0 as in torch (std::min keeps its first argument
  // when the comparison is false), so a diverged step stays visible.
  const float norm = std::sqrt(sumsq[0]);
  const float c = max_norm / (norm + 1e-6f);
  coef[0] = std::min(c, 1.0f);
}
