// Tests of the CPU dense-layer kernels: references, finite differences, shapes.
#include "TestUtil.h"

#include "autoshard/rt/abi.h"

#include <cstring>
#include <string>
#include <tuple>

namespace autoshard::rt::test {
namespace {

struct Shape {
  int64_t rows, in, out;
};

/// Values on a 1/16 grid in [-1, 1]. With them every product and every
/// partial sum of these shapes is exact in f32 (at most 17 significant
/// bits), and a central difference with step 1 of a function that is linear
/// in the perturbed entry is exact too, so the finite-difference checks of
/// the linear kernels can demand agreement to the last bit: any deviation is
/// a wrong index, transpose or missing term, never rounding.
std::vector<float> gridFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-16, 16);
  std::vector<float> v(n);
  for (float &x : v)
    x = static_cast<float>(dist(rng)) / 16.0f;
  return v;
}

class LinearTest
    : public CpuKernelTest,
      public ::testing::WithParamInterface<std::tuple<Shape, bool>> {
protected:
  void SetUp() override {
    std::tie(shape, hasBias) = GetParam();
    rows = shape.rows;
    in = shape.in;
    out = shape.out;
  }

  /// y = x w^T (+ b) from the kernel under test.
  std::vector<float> forward(const std::vector<float> &x,
                             const std::vector<float> &w,
                             const std::vector<float> *b) {
    std::vector<float> y = poisoned(rows * out);
    asrt_linear_fwd(&ctx, ASRT_DTYPE_F32, x.data(), w.data(),
                    b ? b->data() : nullptr, y.data(), rows, in, out);
    return y;
  }

  /// L = sum(dy * y) accumulated in double, y from the kernel's forward; its
  /// gradient with respect to any input is what the grad kernels compute
  /// when given dy.
  double weightedSum(const std::vector<float> &x, const std::vector<float> &w,
                     const std::vector<float> *b,
                     const std::vector<float> &dy) {
    std::vector<float> y = forward(x, w, b);
    double sum = 0.0;
    for (size_t i = 0; i < y.size(); ++i)
      sum += static_cast<double>(dy[i]) * y[i];
    return sum;
  }

  /// Central differences of weightedSum over the probed entries of `*input`
  /// (one of x, w, b), with step 1 (see gridFloats).
  std::vector<double> finiteDifferences(std::vector<float> *input,
                                        const std::vector<size_t> &probes,
                                        std::vector<float> &x,
                                        std::vector<float> &w,
                                        std::vector<float> *b,
                                        const std::vector<float> &dy) {
    std::vector<double> fd;
    for (size_t i : probes) {
      float saved = (*input)[i];
      (*input)[i] = saved + 1.0f;
      double plus = weightedSum(x, w, b, dy);
      (*input)[i] = saved - 1.0f;
      double minus = weightedSum(x, w, b, dy);
      (*input)[i] = saved;
      fd.push_back((plus - minus) / 2.0);
    }
    return fd;
  }

  Shape shape;
  bool hasBias = false;
  int64_t rows = 0, in = 0, out = 0;
};

TEST_P(LinearTest, ForwardMatchesReference) {
  std::vector<float> x = uniformFloats(rows * in, 11, -1.0f, 1.0f);
  std::vector<float> w = uniformFloats(out * in, 12, -1.0f, 1.0f);
  std::vector<float> b = uniformFloats(out, 13, -1.0f, 1.0f);
  std::vector<float> y = forward(x, w, hasBias ? &b : nullptr);

  std::vector<double> ref(rows * out), tol(rows * out);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double sum = hasBias ? b[o] : 0.0, mag = std::fabs(sum);
      for (int64_t k = 0; k < in; ++k) {
        double term = static_cast<double>(x[r * in + k]) * w[o * in + k];
        sum += term;
        mag += std::fabs(term);
      }
      ref[r * out + o] = sum;
      // f32 accuracy relative to the sum of the terms' magnitudes.
      tol[r * out + o] = 1e-5 * mag;
    }
  EXPECT_TRUE(allWithin(y, ref, tol));
}

