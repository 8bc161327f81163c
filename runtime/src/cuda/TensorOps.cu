// The generic tensor kernels on the GPU (abi.h, "Generic tensor ops"):
// unary and binary functions, select, reductions, strided copies, fill and
// softmax, with the CPU backend's formulas (runtime/src/cpu/TensorOps.cpp)
// and the device's libm.
//
// A strided operand's dims and strides travel by value with the launch, as
// the host's coalesced StridedSpace (memory/StridedSpace.h; rank <= 8, three
// operands: 272 bytes of kernel parameters); each thread finds its
// element's offsets by dividing its position by the dims. Every output
// element is computed by one thread, or by one block in a fixed-order
// reduction (RowReduce.cuh): results are deterministic. Sums accumulate in
// double, as on the CPU.
//
// Known performance limits: a division per dim and element (coalescing
// leaves most calls with one or two dims), and a reduction's reduced
// elements read through the same divisions.
#include "Activation.cuh"
#include "ArgChecks.h"
#include "Cuda.h"
#include "Element.cuh"
#include "Grid.cuh"
#include "RowReduce.cuh"

#include "data/Dropout.h"
#include "memory/StridedSpace.h"

#include <cstdint>

namespace autoshard::rt::cuda {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float k2OverSqrtPi = 1.12837916709551257f;
constexpr int kOperands = StridedSpace::kMaxOperands;

/// off[k] = operand k's offset at row-major position `pos` of `s` (unused
/// operands' strides are 0).
__device__ __forceinline__ void offsetsAt(const StridedSpace &s, int64_t pos,
                                          int64_t off[kOperands]) {
  for (int k = 0; k < kOperands; ++k)
    off[k] = 0;
  for (int d = s.rank - 1; d >= 0; --d) {
    const int64_t index = pos % s.dims[d];
    pos /= s.dims[d];
    for (int k = 0; k < kOperands; ++k)
      off[k] += index * s.strides[k][d];
  }
}

// ---- Unary -------------------------------------------------------------
// The fn code is uniform across a launch, so the switch costs one branch
// that every thread takes the same way.

__device__ float unaryValue(int32_t fn, float x, float alpha) {
  switch (fn) {
  case ASRT_UNARY_NEG:
    return -x;
  case ASRT_UNARY_EXP:
    return expf(x);
  case ASRT_UNARY_LOG:
    return logf(x);
  case ASRT_UNARY_TANH:
    return tanhf(x);
  case ASRT_UNARY_SIGMOID:
    return sigmoidParts(x).s;
  case ASRT_UNARY_RSQRT:
    return 1.0f / sqrtf(x); // not rsqrtf: 2 ulp
  case ASRT_UNARY_SQRT:
    return sqrtf(x);
  case ASRT_UNARY_SIN:
    return sinf(x);
  case ASRT_UNARY_COS:
    return cosf(x);
  case ASRT_UNARY_SILU:
    return x * sigmoidParts(x).s;
  case ASRT_UNARY_GELU_TANH:
    return x * geluParts(x).s;
  case ASRT_UNARY_GELU_ERF:
    return 0.5f * x * erfcf(-x * kInvSqrt2);
  case ASRT_UNARY_POW:
    return powf(x, alpha);
  case ASRT_UNARY_ADD:
    return x + alpha;
  case ASRT_UNARY_MUL:
    return x * alpha;
  case ASRT_UNARY_RECIPROCAL:
    return 1.0f / x;
  case ASRT_UNARY_RELU:
    return x < 0.0f ? 0.0f : x; // NaN stays NaN
  case ASRT_UNARY_ABS:
    return fabsf(x);
  case ASRT_UNARY_ERF:
    return erff(x);
  }
  return NAN; // not reached: fn is checked on the host
}

/// dy * f'(x), as the CPU's withUnaryGradFn.
__device__ float unaryGradValue(int32_t fn, float g, float x, float alpha) {
  switch (fn) {
  case ASRT_UNARY_NEG:
    return -g;
  case ASRT_UNARY_EXP:
    return g * expf(x);
  case ASRT_UNARY_LOG:
    return g / x;
  case ASRT_UNARY_TANH: {
    float t = tanhf(x);
    return g * (1.0f - t * t);
  }
  case ASRT_UNARY_SIGMOID: {
    SigmoidParts p = sigmoidParts(x);
    return g * (p.s * p.oneMinusS);
  }
  case ASRT_UNARY_RSQRT: {
    float r = 1.0f / sqrtf(x);
    return g * (-0.5f * r / x);
  }
  case ASRT_UNARY_SQRT:
    return g * (0.5f / sqrtf(x));
  case ASRT_UNARY_SIN:
    return g * cosf(x);
  case ASRT_UNARY_COS:
    return g * -sinf(x);
  case ASRT_UNARY_SILU:
    return g * siluDerivative(x);
  case ASRT_UNARY_GELU_TANH:
    return g * geluDerivative(x);
  case ASRT_UNARY_GELU_ERF: {
    float cdf = 0.5f * erfcf(-x * kInvSqrt2);
    float xc = x != x ? x : fminf(fmaxf(x, -20.0f), 20.0f);
    float pdf = kInvSqrt2Pi * expf(-0.5f * xc * xc);
    return g * (cdf + xc * pdf);
  }
  case ASRT_UNARY_POW:
    return alpha == 0.0f ? 0.0f : g * (alpha * powf(x, alpha - 1.0f));
  case ASRT_UNARY_ADD:
    return g;
  case ASRT_UNARY_MUL:
    return g * alpha;
  case ASRT_UNARY_RECIPROCAL: {
    float r = 1.0f / x;
    return -g * (r * r);
  }
  case ASRT_UNARY_RELU:
    return x > 0.0f ? g : 0.0f;
  case ASRT_UNARY_ABS:
    return g * static_cast<float>((x > 0.0f) - (x < 0.0f));
  case ASRT_UNARY_ERF:
    return g * (k2OverSqrtPi * expf(-x * x));
  }
  return NAN;
}

// Element i is read before it is written: y may be x, dx may be dy or x.
template <typename T>
__global__ void unaryKernel(int32_t fn, const T *x, T *y, int64_t n,
                            float alpha) {
  for (int64_t i : gridThreads(n))
    store(y, i, unaryValue(fn, load(x, i), alpha));
}

template <typename T>
__global__ void unaryGradKernel(int32_t fn, const T *dy, const T *x, T *dx,
                                int64_t n, float alpha) {
  for (int64_t i : gridThreads(n))
    store(dx, i, unaryGradValue(fn, load(dy, i), load(x, i), alpha));
}

// ---- Binary, select, copy, fill ---------------------------------------

__device__ float binaryValue(int32_t fn, float a, float b) {
  switch (fn) {
  case ASRT_BINARY_ADD:
    return a + b;
  case ASRT_BINARY_SUB:
    return a - b;
  case ASRT_BINARY_MUL:
    return a * b;
  case ASRT_BINARY_DIV:
    return a / b;
  // NaN when either is (torch.maximum): not fmaxf, which drops a NaN.
  case ASRT_BINARY_MAX:
    return a > b || a != a ? a : b;
  case ASRT_BINARY_MIN:
    return a < b || a != a ? a : b;
  case ASRT_BINARY_POW:
    return powf(a, b);
  }
  return NAN;
}

__device__ bool compareValue(int32_t fn, float a, float b) {
  switch (fn) {
  case ASRT_BINARY_LT:
    return a < b;
  case ASRT_BINARY_LE:
    return a <= b;
  case ASRT_BINARY_GT:
    return a > b;
  case ASRT_BINARY_GE:
    return a >= b;
  case ASRT_BINARY_EQ:
    return a == b;
  case ASRT_BINARY_NE:
    return a != b;
  }
  return false;
}

template <typename T>
__global__ void binaryKernel(int32_t fn, const T *a, const T *b, T *y,
                             StridedSpace s) {
  for (int64_t i : gridThreads(s.count)) {
    int64_t off[kOperands];
    offsetsAt(s, i, off);
    store(y, i, binaryValue(fn, load(a, off[0]), load(b, off[1])));
  }
}

template <typename T>
__global__ void compareKernel(int32_t fn, const T *a, const T *b, uint8_t *y,
                              StridedSpace s) {
  for (int64_t i : gridThreads(s.count)) {
    int64_t off[kOperands];
    offsetsAt(s, i, off);
    y[i] = compareValue(fn, load(a, off[0]), load(b, off[1])) ? 1 : 0;
  }
}

/// y = cond ? a : b, the chosen element's bits.
template <typename T>
__global__ void selectKernel(const uint8_t *cond, const T *a, const T *b, T *y,
                             StridedSpace s) {
  for (int64_t i : gridThreads(s.count)) {
    int64_t off[kOperands];
    offsetsAt(s, i, off);
    y[i] = cond[off[0]] ? a[off[1]] : b[off[2]];
  }
}

/// y[o1] = x[o0] (bits), x and y already moved to their offsets.
template <typename T>
__global__ void copyStridedKernel(const T *x, T *y, StridedSpace s) {
  for (int64_t i : gridThreads(s.count)) {
    int64_t off[kOperands];
    offsetsAt(s, i, off);
    y[off[1]] = x[off[0]];
  }
}

template <typename T> __global__ void fillKernel(T *y, int64_t n, float value) {
  for (int64_t i : gridThreads(n))
    store(y, i, value);
}

/// An i32 fill: the value converted once, on the host (checked integral).
__global__ void fillIntKernel(int32_t *y, int64_t n, int32_t value) {
  for (int64_t i : gridThreads(n))
    y[i] = value;
}

// ---- Reduce ------------------------------------------------------------

/// Sums in double; MAX and MIN in float, NaN sticking once seen.
struct NanMax {
  __device__ float operator()(float a, float b) const {
    return b > a || b != b ? b : a;
  }
};
struct NanMin {
  __device__ float operator()(float a, float b) const {
    return b < a || b != b ? b : a;
  }
};

/// The final value of an output: the sum (SUM), the mean (AVG: NaN for an
/// empty reduction, 0 / 0) or the extremum.
__device__ __forceinline__ float
finishReduction(int32_t reduceOp, double sum, float extremum, int64_t count) {
  if (reduceOp == ASRT_REDUCE_SUM)
    return static_cast<float>(sum);
  if (reduceOp == ASRT_REDUCE_AVG)
    return static_cast<float>(sum / static_cast<double>(count));
  return extremum;
}

__device__ __forceinline__ float extremumIdentity(int32_t reduceOp) {
  return reduceOp == ASRT_REDUCE_MAX ? -INFINITY : INFINITY;
}

/// Accumulates the reduced elements of output `o` that `elements` gives
/// this thread (of [0, red.count)) into `sum` (SUM, AVG) or `extremum`
/// (MAX, MIN).
template <typename T, typename Elements>
__device__ __forceinline__ void
accumulateReduction(int32_t reduceOp, const T *x, const StridedSpace &out,
                    const StridedSpace &red, int64_t o, Elements elements,
                    double &sum, float &extremum) {
  const bool isSum = reduceOp == ASRT_REDUCE_SUM || reduceOp == ASRT_REDUCE_AVG;
  int64_t base[kOperands];
  offsetsAt(out, o, base);
  for (int64_t r : elements) {
    int64_t off[kOperands];
    offsetsAt(red, r, off);
    const float v = load(x, base[0] + off[0]);
    if (isSum)
      sum += v;
    else if (reduceOp == ASRT_REDUCE_MAX)
      extremum = NanMax{}(extremum, v);
    else
      extremum = NanMin{}(extremum, v);
  }
}

/// One thread per output, the reduced elements in row-major order: for
/// reductions too short to give a block each.
template <typename T>
__global__ void reduceThreadKernel(int32_t reduceOp, const T *x, T *y,
                                   StridedSpace out, StridedSpace red) {
  for (int64_t o : gridThreads(out.count)) {
    double sum = 0.0;
    float extremum = extremumIdentity(reduceOp);
    accumulateReduction(reduceOp, x, out, red, o,
                        Strided<int64_t>{0, red.count, 1}, sum, extremum);
    store(y, o, finishReduction(reduceOp, sum, extremum, red.count));
  }
}

/// One block of kRowThreads threads per output: thread t takes the reduced
/// elements t, t + kRowThreads, ..., and the block combines the threads'
/// results in a fixed order.
template <typename T>
__global__ void reduceBlockKernel(int32_t reduceOp, const T *x, T *y,
                                  StridedSpace out, StridedSpace red) {
  const bool isSum = reduceOp == ASRT_REDUCE_SUM || reduceOp == ASRT_REDUCE_AVG;
  for (int64_t o : gridBlocks(out.count)) {
    double sum = 0.0;
    float extremum = extremumIdentity(reduceOp);
    accumulateReduction(reduceOp, x, out, red, o, blockThreads(red.count), sum,
                        extremum);
    // Every thread of the block takes the same branch (reduceOp is
    // uniform), as blockReduce's barriers require.
    if (isSum)
      sum = blockSum(sum);
    else if (reduceOp == ASRT_REDUCE_MAX)
      extremum = blockReduce(extremum, NanMax{});
    else
      extremum = blockReduce(extremum, NanMin{});
    if (threadIdx.x == 0)
      store(y, o, finishReduction(reduceOp, sum, extremum, red.count));
  }
}

/// Reductions of at least this many elements get a block per output.
constexpr int64_t kBlockReduction = 1024;

// ---- Softmax -----------------------------------------------------------

/// The CPU's row softmax: the maximum (NaN skipped, then poisoning the
/// sum), exp(x - max) in float, their sum in double; y = e / sum, or
/// (x - max) - log(sum) for log_softmax. One block per row.
template <typename T>
__global__ void softmaxKernel(const T *x, T *y, int64_t rows, int64_t cols,
                              int32_t logSoftmax) {
  for (int64_t r : gridBlocks(rows)) {
    const T *row = x + r * cols;
    T *out = y + r * cols;
    float m = -INFINITY;
    for (int64_t j : blockThreads(cols)) {
      const float v = load(row, j);
      m = v > m ? v : m;
    }
    m = blockMax(m);
    double sum = 0.0;
    for (int64_t j : blockThreads(cols))
      sum += expf(load(row, j) - m);
    sum = blockSum(sum);
    if (logSoftmax) {
      const double lse = log(sum);
      for (int64_t j : blockThreads(cols))
        store(
            out, j,
            static_cast<float>((static_cast<double>(load(row, j)) - m) - lse));
    } else {
      for (int64_t j : blockThreads(cols))
        store(out, j,
              static_cast<float>(static_cast<double>(expf(load(row, j) - m)) /
                                 sum));
    }
  }
}

/// dx = y (dy - sum(dy y)), or dy - exp(y) sum(dy) for log_softmax; the
/// sums in double. One block per row.
template <typename T>
__global__ void softmaxGradKernel(const T *dy, const T *y, T *dx, int64_t rows,
                                  int64_t cols, int32_t logSoftmax) {
  for (int64_t r : gridBlocks(rows)) {
    const T *g = dy + r * cols, *p = y + r * cols;
    T *out = dx + r * cols;
    double sum = 0.0;
    for (int64_t j : blockThreads(cols))
      sum += logSoftmax ? static_cast<double>(load(g, j))
                        : static_cast<double>(load(g, j)) * load(p, j);
    sum = blockSum(sum);
    for (int64_t j : blockThreads(cols)) {
      const double gj = load(g, j), pj = load(p, j);
      const double result =
          logSoftmax ? gj - static_cast<double>(expf(load(p, j))) * sum
                     : pj * (gj - sum);
      store(out, j, static_cast<float>(result));
    }
  }
}

// ---- Dropout -------------------------------------------------------------
// A thread per Philox block of the whole tensor's index space (4 elements),
// `first` the whole-tensor index of x[0]: one draw of the rounds per 4
// elements, as on the CPU.

template <typename T>
__global__ void dropoutKernel(DropoutMask mask, const T *x, T *y, int64_t n,
                              uint64_t first, float scale) {
  const int64_t blocks =
      n == 0 ? 0 : int64_t((first + n - 1) / 4 - first / 4 + 1);
  for (int64_t b : gridThreads(blocks)) {
    uint64_t blockIndex = first / 4 + uint64_t(b);
    uint32_t words[4];
    mask.block(blockIndex, words);
    for (int w = 0; w < 4; ++w) {
      uint64_t index = blockIndex * 4 + w;
      if (index < first || index >= first + uint64_t(n))
        continue;
      int64_t i = int64_t(index - first);
      store(y, i, mask.keepsWord(words[w]) ? load(x, i) * scale : 0.0f);
    }
  }
}

} // namespace

