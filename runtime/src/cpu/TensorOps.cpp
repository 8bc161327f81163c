// The generic tensor kernels on the CPU (abi.h, "Generic tensor ops"):
// unary and binary functions, select, reductions, strided copies, fill and
// softmax, over any shape that dims and element strides describe.
//
// Every kernel splits its output into contiguous chunks (Parallel.h) and
// computes each output element in one chunk, through the same operations
// in the same order whatever the chunking: results do not depend on the
// number of threads. Sums accumulate in double, in the row-major order of
// the summed indices.
#include "Activation.h"
#include "Checks.h"
#include "Element.h"
#include "Parallel.h"
#include "Reduce.h"
#include "Scratch.h"

#include "core/ArgChecks.h"
#include "core/Context.h"
#include "memory/StridedSpace.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

using autoshard::rt::checkIntegralFill;
using autoshard::rt::checkBinaryFn;
using autoshard::rt::checkReduceOp;
using autoshard::rt::checkUnaryFn;
using autoshard::rt::coalescedSpace;
using autoshard::rt::fatal;
using autoshard::rt::isComparison;
using autoshard::rt::OpTimer;
using autoshard::rt::stridedOffsets;
using autoshard::rt::StridedSpace;
using namespace autoshard::rt::cpu;

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float k2OverSqrtPi = 1.12837916709551257f;

/// Calls body(pos, offsets, len) for each run of consecutive positions in
/// [begin, end) along the innermost dim of `s`: the elements at positions
/// pos .. pos + len - 1, operand k's at offsets[k] + j * s.innerStride(k).
/// The position is also the element's index in a dense row-major output.
template <typename Body>
void forEachRun(const StridedSpace &s, int64_t begin, int64_t end,
                Body &&body) {
  if (begin >= end)
    return;
  int64_t offsets[StridedSpace::kMaxOperands];
  stridedOffsets(s, begin, offsets);
  if (s.rank == 0) {
    body(begin, static_cast<const int64_t *>(offsets), int64_t(1));
    return;
  }
  const int r = s.rank;
  int64_t index[ASRT_MAX_RANK];
  int64_t rest = begin;
  for (int d = r - 1; d >= 0; --d) {
    index[d] = rest % s.dims[d];
    rest /= s.dims[d];
  }
  int64_t pos = begin;
  for (;;) {
    int64_t len = std::min(s.dims[r - 1] - index[r - 1], end - pos);
    body(pos, static_cast<const int64_t *>(offsets), len);
    pos += len;
    if (pos >= end)
      return;
    // The run reached the end of the innermost dim: back to its index 0,
    // then carry into the outer dims.
    for (int k = 0; k < s.operands; ++k)
      offsets[k] -= index[r - 1] * s.strides[k][r - 1];
    index[r - 1] = 0;
    for (int d = r - 2; d >= 0; --d) {
      ++index[d];
      for (int k = 0; k < s.operands; ++k)
        offsets[k] += s.strides[k][d];
      if (index[d] < s.dims[d])
        break;
      for (int k = 0; k < s.operands; ++k)
        offsets[k] -= s.dims[d] * s.strides[k][d];
      index[d] = 0;
    }
  }
}

// ---- Unary -------------------------------------------------------------

using Vector = std::true_type;
using Scalar = std::false_type;

