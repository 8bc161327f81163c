// Tests of the CPU's generic tensor kernels against double-precision loops.
#include "TestUtil.h"

#include "autoshard/rt/abi.h"

#include <cstring>
#include <functional>

namespace autoshard::rt::test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr float kNaNf = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

using Dims = std::vector<int64_t>;

/// Calls fn(position, index) for every index of `dims`, row-major.
void forEachIndex(const Dims &dims,
                  const std::function<void(int64_t, const Dims &)> &fn) {
  int64_t count = 1;
  for (int64_t d : dims)
    count *= d;
  Dims index(dims.size(), 0);
  for (int64_t pos = 0; pos < count; ++pos) {
    int64_t rest = pos;
    for (size_t d = dims.size(); d-- > 0;) {
      index[d] = rest % dims[d];
      rest /= dims[d];
    }
    fn(pos, index);
  }
}

int64_t offsetOf(const Dims &index, const Dims &strides) {
  int64_t offset = 0;
  for (size_t d = 0; d < index.size(); ++d)
    offset += index[d] * strides[d];
  return offset;
}

int64_t countOf(const Dims &dims) {
  int64_t count = 1;
  for (int64_t d : dims)
    count *= d;
  return count;
}

/// Element-by-element: both NaN, or within rtol * |expected| + atol.
::testing::AssertionResult nanAwareNear(const std::vector<float> &actual,
                                        const std::vector<double> &expected,
                                        double rtol, double atol) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << "size mismatch";
  for (size_t i = 0; i < actual.size(); ++i) {
    bool ok = std::isnan(expected[i])
                  ? std::isnan(actual[i])
                  : (expected[i] == actual[i] ||
                     std::fabs(actual[i] - expected[i]) <=
                         rtol * std::fabs(expected[i]) + atol);
    if (!ok)
      return ::testing::AssertionFailure()
             << "[" << i << "] actual " << actual[i] << ", expected "
             << expected[i];
  }
  return ::testing::AssertionSuccess();
}

// ---- Unary -------------------------------------------------------------

constexpr float kAlpha = 2.5f;