void unary(cudaStream_t stream, int32_t dtype, int32_t fn, const void *x,
           void *y, int64_t n, float alpha) {
  const char *op = "unary";
  checkCount(op, "n", n);
  checkUnaryFn(op, fn);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    unaryKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        fn, static_cast<const T *>(x), static_cast<T *>(y), n, alpha);
  });
  checkLaunch(op);
}

void unaryGrad(cudaStream_t stream, int32_t dtype, int32_t fn, const void *dy,
               const void *x, void *dx, int64_t n, float alpha) {
  const char *op = "unary_grad";
  checkCount(op, "n", n);
  checkUnaryFn(op, fn);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    unaryGradKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        fn, static_cast<const T *>(dy), static_cast<const T *>(x),
        static_cast<T *>(dx), n, alpha);
  });
  checkLaunch(op);
}

void dropout(cudaStream_t stream, int32_t dtype, const void *x, void *y,
             int64_t n, int64_t rowElems, int64_t rowOffset, int64_t rankRows,
             int64_t batchRank, const DropoutMask &mask) {
  const char *op = "dropout";
  const uint64_t first = static_cast<uint64_t>(checkDropoutArgs(
      op, n, rowElems, rowOffset, rankRows, batchRank, mask.p));
  const float scale = 1.0f / (1.0f - mask.p);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    dropoutKernel<<<blocksFor(n / 4 + 2), kThreads, 0, stream>>>(
        mask, static_cast<const T *>(x), static_cast<T *>(y), n, first,
        scale);
  });
  checkLaunch(op);
}