/// Calls use(f, vectorizes) with f(x) the function `fn` of asrt_unary (fn
/// checked). Each case is its own lambda type, so every loop gets its
/// function inlined; `vectorizes` (Vector or Scalar) says whether a loop of
/// it can become vector code (fastExp, sqrt under -fno-math-errno, plain
/// arithmetic) or calls libm (log, tanh, sin, erfc, pow), which only the
/// former's loops are marked for.
template <typename Use> void withUnaryFn(int32_t fn, float alpha, Use &&use) {
  switch (fn) {
  case ASRT_UNARY_NEG:
    return use([](float x) { return -x; }, Vector{});
  case ASRT_UNARY_EXP:
    return use([](float x) { return fastExp(x); }, Vector{});
  case ASRT_UNARY_LOG:
    return use([](float x) { return std::log(x); }, Scalar{});
  case ASRT_UNARY_TANH:
    return use([](float x) { return std::tanh(x); }, Scalar{});
  case ASRT_UNARY_SIGMOID:
    return use([](float x) { return sigmoidParts(x).s; }, Vector{});
  case ASRT_UNARY_RSQRT:
    return use([](float x) { return 1.0f / std::sqrt(x); }, Vector{});
  case ASRT_UNARY_SQRT:
    return use([](float x) { return std::sqrt(x); }, Vector{});
  case ASRT_UNARY_SIN:
    return use([](float x) { return std::sin(x); }, Scalar{});
  case ASRT_UNARY_COS:
    return use([](float x) { return std::cos(x); }, Scalar{});
  case ASRT_UNARY_SILU:
    // As asrt_swiglu_fwd's gate, bit for bit.
    return use([](float x) { return x * sigmoidParts(x).s; }, Vector{});
  case ASRT_UNARY_GELU_TANH:
    // As asrt_gelu_fwd, bit for bit.
    return use([](float x) { return x * geluParts(x).s; }, Vector{});
  case ASRT_UNARY_GELU_ERF:
    // x Phi(x) with Phi(x) = erfc(-x / sqrt 2) / 2: no cancellation in the
    // left tail, where 1 + erf(x / sqrt 2) would lose every digit.
    return use([](float x) { return 0.5f * x * std::erfc(-x * kInvSqrt2); },
               Scalar{});
  case ASRT_UNARY_POW:
    // Squares and cubes as products, as torch's pow kernel computes them:
    // a vector loop, where std::pow is a call per element (GELU's cube).
    if (alpha == 2.0f)
      return use([](float x) { return x * x; }, Vector{});
    if (alpha == 3.0f)
      return use([](float x) { return x * x * x; }, Vector{});
    return use([alpha](float x) { return std::pow(x, alpha); }, Scalar{});
  case ASRT_UNARY_ADD:
    return use([alpha](float x) { return x + alpha; }, Vector{});
  case ASRT_UNARY_MUL:
    return use([alpha](float x) { return x * alpha; }, Vector{});
  case ASRT_UNARY_RECIPROCAL:
    return use([](float x) { return 1.0f / x; }, Vector{});
  case ASRT_UNARY_RELU:
    // NaN stays NaN, as torch.relu (and asrt_relu_fwd).
    return use([](float x) { return x < 0.0f ? 0.0f : x; }, Vector{});
  case ASRT_UNARY_ABS:
    return use([](float x) { return std::fabs(x); }, Vector{});
  case ASRT_UNARY_ERF:
    return use([](float x) { return std::erf(x); }, Scalar{});
  }
}