double sigmoidRef(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double geluTanhRef(double x) {
  return 0.5 * x *
         (1.0 + std::tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}
double phiRef(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double pdfRef(double x) {
  return std::exp(-0.5 * x * x) / std::sqrt(2.0 * 3.14159265358979323846);
}

/// f(x) as abi.h defines it, in double.
double unaryRef(int32_t fn, double x, double alpha) {
  switch (fn) {
  case ASRT_UNARY_NEG:
    return -x;
  case ASRT_UNARY_EXP:
    return std::exp(x);
  case ASRT_UNARY_LOG:
    return std::log(x);
  case ASRT_UNARY_TANH:
    return std::tanh(x);
  case ASRT_UNARY_SIGMOID:
    return sigmoidRef(x);
  case ASRT_UNARY_RSQRT:
    return 1.0 / std::sqrt(x);
  case ASRT_UNARY_SQRT:
    return std::sqrt(x);
  case ASRT_UNARY_SIN:
    return std::sin(x);
  case ASRT_UNARY_COS:
    return std::cos(x);
  case ASRT_UNARY_SILU:
    return x * sigmoidRef(x);
  case ASRT_UNARY_GELU_TANH:
    return geluTanhRef(x);
  case ASRT_UNARY_GELU_ERF:
    return x * phiRef(x);
  case ASRT_UNARY_POW:
    return std::pow(x, alpha);
  case ASRT_UNARY_ADD:
    return x + alpha;
  case ASRT_UNARY_MUL:
    return x * alpha;
  case ASRT_UNARY_RECIPROCAL:
    return 1.0 / x;
  case ASRT_UNARY_RELU:
    return x > 0 ? x : 0.0;
  case ASRT_UNARY_ABS:
    return std::fabs(x);
  case ASRT_UNARY_ERF:
    return std::erf(x);
  }
  return kNaN;
}

/// f'(x), differentiated by hand.
double unaryDerivativeRef(int32_t fn, double x, double alpha) {
  switch (fn) {
  case ASRT_UNARY_NEG:
    return -1.0;
  case ASRT_UNARY_EXP:
    return std::exp(x);
  case ASRT_UNARY_LOG:
    return 1.0 / x;
  case ASRT_UNARY_TANH:
    return 1.0 - std::tanh(x) * std::tanh(x);
  case ASRT_UNARY_SIGMOID:
    return sigmoidRef(x) * (1.0 - sigmoidRef(x));
  case ASRT_UNARY_RSQRT:
    return -0.5 * std::pow(x, -1.5);
  case ASRT_UNARY_SQRT:
    return 0.5 / std::sqrt(x);
  case ASRT_UNARY_SIN:
    return std::cos(x);
  case ASRT_UNARY_COS:
    return -std::sin(x);
  case ASRT_UNARY_SILU: {
    double s = sigmoidRef(x);
    return s + x * s * (1.0 - s);
  }
  case ASRT_UNARY_GELU_TANH: {
    constexpr double c = 0.79788456080286535588;
    double t = std::tanh(c * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) +
           0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
  }
  case ASRT_UNARY_GELU_ERF:
    return phiRef(x) + x * pdfRef(x);
  case ASRT_UNARY_POW:
    return alpha * std::pow(x, alpha - 1.0);
  case ASRT_UNARY_ADD:
    return 1.0;
  case ASRT_UNARY_MUL:
    return alpha;
  case ASRT_UNARY_RECIPROCAL:
    return -1.0 / (x * x);
  case ASRT_UNARY_RELU:
    return x > 0 ? 1.0 : 0.0;
  case ASRT_UNARY_ABS:
    return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
  case ASRT_UNARY_ERF:
    return 2.0 / std::sqrt(3.14159265358979323846) * std::exp(-x * x);
  }
  return kNaN;
}

/// Inputs inside fn's domain: positive for log, the roots, a fractional
/// power and the reciprocal; [-6, 6] otherwise.
std::vector<float> unaryInputs(int32_t fn, size_t n, uint32_t seed) {
  bool positive = fn == ASRT_UNARY_LOG || fn == ASRT_UNARY_RSQRT ||
                  fn == ASRT_UNARY_SQRT || fn == ASRT_UNARY_POW ||
                  fn == ASRT_UNARY_RECIPROCAL;
  return positive ? uniformFloats(n, seed, 0.1f, 4.0f)
                  : uniformFloats(n, seed, -6.0f, 6.0f);
}

class UnaryTest : public CpuKernelTest,
                  public ::testing::WithParamInterface<int32_t> {};

TEST_P(UnaryTest, ForwardMatchesReferenceAndRunsInPlace) {
  const int32_t fn = GetParam();
  const size_t n = 1001;
  std::vector<float> x = unaryInputs(fn, n, 10 + fn), y = poisoned(n);
  asrt_unary(&ctx, ASRT_DTYPE_F32, fn, x.data(), y.data(), n, kAlpha);
  std::vector<double> ref(n);
  for (size_t i = 0; i < n; ++i)
    ref[i] = unaryRef(fn, x[i], kAlpha);
  EXPECT_TRUE(allNear(y, ref, 1e-5, 1e-6)) << "fn " << fn;
  // In place: the same bits.
  std::vector<float> inPlace = x;
  asrt_unary(&ctx, ASRT_DTYPE_F32, fn, inPlace.data(), inPlace.data(), n,
             kAlpha);
  EXPECT_TRUE(bitwiseEqual(inPlace, y));
}

TEST_P(UnaryTest, GradMatchesDerivativeAndRunsInPlace) {
  const int32_t fn = GetParam();
  const size_t n = 1001;
  std::vector<float> x = unaryInputs(fn, n, 20 + fn);
  std::vector<float> dy = uniformFloats(n, 30 + fn, -2.0f, 2.0f);
  std::vector<float> dx = poisoned(n);
  asrt_unary_grad(&ctx, ASRT_DTYPE_F32, fn, dy.data(), x.data(), dx.data(), n,
                  kAlpha);
  std::vector<double> ref(n), tol(n);
  for (size_t i = 0; i < n; ++i) {
    ref[i] = dy[i] * unaryDerivativeRef(fn, x[i], kAlpha);
    // Derivatives computed as 1 - t^2 and the like cancel: absolute slack
    // relative to dy.
    tol[i] = 1e-5 * std::fabs(ref[i]) + 1e-6 * std::fabs(dy[i]);
  }
  EXPECT_TRUE(allWithin(dx, ref, tol)) << "fn " << fn;
  // dx = dy and dx = x in place: the same bits.
  std::vector<float> overDy = dy, overX = x;
  asrt_unary_grad(&ctx, ASRT_DTYPE_F32, fn, overDy.data(), x.data(),
                  overDy.data(), n, kAlpha);
  asrt_unary_grad(&ctx, ASRT_DTYPE_F32, fn, dy.data(), overX.data(),
                  overX.data(), n, kAlpha);
  EXPECT_TRUE(bitwiseEqual(overDy, dx));
  EXPECT_TRUE(bitwiseEqual(overX, dx));
}

TEST_P(UnaryTest, Bf16IsTheRoundedF32Result) {
  const int32_t fn = GetParam();
  const size_t n = 257;
  std::vector<float> x = bf16Rounded(unaryInputs(fn, n, 40 + fn));
  std::vector<float> dy = bf16Rounded(uniformFloats(n, 50 + fn, -2, 2));
  std::vector<float> y(n), dx(n);
  asrt_unary(&ctx, ASRT_DTYPE_F32, fn, x.data(), y.data(), n, kAlpha);
  asrt_unary_grad(&ctx, ASRT_DTYPE_F32, fn, dy.data(), x.data(), dx.data(), n,
                  kAlpha);
  std::vector<uint16_t> xb = toBf16(x), dyb = toBf16(dy);
  std::vector<uint16_t> yb = poisonedBf16(n), dxb = poisonedBf16(n);
  asrt_unary(&ctx, ASRT_DTYPE_BF16, fn, xb.data(), yb.data(), n, kAlpha);
  asrt_unary_grad(&ctx, ASRT_DTYPE_BF16, fn, dyb.data(), xb.data(), dxb.data(),
                  n, kAlpha);
  EXPECT_TRUE(bf16IsRoundedF32(yb, y));
  EXPECT_TRUE(bf16IsRoundedF32(dxb, dx));
}

INSTANTIATE_TEST_SUITE_P(EveryFn, UnaryTest,
                         ::testing::Range<int32_t>(ASRT_UNARY_NEG,
                                                   ASRT_UNARY_ERF + 1));

using TensorOpsTest = CpuKernelTest;

TEST_F(TensorOpsTest, UnaryGivesTheFixedKernelsBits) {
  const int64_t n = 999;
  std::vector<float> x = uniformFloats(n, 60, -9, 9);
  std::vector<float> dy = uniformFloats(n, 61, -1, 1);
  auto both = [&](int32_t fn, auto fixedFwd, auto fixedGrad) {
    std::vector<float> a(n), b(n), ga(n), gb(n);
    asrt_unary(&ctx, ASRT_DTYPE_F32, fn, x.data(), a.data(), n, 0.0f);
    fixedFwd(x.data(), b.data());
    asrt_unary_grad(&ctx, ASRT_DTYPE_F32, fn, dy.data(), x.data(), ga.data(), n,
                    0.0f);
    fixedGrad(gb.data());
    EXPECT_TRUE(bitwiseEqual(a, b)) << "fn " << fn;
    EXPECT_TRUE(bitwiseEqual(ga, gb)) << "fn " << fn;
  };
  both(
      ASRT_UNARY_GELU_TANH,
      [&](float *in, float *out) {
        asrt_gelu_fwd(&ctx, ASRT_DTYPE_F32, in, out, n);
      },
      [&](float *out) {
        asrt_gelu_grad(&ctx, ASRT_DTYPE_F32, dy.data(), x.data(), out, n);
      });
  both(
      ASRT_UNARY_RELU,
      [&](float *in, float *out) {
        asrt_relu_fwd(&ctx, ASRT_DTYPE_F32, in, out, n);
      },
      [&](float *out) {
        asrt_relu_grad(&ctx, ASRT_DTYPE_F32, dy.data(), x.data(), out, n);
      });
  // SiLU is SwiGLU's gate with up = 1 (and its gate gradient with dy).
  std::vector<float> ones(n, 1.0f);
  both(
      ASRT_UNARY_SILU,
      [&](float *in, float *out) {
        asrt_swiglu_fwd(&ctx, ASRT_DTYPE_F32, in, ones.data(), out, n);
      },
      [&](float *out) {
        std::vector<float> dup(n);
        asrt_swiglu_grad(&ctx, ASRT_DTYPE_F32, dy.data(), x.data(), ones.data(),
                         out, dup.data(), n);
      });
}

TEST_F(TensorOpsTest, PowSquaresAndCubesAsTorchsProducts) {
  // torch computes x^2 and x^3 as x * x and x * x * x (and their gradients
  // from those): the same bits, which std::pow's rounding of x^3 is not
  // always.
  const int64_t n = 1001;
  std::vector<float> x = uniformFloats(n, 70, -9, 9);
  std::vector<float> dy = uniformFloats(n, 71, -1, 1);
  for (float alpha : {2.0f, 3.0f}) {
    std::vector<float> y(n), dx(n), ref(n), dref(n);
    asrt_unary(&ctx, ASRT_DTYPE_F32, ASRT_UNARY_POW, x.data(), y.data(), n,
               alpha);
    asrt_unary_grad(&ctx, ASRT_DTYPE_F32, ASRT_UNARY_POW, dy.data(), x.data(),
                    dx.data(), n, alpha);
    for (int64_t i = 0; i < n; ++i) {
      float v = x[i];
      ref[i] = alpha == 2.0f ? v * v : v * v * v;
      dref[i] = alpha == 2.0f ? dy[i] * (2.0f * v) : dy[i] * (3.0f * (v * v));
    }
    EXPECT_TRUE(bitwiseEqual(y, ref)) << "alpha " << alpha;
    EXPECT_TRUE(bitwiseEqual(dx, dref)) << "alpha " << alpha;
  }
}

TEST_F(TensorOpsTest, UnaryEdgeValues) {
  // ReLU keeps NaN; |x|'s gradient is 0 at 0; pow's is 0 for exponent 0,
  // even at x = 0; exact GELU keeps its relative accuracy in the left tail.
  std::vector<float> x = {kNaNf, -0.0f, 0.0f, -10.0f};
  std::vector<float> y(4), g(4);
  asrt_unary(&ctx, ASRT_DTYPE_F32, ASRT_UNARY_RELU, x.data(), y.data(), 4, 0);
  EXPECT_TRUE(std::isnan(y[0]));
  std::vector<float> dy = {1, 1, 1, 1};
  asrt_unary_grad(&ctx, ASRT_DTYPE_F32, ASRT_UNARY_ABS, dy.data(), x.data(),
                  g.data(), 4, 0);
  EXPECT_EQ(g[1], 0.0f);
  EXPECT_EQ(g[2], 0.0f);
  EXPECT_EQ(g[3], -1.0f);
  asrt_unary_grad(&ctx, ASRT_DTYPE_F32, ASRT_UNARY_POW, dy.data(), x.data(),
                  g.data(), 4, 0.0f);
  EXPECT_EQ(g[2], 0.0f);
  asrt_unary(&ctx, ASRT_DTYPE_F32, ASRT_UNARY_GELU_ERF, x.data(), y.data(), 4,
             0);
  double tail = -10.0 * phiRef(-10.0); // about -7.6e-23
  EXPECT_NEAR(y[3], tail, 1e-4 * std::fabs(tail));
  // n = 0 touches nothing.
  asrt_unary(&ctx, ASRT_DTYPE_F32, ASRT_UNARY_EXP, nullptr, nullptr, 0, 0);
}

// ---- Binary and select ---------------------------------------------------

double binaryRef(int32_t fn, double a, double b) {
  switch (fn) {
  case ASRT_BINARY_ADD:
    return a + b;
  case ASRT_BINARY_SUB:
    return a - b;
  case ASRT_BINARY_MUL:
    return a * b;
  case ASRT_BINARY_DIV:
    return a / b;
  case ASRT_BINARY_MAX:
    return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b);
  case ASRT_BINARY_MIN:
    return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b);
  case ASRT_BINARY_POW:
    return std::pow(a, b);
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
  return kNaN;
}

/// One broadcasting case: y[dims] = a OP b with the operands' strides over
/// storage of aSize and bSize elements.
struct BinaryCase {
  Dims dims, aStrides, bStrides;
  size_t aSize, bSize;
};

std::vector<BinaryCase> binaryCases() {
  return {
      // a dense [2, 3, 4]; b [3] broadcast along the first and last dims.
      {{2, 3, 4}, {12, 4, 1}, {0, 1, 0}, 24, 3},
      // a read transposed from [4, 3, 2] storage; b a row [4] broadcast.
      {{2, 3, 4}, {1, 2, 6}, {0, 0, 1}, 24, 4},
      // a scalar (every stride 0) against a dense b; size-1 dims.
      {{1, 5, 1, 7}, {0, 0, 0, 0}, {35, 7, 7, 1}, 1, 35},
      // rank 0: one element.
      {{}, {}, {}, 1, 1},
      // an empty dim: nothing written.
      {{3, 0, 2}, {0, 2, 1}, {0, 2, 1}, 1, 1},
  };
}

TEST_F(TensorOpsTest, BinaryBroadcastsEveryFnAsTheReference) {
  for (const BinaryCase &c : binaryCases()) {
    const int64_t count = countOf(c.dims);
    const int32_t rank = static_cast<int32_t>(c.dims.size());
    std::vector<float> a = uniformFloats(c.aSize, 70, 0.5f, 3.0f);
    std::vector<float> b = uniformFloats(c.bSize, 71, -2.0f, 2.0f);
    // Some equal pairs for the comparisons.
    if (c.bSize > 1)
      b[1] = a[0];
    for (int32_t fn = ASRT_BINARY_ADD; fn <= ASRT_BINARY_NE; ++fn) {
      std::vector<double> ref(count);
      forEachIndex(c.dims, [&](int64_t pos, const Dims &i) {
        ref[pos] = binaryRef(fn, a[offsetOf(i, c.aStrides)],
                             b[offsetOf(i, c.bStrides)]);
      });
      SCOPED_TRACE(::testing::Message() << "fn " << fn << ", rank " << rank);
      if (fn >= ASRT_BINARY_LT) {
        std::vector<uint8_t> mask(count + 1, 7);
        asrt_binary(&ctx, ASRT_DTYPE_F32, fn, a.data(), b.data(), mask.data(),
                    rank, c.dims.data(), c.aStrides.data(), c.bStrides.data());
        for (int64_t i = 0; i < count; ++i)
          EXPECT_EQ(mask[i], static_cast<uint8_t>(ref[i])) << "[" << i << "]";
        EXPECT_EQ(mask[count], 7) << "wrote past the mask";
      } else {
        std::vector<float> y = poisoned(count + 1);
        y[count] = 123.0f;
        asrt_binary(&ctx, ASRT_DTYPE_F32, fn, a.data(), b.data(), y.data(),
                    rank, c.dims.data(), c.aStrides.data(), c.bStrides.data());
        EXPECT_EQ(y[count], 123.0f) << "wrote past the output";
        y.pop_back();
        EXPECT_TRUE(nanAwareNear(y, ref, 1e-6, 0.0));
      }
    }
  }
}

TEST_F(TensorOpsTest, BinaryMaxMinPropagateNaNAndComparisonsFollowIEEE) {
  std::vector<float> a = {1, kNaNf, 3, kNaNf, -0.0f};
  std::vector<float> b = {kNaNf, 2, 1, kNaNf, 0.0f};
  Dims dims = {5}, unit = {1};
  std::vector<float> y(5);
  asrt_binary(&ctx, ASRT_DTYPE_F32, ASRT_BINARY_MAX, a.data(), b.data(),
              y.data(), 1, dims.data(), unit.data(), unit.data());
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]) && std::isnan(y[3]));
  EXPECT_EQ(y[2], 3.0f);
  asrt_binary(&ctx, ASRT_DTYPE_F32, ASRT_BINARY_MIN, a.data(), b.data(),
              y.data(), 1, dims.data(), unit.data(), unit.data());
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]) && std::isnan(y[3]));
  EXPECT_EQ(y[2], 1.0f);
  std::vector<uint8_t> mask(5);
  asrt_binary(&ctx, ASRT_DTYPE_F32, ASRT_BINARY_NE, a.data(), b.data(),
              mask.data(), 1, dims.data(), unit.data(), unit.data());
  EXPECT_EQ(mask, (std::vector<uint8_t>{1, 1, 1, 1, 0}));
  asrt_binary(&ctx, ASRT_DTYPE_F32, ASRT_BINARY_GE, a.data(), b.data(),
              mask.data(), 1, dims.data(), unit.data(), unit.data());
  EXPECT_EQ(mask, (std::vector<uint8_t>{0, 0, 1, 0, 1}));
}

