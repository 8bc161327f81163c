// Optimizer updates and global-norm clipping on the GPU: torch.optim.SGD,
// torch.optim.AdamW, the step counter, sums of squares, the clipping
// coefficient.
//
// The same f32 operations in the same order as runtime/src/cpu/Optimizer.cpp
// and GradClip.cpp. nvcc contracts a * b + c into an FMA by default and the
// CPU build does not (no -march, so no FMA instructions), so the element
// formulas use the explicitly rounded __fmul_rn / __fadd_rn / ... intrinsics,
// which are never contracted: given the same scalars, an element's result is
// the CPU's bit for bit.
//
// Learning rate, step and clipping scale are device pointers (they live in
// device memory so that schedules and clipping need no host round trip):
// the kernels read them, never the host.
//
// A kernel cannot call fatal(). Where the CPU backend is fatal on a value
// that only the device sees (a step below 1, a step counter at INT32_MAX),
// the kernel prints the CPU's message with device printf and executes
// __trap(): the kernel aborts, the context's sticky error makes the next
// synchronization or CUDA call fail (the caller's check() is then fatal), and
// the message appears when the driver flushes device printf. No output is
// written by a trapping call.
//
// Future work: a multi-tensor fused AdamW (one launch over a list of
// parameter tensors, as torch's _fused_adamw / apex's multi_tensor_apply);
// for now it is one launch per tensor.
#include "Cuda.h"
#include "Element.cuh"

#include "core/ArgChecks.h"
#include "core/Context.h"

#include <algorithm>
#include <climits>
#include <cstdio>

namespace autoshard::rt::cuda {
namespace {

// A grid-stride loop over n elements.
#define ASRT_FOR_EACH(i, n)                                                    \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);    \
       i += int64_t(blockDim.x) * gridDim.x)

// ---- SGD ----

struct SgdArgs {
  const float *param, *buf;
  float *paramOut, *bufOut;
  const float *lr, *gradScale; // device scalars; gradScale may be null
  float weightDecay, momentum;
  bool decay, hasMomentum, nesterov;
};

template <typename T>
__global__ void sgdKernel(SgdArgs a, const T *grad, int64_t n) {
  // Read once per thread from device memory (a broadcast load, cached).
  const float rate = a.lr[0];
  const float gradScale = a.gradScale ? a.gradScale[0] : 1.0f;
  ASRT_FOR_EACH(i, n) {
    // Each element's inputs are read before its outputs are written: the
    // outputs may alias the inputs.
    float p = a.param[i];
    float g = load(grad, i);
    if (a.gradScale)
      g = __fmul_rn(gradScale, g);
    // torch skips a zero decay term (an inf parameter stays inf, not NaN).
    if (a.decay)
      g = __fadd_rn(g, __fmul_rn(a.weightDecay, p));
    float step = g;
    if (a.hasMomentum) {
      float b = __fadd_rn(__fmul_rn(a.momentum, a.buf[i]), g);
      step = a.nesterov ? __fadd_rn(g, __fmul_rn(a.momentum, b)) : b;
      a.bufOut[i] = b;
    }
    a.paramOut[i] = __fsub_rn(p, __fmul_rn(rate, step));
  }
}

// ---- AdamW ----

struct AdamWArgs {
  const float *param, *expAvg, *expAvgSq;
  float *paramOut, *expAvgOut, *expAvgSqOut;
  const float *lr, *gradScale; // device scalars; gradScale may be null
  const int32_t *step;         // device scalar
  float beta1, beta2, eps, weightDecay;
  // Formed on the host from the hyperparameters, as the CPU forms them.
  float avgWeight, oneMinusAvgWeight, sqWeight;
  bool decay, lerpFromStart;
};

/// The per-call scalars that depend on device memory, formed as the CPU
/// forms them: in double (torch's Python floats), then rounded to float.
struct AdamWScalars {
  float decay, stepSize, correction2Sqrt, gradScale;
  bool badStep;
};

__device__ AdamWScalars adamwScalars(const AdamWArgs &a) {
  AdamWScalars s{};
  const int32_t t = a.step[0];
  s.badStep = t < 1;
  const double rate = a.lr[0];
  s.decay = static_cast<float>(1.0 - rate * double(a.weightDecay));
  const double biasCorrection1 = 1.0 - pow(double(a.beta1), double(t));
  const double biasCorrection2 = 1.0 - pow(double(a.beta2), double(t));
  s.stepSize = static_cast<float>(-rate / biasCorrection1);
  s.correction2Sqrt = static_cast<float>(sqrt(biasCorrection2));
  s.gradScale = a.gradScale ? a.gradScale[0] : 1.0f;
  return s;
}

template <typename T>
__global__ void adamwKernel(AdamWArgs a, const T *grad, int64_t n) {
  // One thread per block forms the scalars (two double pows), not every
  // thread: the kernel is bandwidth-bound and double pow is not free.
  __shared__ AdamWScalars shared;
  if (threadIdx.x == 0)
    shared = adamwScalars(a);
  __syncthreads();
  const AdamWScalars s = shared;
  if (s.badStep) {
    // Step 0 would divide by the bias correction 1 - beta^0 = 0. Block 0
    // reports and traps; the others write nothing.
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      printf("adamw_update: step %d must be at least 1 (the counter is "
             "incremented before the update)\n",
             a.step[0]);
      __trap();
    }
    return;
  }
  ASRT_FOR_EACH(i, n) {
    float p = a.param[i];
    float g = load(grad, i);
    float m = a.expAvg[i];
    float v = a.expAvgSq[i];
    if (a.gradScale)
      g = __fmul_rn(s.gradScale, g);
    if (a.decay)
      p = __fmul_rn(p, s.decay);
    // torch's lerp picks the form that is exact at its nearer end.
    if (a.lerpFromStart)
      m = __fadd_rn(m, __fmul_rn(a.avgWeight, __fsub_rn(g, m)));
    else
      m = __fsub_rn(g, __fmul_rn(__fsub_rn(g, m), a.oneMinusAvgWeight));
    v = __fmul_rn(v, a.beta2);
    v = __fadd_rn(v, __fmul_rn(__fmul_rn(a.sqWeight, g), g));
    float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.correction2Sqrt), a.eps);
    a.expAvgOut[i] = m;
    a.expAvgSqOut[i] = v;
    a.paramOut[i] = __fadd_rn(p, __fdiv_rn(__fmul_rn(s.stepSize, m), denom));
  }
}