/// Calls use(g, vectorizes) with g(dy, x) = dy * f'(x) for the function
/// `fn`.
template <typename Use>
void withUnaryGradFn(int32_t fn, float alpha, Use &&use) {
  switch (fn) {
  case ASRT_UNARY_NEG:
    return use([](float g, float) { return -g; }, Vector{});
  case ASRT_UNARY_EXP:
    return use([](float g, float x) { return g * fastExp(x); }, Vector{});
  case ASRT_UNARY_LOG:
    return use([](float g, float x) { return g / x; }, Vector{});
  case ASRT_UNARY_TANH:
    return use(
        [](float g, float x) {
          float t = std::tanh(x);
          return g * (1.0f - t * t);
        },
        Scalar{});
  case ASRT_UNARY_SIGMOID:
    return use(
        [](float g, float x) {
          SigmoidParts p = sigmoidParts(x);
          return g * (p.s * p.oneMinusS);
        },
        Vector{});
  case ASRT_UNARY_RSQRT:
    // d/dx x^(-1/2) = -x^(-1/2) / (2x).
    return use(
        [](float g, float x) {
          float r = 1.0f / std::sqrt(x);
          return g * (-0.5f * r / x);
        },
        Vector{});
  case ASRT_UNARY_SQRT:
    return use([](float g, float x) { return g * (0.5f / std::sqrt(x)); },
               Vector{});
  case ASRT_UNARY_SIN:
    return use([](float g, float x) { return g * std::cos(x); }, Scalar{});
  case ASRT_UNARY_COS:
    return use([](float g, float x) { return g * -std::sin(x); }, Scalar{});
  case ASRT_UNARY_SILU:
    return use([](float g, float x) { return g * siluDerivative(x); },
               Vector{});
  case ASRT_UNARY_GELU_TANH:
    // As asrt_gelu_grad, bit for bit.
    return use([](float g, float x) { return g * geluDerivative(x); },
               Vector{});
  case ASRT_UNARY_GELU_ERF:
    // Phi(x) + x phi(x); beyond |x| = 20 phi is 0 in f32, and the clamp
    // keeps an infinite x from making 0 * inf.
    return use(
        [](float g, float x) {
          float cdf = 0.5f * std::erfc(-x * kInvSqrt2);
          float xc = std::clamp(x, -20.0f, 20.0f);
          float pdf = kInvSqrt2Pi * std::exp(-0.5f * xc * xc);
          return g * (cdf + xc * pdf);
        },
        Scalar{});
  case ASRT_UNARY_POW:
    // torch's pow_backward, dy * (alpha * x^(alpha - 1)), with x^1 and x^2
    // as the forward's products.
    if (alpha == 2.0f)
      return use([](float g, float x) { return g * (2.0f * x); }, Vector{});
    if (alpha == 3.0f)
      return use([](float g, float x) { return g * (3.0f * (x * x)); },
                 Vector{});
    // 0 for the exponent 0 (also where x^-1 is inf).
    return use(
        [alpha](float g, float x) {
          return alpha == 0.0f ? 0.0f : g * (alpha * std::pow(x, alpha - 1.0f));
        },
        Scalar{});
  case ASRT_UNARY_ADD:
    return use([](float g, float) { return g; }, Vector{});
  case ASRT_UNARY_MUL:
    return use([alpha](float g, float) { return g * alpha; }, Vector{});
  case ASRT_UNARY_RECIPROCAL:
    return use(
        [](float g, float x) {
          float r = 1.0f / x;
          return -g * (r * r);
        },
        Vector{});
  case ASRT_UNARY_RELU:
    // As asrt_relu_grad: dy where x > 0, else 0 (a select, so that an
    // infinite dy does not become NaN where x <= 0).
    return use([](float g, float x) { return x > 0.0f ? g : 0.0f; }, Vector{});
  case ASRT_UNARY_ABS:
    // dy * sign(x), sign(0) = 0 (and sign(NaN) = 0, as torch.sign).
    return use(
        [](float g, float x) {
          return g * static_cast<float>((x > 0.0f) - (x < 0.0f));
        },
        Vector{});
  case ASRT_UNARY_ERF:
    // 2/sqrt(pi) exp(-x^2); exp underflows to 0 for |x| > ~10, inf included.
    return use(
        [](float g, float x) { return g * (k2OverSqrtPi * std::exp(-x * x)); },
        Scalar{});
  }
}

// ---- Binary ------------------------------------------------------------