TEST_F(TensorOpsTest, BinaryBf16IsTheRoundedF32Result) {
  const BinaryCase c = binaryCases()[1];
  const int64_t count = countOf(c.dims);
  std::vector<float> a = bf16Rounded(uniformFloats(c.aSize, 72, 0.5f, 3.0f));
  std::vector<float> b = bf16Rounded(uniformFloats(c.bSize, 73, -2.0f, 2.0f));
  std::vector<uint16_t> ab = toBf16(a), bb = toBf16(b);
  for (int32_t fn = ASRT_BINARY_ADD; fn <= ASRT_BINARY_POW; ++fn) {
    std::vector<float> y(count);
    std::vector<uint16_t> yb = poisonedBf16(count);
    asrt_binary(&ctx, ASRT_DTYPE_F32, fn, a.data(), b.data(), y.data(), 3,
                c.dims.data(), c.aStrides.data(), c.bStrides.data());
    asrt_binary(&ctx, ASRT_DTYPE_BF16, fn, ab.data(), bb.data(), yb.data(), 3,
                c.dims.data(), c.aStrides.data(), c.bStrides.data());
    EXPECT_TRUE(bf16IsRoundedF32(yb, y)) << "fn " << fn;
  }
}

TEST_F(TensorOpsTest, SelectPicksByABroadcastMask) {
  // y[2, 3] = cond[3] ? a[2, 3] : b (a scalar).
  Dims dims = {2, 3}, condStrides = {0, 1}, aStrides = {3, 1},
       bStrides = {0, 0};
  std::vector<uint8_t> cond = {1, 0, 1};
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {-1};
  std::vector<float> y = poisoned(6);
  asrt_select(&ctx, ASRT_DTYPE_F32, cond.data(), a.data(), b.data(), y.data(),
              2, dims.data(), condStrides.data(), aStrides.data(),
              bStrides.data());
  EXPECT_EQ(y, (std::vector<float>{1, -1, 3, 4, -1, 6}));
  // bf16: the chosen bits, and rank 0.
  std::vector<uint16_t> ab = {0x3f80}, bb = {0xc000}, yb = {0};
  uint8_t no = 0;
  asrt_select(&ctx, ASRT_DTYPE_BF16, &no, ab.data(), bb.data(), yb.data(), 0,
              nullptr, nullptr, nullptr, nullptr);
  EXPECT_EQ(yb[0], 0xc000);
}