// ---- Step counter ----

__global__ void incrementKernel(const int32_t *x, int32_t *y) {
  const int32_t value = x[0];
  // Signed overflow is undefined and a wrapped step would break the bias
  // corrections.
  if (value == INT_MAX) {
    printf("increment_i32: %d + 1 overflows int32\n", value);
    __trap();
  }
  y[0] = value + 1;
}

// ---- Gradient clipping ----

// Sums of squares in two passes, deterministic for a given n: a fixed grid
// of at most kSumBlocks blocks writes one double partial each, then one
// block adds the partials in a fixed order and updates acc once.
constexpr int kSumBlocks = 1024;

/// Sum of `value` over the block's kThreads threads, in thread 0.
__device__ double blockSum(double value) {
  __shared__ double shared[kThreads];
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  return shared[0];
}

template <typename T>
__global__ void sumOfSquaresPartialsKernel(const T *x, int64_t n,
                                           double *partials) {
  double sum = 0.0;
  ASRT_FOR_EACH(i, n) {
    double v = load(x, i);
    sum += v * v;
  }
  double total = blockSum(sum);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = total;
}

__global__ void sumOfSquaresFinishKernel(const double *partials, int blocks,
                                         float *acc, int32_t accumulate) {
  double sum = 0.0;
  for (int b = threadIdx.x; b < blocks; b += kThreads)
    sum += partials[b];
  double total = blockSum(sum);
  // The running total is f32 (the ABI fixes it): this call's sum is rounded
  // once, when it is added, as on the CPU.
  if (threadIdx.x == 0)
    acc[0] = static_cast<float>(
        (accumulate ? static_cast<double>(acc[0]) : 0.0) + total);
}

__global__ void clipCoefficientKernel(const float *sumsq, float *coef,
                                      float maxNorm) {
  // As torch.nn.utils.clip_grad_norm_, in float; the CPU's std::min(c, 1)
  // keeps c when the comparison is false, so a NaN norm gives NaN (fminf
  // would give 1 and hide a diverged step).
  const float norm = __fsqrt_rn(sumsq[0]);
  const float c = __fdiv_rn(maxNorm, __fadd_rn(norm, 1e-6f));
  coef[0] = 1.0f < c ? 1.0f : c;
}