/// Calls use(f) with f(a, b) the function `fn` of asrt_binary: a float for
/// the arithmetic ones, a bool for the comparisons (IEEE: false for NaN,
/// except NE).
template <typename Use> void withBinaryFn(int32_t fn, Use &&use) {
  switch (fn) {
  case ASRT_BINARY_ADD:
    return use([](float a, float b) { return a + b; });
  case ASRT_BINARY_SUB:
    return use([](float a, float b) { return a - b; });
  case ASRT_BINARY_MUL:
    return use([](float a, float b) { return a * b; });
  case ASRT_BINARY_DIV:
    return use([](float a, float b) { return a / b; });
  case ASRT_BINARY_MAX:
    // NaN when either is (torch.maximum); a comparison alone would drop
    // a NaN b.
    return use([](float a, float b) { return a > b || a != a ? a : b; });
  case ASRT_BINARY_MIN:
    return use([](float a, float b) { return a < b || a != a ? a : b; });
  case ASRT_BINARY_POW:
    return use([](float a, float b) { return std::pow(a, b); });
  case ASRT_BINARY_LT:
    return use([](float a, float b) { return a < b; });
  case ASRT_BINARY_LE:
    return use([](float a, float b) { return a <= b; });
  case ASRT_BINARY_GT:
    return use([](float a, float b) { return a > b; });
  case ASRT_BINARY_GE:
    return use([](float a, float b) { return a >= b; });
  case ASRT_BINARY_EQ:
    return use([](float a, float b) { return a == b; });
  case ASRT_BINARY_NE:
    return use([](float a, float b) { return a != b; });
  }
}

/// Stores a result: rounded to T, or as a mask byte.
template <typename T> inline void put(T *p, int64_t i, float v) {
  store(p, i, v);
}
inline void put(uint8_t *p, int64_t i, bool v) { p[i] = v ? 1 : 0; }

/// y[j] = f(a[j * sa], b[j * sb]) for j < len, with the unit and zero
/// strides of dense and broadcast operands as loops of their own, which
/// vectorize.
template <typename A, typename B, typename Out, typename F>
void binaryRun(const A *a, int64_t sa, const B *b, int64_t sb, Out *y,
               int64_t len, const F &f) {
  if (sa == 1 && sb == 1) {
    for (int64_t j = 0; j < len; ++j)
      put(y, j, f(load(a, j), load(b, j)));
  } else if (sa == 1 && sb == 0) {
    const float bv = load(b, 0);
    for (int64_t j = 0; j < len; ++j)
      put(y, j, f(load(a, j), bv));
  } else if (sa == 0 && sb == 1) {
    const float av = load(a, 0);
    for (int64_t j = 0; j < len; ++j)
      put(y, j, f(av, load(b, j)));
  } else {
    for (int64_t j = 0; j < len; ++j)
      put(y, j, f(load(a, j * sa), load(b, j * sb)));
  }
}

// ---- Select ------------------------------------------------------------

/// Calls use(stride) with a stride of 0 or 1 as a compile-time constant,
/// any other as itself: a loop over dense and broadcast operands then
/// indexes them as a vector loop can.
template <typename Use> void withStride(int64_t stride, Use &&use) {
  if (stride == 1)
    use(std::integral_constant<int64_t, 1>{});
  else if (stride == 0)
    use(std::integral_constant<int64_t, 0>{});
  else
    use(stride);
}

/// y[j] = c[j * sc] ? a[j * sa] : b[j * sb] for j < len: the chosen
/// element's bits, not a rounding of them. Both operands are read for
/// every j (each covers the whole space), so that the choice is a blend
/// and the loop vectorizes.
template <typename T, typename SC, typename SA, typename SB>
void selectRun(const uint8_t *c, SC sc, const T *a, SA sa, const T *b, SB sb,
               T *y, int64_t len) {
  for (int64_t j = 0; j < len; ++j) {
    const T va = a[j * sa], vb = b[j * sb];
    y[j] = c[j * sc] ? va : vb;
  }
}

// ---- Copy --------------------------------------------------------------

/// The side of a transpose's square tiles: 32 rows of 32 elements touch 32
/// cache lines on the strided side, which stay in L1 while the tile's
/// other elements fill them.
constexpr int64_t kTransposeTile = 32;