TEST_P(LinearTest, GradInputMatchesReference) {
  std::vector<float> dy = uniformFloats(rows * out, 21, -1.0f, 1.0f);
  std::vector<float> w = uniformFloats(out * in, 22, -1.0f, 1.0f);
  std::vector<float> dx = poisoned(rows * in);
  asrt_linear_grad_input(&ctx, ASRT_DTYPE_F32, dy.data(), w.data(), dx.data(),
                         rows, in, out);

  std::vector<double> ref(rows * in), tol(rows * in);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < in; ++k) {
      double sum = 0.0, mag = 0.0;
      for (int64_t o = 0; o < out; ++o) {
        double term = static_cast<double>(dy[r * out + o]) * w[o * in + k];
        sum += term;
        mag += std::fabs(term);
      }
      ref[r * in + k] = sum;
      tol[r * in + k] = 1e-5 * mag;
    }
  EXPECT_TRUE(allWithin(dx, ref, tol));
}

TEST_P(LinearTest, GradWeightMatchesReference) {
  std::vector<float> dy = uniformFloats(rows * out, 31, -1.0f, 1.0f);
  std::vector<float> x = uniformFloats(rows * in, 32, -1.0f, 1.0f);
  std::vector<float> dw = poisoned(out * in);
  asrt_linear_grad_weight(&ctx, ASRT_DTYPE_F32, dy.data(), x.data(), dw.data(),
                          rows, in, out);

  std::vector<double> ref(out * in), tol(out * in);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t k = 0; k < in; ++k) {
      double sum = 0.0, mag = 0.0;
      for (int64_t r = 0; r < rows; ++r) {
        double term = static_cast<double>(dy[r * out + o]) * x[r * in + k];
        sum += term;
        mag += std::fabs(term);
      }
      ref[o * in + k] = sum;
      tol[o * in + k] = 1e-5 * mag;
    }
  EXPECT_TRUE(allWithin(dw, ref, tol));
}

TEST_P(LinearTest, BiasGradMatchesReference) {
  std::vector<float> dy = uniformFloats(rows * out, 41, -1.0f, 1.0f);
  std::vector<float> db = poisoned(out);
  asrt_bias_grad(&ctx, ASRT_DTYPE_F32, dy.data(), db.data(), rows, out);

  std::vector<double> ref(out, 0.0), tol(out, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      ref[o] += dy[r * out + o];
      tol[o] += 1e-6 * std::fabs(dy[r * out + o]);
    }
  EXPECT_TRUE(allWithin(db, ref, tol));
}

TEST_P(LinearTest, GradsMatchFiniteDifferencesOfForward) {
  std::vector<float> x = gridFloats(rows * in, 51);
  std::vector<float> w = gridFloats(out * in, 52);
  std::vector<float> b = gridFloats(out, 53);
  std::vector<float> dy = gridFloats(rows * out, 54);
  std::vector<float> *bias = hasBias ? &b : nullptr;

  std::vector<float> dx = poisoned(rows * in), dw = poisoned(out * in),
                     db = poisoned(out);
  asrt_linear_grad_input(&ctx, ASRT_DTYPE_F32, dy.data(), w.data(), dx.data(),
                         rows, in, out);
  asrt_linear_grad_weight(&ctx, ASRT_DTYPE_F32, dy.data(), x.data(), dw.data(),
                          rows, in, out);
  asrt_bias_grad(&ctx, ASRT_DTYPE_F32, dy.data(), db.data(), rows, out);

  auto probed = [](const std::vector<float> &g,
                   const std::vector<size_t> &probes) {
    std::vector<float> v;
    for (size_t i : probes)
      v.push_back(g[i]);
    return v;
  };
  std::vector<size_t> px = probeIndices(x.size());
  std::vector<size_t> pw = probeIndices(w.size());
  // Exact arithmetic (see gridFloats): zero tolerance.
  EXPECT_TRUE(allNear(probed(dx, px), finiteDifferences(&x, px, x, w, bias, dy),
                      0.0, 0.0))
      << "dx";
  EXPECT_TRUE(allNear(probed(dw, pw), finiteDifferences(&w, pw, x, w, bias, dy),
                      0.0, 0.0))
      << "dw";
  // The bias gradient is checked through a forward that has a bias.
  std::vector<size_t> pb = probeIndices(b.size());
  EXPECT_TRUE(allNear(probed(db, pb), finiteDifferences(&b, pb, x, w, &b, dy),
                      0.0, 0.0))
      << "db";
}

