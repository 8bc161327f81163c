// Optimizer updates on the CPU: torch.optim.SGD and torch.optim.AdamW.
#include "Checks.h"
#include "Element.h"
#include "Parallel.h"

#include "core/Context.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

using autoshard::rt::fatal;
using autoshard::rt::OpTimer;
using namespace autoshard::rt::cpu;

// Parameters and states are f32; the gradient is read as float from its
// dtype. Element i of the outputs depends on element i of the inputs only,
// and each loop reads an element's inputs before it writes its outputs,
// which makes the in-place update (an output that is the buffer of the
// input it replaces) safe, vectorized or not. Learning rates, steps and the
// clipping scale live in memory so that schedules and clipping need no
// recompilation; each is read once per call.
//
// The loops vectorize and run on the context's optimizer threads
// (ZeRO-Offload runs the whole optimizer step here, on the host):
// - the choices fixed for a call (gradient dtype, clipping scale, weight
//   decay, momentum, lerp form) are template arguments, so that the loop
//   bodies have no branches;
// - this file is compiled with -fno-math-errno (CMakeLists.txt), which makes
//   std::sqrt the IEEE square-root instruction instead of a libm call kept
//   for errno's sake;
// - the loops are marked free of loop-carried dependences, so that an
//   in-place update is not sent to the scalar loop by the vectorizer's
//   runtime overlap checks;
// - [0, n) is split into contiguous chunks, one per thread (Parallel.h).
// None of it changes a result bit: every element goes through the same f32
// operations in the same order (no -ffast-math, no reassociation), a vector
// lane rounds as a scalar does, and an element's result does not depend on
// its chunk. The unit tests check that against the plain scalar loops.

namespace {

/// Calls fn(std::bool_constant<flags>{}...): flags fixed for a call become
/// template arguments, one branch-free loop per combination.
template <typename Fn> void withFlags(Fn &&fn) { fn(); }
template <typename Fn, typename... Rest>
void withFlags(Fn &&fn, bool first, Rest... rest) {
  auto bindFirst = [&](auto firstFlag) {
    withFlags([&](auto... restFlags) { fn(firstFlag, restFlags...); }, rest...);
  };
  if (first)
    bindFirst(std::true_type{});
  else
    bindFirst(std::false_type{});
}

template <typename T> struct SgdCall {
  const float *param;
  const T *grad;
  const float *buf;
  float *paramOut;
  float *bufOut;
  float rate, gradScale, weightDecay, momentum;
};

template <typename T, bool Scaled, bool Decay, bool Momentum, bool Nesterov>
void sgdElements(const SgdCall<T> &c, int64_t begin, int64_t end) {
  const float *param = c.param;
  const T *grad = c.grad;
  const float *buf = c.buf;
  float *paramOut = c.paramOut;
  float *bufOut = c.bufOut;
  const float rate = c.rate, gradScale = c.gradScale,
              weightDecay = c.weightDecay, momentum = c.momentum;
  // Operations follow torch's order in float so results match it up to
  // FMA contraction. torch skips the decay term when it is 0; so do we,
  // which keeps an inf parameter from turning its update into NaN.
  ASRT_INDEPENDENT_ITERATIONS
  for (int64_t i = begin; i < end; ++i) {
    float p = param[i];
    float g = load(grad, i);
    if constexpr (Scaled)
      g = gradScale * g;
    if constexpr (Decay)
      g = g + weightDecay * p;
    float step = g;
    if constexpr (Momentum) {
      float b = momentum * buf[i] + g;
      step = Nesterov ? g + momentum * b : b;
      bufOut[i] = b;
    }
    paramOut[i] = p - rate * step;
  }
}

template <typename T> struct AdamWCall {
  const float *param;
  const T *grad;
  const float *expAvg, *expAvgSq;
  float *paramOut, *expAvgOut, *expAvgSqOut;
  float gradScale, decay, avgWeight, beta2, sqWeight, correction2Sqrt, eps,
      stepSize;
};

template <typename T, bool Scaled, bool Decay, bool LerpFromStart>
void adamwElements(const AdamWCall<T> &c, int64_t begin, int64_t end) {
  const float *param = c.param;
  const T *grad = c.grad;
  const float *expAvg = c.expAvg, *expAvgSq = c.expAvgSq;
  float *paramOut = c.paramOut, *expAvgOut = c.expAvgOut,
        *expAvgSqOut = c.expAvgSqOut;
  const float gradScale = c.gradScale, decay = c.decay, avgWeight = c.avgWeight,
              beta2 = c.beta2, sqWeight = c.sqWeight,
              correction2Sqrt = c.correction2Sqrt, eps = c.eps,
              stepSize = c.stepSize;
  ASRT_INDEPENDENT_ITERATIONS
  for (int64_t i = begin; i < end; ++i) {
    float p = param[i];
    float g = load(grad, i);
    float m = expAvg[i];
    float v = expAvgSq[i];
    if constexpr (Scaled)
      g = gradScale * g;
    if constexpr (Decay)
      p = p * decay;
    // torch's lerp picks the form that is exact at its nearer end.
    if constexpr (LerpFromStart)
      m = m + avgWeight * (g - m);
    else
      m = g - (g - m) * (1.0f - avgWeight);
    v = v * beta2;
    v = v + sqWeight * g * g;
    float denom = std::sqrt(v) / correction2Sqrt + eps;
    expAvgOut[i] = m;
    expAvgSqOut[i] = v;
    paramOut[i] = p + stepSize * m / denom;
  }
}

} // namespace

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
  const bool hasMomentum = momentum != 0.0f;
  dispatchFloatDtype(op, grad_dtype, [&](auto tag) {
    using T = decltype(tag);
    const SgdCall<T> call{param,     static_cast<const T *>(grad),
                          buf,       param_out,
                          buf_out,   rate,
                          gradScale, weight_decay,
                          momentum};
    withFlags(
        [&](auto kScaled, auto kDecay, auto kMomentum, auto kNesterov) {
          forEachOptimizerChunk(ctx, n, 1, [&](int64_t begin, int64_t end) {
            sgdElements<T, decltype(kScaled)::value, decltype(kDecay)::value,
                        decltype(kMomentum)::value, decltype(kNesterov)::value>(
                call, begin, end);
          });
        },
        scaled, weight_decay != 0.0f, hasMomentum,
        hasMomentum && nesterov != 0);
  });
}