/// A copy whose two innermost dims are transposed (one operand steps by 1
/// along the inner dim, the other along the one outside it), in tiles:
/// copied in runs of the inner dim, the strided side would touch a cache
/// line, and at large strides a page, per element. Each element is copied
/// once, so any order gives the same bytes. Returns false, copying
/// nothing, when `s` is not such a transpose or too small to gain.
template <typename T>
bool copyTransposeInTiles(asrt_context *ctx, const StridedSpace &s, const T *in,
                          T *out) {
  const int r = s.rank;
  if (r < 2)
    return false;
  const int64_t rows = s.dims[r - 2], cols = s.dims[r - 1];
  const int64_t xr = s.strides[0][r - 2], xc = s.strides[0][r - 1];
  const int64_t yr = s.strides[1][r - 2], yc = s.strides[1][r - 1];
  const bool transposed =
      (xc == 1 && yr == 1 && yc != 1) || (yc == 1 && xr == 1 && xc != 1);
  if (!transposed || rows < kTransposeTile || cols < kTransposeTile)
    return false;
  const int64_t rowTiles = (rows + kTransposeTile - 1) / kTransposeTile;
  const int64_t batches = s.count / (rows * cols);
  // An item is one band of kTransposeTile rows of one batch.
  forEachChunk(ctx, batches * rowTiles, kTransposeTile * cols,
               [&](int64_t begin, int64_t end) {
                 for (int64_t item = begin; item < end; ++item) {
                   int64_t batch = item / rowTiles;
                   const int64_t i0 = (item % rowTiles) * kTransposeTile;
                   const int64_t i1 = std::min(rows, i0 + kTransposeTile);
                   int64_t ox = 0, oy = 0;
                   for (int d = r - 3; d >= 0; --d) {
                     const int64_t index = batch % s.dims[d];
                     batch /= s.dims[d];
                     ox += index * s.strides[0][d];
                     oy += index * s.strides[1][d];
                   }
                   for (int64_t j0 = 0; j0 < cols; j0 += kTransposeTile) {
                     const int64_t j1 = std::min(cols, j0 + kTransposeTile);
                     for (int64_t i = i0; i < i1; ++i) {
                       const T *px = in + ox + i * xr;
                       T *py = out + oy + i * yr;
                       for (int64_t j = j0; j < j1; ++j)
                         py[j * yc] = px[j * xc];
                     }
                   }
                 }
               });
  return true;
}

// ---- Reduce ------------------------------------------------------------

/// Outputs reduced together: one pass over the reduced space adds each
/// reduced element into up to this many accumulators, which keeps
/// reductions over outer dims (column sums) reading whole cache lines.
constexpr int64_t kReduceBlock = 64;

/// y[j] for j < width: the reduction over `red` of x[j * so + r], each
/// output's elements visited in the row-major order of the reduced
/// indices, whatever the block.
template <typename T>
void reduceBlock(int32_t reduceOp, const T *x, int64_t so, int64_t width,
                 const StridedSpace &red, T *y) {
  const int64_t sr = red.innerStride(0);
  if (reduceOp == ASRT_REDUCE_SUM || reduceOp == ASRT_REDUCE_AVG) {
    double acc[kReduceBlock] = {};
    forEachRun(red, 0, red.count,
               [&](int64_t, const int64_t *off, int64_t len) {
                 for (int64_t r = 0; r < len; ++r) {
                   const T *xr = x + off[0] + r * sr;
                   for (int64_t j = 0; j < width; ++j)
                     acc[j] += load(xr, j * so);
                 }
               });
    // AVG of an empty reduction: 0 / 0, NaN.
    const double count = static_cast<double>(red.count);
    for (int64_t j = 0; j < width; ++j)
      store(y, j,
            static_cast<float>(reduceOp == ASRT_REDUCE_SUM ? acc[j]
                                                           : acc[j] / count));
    return;
  }
  const bool isMax = reduceOp == ASRT_REDUCE_MAX;
  float acc[kReduceBlock];
  std::fill(acc, acc + width,
            isMax ? -std::numeric_limits<float>::infinity()
                  : std::numeric_limits<float>::infinity());
  // A NaN element replaces the result and no later comparison with it
  // holds: NaN propagates.
  forEachRun(red, 0, red.count, [&](int64_t, const int64_t *off, int64_t len) {
    for (int64_t r = 0; r < len; ++r) {
      const T *xr = x + off[0] + r * sr;
      if (isMax)
        for (int64_t j = 0; j < width; ++j) {
          float v = load(xr, j * so);
          acc[j] = v > acc[j] || v != v ? v : acc[j];
        }
      else
        for (int64_t j = 0; j < width; ++j) {
          float v = load(xr, j * so);
          acc[j] = v < acc[j] || v != v ? v : acc[j];
        }
    }
  });
  for (int64_t j = 0; j < width; ++j)
    store(y, j, acc[j]);
}

} // namespace