// ---- Reduce --------------------------------------------------------------

double reduceRef(int32_t reduceOp, const std::vector<double> &values) {
  double r = reduceOp == ASRT_REDUCE_MAX   ? -INFINITY
             : reduceOp == ASRT_REDUCE_MIN ? INFINITY
                                           : 0.0;
  bool nan = false;
  for (double v : values) {
    nan = nan || std::isnan(v);
    if (reduceOp == ASRT_REDUCE_MAX)
      r = std::max(r, v);
    else if (reduceOp == ASRT_REDUCE_MIN)
      r = std::min(r, v);
    else
      r += v;
  }
  if (reduceOp == ASRT_REDUCE_AVG)
    r /= static_cast<double>(values.size()); // 0 / 0 for none: NaN
  return nan ? kNaN : r;
}

struct ReduceCase {
  const char *name;
  Dims outDims, outStrides, redDims, redStrides;
  size_t xSize;
};

std::vector<ReduceCase> reduceCases() {
  return {
      // x[6, 5]: rows (the last dim), columns (the first), everything.
      {"rows", {6}, {5}, {5}, {1}, 30},
      {"columns", {5}, {1}, {6}, {5}, 30},
      {"all", {}, {}, {6, 5}, {5, 1}, 30},
      // x[2, 3, 4, 5] reduced over dims 1 and 3, out [2, 4].
      {"interleaved", {2, 4}, {60, 5}, {3, 5}, {20, 1}, 120},
      // A column block wider than the kernel's block of outputs.
      {"wide", {3, 150}, {150, 1}, {7}, {450}, 3150},
      // Nothing reduced (red_rank 0): a copy; an output of no element.
      {"identity", {4}, {1}, {}, {}, 4},
      {"no outputs", {0, 3}, {3, 1}, {2}, {1}, 1},
      // An empty reduction: 0, NaN, -inf and +inf.
      {"empty", {3}, {1}, {0}, {1}, 3},
  };
}

TEST_F(TensorOpsTest, ReduceEveryOpMatchesTheReference) {
  for (const ReduceCase &c : reduceCases()) {
    std::vector<float> x = uniformFloats(c.xSize, 80, -4.0f, 4.0f);
    std::vector<uint16_t> xb = toBf16(x);
    std::vector<float> xr = fromBf16(xb);
    const int64_t outCount = countOf(c.outDims);
    for (int32_t reduceOp = ASRT_REDUCE_SUM; reduceOp <= ASRT_REDUCE_MIN;
         ++reduceOp) {
      SCOPED_TRACE(::testing::Message()
                   << c.name << ", reduce_op " << reduceOp);
      std::vector<double> ref(outCount), refBf16(outCount);
      forEachIndex(c.outDims, [&](int64_t pos, const Dims &o) {
        std::vector<double> values, valuesBf16;
        forEachIndex(c.redDims, [&](int64_t, const Dims &r) {
          int64_t at = offsetOf(o, c.outStrides) + offsetOf(r, c.redStrides);
          values.push_back(x[at]);
          valuesBf16.push_back(xr[at]);
        });
        ref[pos] = reduceRef(reduceOp, values);
        refBf16[pos] = reduceRef(reduceOp, valuesBf16);
      });
      std::vector<float> y = poisoned(outCount);
      asrt_reduce(&ctx, ASRT_DTYPE_F32, reduceOp, x.data(), y.data(),
                  int32_t(c.outDims.size()), c.outDims.data(),
                  c.outStrides.data(), int32_t(c.redDims.size()),
                  c.redDims.data(), c.redStrides.data());
      EXPECT_TRUE(nanAwareNear(y, ref, 1e-6, 1e-6));
      std::vector<uint16_t> yb = poisonedBf16(outCount);
      asrt_reduce(&ctx, ASRT_DTYPE_BF16, reduceOp, xb.data(), yb.data(),
                  int32_t(c.outDims.size()), c.outDims.data(),
                  c.outStrides.data(), int32_t(c.redDims.size()),
                  c.redDims.data(), c.redStrides.data());
      EXPECT_TRUE(nanAwareNear(fromBf16(yb), refBf16, 4e-3, 1e-6));
    }
  }
}

TEST_F(TensorOpsTest, ReduceEmptyGivesTheIdentities) {
  Dims outDims = {2}, outStrides = {1}, redDims = {3, 0}, redStrides = {2, 1};
  float x = 1.0f;
  const float want[] = {0.0f, kNaNf, -kInf, kInf};
  for (int32_t reduceOp = ASRT_REDUCE_SUM; reduceOp <= ASRT_REDUCE_MIN;
       ++reduceOp) {
    std::vector<float> y = poisoned(2);
    y[0] = y[1] = 42.0f;
    asrt_reduce(&ctx, ASRT_DTYPE_F32, reduceOp, &x, y.data(), 1, outDims.data(),
                outStrides.data(), 2, redDims.data(), redStrides.data());
    for (float v : y) {
      if (std::isnan(want[reduceOp]))
        EXPECT_TRUE(std::isnan(v)) << "reduce_op " << reduceOp;
      else
        EXPECT_EQ(v, want[reduceOp]) << "reduce_op " << reduceOp;
    }
  }
}

TEST_F(TensorOpsTest, ReduceMaxMinPropagateNaN) {
  // Rows of x[3, 4]: a NaN first, last, and none.
  std::vector<float> x = {kNaNf, 1, 2, 3, 1, 2, 3, kNaNf, 5, -1, 0, 4};
  Dims outDims = {3}, outStrides = {4}, redDims = {4}, redStrides = {1};
  for (int32_t reduceOp : {ASRT_REDUCE_MAX, ASRT_REDUCE_MIN}) {
    std::vector<float> y(3);
    asrt_reduce(&ctx, ASRT_DTYPE_F32, reduceOp, x.data(), y.data(), 1,
                outDims.data(), outStrides.data(), 1, redDims.data(),
                redStrides.data());
    EXPECT_TRUE(std::isnan(y[0]));
    EXPECT_TRUE(std::isnan(y[1]));
    EXPECT_EQ(y[2], reduceOp == ASRT_REDUCE_MAX ? 5.0f : -1.0f);
  }
}

