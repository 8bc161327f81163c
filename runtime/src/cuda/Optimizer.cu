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
// AdamW also runs over a list of tensors in one launch per group of tensors
// (adamwUpdateMulti, the idea of torch's fused AdamW and apex's
// multi_tensor_apply): the blocks share the tensors' chunks, which keeps the
// GPU full when a model has many small parameters. The single and the
// multi-tensor kernel form the scalars with one compiled function and
// update elements with one function of explicitly rounded operations: a
// tensor's results are the same bits either way.
#include "Cuda.h"
#include "Element.cuh"
#include "Grid.cuh"

#include "core/ArgChecks.h"
#include "core/Context.h"

#include <climits>
#include <cstdio>

namespace autoshard::rt::cuda {
namespace {

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
  for (int64_t i : gridThreads(n)) {
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

/// The hyperparameters every tensor of a call shares.
struct AdamWHyper {
  const float *lr, *gradScale; // device scalars; gradScale may be null
  const int32_t *step;         // device scalar
  float beta1, beta2, eps;
  // Formed on the host from the hyperparameters, as the CPU forms them.
  float avgWeight, oneMinusAvgWeight, sqWeight;
  bool lerpFromStart;
};

/// One tensor's buffers (its gradient is typed by the kernel) and decay.
struct AdamWTensor {
  const float *param, *expAvg, *expAvgSq;
  float *paramOut, *expAvgOut, *expAvgSqOut;
  float weightDecay;
};

/// The per-call scalars that depend on device memory, formed as the CPU
/// forms them: in double (torch's Python floats), then rounded to float.
struct AdamWScalars {
  double rate;
  float stepSize, correction2Sqrt, gradScale;
  bool badStep;
};

// Not inlined, and rounded explicitly: both kernels call this one compiled
// function, so ptxas cannot fuse or schedule its double arithmetic (or
// pow's) differently in each, and the CPU does not fuse either.
__device__ __noinline__ AdamWScalars adamwScalars(const float *lr,
                                                  const int32_t *step,
                                                  const float *gradScale,
                                                  float beta1, float beta2) {
  AdamWScalars s{};
  const int32_t t = step[0];
  s.badStep = t < 1;
  s.rate = lr[0];
  const double biasCorrection1 = __dsub_rn(1.0, pow(double(beta1), double(t)));
  const double biasCorrection2 = __dsub_rn(1.0, pow(double(beta2), double(t)));
  s.stepSize = static_cast<float>(__ddiv_rn(-s.rate, biasCorrection1));
  s.correction2Sqrt = static_cast<float>(__dsqrt_rn(biasCorrection2));
  s.gradScale = gradScale ? gradScale[0] : 1.0f;
  return s;
}

/// A tensor's decay factor 1 - lr * weight_decay, never contracted to an FMA
/// (the CPU's double multiply and subtract round twice).
__device__ __forceinline__ float adamwDecay(double rate, float weightDecay) {
  return static_cast<float>(
      __dsub_rn(1.0, __dmul_rn(rate, double(weightDecay))));
}

/// The block's scalars, formed by one thread (two double pows), not every
/// thread: the kernels are bandwidth-bound and double pow is not free. On a
/// step below 1, which would divide by the bias correction 1 - beta^0 = 0,
/// block 0 reports (naming `op`) and traps, and every block returns false
/// and writes nothing.
__device__ bool blockScalars(const AdamWHyper &h, const char *op,
                             AdamWScalars &s) {
  __shared__ AdamWScalars shared;
  if (threadIdx.x == 0)
    shared = adamwScalars(h.lr, h.step, h.gradScale, h.beta1, h.beta2);
  __syncthreads();
  s = shared;
  if (!s.badStep)
    return true;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    printf("%s: step %d must be at least 1 (the counter is incremented "
           "before the update)\n",
           op, h.step[0]);
    __trap();
  }
  return false;
}

/// Element i of one tensor's update. It reads the element's inputs before
/// it writes its outputs: the outputs may alias the inputs.
template <typename T>
__device__ __forceinline__ void
adamwElement(const AdamWHyper &h, const AdamWScalars &s, const AdamWTensor &x,
             float decay, const T *grad, int64_t i) {
  float p = x.param[i];
  float g = load(grad, i);
  float m = x.expAvg[i];
  float v = x.expAvgSq[i];
  if (h.gradScale)
    g = __fmul_rn(s.gradScale, g);
  if (x.weightDecay != 0.0f)
    p = __fmul_rn(p, decay);
  // torch's lerp picks the form that is exact at its nearer end.
  if (h.lerpFromStart)
    m = __fadd_rn(m, __fmul_rn(h.avgWeight, __fsub_rn(g, m)));
  else
    m = __fsub_rn(g, __fmul_rn(__fsub_rn(g, m), h.oneMinusAvgWeight));
  v = __fmul_rn(v, h.beta2);
  v = __fadd_rn(v, __fmul_rn(__fmul_rn(h.sqWeight, g), g));
  float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.correction2Sqrt), h.eps);
  x.expAvgOut[i] = m;
  x.expAvgSqOut[i] = v;
  x.paramOut[i] = __fadd_rn(p, __fdiv_rn(__fmul_rn(s.stepSize, m), denom));
}