extern "C" void asrt_unary(asrt_context *ctx, int32_t dtype, int32_t fn,
                           const void *x, void *y, int64_t n, float alpha) {
  OpTimer timer(ctx, "unary");
  const char *op = "unary";
  checkCount(op, "n", n);
  checkUnaryFn(op, fn);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x);
    T *out = static_cast<T *>(y);
    withUnaryFn(fn, alpha, [&](auto f, auto vectorizes) {
      forEachChunk(ctx, n, 1, [&](int64_t begin, int64_t end) {
        // Element i is read before it is written: y may be x.
        if constexpr (decltype(vectorizes)::value) {
          ASRT_INDEPENDENT_ITERATIONS
          for (int64_t i = begin; i < end; ++i)
            store(out, i, f(load(in, i)));
        } else {
          for (int64_t i = begin; i < end; ++i)
            store(out, i, f(load(in, i)));
        }
      });
    });
  });
}

extern "C" void asrt_unary_grad(asrt_context *ctx, int32_t dtype, int32_t fn,
                                const void *dy, const void *x, void *dx,
                                int64_t n, float alpha) {
  OpTimer timer(ctx, "unary_grad");
  const char *op = "unary_grad";
  checkCount(op, "n", n);
  checkUnaryFn(op, fn);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *g = static_cast<const T *>(dy);
    const T *in = static_cast<const T *>(x);
    T *out = static_cast<T *>(dx);
    withUnaryGradFn(fn, alpha, [&](auto f, auto vectorizes) {
      forEachChunk(ctx, n, 1, [&](int64_t begin, int64_t end) {
        // dx may be dy or x: both are read before element i is written.
        if constexpr (decltype(vectorizes)::value) {
          ASRT_INDEPENDENT_ITERATIONS
          for (int64_t i = begin; i < end; ++i)
            store(out, i, f(load(g, i), load(in, i)));
        } else {
          for (int64_t i = begin; i < end; ++i)
            store(out, i, f(load(g, i), load(in, i)));
        }
      });
    });
  });
}

extern "C" void asrt_binary(asrt_context *ctx, int32_t dtype, int32_t fn,
                            const void *a, const void *b, void *y, int32_t rank,
                            const int64_t *dims, const int64_t *a_strides,
                            const int64_t *b_strides) {
  OpTimer timer(ctx, "binary");
  const char *op = "binary";
  checkBinaryFn(op, fn);
  const StridedSpace s =
      coalescedSpace(op, "dims", rank, dims, {a_strides, b_strides});
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *lhs = static_cast<const T *>(a);
    const T *rhs = static_cast<const T *>(b);
    withBinaryFn(fn, [&](auto f) {
      using R = decltype(f(0.0f, 0.0f));
      using Out = std::conditional_t<std::is_same_v<R, bool>, uint8_t, T>;
      Out *out = static_cast<Out *>(y);
      forEachChunk(ctx, s.count, 1, [&](int64_t begin, int64_t end) {
        forEachRun(s, begin, end,
                   [&](int64_t pos, const int64_t *off, int64_t len) {
                     binaryRun(lhs + off[0], s.innerStride(0), rhs + off[1],
                               s.innerStride(1), out + pos, len, f);
                   });
      });
    });
  });
}