namespace {

/// AdamW's scalars shared by the tensors of one update: formed as torch
/// forms them, in double (Python floats) from the hyperparameters, then
/// used as float scalars by the tensor ops of torch's single-tensor AdamW:
///   param.mul_(1 - lr * wd); exp_avg.lerp_(grad, 1 - beta1);
///   exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2);
///   denom = (exp_avg_sq.sqrt() / sqrt(bias_correction2)).add_(eps);
///   param.addcdiv_(exp_avg, denom, value=-lr / bias_correction1).
struct AdamWScalars {
  double rate;
  float avgWeight, sqWeight, stepSize, correction2Sqrt, gradScale;
  bool scaled;
};

AdamWScalars adamwScalars(const char *op, const float *lr,
                          const int32_t *step, const float *grad_scale,
                          float beta1, float beta2) {
  checkNotNull(op, "learning-rate", lr);
  checkNotNull(op, "step", step);
  const int32_t t = step[0];
  // Step 0 would divide by the bias correction 1 - beta^0 = 0.
  if (t < 1)
    fatal("%s: step %d must be at least 1 (the counter is incremented "
          "before the update)",
          op, t);
  AdamWScalars s;
  s.rate = lr[0];
  s.avgWeight = static_cast<float>(1.0 - double(beta1));
  s.sqWeight = static_cast<float>(1.0 - double(beta2));
  const double biasCorrection1 = 1.0 - std::pow(double(beta1), double(t));
  const double biasCorrection2 = 1.0 - std::pow(double(beta2), double(t));
  s.stepSize = static_cast<float>(-s.rate / biasCorrection1);
  s.correction2Sqrt = static_cast<float>(std::sqrt(biasCorrection2));
  s.scaled = grad_scale != nullptr;
  s.gradScale = s.scaled ? grad_scale[0] : 1.0f;
  return s;
}

/// One tensor's AdamW update with the call's shared scalars.
void adamwTensor(asrt_context *ctx, const char *op, int32_t gradDtype,
                 const asrt_adamw_tensor &x, const AdamWScalars &s,
                 float beta2, float eps) {
  const float decay = static_cast<float>(1.0 - s.rate * x.weight_decay);
  dispatchFloatDtype(op, gradDtype, [&](auto tag) {
    using T = decltype(tag);
    const AdamWCall<T> call{x.param,          static_cast<const T *>(x.grad),
                            x.exp_avg,        x.exp_avg_sq,
                            x.param_out,      x.exp_avg_out,
                            x.exp_avg_sq_out, s.gradScale,
                            decay,            s.avgWeight,
                            beta2,            s.sqWeight,
                            s.correction2Sqrt, eps,
                            s.stepSize};
    withFlags(
        [&](auto kScaled, auto kDecay, auto kLerpFromStart) {
          forEachOptimizerChunk(ctx, x.n, 1, [&](int64_t begin, int64_t end) {
            adamwElements<T, decltype(kScaled)::value, decltype(kDecay)::value,
                          decltype(kLerpFromStart)::value>(call, begin, end);
          });
        },
        // torch's lerp computes from the start when the weight is < 0.5.
        s.scaled, x.weight_decay != 0.0f, s.avgWeight < 0.5f);
  });
}

} // namespace

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
  AdamWScalars s = adamwScalars(op, lr, step, grad_scale, beta1, beta2);
  asrt_adamw_tensor x{param,     grad,        exp_avg,        exp_avg_sq,
                      param_out, exp_avg_out, exp_avg_sq_out, n,
                      weight_decay};
  adamwTensor(ctx, op, grad_dtype, x, s, beta2, eps);
}

extern "C" void asrt_adamw_update_multi(asrt_context *ctx, int32_t grad_dtype,
                                        const asrt_adamw_tensor *tensors,
                                        int64_t count, const float *lr,
                                        const int32_t *step,
                                        const float *grad_scale, float beta1,
                                        float beta2, float eps) {
  // Timed under the single call's name: the same work, in fewer calls.
  OpTimer timer(ctx, "adamw_update");
  const char *op = "adamw_update_multi";
  if (count < 1)
    fatal("%s: count = %lld; a multi-tensor update needs at least one tensor",
          op, static_cast<long long>(count));
  checkNotNull(op, "tensors", tensors);
  for (int64_t i = 0; i < count; ++i)
    if (tensors[i].n < 0)
      fatal("%s: tensor %lld: n = %lld is negative", op,
            static_cast<long long>(i), static_cast<long long>(tensors[i].n));
  AdamWScalars s = adamwScalars(op, lr, step, grad_scale, beta1, beta2);
  for (int64_t i = 0; i < count; ++i)
    adamwTensor(ctx, op, grad_dtype, tensors[i], s, beta2, eps);
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