template <typename T>
__global__ void adamwKernel(AdamWHyper h, AdamWTensor x, const T *grad,
                            int64_t n) {
  AdamWScalars s;
  if (!blockScalars(h, "adamw_update", s))
    return;
  const float decay = adamwDecay(s.rate, x.weightDecay);
  for (int64_t i : gridThreads(n))
    adamwElement(h, s, x, decay, grad, i);
}

// The multi-tensor kernel: each launch covers a group of at most
// kMultiTensors non-empty tensors, cut into chunks of kChunk elements (a
// tensor's last chunk may be shorter); block b updates chunks b, b + grid,
// ... of the group, finding each chunk's tensor by a binary search over the
// tensors' first chunks.

/// Elements per chunk: 16 per thread, which spreads the block's scalars over
/// enough elements while a tensor of a few hundred thousand elements still
/// spans many blocks.
constexpr int64_t kChunk = int64_t(kThreads) * 16;
/// Tensors per launch: the argument struct is passed by value and stays
/// under the 4 KiB of kernel parameters that CUDA guarantees everywhere.
constexpr int kMultiTensors = 48;

struct AdamWMultiTensor {
  AdamWTensor x;
  const void *grad; // of the call's gradient dtype
  int64_t n;
  int64_t firstChunk; // the chunks of the tensors before it in the group
};

struct AdamWMultiArgs {
  AdamWHyper h;
  int32_t count;  // tensors in the group, each with n > 0
  int64_t chunks; // the group's chunks
  AdamWMultiTensor tensors[kMultiTensors];
};
static_assert(sizeof(AdamWMultiArgs) <= 4096,
              "the multi-tensor AdamW arguments exceed 4 KiB of kernel "
              "parameters: lower kMultiTensors");

// __grid_constant__: the tensors are indexed by a runtime value, which the
// kernel reads from parameter memory instead of a per-thread local copy.
template <typename T>
__global__ void adamwMultiKernel(const __grid_constant__ AdamWMultiArgs a) {
  AdamWScalars s;
  if (!blockScalars(a.h, "adamw_update_multi", s))
    return;
  for (int64_t chunk : gridBlocks(a.chunks)) {
    // The last tensor whose first chunk is at most `chunk` (first chunks
    // increase strictly: every tensor of the group has one).
    int lo = 0, hi = a.count - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (a.tensors[mid].firstChunk <= chunk)
        lo = mid;
      else
        hi = mid - 1;
    }
    const AdamWMultiTensor &t = a.tensors[lo];
    const int64_t begin = (chunk - t.firstChunk) * kChunk;
    const int64_t end = begin + kChunk < t.n ? begin + kChunk : t.n;
    const T *grad = static_cast<const T *>(t.grad);
    const float decay = adamwDecay(s.rate, t.x.weightDecay);
    for (int64_t i : blockThreads(begin, end))
      adamwElement(a.h, s, t.x, decay, grad, i);
  }
}