extern "C" void asrt_select(asrt_context *ctx, int32_t dtype,
                            const uint8_t *cond, const void *a, const void *b,
                            void *y, int32_t rank, const int64_t *dims,
                            const int64_t *cond_strides,
                            const int64_t *a_strides,
                            const int64_t *b_strides) {
  OpTimer timer(ctx, "select");
  const char *op = "select";
  const StridedSpace s = coalescedSpace(op, "dims", rank, dims,
                                        {cond_strides, a_strides, b_strides});
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *lhs = static_cast<const T *>(a);
    const T *rhs = static_cast<const T *>(b);
    T *out = static_cast<T *>(y);
    const int64_t sc = s.innerStride(0), sa = s.innerStride(1),
                  sb = s.innerStride(2);
    forEachChunk(ctx, s.count, 1, [&](int64_t begin, int64_t end) {
      forEachRun(s, begin, end,
                 [&](int64_t pos, const int64_t *off, int64_t len) {
                   withStride(sc, [&](auto c) {
                     withStride(sa, [&](auto a) {
                       withStride(sb, [&](auto b) {
                         selectRun(cond + off[0], c, lhs + off[1], a,
                                   rhs + off[2], b, out + pos, len);
                       });
                     });
                   });
                 });
    });
  });
}

extern "C" void asrt_reduce(asrt_context *ctx, int32_t dtype, int32_t reduce_op,
                            const void *x, void *y, int32_t out_rank,
                            const int64_t *out_dims, const int64_t *out_strides,
                            int32_t red_rank, const int64_t *red_dims,
                            const int64_t *red_strides) {
  OpTimer timer(ctx, "reduce");
  const char *op = "reduce";
  checkReduceOp(op, reduce_op);
  const StridedSpace out =
      coalescedSpace(op, "out_dims", out_rank, out_dims, {out_strides});
  const StridedSpace red =
      coalescedSpace(op, "red_dims", red_rank, red_dims, {red_strides});
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x);
    T *result = static_cast<T *>(y);
    const int64_t so = out.innerStride(0);
    forEachChunk(ctx, out.count, red.count, [&](int64_t begin, int64_t end) {
      forEachRun(out, begin, end,
                 [&](int64_t pos, const int64_t *off, int64_t len) {
                   for (int64_t j = 0; j < len; j += kReduceBlock)
                     reduceBlock(reduce_op, in + off[0] + j * so, so,
                                 std::min(kReduceBlock, len - j), red,
                                 result + pos + j);
                 });
    });
  });
}

extern "C" void asrt_copy_strided(asrt_context *ctx, int32_t dtype,
                                  const void *x, void *y, int32_t rank,
                                  const int64_t *dims, const int64_t *x_strides,
                                  int64_t x_offset, const int64_t *y_strides,
                                  int64_t y_offset) {
  OpTimer timer(ctx, "copy_strided");
  const char *op = "copy_strided";
  const StridedSpace s =
      coalescedSpace(op, "dims", rank, dims, {x_strides, y_strides});
  dispatchViewDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x) + x_offset;
    T *out = static_cast<T *>(y) + y_offset;
    if (copyTransposeInTiles(ctx, s, in, out))
      return;
    const int64_t sx = s.innerStride(0), sy = s.innerStride(1);
    forEachChunk(ctx, s.count, 1, [&](int64_t begin, int64_t end) {
      forEachRun(s, begin, end, [&](int64_t, const int64_t *off, int64_t len) {
        const T *px = in + off[0];
        T *py = out + off[1];
        if (sx == 1 && sy == 1)
          std::memcpy(py, px, static_cast<size_t>(len) * sizeof(T));
        else
          for (int64_t j = 0; j < len; ++j)
            py[j * sy] = px[j * sx];
      });
    });
  });
}