void binary(cudaStream_t stream, int32_t dtype, int32_t fn, const void *a,
            const void *b, void *y, int32_t rank, const int64_t *dims,
            const int64_t *aStrides, const int64_t *bStrides) {
  const char *op = "binary";
  checkBinaryFn(op, fn);
  const StridedSpace s =
      coalescedSpace(op, "dims", rank, dims, {aStrides, bStrides});
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    if (s.count == 0)
      return;
    const T *lhs = static_cast<const T *>(a);
    const T *rhs = static_cast<const T *>(b);
    if (isComparison(fn))
      compareKernel<<<blocksFor(s.count), kThreads, 0, stream>>>(
          fn, lhs, rhs, static_cast<uint8_t *>(y), s);
    else
      binaryKernel<<<blocksFor(s.count), kThreads, 0, stream>>>(
          fn, lhs, rhs, static_cast<T *>(y), s);
  });
  checkLaunch(op);
}

void select(cudaStream_t stream, int32_t dtype, const uint8_t *cond,
            const void *a, const void *b, void *y, int32_t rank,
            const int64_t *dims, const int64_t *condStrides,
            const int64_t *aStrides, const int64_t *bStrides) {
  const char *op = "select";
  const StridedSpace s =
      coalescedSpace(op, "dims", rank, dims, {condStrides, aStrides, bStrides});
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    if (s.count == 0)
      return;
    selectKernel<<<blocksFor(s.count), kThreads, 0, stream>>>(
        cond, static_cast<const T *>(a), static_cast<const T *>(b),
        static_cast<T *>(y), s);
  });
  checkLaunch(op);
}

