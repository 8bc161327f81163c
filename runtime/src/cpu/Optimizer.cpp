// Optimizer updates on the CPU: torch.optim.SGD with dampening 0.
#include "Checks.h"
#include "core/Context.h"

using autoshard::rt::fatal;
using autoshard::rt::OpTimer;

extern "C" void asrt_sgd_update_f32(asrt_context *ctx, const float *param,
                                    const float *grad, const float *lr,
                                    const float *buf, float *param_out,
                                    float *buf_out, int64_t n, float momentum,
                                    float weight_decay, int32_t nesterov) {
  OpTimer timer(ctx, "sgd_update_f32");
  const char *op = "sgd_update_f32";
  autoshard::rt::cpu::checkCount(op, "n", n);
  if (!lr)
    fatal("%s: the learning-rate pointer is null", op);
  if (momentum != 0.0f && (!buf || !buf_out))
    fatal("%s: momentum %g needs both momentum buffers (buf %p, buf_out %p)",
          op, static_cast<double>(momentum), static_cast<const void *>(buf),
          static_cast<void *>(buf_out));
  // The learning rate lives in memory so that a schedule can change it
  // without recompiling; it is read once per call.
  const float rate = lr[0];
  // Each loop reads param[i], grad[i] and buf[i] into registers before it
  // writes param_out[i] and buf_out[i], which makes the in-place update
  // (param_out == param, buf_out == buf) safe. Operations follow torch's
  // order in float so results match it up to FMA contraction.
  if (momentum == 0.0f) {
    for (int64_t i = 0; i < n; ++i) {
      float p = param[i];
      // torch skips the decay term when it is 0; so do we, which keeps an
      // inf parameter from turning its update into NaN.
      float g = weight_decay != 0.0f ? grad[i] + weight_decay * p : grad[i];
      param_out[i] = p - rate * g;
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    float p = param[i];
    float g = weight_decay != 0.0f ? grad[i] + weight_decay * p : grad[i];
    float b = momentum * buf[i] + g;
    float step = nesterov ? g + momentum * b : b;
    buf_out[i] = b;
    param_out[i] = p - rate * step;
  }
}