extern "C" void asrt_fill(asrt_context *ctx, int32_t dtype, void *y, int64_t n,
                          float value) {
  OpTimer timer(ctx, "fill");
  const char *op = "fill";
  checkCount(op, "n", n);
  if (dtype == ASRT_DTYPE_I32)
    checkIntegralFill(op, value);
  dispatchViewDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    T *out = static_cast<T *>(y);
    T v;
    if constexpr (std::is_same_v<T, int32_t>)
      v = static_cast<int32_t>(value); // exact: checked above
    else
      store(&v, 0, value); // rounded once
    forEachChunk(ctx, n, 1, [&](int64_t begin, int64_t end) {
      std::fill(out + begin, out + end, v);
    });
  });
}

extern "C" void asrt_softmax(asrt_context *ctx, int32_t dtype, const void *x,
                             void *y, int64_t rows, int64_t cols, int32_t log) {
  OpTimer timer(ctx, "softmax");
  const char *op = "softmax";
  checkCount(op, "rows", rows);
  checkCount(op, "cols", cols);
  if (cols == 0)
    return; // rows of no element: nothing to write
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x);
    T *out = static_cast<T *>(y);
    forEachChunk(ctx, rows, cols, [&](int64_t begin, int64_t end) {
      // A frame per chunk: each thread has its own scratch arena.
      ScratchFrame scratch(op);
      float *row = scratch.take<float>(cols);
      float *e = scratch.take<float>(cols);
      for (int64_t r = begin; r < end; ++r) {
        loadRow(in + r * cols, cols, row);
        // The maximum skips NaN, which then poisons the sum (Reduce.h): a
        // row with a NaN is NaN, as in torch.
        const float m = rowMaximum(row, cols);
        for (int64_t j = 0; j < cols; ++j)
          e[j] = fastExp(row[j] - m);
        const double sum = rowSumDouble(e, cols);
        T *yr = out + r * cols;
        if (log) {
          const double lse = std::log(sum);
          for (int64_t j = 0; j < cols; ++j)
            store(yr, j, static_cast<float>((double(row[j]) - m) - lse));
        } else {
          for (int64_t j = 0; j < cols; ++j)
            store(yr, j, static_cast<float>(e[j] / sum));
        }
      }
    });
  });
}

extern "C" void asrt_softmax_grad(asrt_context *ctx, int32_t dtype,
                                  const void *dy, const void *y, void *dx,
                                  int64_t rows, int64_t cols, int32_t log) {
  OpTimer timer(ctx, "softmax_grad");
  const char *op = "softmax_grad";
  checkCount(op, "rows", rows);
  checkCount(op, "cols", cols);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *g = static_cast<const T *>(dy);
    const T *p = static_cast<const T *>(y);
    T *out = static_cast<T *>(dx);
    // In double: dy - sum(dy y) cancels where the gradient is flat.
    forEachChunk(ctx, rows, cols, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T *gr = g + r * cols, *pr = p + r * cols;
        T *dr = out + r * cols;
        double sum = 0.0;
        if (log) {
          // dx = dy - exp(y) sum(dy)
          for (int64_t j = 0; j < cols; ++j)
            sum += load(gr, j);
          for (int64_t j = 0; j < cols; ++j)
            store(dr, j,
                  static_cast<float>(double(load(gr, j)) -
                                     double(fastExp(load(pr, j))) * sum));
        } else {
          // dx = y (dy - sum(dy y))
          for (int64_t j = 0; j < cols; ++j)
            sum += double(load(gr, j)) * double(load(pr, j));
          for (int64_t j = 0; j < cols; ++j)
            store(dr, j,
                  static_cast<float>(double(load(pr, j)) *
                                     (double(load(gr, j)) - sum)));
        }
      }
    });
  });
}