void reduce(cudaStream_t stream, int32_t dtype, int32_t reduceOp, const void *x,
            void *y, int32_t outRank, const int64_t *outDims,
            const int64_t *outStrides, int32_t redRank, const int64_t *redDims,
            const int64_t *redStrides) {
  const char *op = "reduce";
  checkReduceOp(op, reduceOp);
  const StridedSpace out =
      coalescedSpace(op, "out_dims", outRank, outDims, {outStrides});
  const StridedSpace red =
      coalescedSpace(op, "red_dims", redRank, redDims, {redStrides});
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    if (out.count == 0)
      return;
    const T *in = static_cast<const T *>(x);
    T *result = static_cast<T *>(y);
    if (red.count >= kBlockReduction)
      reduceBlockKernel<<<rowBlocksFor(out.count), kRowThreads, 0, stream>>>(
          reduceOp, in, result, out, red);
    else
      reduceThreadKernel<<<blocksFor(out.count), kThreads, 0, stream>>>(
          reduceOp, in, result, out, red);
  });
  checkLaunch(op);
}

void copyStrided(cudaStream_t stream, int32_t dtype, const void *x, void *y,
                 int32_t rank, const int64_t *dims, const int64_t *xStrides,
                 int64_t xOffset, const int64_t *yStrides, int64_t yOffset) {
  const char *op = "copy_strided";
  const StridedSpace s =
      coalescedSpace(op, "dims", rank, dims, {xStrides, yStrides});
  dispatchView(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    if (s.count == 0)
      return;
    copyStridedKernel<<<blocksFor(s.count), kThreads, 0, stream>>>(
        static_cast<const T *>(x) + xOffset, static_cast<T *>(y) + yOffset, s);
  });
  checkLaunch(op);
}