// ---- Copy and fill ---------------------------------------------------------

TEST_F(TensorOpsTest, CopyStridedWritesOnlyTheAddressedElements) {
  // x[3, 4] transposed into columns 1..3 of rows 2..5 of y[7, 6] (an
  // offset, a transpose and a slice at once).
  std::vector<float> x = uniformFloats(12, 90, -1, 1);
  Dims dims = {4, 3}, xStrides = {1, 4}, yStrides = {6, 1};
  std::vector<float> y(42, 7.0f);
  asrt_copy_strided(&ctx, ASRT_DTYPE_F32, x.data(), y.data(), 2, dims.data(),
                    xStrides.data(), 0, yStrides.data(), 2 * 6 + 1);
  for (int64_t r = 0; r < 7; ++r)
    for (int64_t c = 0; c < 6; ++c) {
      bool inside = r >= 2 && r < 6 && c >= 1 && c < 4;
      float want = inside ? x[(c - 1) * 4 + (r - 2)] : 7.0f;
      EXPECT_EQ(y[r * 6 + c], want) << r << ", " << c;
    }
  // A broadcast row (x stride 0) from an offset, in bf16: bits copied.
  std::vector<uint16_t> xb = {0x1111, 0x2222, 0x3333, 0x4444};
  std::vector<uint16_t> yb(6, 0);
  Dims bdims = {2, 3}, bx = {0, 1}, by = {3, 1};
  asrt_copy_strided(&ctx, ASRT_DTYPE_BF16, xb.data(), yb.data(), 2,
                    bdims.data(), bx.data(), 1, by.data(), 0);
  EXPECT_EQ(yb, (std::vector<uint16_t>{0x2222, 0x3333, 0x4444, 0x2222, 0x3333,
                                       0x4444}));
  // Rank 0: one element at the offsets.
  float one = 0.0f;
  asrt_copy_strided(&ctx, ASRT_DTYPE_F32, x.data(), &one, 0, nullptr, nullptr,
                    5, nullptr, 0);
  EXPECT_EQ(one, x[5]);
}

TEST_F(TensorOpsTest, CopyStridedTransposesInTilesAsElementByElement) {
  // Batched transposes of the two innermost dims, large enough for tiles
  // and no multiple of them: writing strided, reading strided, and into a
  // padded slice of a larger buffer; each element where a loop over the
  // index space puts it, and nothing else written.
  struct Case {
    Dims dims, xStrides, yStrides;
    int64_t yOffset, ySize;
  };
  const Dims dims = {2, 3, 45, 70};
  const std::vector<Case> cases = {
      {dims, {9450, 3150, 70, 1}, {9450, 3150, 1, 45}, 0, 18900},
      {dims, {9450, 3150, 1, 45}, {9450, 3150, 70, 1}, 0, 18900},
      {dims, {9450, 3150, 70, 1}, {11000, 3600, 1, 50}, 7, 22000},
      // Too small for tiles: the runs of the inner dim.
      {{4, 31, 33}, {1023, 33, 1}, {1023, 1, 31}, 0, 4092},
  };
  for (const Case &c : cases) {
    const int64_t count = countOf(c.dims);
    std::vector<float> x = uniformFloats(count, 95, -1, 1);
    std::vector<float> y(c.ySize, 7.0f), want(c.ySize, 7.0f);
    forEachIndex(c.dims, [&](int64_t, const Dims &index) {
      want[c.yOffset + offsetOf(index, c.yStrides)] =
          x[offsetOf(index, c.xStrides)];
    });
    asrt_copy_strided(&ctx, ASRT_DTYPE_F32, x.data(), y.data(),
                      static_cast<int32_t>(c.dims.size()), c.dims.data(),
                      c.xStrides.data(), 0, c.yStrides.data(), c.yOffset);
    EXPECT_TRUE(bitwiseEqual(y, want)) << "x strides " << c.xStrides[1];
  }
}

TEST_F(TensorOpsTest, FillRoundsOnce) {
  std::vector<float> y = poisoned(100);
  asrt_fill(&ctx, ASRT_DTYPE_F32, y.data(), 100, 0.1f);
  EXPECT_TRUE(
      std::all_of(y.begin(), y.end(), [](float v) { return v == 0.1f; }));
  std::vector<uint16_t> yb = poisonedBf16(3);
  asrt_fill(&ctx, ASRT_DTYPE_BF16, yb.data(), 3, 0.1f);
  EXPECT_EQ(yb, std::vector<uint16_t>(3, floatToBf16(0.1f)));
}

TEST_F(TensorOpsTest, CopyAndFillMoveI32Labels) {
  // HuggingFace's label shift on labels[2, 3]: pad dim 1 with one -100 at
  // the end (a fill, then the labels copied into rows of 4), then slice
  // dim 1 from 1 (a strided copy): each row's labels moved left by one,
  // the last position ignored. Labels beyond 2^24 stay exact (a float
  // round trip would not keep them).
  std::vector<int32_t> labels = {16777217, 1, 2, 3, 4, 5};
  std::vector<int32_t> padded(8, 7);
  asrt_fill(&ctx, ASRT_DTYPE_I32, padded.data(), 8, -100.0f);
  Dims dims = {2, 3}, in = {3, 1}, out = {4, 1};
  asrt_copy_strided(&ctx, ASRT_DTYPE_I32, labels.data(), padded.data(), 2,
                    dims.data(), in.data(), 0, out.data(), 0);
  EXPECT_EQ(padded, (std::vector<int32_t>{16777217, 1, 2, -100, 3, 4, 5,
                                          -100}));
  std::vector<int32_t> shifted(6, 0);
  asrt_copy_strided(&ctx, ASRT_DTYPE_I32, padded.data(), shifted.data(), 2,
                    dims.data(), out.data(), 1, in.data(), 0);
  EXPECT_EQ(shifted, (std::vector<int32_t>{1, 2, -100, 4, 5, -100}));
  // A transpose with a broadcast: every element of a column.
  std::vector<int32_t> t(6, 0);
  Dims tdims = {3, 2}, tx = {0, 3}, ty = {2, 1};
  asrt_copy_strided(&ctx, ASRT_DTYPE_I32, labels.data() + 1, t.data(), 2,
                    tdims.data(), tx.data(), 0, ty.data(), 0);
  EXPECT_EQ(t, (std::vector<int32_t>{1, 4, 1, 4, 1, 4}));
}

TEST_F(TensorOpsTest, AnI32FillTakesIntegersOnly) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<int32_t> y(3, 0);
  asrt_fill(&ctx, ASRT_DTYPE_I32, y.data(), 3, -2147483648.0f);
  EXPECT_EQ(y, std::vector<int32_t>(3, INT32_MIN));
  EXPECT_DEATH(asrt_fill(&ctx, ASRT_DTYPE_I32, y.data(), 3, 0.5f),
               "fill: value = 0.5 is not an integer in the int32 range");
  EXPECT_DEATH(asrt_fill(&ctx, ASRT_DTYPE_I32, y.data(), 3, 2147483648.0f),
               "fill: value = 2.14748e\\+09 is not an integer");
  EXPECT_DEATH(asrt_fill(&ctx, ASRT_DTYPE_I32, y.data(), 3, NAN),
               "fill: value = nan is not an integer");
}