TEST_P(LinearTest, Bf16AgreesWithF32) {
  // Inputs that bf16 holds exactly: the two variants then see the same
  // values and differ only in the rounding of their outputs.
  std::vector<float> x = bf16Rounded(uniformFloats(rows * in, 71, -1, 1));
  std::vector<float> w = bf16Rounded(uniformFloats(out * in, 72, -1, 1));
  std::vector<float> b = bf16Rounded(uniformFloats(out, 73, -1, 1));
  std::vector<float> dy = bf16Rounded(uniformFloats(rows * out, 74, -1, 1));
  std::vector<uint16_t> xb = toBf16(x), wb = toBf16(w), bb = toBf16(b),
                        dyb = toBf16(dy);
  const void *bias = hasBias ? static_cast<const void *>(b.data()) : nullptr;
  const void *biasB = hasBias ? static_cast<const void *>(bb.data()) : nullptr;

  std::vector<float> y = poisoned(rows * out), dx = poisoned(rows * in),
                     dw = poisoned(out * in), db = poisoned(out);
  asrt_linear_fwd(&ctx, ASRT_DTYPE_F32, x.data(), w.data(), bias, y.data(),
                  rows, in, out);
  asrt_linear_grad_input(&ctx, ASRT_DTYPE_F32, dy.data(), w.data(), dx.data(),
                         rows, in, out);
  asrt_linear_grad_weight(&ctx, ASRT_DTYPE_F32, dy.data(), x.data(), dw.data(),
                          rows, in, out);
  asrt_bias_grad(&ctx, ASRT_DTYPE_F32, dy.data(), db.data(), rows, out);

  std::vector<uint16_t> yb = poisonedBf16(rows * out),
                        dxb = poisonedBf16(rows * in),
                        dwb = poisonedBf16(out * in), dbb = poisonedBf16(out);
  asrt_linear_fwd(&ctx, ASRT_DTYPE_BF16, xb.data(), wb.data(), biasB, yb.data(),
                  rows, in, out);
  asrt_linear_grad_input(&ctx, ASRT_DTYPE_BF16, dyb.data(), wb.data(),
                         dxb.data(), rows, in, out);
  asrt_linear_grad_weight(&ctx, ASRT_DTYPE_BF16, dyb.data(), xb.data(),
                          dwb.data(), rows, in, out);
  asrt_bias_grad(&ctx, ASRT_DTYPE_BF16, dyb.data(), dbb.data(), rows, out);

  // The GEMMs run in f32 on the converted operands: each bf16 output is the
  // f32 result rounded, within half a bf16 ulp (2^-8 relative) of it.
  const double halfUlp = 1.0 / 256;
  EXPECT_TRUE(bf16CloseToF32(yb, y, halfUlp, 1e-6)) << "y";
  EXPECT_TRUE(bf16CloseToF32(dxb, dx, halfUlp, 1e-6)) << "dx";
  EXPECT_TRUE(bf16CloseToF32(dwb, dw, halfUlp, 1e-6)) << "dw";
  // Column sums in double, rounded once: exactly the f32 sum rounded.
  EXPECT_TRUE(bf16IsRoundedF32(dbb, db)) << "db";
}

const Shape kShapes[] = {
    {1, 1, 1},    {1, 7, 3},    {3, 1, 5},     {5, 13, 9},
    {17, 33, 65}, {64, 31, 10}, {2, 129, 257},
};

std::string
shapeName(const ::testing::TestParamInfo<std::tuple<Shape, bool>> &info) {
  const Shape &s = std::get<0>(info.param);
  return "r" + std::to_string(s.rows) + "_in" + std::to_string(s.in) + "_out" +
         std::to_string(s.out) + (std::get<1>(info.param) ? "_bias" : "");
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearTest,
                         ::testing::Combine(::testing::ValuesIn(kShapes),
                                            ::testing::Bool()),
                         shapeName);

using LinearEdgeTest = CpuKernelTest;