#undef ASRT_FOR_EACH

} // namespace

void sgdUpdate(cudaStream_t stream, int32_t gradDtype, const float *param,
               const void *grad, const float *lr, const float *buf,
               const float *gradScale, float *paramOut, float *bufOut,
               int64_t n, float momentum, float weightDecay, int32_t nesterov) {
  const char *op = "sgd_update";
  checkCount(op, "n", n);
  checkNotNull(op, "learning-rate", lr);
  if (momentum != 0.0f && (!buf || !bufOut))
    fatal("%s: momentum %g needs both momentum buffers (buf %p, buf_out %p)",
          op, static_cast<double>(momentum), static_cast<const void *>(buf),
          static_cast<void *>(bufOut));
  const bool hasMomentum = momentum != 0.0f;
  const SgdArgs args{param,
                     buf,
                     paramOut,
                     bufOut,
                     lr,
                     gradScale,
                     weightDecay,
                     momentum,
                     weightDecay != 0.0f,
                     hasMomentum,
                     hasMomentum && nesterov != 0};
  dispatchFloat(op, gradDtype, [&](auto tag) {
    using T = decltype(tag);
    sgdKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        args, static_cast<const T *>(grad), n);
  });
  checkLaunch(op);
}

void adamwUpdate(cudaStream_t stream, int32_t gradDtype, const float *param,
                 const void *grad, const float *expAvg, const float *expAvgSq,
                 const float *lr, const int32_t *step, const float *gradScale,
                 float *paramOut, float *expAvgOut, float *expAvgSqOut,
                 int64_t n, float beta1, float beta2, float eps,
                 float weightDecay) {
  const char *op = "adamw_update";
  checkCount(op, "n", n);
  checkNotNull(op, "learning-rate", lr);
  checkNotNull(op, "step", step);
  const float avgWeight = static_cast<float>(1.0 - double(beta1));
  const AdamWArgs args{
      param, expAvg, expAvgSq, paramOut, expAvgOut, expAvgSqOut, lr, gradScale,
      step, beta1, beta2, eps, weightDecay, avgWeight, 1.0f - avgWeight,
      static_cast<float>(1.0 - double(beta2)), weightDecay != 0.0f,
      // torch's lerp computes from the start when the
      // weight is < 0.5.
      avgWeight < 0.5f};
  dispatchFloat(op, gradDtype, [&](auto tag) {
    using T = decltype(tag);
    adamwKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        args, static_cast<const T *>(grad), n);
  });
  checkLaunch(op);
}

void incrementI32(cudaStream_t stream, const int32_t *x, int32_t *y) {
  const char *op = "increment_i32";
  checkNotNull(op, "input", x);
  checkNotNull(op, "output", y);
  incrementKernel<<<1, 1, 0, stream>>>(x, y);
  checkLaunch(op);
}

void sumOfSquares(cudaStream_t stream, int32_t dtype, const void *x, int64_t n,
                  float *acc, int32_t accumulate) {
  const char *op = "sum_of_squares";
  checkCount(op, "n", n);
  checkNotNull(op, "accumulator", acc);
  if (dtype != ASRT_DTYPE_F32 && dtype != ASRT_DTYPE_BF16)
    badDtype(op, dtype);
  const unsigned blocks = std::min(blocksFor(n), unsigned(kSumBlocks));
  // The partials live in stream-ordered memory for the two kernels only.
  double *partials = nullptr;
  check(cudaMallocAsync(reinterpret_cast<void **>(&partials),
                        blocks * sizeof(double), stream),
        op);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    sumOfSquaresPartialsKernel<<<blocks, kThreads, 0, stream>>>(
        static_cast<const T *>(x), n, partials);
  });
  checkLaunch(op);
  sumOfSquaresFinishKernel<<<1, kThreads, 0, stream>>>(partials, int(blocks),
                                                       acc, accumulate);
  checkLaunch(op);
  check(cudaFreeAsync(partials, stream), op);
}

void clipCoefficient(cudaStream_t stream, const float *sumsq, float *coef,
                     float maxNorm) {
  const char *op = "clip_coefficient";
  checkNotNull(op, "sum-of-squares", sumsq);
  checkNotNull(op, "coefficient", coef);
  clipCoefficientKernel<<<1, 1, 0, stream>>>(sumsq, coef, maxNorm);
  checkLaunch(op);
}

} // namespace autoshard::rt::cuda