// ---- Matmul ----------------------------------------------------------------

struct MatmulCase {
  const char *name;
  Dims batch, aStrides, bStrides;
  int64_t m, n, k;
  bool ta, tb;
  size_t aSize, bSize;
};

std::vector<MatmulCase> matmulCases() {
  const int64_t m = 5, n = 7, k = 3;
  return {
      {"plain", {}, {}, {}, m, n, k, false, false, m * k, k * n},
      {"trans a", {}, {}, {}, m, n, k, true, false, m * k, k * n},
      {"trans b", {}, {}, {}, m, n, k, false, true, m * k, k * n},
      {"trans both", {}, {}, {}, m, n, k, true, true, m * k, k * n},
      // x[2, 3, m, k] @ w[k, n]: one GEMM over the stacked rows.
      {"broadcast b",
       {2, 3},
       {3 * m * k, m * k},
       {0, 0},
       m,
       n,
       k,
       false,
       false,
       6 * m * k,
       k * n},
      // a shared along the second batch dim, b dense and transposed.
      {"broadcast a",
       {2, 3},
       {m * k, 0},
       {3 * k * n, k * n},
       m,
       n,
       k,
       true,
       true,
       2 * m * k,
       6 * k * n},
      // Batches read from a permuted layout: a's batch dims swapped.
      {"permuted batch",
       {3, 2},
       {m * k, 3 * m * k},
       {k * n, 3 * k * n},
       m,
       n,
       k,
       false,
       false,
       6 * m * k,
       6 * k * n},
      // An empty sum: y = 0.
      {"k = 0", {2}, {0, 0}, {0, 0}, m, n, 0, false, false, 1, 1},
  };
}

/// The reference product and, per element, the sum of |a| |b| over k.
void matmulRef(const MatmulCase &c, const std::vector<float> &a,
               const std::vector<float> &b, std::vector<double> &ref,
               std::vector<double> &magnitude) {
  const int64_t mn = c.m * c.n;
  ref.assign(countOf(c.batch) * mn, 0.0);
  magnitude.assign(ref.size(), 0.0);
  forEachIndex(c.batch, [&](int64_t pos, const Dims &i) {
    int64_t ao = offsetOf(i, c.aStrides), bo = offsetOf(i, c.bStrides);
    for (int64_t r = 0; r < c.m; ++r)
      for (int64_t col = 0; col < c.n; ++col)
        for (int64_t p = 0; p < c.k; ++p) {
          double av = a[ao + (c.ta ? p * c.m + r : r * c.k + p)];
          double bv = b[bo + (c.tb ? col * c.k + p : p * c.n + col)];
          ref[pos * mn + r * c.n + col] += av * bv;
          magnitude[pos * mn + r * c.n + col] += std::fabs(av * bv);
        }
  });
}

TEST_F(TensorOpsTest, MatmulMatchesTheReference) {
  for (const MatmulCase &c : matmulCases()) {
    SCOPED_TRACE(c.name);
    std::vector<float> a = bf16Rounded(uniformFloats(c.aSize, 100, -1, 1));
    std::vector<float> b = bf16Rounded(uniformFloats(c.bSize, 101, -1, 1));
    std::vector<double> ref, magnitude;
    matmulRef(c, a, b, ref, magnitude);
    std::vector<double> tol(ref.size());
    for (size_t i = 0; i < tol.size(); ++i)
      tol[i] = 1e-6 * magnitude[i];
    const int32_t rank = static_cast<int32_t>(c.batch.size());
    std::vector<float> y = poisoned(ref.size());
    asrt_matmul(&ctx, ASRT_DTYPE_F32, a.data(), b.data(), y.data(), rank,
                c.batch.data(), c.aStrides.data(), c.bStrides.data(), c.m, c.n,
                c.k, c.ta, c.tb);
    EXPECT_TRUE(allWithin(y, ref, tol));
    // bf16 (the same, exactly representable inputs): f32 accumulation and
    // one rounding (within bf16's precision of the f32 result: the BLAS
    // may sum a copy in scratch in another order).
    std::vector<uint16_t> ab = toBf16(a), bb = toBf16(b);
    std::vector<uint16_t> yb = poisonedBf16(ref.size());
    asrt_matmul(&ctx, ASRT_DTYPE_BF16, ab.data(), bb.data(), yb.data(), rank,
                c.batch.data(), c.aStrides.data(), c.bStrides.data(), c.m, c.n,
                c.k, c.ta, c.tb);
    EXPECT_TRUE(bf16CloseToF32(yb, y));
  }
}

TEST_F(TensorOpsTest, MatmulWithNoRowsWritesNothing) {
  Dims batch = {2}, strides = {0};
  float a = 1, b = 1, y = 5;
  asrt_matmul(&ctx, ASRT_DTYPE_F32, &a, &b, &y, 1, batch.data(), strides.data(),
              strides.data(), 0, 1, 1, 0, 0);
  EXPECT_EQ(y, 5.0f);
}

// ---- Softmax ---------------------------------------------------------------

/// softmax or log_softmax of each row, in double.
std::vector<double> softmaxRef(const std::vector<float> &x, int64_t rows,
                               int64_t cols, bool log) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = &x[r * cols];
    double m = *std::max_element(row, row + cols);
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j)
      sum += std::exp(row[j] - m);
    for (int64_t j = 0; j < cols; ++j)
      y[r * cols + j] =
          log ? row[j] - m - std::log(sum) : std::exp(row[j] - m) / sum;
  }
  return y;
}

class SoftmaxTest : public CpuKernelTest,
                    public ::testing::WithParamInterface<int32_t> {
protected:
  bool log() const { return GetParam() != 0; }
};

TEST_P(SoftmaxTest, ForwardIsStableAndMatchesTheReference) {
  const int64_t rows = 7, cols = 301;
  std::vector<float> x = uniformFloats(rows * cols, 110, -5, 5);
  // Far from 0: exp would overflow without the maximum subtracted.
  for (int64_t j = 0; j < cols; ++j)
    x[3 * cols + j] += 1000.0f;
  std::vector<float> y = poisoned(x.size());
  asrt_softmax(&ctx, ASRT_DTYPE_F32, x.data(), y.data(), rows, cols, log());
  EXPECT_TRUE(
      allNear(y, softmaxRef(x, rows, cols, log()), 1e-5, log() ? 1e-5 : 1e-9));
  std::vector<float> xr = bf16Rounded(x);
  std::vector<float> yr(x.size());
  asrt_softmax(&ctx, ASRT_DTYPE_F32, xr.data(), yr.data(), rows, cols, log());
  std::vector<uint16_t> xb = toBf16(xr), yb = poisonedBf16(x.size());
  asrt_softmax(&ctx, ASRT_DTYPE_BF16, xb.data(), yb.data(), rows, cols, log());
  EXPECT_TRUE(bf16IsRoundedF32(yb, yr));
}

TEST_P(SoftmaxTest, ARowWithNaNIsNaN) {
  std::vector<float> x = {1, kNaNf, 2, 1, 2, 3};
  std::vector<float> y(6);
  asrt_softmax(&ctx, ASRT_DTYPE_F32, x.data(), y.data(), 2, 3, log());
  for (int j = 0; j < 3; ++j) {
    EXPECT_TRUE(std::isnan(y[j]));
    EXPECT_FALSE(std::isnan(y[3 + j]));
  }
}