void fill(cudaStream_t stream, int32_t dtype, void *y, int64_t n, float value) {
  const char *op = "fill";
  checkCount(op, "n", n);
  if (dtype == ASRT_DTYPE_I32) {
    checkIntegralFill(op, value);
    fillIntKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<int32_t *>(y), n, static_cast<int32_t>(value));
    checkLaunch(op);
    return;
  }
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    fillKernel<<<blocksFor(n), kThreads, 0, stream>>>(static_cast<T *>(y), n,
                                                      value);
  });
  checkLaunch(op);
}

void softmax(cudaStream_t stream, int32_t dtype, const void *x, void *y,
             int64_t rows, int64_t cols, int32_t logSoftmax) {
  const char *op = "softmax";
  checkCount(op, "rows", rows);
  checkCount(op, "cols", cols);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    if (rows == 0 || cols == 0)
      return;
    softmaxKernel<<<rowBlocksFor(rows), kRowThreads, 0, stream>>>(
        static_cast<const T *>(x), static_cast<T *>(y), rows, cols, logSoftmax);
  });
  checkLaunch(op);
}

void softmaxGrad(cudaStream_t stream, int32_t dtype, const void *dy,
                 const void *y, void *dx, int64_t rows, int64_t cols,
                 int32_t logSoftmax) {
  const char *op = "softmax_grad";
  checkCount(op, "rows", rows);
  checkCount(op, "cols", cols);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    if (rows == 0 || cols == 0)
      return;
    softmaxGradKernel<<<rowBlocksFor(rows), kRowThreads, 0, stream>>>(
        static_cast<const T *>(dy), static_cast<const T *>(y),
        static_cast<T *>(dx), rows, cols, logSoftmax);
  });
  checkLaunch(op);
}

} // namespace autoshard::rt::cuda