/// The shared hyperparameters of an AdamW call, as the CPU forms them.
AdamWHyper adamwHyper(const float *lr, const int32_t *step,
                      const float *gradScale, float beta1, float beta2,
                      float eps) {
  const float avgWeight = static_cast<float>(1.0 - double(beta1));
  return AdamWHyper{lr, gradScale, step, beta1, beta2, eps, avgWeight,
                    1.0f - avgWeight, static_cast<float>(1.0 - double(beta2)),
                    // torch's lerp computes from the start when the weight
                    // is < 0.5.
                    avgWeight < 0.5f};
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
  for (int64_t i : gridThreads(n)) {
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
  for (int b : blockThreads(blocks))
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
  const AdamWHyper h = adamwHyper(lr, step, gradScale, beta1, beta2, eps);
  const AdamWTensor x{param,     expAvg,      expAvgSq,   paramOut,
                      expAvgOut, expAvgSqOut, weightDecay};
  dispatchFloat(op, gradDtype, [&](auto tag) {
    using T = decltype(tag);
    adamwKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        h, x, static_cast<const T *>(grad), n);
  });
  checkLaunch(op);
}

void adamwUpdateMulti(cudaStream_t stream, int32_t gradDtype,
                      const asrt_adamw_tensor *tensors, int64_t count,
                      const float *lr, const int32_t *step,
                      const float *gradScale, float beta1, float beta2,
                      float eps) {
  const char *op = "adamw_update_multi";
  if (count < 1)
    fatal("%s: count = %lld; a multi-tensor update needs at least one tensor",
          op, static_cast<long long>(count));
  checkNotNull(op, "tensors", tensors);
  for (int64_t i = 0; i < count; ++i) {
    // "adamw_update_multi: tensor 3: n = -1 is negative".
    char where[64];
    std::snprintf(where, sizeof where, "%s: tensor %lld", op,
                  static_cast<long long>(i));
    checkCount(where, "n", tensors[i].n);
  }
  checkNotNull(op, "learning-rate", lr);
  checkNotNull(op, "step", step);
  AdamWMultiArgs args{};
  args.h = adamwHyper(lr, step, gradScale, beta1, beta2, eps);
  dispatchFloat(op, gradDtype, [&](auto tag) {
    using T = decltype(tag);
    bool launched = false;
    auto launch = [&] {
      // A block per chunk; a group with more chunks than blocks loops.
      const unsigned blocks = tileBlocksFor(args.chunks);
      adamwMultiKernel<T><<<blocks, kThreads, 0, stream>>>(args);
      checkLaunch(op);
      launched = true;
      args.count = 0;
      args.chunks = 0;
    };
    for (int64_t i = 0; i < count; ++i) {
      const asrt_adamw_tensor &t = tensors[i];
      // An empty tensor has no chunk (and a chunk's tensor is found by its
      // first chunk, which must differ from its neighbours').
      if (t.n == 0)
        continue;
      args.tensors[args.count++] = AdamWMultiTensor{
          AdamWTensor{t.param, t.exp_avg, t.exp_avg_sq, t.param_out,
                      t.exp_avg_out, t.exp_avg_sq_out, t.weight_decay},
          t.grad, t.n, args.chunks};
      args.chunks += (t.n + kChunk - 1) / kChunk;
      if (args.count == kMultiTensors)
        launch();
    }
    // A call without elements still launches once: a bad step traps, as it
    // does in the single call.
    if (args.count > 0 || !launched)
      launch();
  });
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
  const unsigned blocks = blocksFor(n, kSumBlocks);
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