TEST_P(SoftmaxTest, GradMatchesFiniteDifferencesAndTheFormula) {
  const int64_t rows = 3, cols = 17;
  std::vector<float> x = uniformFloats(rows * cols, 120, -3, 3);
  std::vector<float> w = uniformFloats(rows * cols, 121, -1, 1);
  auto forward = [&]() {
    std::vector<float> y(x.size());
    asrt_softmax(&ctx, ASRT_DTYPE_F32, x.data(), y.data(), rows, cols, log());
    return y;
  };
  std::vector<float> y = forward();
  std::vector<float> dx = poisoned(x.size());
  asrt_softmax_grad(&ctx, ASRT_DTYPE_F32, w.data(), y.data(), dx.data(), rows,
                    cols, log());
  EXPECT_TRUE(gradMatchesDifferences(dx, forward, x, w, 1e-2f, 2e-3, 2e-4));
  // The ABI's formula from the same y, in double.
  std::vector<double> ref(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j)
      sum +=
          log() ? w[r * cols + j] : double(w[r * cols + j]) * y[r * cols + j];
    for (int64_t j = 0; j < cols; ++j) {
      size_t i = r * cols + j;
      ref[i] =
          log() ? w[i] - std::exp(double(y[i])) * sum : y[i] * (w[i] - sum);
    }
  }
  EXPECT_TRUE(allNear(dx, ref, 1e-5, 1e-6));
  // bf16: the same computation on the rounded values, rounded once.
  std::vector<uint16_t> wb = toBf16(w), yb = toBf16(y);
  std::vector<float> wr = fromBf16(wb), yr = fromBf16(yb), dxr(x.size());
  asrt_softmax_grad(&ctx, ASRT_DTYPE_F32, wr.data(), yr.data(), dxr.data(),
                    rows, cols, log());
  std::vector<uint16_t> dxb = poisonedBf16(x.size());
  asrt_softmax_grad(&ctx, ASRT_DTYPE_BF16, wb.data(), yb.data(), dxb.data(),
                    rows, cols, log());
  EXPECT_TRUE(bf16IsRoundedF32(dxb, dxr));
}

INSTANTIATE_TEST_SUITE_P(SoftmaxAndLogSoftmax, SoftmaxTest,
                         ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int32_t> &info) {
                           return std::string(info.param ? "log" : "plain");
                         });

// ---- Threads -------------------------------------------------------------

/// Runs `kernel` (which returns what it wrote) on 1 and on 2, 3 and 4 of
/// the context's kernel threads: the same bits.
template <typename Kernel>
void expectThreadIndependent(asrt_context &ctx, const Kernel &kernel,
                             const char *what) {
  ctx.setKernelThreads(1);
  const auto one = kernel();
  for (int threads : {2, 3, 4}) {
    ctx.setKernelThreads(threads);
    const auto many = kernel();
    EXPECT_TRUE(
        one.size() == many.size() &&
        std::memcmp(one.data(), many.data(), one.size() * sizeof(one[0])) == 0)
        << what << " on " << threads << " threads";
  }
  ctx.setKernelThreads(1);
}

TEST_F(TensorOpsTest, ResultsDoNotDependOnTheThreadCount) {
  // Large enough that every kernel splits (at least 2^16 element updates),
  // and a row length (1001) that is no multiple of a chunk's alignment.
  const int64_t rows = 300, cols = 1001, n = rows * cols;
  std::vector<float> x = uniformFloats(n, 130, -4, 4);
  std::vector<float> x2 = uniformFloats(n, 132, -4, 4);
  std::vector<float> b = uniformFloats(cols, 131, -4, 4);
  Dims dims = {rows, cols}, dense = {cols, 1}, row = {0, 1}, col = {1, 0};
  expectThreadIndependent(
      ctx,
      [&] {
        std::vector<float> y(2 * n);
        asrt_unary(&ctx, ASRT_DTYPE_F32, ASRT_UNARY_GELU_ERF, x.data(),
                   y.data(), n, 0);
        asrt_unary(&ctx, ASRT_DTYPE_F32, ASRT_UNARY_EXP, x.data(), y.data() + n,
                   n, 0);
        return y;
      },
      "unary");
  expectThreadIndependent(
      ctx,
      [&] {
        std::vector<float> y(2 * n);
        asrt_unary_grad(&ctx, ASRT_DTYPE_F32, ASRT_UNARY_GELU_TANH, x2.data(),
                        x.data(), y.data(), n, 0);
        asrt_unary_grad(&ctx, ASRT_DTYPE_F32, ASRT_UNARY_TANH, x2.data(),
                        x.data(), y.data() + n, n, 0);
        return y;
      },
      "unary_grad");
  // Broadcasting a row, a column, and a middle dim of a 3-d space.
  Dims dims3 = {rows / 3, 3, cols}, dense3 = {3 * cols, cols, 1},
       middle = {3 * cols, 0, 1};
  expectThreadIndependent(
      ctx,
      [&] {
        std::vector<float> y(3 * n);
        asrt_binary(&ctx, ASRT_DTYPE_F32, ASRT_BINARY_DIV, x.data(), b.data(),
                    y.data(), 2, dims.data(), dense.data(), row.data());
        asrt_binary(&ctx, ASRT_DTYPE_F32, ASRT_BINARY_SUB, x.data(), x2.data(),
                    y.data() + n, 2, dims.data(), dense.data(), col.data());
        asrt_binary(&ctx, ASRT_DTYPE_F32, ASRT_BINARY_MUL, x.data(), x2.data(),
                    y.data() + 2 * n, 3, dims3.data(), dense3.data(),
                    middle.data());
        return y;
      },
      "binary");
  // A comparison's byte mask, then a select by it against a broadcast row.
  expectThreadIndependent(
      ctx,
      [&] {
        std::vector<uint8_t> mask(n);
        asrt_binary(&ctx, ASRT_DTYPE_F32, ASRT_BINARY_GT, x.data(), b.data(),
                    mask.data(), 2, dims.data(), dense.data(), row.data());
        std::vector<float> y(n);
        asrt_select(&ctx, ASRT_DTYPE_F32, mask.data(), x2.data(), b.data(),
                    y.data(), 2, dims.data(), dense.data(), dense.data(),
                    row.data());
        std::vector<uint8_t> bytes(mask);
        const auto *yb = reinterpret_cast<const uint8_t *>(y.data());
        bytes.insert(bytes.end(), yb, yb + n * sizeof(float));
        return bytes;
      },
      "compare and select");
  // Row sums (many outputs), column sums (outputs in blocks), the sum of
  // everything (one output: one thread), and a max and a mean over the
  // middle dim of a 3-d space (a reduction over a dim that is not last).
  Dims rowsOut = {rows}, rowsStride = {cols}, colsRed = {cols}, unit = {1};
  Dims colsOut = {cols}, rowsRed = {rows};
  Dims outerInner = {rows / 3, cols}, outerInnerStrides = {3 * cols, 1},
       middleRed = {3}, middleStride = {cols};
  expectThreadIndependent(
      ctx,
      [&] {
        std::vector<float> y(rows + cols + 1 + 2 * (n / 3));
        float *p = y.data();
        asrt_reduce(&ctx, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, x.data(), p, 1,
                    rowsOut.data(), rowsStride.data(), 1, colsRed.data(),
                    unit.data());
        p += rows;
        asrt_reduce(&ctx, ASRT_DTYPE_F32, ASRT_REDUCE_AVG, x.data(), p, 1,
                    colsOut.data(), unit.data(), 1, rowsRed.data(),
                    rowsStride.data());
        p += cols;
        asrt_reduce(&ctx, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, x.data(), p, 0,
                    nullptr, nullptr, 2, dims.data(), dense.data());
        p += 1;
        asrt_reduce(&ctx, ASRT_DTYPE_F32, ASRT_REDUCE_MAX, x.data(), p, 2,
                    outerInner.data(), outerInnerStrides.data(), 1,
                    middleRed.data(), middleStride.data());
        p += n / 3;
        asrt_reduce(&ctx, ASRT_DTYPE_F32, ASRT_REDUCE_AVG, x.data(), p, 2,
                    outerInner.data(), outerInnerStrides.data(), 1,
                    middleRed.data(), middleStride.data());
        return y;
      },
      "reduce");
  expectThreadIndependent(
      ctx,
      [&] {
        std::vector<float> y(4 * n);
        float *plain = y.data(), *dplain = plain + n, *logp = plain + 2 * n,
              *dlog = plain + 3 * n;
        asrt_softmax(&ctx, ASRT_DTYPE_F32, x.data(), plain, rows, cols, 0);
        asrt_softmax_grad(&ctx, ASRT_DTYPE_F32, x2.data(), plain, dplain, rows,
                          cols, 0);
        asrt_softmax(&ctx, ASRT_DTYPE_F32, x.data(), logp, rows, cols, 1);
        asrt_softmax_grad(&ctx, ASRT_DTYPE_F32, x2.data(), logp, dlog, rows,
                          cols, 1);
        return y;
      },
      "softmax");
  // Transpose, a slice into a padded buffer (concat writes such slices),
  // fill.
  Dims transposed = {1, rows}, padded = {cols + 4, 1};
  expectThreadIndependent(
      ctx,
      [&] {
        std::vector<float> y(n + rows * (cols + 4) + n);
        asrt_copy_strided(&ctx, ASRT_DTYPE_F32, x.data(), y.data(), 2,
                          dims.data(), dense.data(), 0, transposed.data(), 0);
        asrt_copy_strided(&ctx, ASRT_DTYPE_F32, x.data(), y.data() + n, 2,
                          dims.data(), dense.data(), 0, padded.data(), 2);
        asrt_fill(&ctx, ASRT_DTYPE_F32, y.data() + n + rows * (cols + 4), n,
                  0.1f);
        return y;
      },
      "copy_strided and fill");
  // The fixed add and scale, which the generic lowering calls too.
  expectThreadIndependent(
      ctx,
      [&] {
        std::vector<float> y(2 * n);
        asrt_add(&ctx, ASRT_DTYPE_F32, x.data(), x2.data(), y.data(), n);
        asrt_scale(&ctx, ASRT_DTYPE_F32, x.data(), y.data() + n, n, 0.3f);
        return y;
      },
      "add and scale");
  // bf16: widened, computed and rounded per element as in f32.
  std::vector<uint16_t> xb = toBf16(x), bb = toBf16(b);
  expectThreadIndependent(
      ctx,
      [&] {
        std::vector<uint16_t> y(2 * n + rows);
        asrt_binary(&ctx, ASRT_DTYPE_BF16, ASRT_BINARY_ADD, xb.data(),
                    bb.data(), y.data(), 2, dims.data(), dense.data(),
                    row.data());
        asrt_softmax(&ctx, ASRT_DTYPE_BF16, xb.data(), y.data() + n, rows, cols,
                     1);
        asrt_reduce(&ctx, ASRT_DTYPE_BF16, ASRT_REDUCE_SUM, xb.data(),
                    y.data() + 2 * n, 1, rowsOut.data(), rowsStride.data(), 1,
                    colsRed.data(), unit.data());
        return y;
      },
      "bf16");
}