TEST_F(LinearEdgeTest, EmptyReductionsGiveBiasOrZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> b = {0.5f, -2.0f, 3.0f};
  std::vector<float> unusedIn(1, nan);

  // in == 0: y is the bias (or 0) in every row.
  std::vector<float> y = poisoned(2 * 3);
  asrt_linear_fwd(&ctx, ASRT_DTYPE_F32, unusedIn.data(), unusedIn.data(),
                  b.data(), y.data(), 2, 0, 3);
  EXPECT_TRUE(allNear(y, {0.5, -2.0, 3.0, 0.5, -2.0, 3.0}, 0.0, 0.0));
  y = poisoned(2 * 3);
  asrt_linear_fwd(&ctx, ASRT_DTYPE_F32, unusedIn.data(), unusedIn.data(),
                  nullptr, y.data(), 2, 0, 3);
  EXPECT_TRUE(allNear(y, std::vector<double>(6, 0.0), 0.0, 0.0));

  // out == 0: dx is an empty sum.
  std::vector<float> dx = poisoned(2 * 4);
  asrt_linear_grad_input(&ctx, ASRT_DTYPE_F32, unusedIn.data(), unusedIn.data(),
                         dx.data(), 2, 4, 0);
  EXPECT_TRUE(allNear(dx, std::vector<double>(8, 0.0), 0.0, 0.0));

  // rows == 0: dw and db are empty sums.
  std::vector<float> dw = poisoned(3 * 4), db = poisoned(3);
  asrt_linear_grad_weight(&ctx, ASRT_DTYPE_F32, unusedIn.data(),
                          unusedIn.data(), dw.data(), 0, 4, 3);
  asrt_bias_grad(&ctx, ASRT_DTYPE_F32, unusedIn.data(), db.data(), 0, 3);
  EXPECT_TRUE(allNear(dw, std::vector<double>(12, 0.0), 0.0, 0.0));
  EXPECT_TRUE(allNear(db, std::vector<double>(3, 0.0), 0.0, 0.0));
}

TEST_F(LinearEdgeTest, BiasGradAccumulatesManyRowsAccurately) {
  // A batch x sequence of 2^17 rows: a float running sum would be off by
  // ~1e-4 relative here; the kernel's double accumulation is not.
  const int64_t rows = int64_t(1) << 17, out = 5;
  std::vector<float> dy = uniformFloats(rows * out, 61, 0.0f, 1.0f);
  std::vector<float> db = poisoned(out);
  asrt_bias_grad(&ctx, ASRT_DTYPE_F32, dy.data(), db.data(), rows, out);
  std::vector<double> ref(out, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o)
      ref[o] += dy[r * out + o];
  EXPECT_TRUE(allNear(db, ref, 1e-6, 0.0));
}

TEST_F(LinearEdgeTest, NegativeShapeIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float dummy = 0.0f;
  EXPECT_DEATH(asrt_linear_fwd(&ctx, ASRT_DTYPE_F32, &dummy, &dummy, nullptr,
                               &dummy, -1, 1, 1),
               "linear_fwd: rows = -1 is negative");
  EXPECT_DEATH(asrt_bias_grad(&ctx, ASRT_DTYPE_F32, &dummy, &dummy, 1, -3),
               "bias_grad: out = -3 is negative");
}

TEST_F(LinearEdgeTest, UnsupportedDtypeIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float dummy = 0.0f;
  EXPECT_DEATH(asrt_linear_fwd(&ctx, ASRT_DTYPE_F16, &dummy, &dummy, nullptr,
                               &dummy, 1, 1, 1),
               "linear_fwd: dtype 3 \\(f16\\) is not supported; expected f32 "
               "\\(0\\) or bf16 \\(2\\)");
  EXPECT_DEATH(asrt_bias_grad(&ctx, 42, &dummy, &dummy, 1, 1),
               "bias_grad: dtype 42 \\(\\?\\) is not supported");
}

