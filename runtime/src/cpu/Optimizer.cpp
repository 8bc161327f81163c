// Optimizer updates on the CPU: torch.optim.SGD and torch.optim.AdamW.
#include "Checks.h"
#include "Element.h"

#include "core/Context.h"

#include <cmath>
#include <limits>

using autoshard::rt::fatal;
using autoshard::rt::OpTimer;
using namespace autoshard::rt::cpu;

// Parameters and states are f32; the gradient is read as float from its
// dtype. Each loop reads every input element i into registers before it
// writes the outputs' element i, which makes the in-place update (outputs
// aliasing their inputs) safe. Learning rates, steps and the clipping scale
// live in memory so that schedules and clipping need no recompilation; each
// is read once per call.

extern "C" void asrt_sgd_update(asrt_context *ctx, int32_t grad_dtype,
                                const float *param, const void *grad,
                                const float *lr, const float *buf,
                                const float *grad_scale, float *param_out,
                                float *buf_out, int64_t n, float momentum,
                                float weight_decay, int32_t nesterov) {
  OpTimer timer(ctx, "sgd_update");
  const char *op = "sgd_update";
  checkCount(op, "n", n);
  checkNotNull(op, "learning-rate", lr);
  if (momentum != 0.0f && (!buf || !buf_out))
    fatal("%s: momentum %g needs both momentum buffers (buf %p, buf_out %p)",
          op, static_cast<double>(momentum), static_cast<const void *>(buf),
          static_cast<void *>(buf_out));
  const float rate = lr[0];
  const bool scaled = grad_scale != nullptr;
  const float gradScale = scaled ? grad_scale[0] : 1.0f;
  dispatchFloatDtype(op, grad_dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *gradT = static_cast<const T *>(grad);
    // Operations follow torch's order in float so results match it up to
    // FMA contraction. torch skips the decay term when it is 0; so do we,
    // which keeps an inf parameter from turning its update into NaN.
    for (int64_t i = 0; i < n; ++i) {
      float p = param[i];
      float g = load(gradT, i);
      if (scaled)
        g = gradScale * g;
      if (weight_decay != 0.0f)
        g = g + weight_decay * p;
      float step = g;
      if (momentum != 0.0f) {
        float b = momentum * buf[i] + g;
        step = nesterov ? g + momentum * b : b;
        buf_out[i] = b;
      }
      param_out[i] = p - rate * step;
    }
  });
}

extern "C" void asrt_adamw_update(asrt_context *ctx, int32_t grad_dtype,
                                  const float *param, const void *grad,
                                  const float *exp_avg, const float *exp_avg_sq,
                                  const float *lr, const int32_t *step,
                                  const float *grad_scale, float *param_out,
                                  float *exp_avg_out, float *exp_avg_sq_out,
                                  int64_t n, float beta1, float beta2,
                                  float eps, float weight_decay) {
  OpTimer timer(ctx, "adamw_update");
  const char *op = "adamw_update";
  checkCount(op, "n", n);
  checkNotNull(op, "learning-rate", lr);
  checkNotNull(op, "step", step);
  const int32_t t = step[0];
  // Step 0 would divide by the bias correction 1 - beta^0 = 0.
  if (t < 1)
    fatal("%s: step %d must be at least 1 (the counter is incremented "
          "before the update)",
          op, t);
  // The scalars are formed as torch forms them: in double (Python floats)
  // from the hyperparameters, then used as float scalars by the tensor ops
  // of torch's single-tensor AdamW:
  //   param.mul_(1 - lr * wd); exp_avg.lerp_(grad, 1 - beta1);
  //   exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2);
  //   denom = (exp_avg_sq.sqrt() / sqrt(bias_correction2)).add_(eps);
  //   param.addcdiv_(exp_avg, denom, value=-lr / bias_correction1).
  const double rate = lr[0];
  const float decay = static_cast<float>(1.0 - rate * weight_decay);
  const float avgWeight = static_cast<float>(1.0 - double(beta1));
  const float sqWeight = static_cast<float>(1.0 - double(beta2));
  const double biasCorrection1 = 1.0 - std::pow(double(beta1), double(t));
  const double biasCorrection2 = 1.0 - std::pow(double(beta2), double(t));
  const float stepSize = static_cast<float>(-rate / biasCorrection1);
  const float correction2Sqrt = static_cast<float>(std::sqrt(biasCorrection2));
  const bool scaled = grad_scale != nullptr;
  const float gradScale = scaled ? grad_scale[0] : 1.0f;
  dispatchFloatDtype(op, grad_dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *gradT = static_cast<const T *>(grad);
    for (int64_t i = 0; i < n; ++i) {
      float p = param[i];
      float g = load(gradT, i);
      float m = exp_avg[i];
      float v = exp_avg_sq[i];
      if (scaled)
        g = gradScale * g;
      if (weight_decay != 0.0f)
        p = p * decay;
      // torch's lerp picks the form that is exact at its nearer end.
      m = avgWeight < 0.5f ? m + avgWeight * (g - m)
                           : g - (g - m) * (1.0f - avgWeight);
      v = v * beta2;
      v = v + sqWeight * g * g;
      float denom = std::sqrt(v) / correction2Sqrt + eps;
      exp_avg_out[i] = m;
      exp_avg_sq_out[i] = v;
      param_out[i] = p + stepSize * m / denom;
    }
  });
}

extern "C" void asrt_increment_i32(asrt_context *ctx, const int32_t *x,
                                   int32_t *y) {
  OpTimer timer(ctx, "increment_i32");
  const int32_t value = x[0];
  // Signed overflow is undefined and a wrapped step would break the bias
  // corrections; 2^31 steps are not a training run anyone will reach.
  if (value == std::numeric_limits<int32_t>::max())
    fatal("increment_i32: %d + 1 overflows int32", value);
  y[0] = value + 1;
}