// ---- Bad arguments ---------------------------------------------------------

TEST_F(TensorOpsTest, BadRanksDimsAndCodesAreFatal) {
  float v = 0;
  Dims nine(9, 1), negative = {2, -1};
  EXPECT_DEATH(asrt_binary(&ctx, ASRT_DTYPE_F32, ASRT_BINARY_ADD, &v, &v, &v, 9,
                           nine.data(), nine.data(), nine.data()),
               "binary: the rank of dims is 9, outside \\[0, 8\\]");
  EXPECT_DEATH(asrt_binary(&ctx, ASRT_DTYPE_F32, ASRT_BINARY_ADD, &v, &v, &v,
                           -1, nine.data(), nine.data(), nine.data()),
               "rank of dims is -1");
  EXPECT_DEATH(asrt_copy_strided(&ctx, ASRT_DTYPE_F32, &v, &v, 2,
                                 negative.data(), nine.data(), 0, nine.data(),
                                 0),
               "copy_strided: dims\\[1\\] = -1 is negative");
  EXPECT_DEATH(asrt_select(&ctx, ASRT_DTYPE_F32, nullptr, &v, &v, &v, 1,
                           nine.data(), nullptr, nine.data(), nine.data()),
               "select: a strides array over dims is null");
  EXPECT_DEATH(asrt_reduce(&ctx, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, &v, &v, 0,
                           nullptr, nullptr, 9, nine.data(), nine.data()),
               "reduce: the rank of red_dims is 9");
  EXPECT_DEATH(asrt_matmul(&ctx, ASRT_DTYPE_F32, &v, &v, &v, 9, nine.data(),
                           nine.data(), nine.data(), 1, 1, 1, 0, 0),
               "matmul: the rank of batch_dims is 9");
  EXPECT_DEATH(asrt_unary(&ctx, ASRT_DTYPE_F32, 19, &v, &v, 1, 0),
               "unary: fn = 19 is not an asrt_unary_fn \\(0 \\.\\. 18\\)");
  EXPECT_DEATH(asrt_unary_grad(&ctx, ASRT_DTYPE_F32, -1, &v, &v, &v, 1, 0),
               "unary_grad: fn = -1 is not an asrt_unary_fn");
  EXPECT_DEATH(asrt_binary(&ctx, ASRT_DTYPE_F32, 13, &v, &v, &v, 0, nullptr,
                           nullptr, nullptr),
               "binary: fn = 13 is not an asrt_binary_fn \\(0 \\.\\. 12\\)");
  EXPECT_DEATH(asrt_reduce(&ctx, ASRT_DTYPE_F32, 4, &v, &v, 0, nullptr, nullptr,
                           0, nullptr, nullptr),
               "reduce: reduce_op = 4 is not an asrt_reduce_op");
  EXPECT_DEATH(asrt_fill(&ctx, ASRT_DTYPE_F16, &v, 1, 0),
               "fill: dtype 3 \\(f16\\) is not supported; expected f32 "
               "\\(0\\), bf16 \\(2\\) or i32 \\(1\\)");
  EXPECT_DEATH(asrt_copy_strided(&ctx, ASRT_DTYPE_I64, &v, &v, 0, nullptr,
                                 nullptr, 0, nullptr, 0),
               "copy_strided: dtype 4 \\(i64\\) is not supported");
  EXPECT_DEATH(asrt_softmax(&ctx, ASRT_DTYPE_F32, &v, &v, -1, 1, 0),
               "softmax: rows = -1 is negative");
}

} // namespace
} // namespace autoshard::rt::test