// The fused call is asrt_linear_fwd then asrt_gelu_fwd, bit for bit: the
// compiler may pair the two, the CPU's results must not move.
TEST_F(LinearEdgeTest, LinearGeluIsLinearThenGeluBitForBit) {
  const int64_t rows = 7, in = 9, out = 5;
  std::vector<float> x = uniformFloats(rows * in, 71, -2.0f, 2.0f);
  std::vector<float> w = uniformFloats(out * in, 72, -1.0f, 1.0f);
  std::vector<float> b = uniformFloats(out, 73, -1.0f, 1.0f);
  std::vector<float> pre = poisoned(rows * out), y = poisoned(rows * out);
  asrt_linear_gelu_fwd(&ctx, ASRT_DTYPE_F32, x.data(), w.data(), b.data(),
                       pre.data(), y.data(), rows, in, out);
  std::vector<float> pre2 = poisoned(rows * out), y2 = poisoned(rows * out);
  asrt_linear_fwd(&ctx, ASRT_DTYPE_F32, x.data(), w.data(), b.data(),
                  pre2.data(), rows, in, out);
  asrt_gelu_fwd(&ctx, ASRT_DTYPE_F32, pre2.data(), y2.data(), rows * out);
  EXPECT_EQ(0, std::memcmp(pre.data(), pre2.data(), pre.size() * 4));
  EXPECT_EQ(0, std::memcmp(y.data(), y2.data(), y.size() * 4));
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(asrt_linear_gelu_fwd(&ctx, ASRT_DTYPE_F32, x.data(), w.data(),
                                    nullptr, pre.data(), y.data(), rows, in,
                                    out),
               "linear_gelu_fwd: the bias is null");
}

// The backward's fused call is asrt_linear_grad_input, asrt_gelu_grad and
// asrt_bias_grad, bit for bit, with or without the bias gradient.
TEST_F(LinearEdgeTest, LinearGradGeluIsItsThreeCallsBitForBit) {
  const int64_t rows = 6, in = 5, out = 7;
  std::vector<float> dy = uniformFloats(rows * out, 81, -1.0f, 1.0f);
  std::vector<float> w = uniformFloats(out * in, 82, -1.0f, 1.0f);
  std::vector<float> pre = uniformFloats(rows * in, 83, -3.0f, 3.0f);
  std::vector<float> dx = poisoned(rows * in), dpre = poisoned(rows * in);
  std::vector<float> db = poisoned(in), db2 = poisoned(in);
  asrt_linear_grad_input(&ctx, ASRT_DTYPE_F32, dy.data(), w.data(), dx.data(),
                         rows, in, out);
  asrt_gelu_grad(&ctx, ASRT_DTYPE_F32, dx.data(), pre.data(), dpre.data(),
                 rows * in);
  asrt_bias_grad(&ctx, ASRT_DTYPE_F32, dpre.data(), db.data(), rows, in);
  std::vector<float> fused = poisoned(rows * in), fused2 = poisoned(rows * in);
  asrt_linear_grad_gelu(&ctx, ASRT_DTYPE_F32, dy.data(), w.data(), pre.data(),
                        fused.data(), db2.data(), rows, in, out);
  EXPECT_EQ(0, std::memcmp(fused.data(), dpre.data(), dpre.size() * 4));
  EXPECT_EQ(0, std::memcmp(db2.data(), db.data(), db.size() * 4));
  asrt_linear_grad_gelu(&ctx, ASRT_DTYPE_F32, dy.data(), w.data(), pre.data(),
                        fused2.data(), nullptr, rows, in, out);
  EXPECT_EQ(0, std::memcmp(fused2.data(), dpre.data(), dpre.size() * 4));
}

// The weight and bias gradients of one dy in one call: the two calls' bits.
TEST_F(LinearEdgeTest, LinearGradWeightBiasIsItsTwoCallsBitForBit) {
  const int64_t rows = 9, in = 4, out = 6;
  std::vector<float> dy = uniformFloats(rows * out, 91, -1.0f, 1.0f);
  std::vector<float> x = uniformFloats(rows * in, 92, -1.0f, 1.0f);
  std::vector<float> dw = poisoned(out * in), db = poisoned(out);
  std::vector<float> dw2 = poisoned(out * in), db2 = poisoned(out);
  asrt_linear_grad_weight(&ctx, ASRT_DTYPE_F32, dy.data(), x.data(), dw.data(),
                          rows, in, out);
  asrt_bias_grad(&ctx, ASRT_DTYPE_F32, dy.data(), db.data(), rows, out);
  asrt_linear_grad_weight_bias(&ctx, ASRT_DTYPE_F32, dy.data(), x.data(),
                               dw2.data(), db2.data(), rows, in, out);
  EXPECT_EQ(0, std::memcmp(dw.data(), dw2.data(), dw.size() * 4));
  EXPECT_EQ(0, std::memcmp(db.data(), db2.data(), db.size() * 4));
}

} // namespace
} // namespace autoshard::rt::test
