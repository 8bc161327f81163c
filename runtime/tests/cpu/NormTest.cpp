// Tests of the CPU LayerNorm and RMSNorm kernels: references, differences.
#include "TestUtil.h"

#include "autoshard/rt/abi.h"

#include <string>
#include <tuple>

namespace autoshard::rt::test {
namespace {

constexpr float kEps = 1e-5f;

/// x / sqrt(var + eps) statistics of one row in double: the mean (0 for
/// RMSNorm) and 1 / sqrt(E[(x - mean)^2] + eps).
struct RowRef {
  double mean, rstd;
};

RowRef layerNormRow(const float *x, int64_t cols) {
  double mean = 0.0;
  for (int64_t j = 0; j < cols; ++j)
    mean += x[j];
  mean /= cols;
  double var = 0.0;
  for (int64_t j = 0; j < cols; ++j)
    var += (x[j] - mean) * (x[j] - mean);
  var /= cols;
  return {mean, 1.0 / std::sqrt(var + kEps)};
}

RowRef rmsNormRow(const float *x, int64_t cols) {
  double ms = 0.0;
  for (int64_t j = 0; j < cols; ++j)
    ms += static_cast<double>(x[j]) * x[j];
  ms /= cols;
  return {0.0, 1.0 / std::sqrt(ms + kEps)};
}

/// The backward pass of y = xhat * gamma (+ beta), xhat = (x - mean) rstd,
/// derived by hand for both norms, in double:
///   g = dy gamma
///   LayerNorm: dx = rstd (g - mean(g) - xhat mean(g xhat))
///   RMSNorm:   dx = rstd (g - xhat mean(g xhat))
///   dgamma = sum over rows of dy xhat;  dbeta = sum over rows of dy.
/// Tolerances are relative to the magnitudes of the terms, which cancel.
struct NormGradRef {
  std::vector<double> dx, dxTol, dgamma, dgammaTol, dbeta, dbetaTol;
};

NormGradRef normGradRef(bool layerNorm, const std::vector<float> &x,
                        const std::vector<float> &gamma,
                        const std::vector<float> &dy, int64_t rows,
                        int64_t cols) {
  NormGradRef r;
  r.dx.resize(rows * cols);
  r.dxTol.resize(rows * cols);
  r.dgamma.assign(cols, 0.0);
  r.dgammaTol.assign(cols, 0.0);
  r.dbeta.assign(cols, 0.0);
  r.dbetaTol.assign(cols, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    const float *xr = x.data() + i * cols;
    const float *dyr = dy.data() + i * cols;
    RowRef s = layerNorm ? layerNormRow(xr, cols) : rmsNormRow(xr, cols);
    std::vector<double> xhat(cols), g(cols);
    double meanG = 0.0, meanGXhat = 0.0, magG = 0.0, magGXhat = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      xhat[j] = (xr[j] - s.mean) * s.rstd;
      g[j] = static_cast<double>(dyr[j]) * gamma[j];
      meanG += g[j] / cols;
      meanGXhat += g[j] * xhat[j] / cols;
      magG += std::fabs(g[j]) / cols;
      magGXhat += std::fabs(g[j] * xhat[j]) / cols;
      r.dgamma[j] += dyr[j] * xhat[j];
      r.dgammaTol[j] += 1e-5 * std::fabs(dyr[j] * xhat[j]);
      r.dbeta[j] += dyr[j];
      r.dbetaTol[j] += 1e-6 * std::fabs(dyr[j]);
    }
    if (!layerNorm)
      meanG = magG = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      r.dx[i * cols + j] = s.rstd * (g[j] - meanG - xhat[j] * meanGXhat);
      r.dxTol[i * cols + j] =
          1e-5 * s.rstd *
              (std::fabs(g[j]) + magG + std::fabs(xhat[j]) * magGXhat) +
          1e-30;
    }
  }
  for (int64_t j = 0; j < cols; ++j) {
    r.dgammaTol[j] += 1e-30;
    r.dbetaTol[j] += 1e-30;
  }
  return r;
}

/// The kernels under test, one interface for both norms: beta and dbeta
/// are ignored for RMSNorm.
struct NormKernels {
  bool layerNorm;
  asrt_context *ctx;

  void forward(int32_t dtype, const void *x, const void *gamma,
               const void *beta, void *y, int64_t rows, int64_t cols) const {
    if (layerNorm)
      asrt_layer_norm_fwd(ctx, dtype, x, gamma, beta, y, rows, cols, kEps);
    else
      asrt_rms_norm_fwd(ctx, dtype, x, gamma, y, rows, cols, kEps);
  }
  void grad(int32_t dtype, const void *dy, const void *x, const void *gamma,
            void *dx, void *dgamma, void *dbeta, int64_t rows,
            int64_t cols) const {
    if (layerNorm)
      asrt_layer_norm_grad(ctx, dtype, dy, x, gamma, dx, dgamma, dbeta, rows,
                           cols, kEps);
    else
      asrt_rms_norm_grad(ctx, dtype, dy, x, gamma, dx, dgamma, rows, cols,
                         kEps);
  }
};

class NormTest : public CpuKernelTest,
                 public ::testing::WithParamInterface<
                     std::tuple<bool, std::pair<int64_t, int64_t>>> {
protected:
  void SetUp() override {
    layerNorm = std::get<0>(GetParam());
    std::tie(rows, cols) = std::get<1>(GetParam());
    kernels = {layerNorm, &ctx};
    // A mean of 3 and a spread of ~1: the centring is exercised.
    x = uniformFloats(rows * cols, 1 + cols, 2.0f, 4.0f);
    gamma = uniformFloats(cols, 2 + cols, 0.5f, 1.5f);
    beta = uniformFloats(cols, 3 + cols, -0.5f, 0.5f);
  }

  std::vector<float> forward() {
    std::vector<float> y = poisoned(rows * cols);
    kernels.forward(ASRT_DTYPE_F32, x.data(), gamma.data(), beta.data(),
                    y.data(), rows, cols);
    return y;
  }

  bool layerNorm = true;
  int64_t rows = 0, cols = 0;
  NormKernels kernels{true, nullptr};
  std::vector<float> x, gamma, beta;
};

TEST_P(NormTest, ForwardMatchesReference) {
  std::vector<float> y = forward();
  std::vector<double> ref(rows * cols), tol(rows * cols);
  for (int64_t i = 0; i < rows; ++i) {
    const float *xr = x.data() + i * cols;
    RowRef s = layerNorm ? layerNormRow(xr, cols) : rmsNormRow(xr, cols);
    for (int64_t j = 0; j < cols; ++j) {
      double scaled = (xr[j] - s.mean) * s.rstd * gamma[j];
      double shift = layerNorm ? beta[j] : 0.0;
      ref[i * cols + j] = scaled + shift;
      tol[i * cols + j] = 1e-5 * (std::fabs(scaled) + std::fabs(shift)) + 1e-30;
    }
  }
  EXPECT_TRUE(allWithin(y, ref, tol));
}

TEST_P(NormTest, GradMatchesAnalyticReference) {
  std::vector<float> dy = uniformFloats(rows * cols, 4 + cols, -1.0f, 1.0f);
  std::vector<float> dx = poisoned(rows * cols), dgamma = poisoned(cols),
                     dbeta = poisoned(cols);
  kernels.grad(ASRT_DTYPE_F32, dy.data(), x.data(), gamma.data(), dx.data(),
               dgamma.data(), dbeta.data(), rows, cols);
  NormGradRef ref = normGradRef(layerNorm, x, gamma, dy, rows, cols);
  EXPECT_TRUE(allWithin(dx, ref.dx, ref.dxTol)) << "dx";
  EXPECT_TRUE(allWithin(dgamma, ref.dgamma, ref.dgammaTol)) << "dgamma";
  if (layerNorm) {
    EXPECT_TRUE(allWithin(dbeta, ref.dbeta, ref.dbetaTol)) << "dbeta";
  }
}

TEST_P(NormTest, GradMatchesFiniteDifferencesOfKernelForward) {
  std::vector<float> w = uniformFloats(rows * cols, 5 + cols, -1.0f, 1.0f);
  std::vector<float> dx = poisoned(rows * cols), dgamma = poisoned(cols),
                     dbeta = poisoned(cols);
  kernels.grad(ASRT_DTYPE_F32, w.data(), x.data(), gamma.data(), dx.data(),
               dgamma.data(), dbeta.data(), rows, cols);
  auto fwd = [&] { return forward(); };
  // x: a step of 2e-2 against a spread of ~1 keeps the truncation error
  // (h^2/6 of a third derivative of order rstd^3) and the f32 rounding of
  // a row's outputs (~sqrt(cols) ulp / h) both near 1e-4.
  EXPECT_TRUE(gradMatchesDifferences(dx, fwd, x, w, 2e-2f, 5e-3, 5e-4)) << "dx";
  // gamma and beta enter linearly: the difference is exact but for f32
  // rounding of y.
  EXPECT_TRUE(gradMatchesDifferences(dgamma, fwd, gamma, w, 0.25f, 1e-5,
                                     1e-5 * std::sqrt(double(rows))))
      << "dgamma";
  if (layerNorm) {
    EXPECT_TRUE(gradMatchesDifferences(dbeta, fwd, beta, w, 0.25f, 1e-5,
                                       1e-5 * std::sqrt(double(rows))))
        << "dbeta";
  }
}

TEST_P(NormTest, Bf16IsRoundedF32) {
  x = bf16Rounded(x);
  gamma = bf16Rounded(gamma);
  beta = bf16Rounded(beta);
  std::vector<float> dy =
      bf16Rounded(uniformFloats(rows * cols, 6 + cols, -1.0f, 1.0f));
  std::vector<uint16_t> xB = toBf16(x), gammaB = toBf16(gamma),
                        betaB = toBf16(beta), dyB = toBf16(dy);

  std::vector<uint16_t> yB = poisonedBf16(rows * cols);
  kernels.forward(ASRT_DTYPE_BF16, xB.data(), gammaB.data(), betaB.data(),
                  yB.data(), rows, cols);
  std::vector<float> y = forward();
  EXPECT_TRUE(bf16IsRoundedF32(yB, y)) << "y";
  EXPECT_TRUE(bf16CloseToF32(yB, y)) << "y";

  std::vector<float> dx = poisoned(rows * cols), dgamma = poisoned(cols),
                     dbeta = poisoned(cols);
  kernels.grad(ASRT_DTYPE_F32, dy.data(), x.data(), gamma.data(), dx.data(),
               dgamma.data(), dbeta.data(), rows, cols);
  std::vector<uint16_t> dxB = poisonedBf16(rows * cols),
                        dgammaB = poisonedBf16(cols),
                        dbetaB = poisonedBf16(cols);
  kernels.grad(ASRT_DTYPE_BF16, dyB.data(), xB.data(), gammaB.data(),
               dxB.data(), dgammaB.data(), dbetaB.data(), rows, cols);
  EXPECT_TRUE(bf16IsRoundedF32(dxB, dx)) << "dx";
  EXPECT_TRUE(bf16IsRoundedF32(dgammaB, dgamma)) << "dgamma";
  if (layerNorm) {
    EXPECT_TRUE(bf16IsRoundedF32(dbetaB, dbeta)) << "dbeta";
  }
}

const std::pair<int64_t, int64_t> kShapes[] = {
    {1, 1}, {3, 7}, {5, 64}, {4, 769}};

std::string normName(const ::testing::TestParamInfo<
                     std::tuple<bool, std::pair<int64_t, int64_t>>> &p) {
  auto [rows, cols] = std::get<1>(p.param);
  return std::string(std::get<0>(p.param) ? "layer" : "rms") + "_r" +
         std::to_string(rows) + "_c" + std::to_string(cols);
}

INSTANTIATE_TEST_SUITE_P(Shapes, NormTest,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::ValuesIn(kShapes)),
                         normName);

using NormEdgeTest = CpuKernelTest;

TEST_F(NormEdgeTest, LayerNormOfRowsWithLargeMeanKeepsAccuracy) {
  // A residual stream offset by 1000 with a spread of 1e-2: E[x^2] - E[x]^2
  // in f32 would be all rounding, and a float mean alone is off by 3e-5,
  // i.e. 3e-3 of the spread.
  const int64_t rows = 2, cols = 300;
  std::vector<float> x = uniformFloats(rows * cols, 7, 999.99f, 1000.01f);
  std::vector<float> gamma(cols, 1.0f), beta(cols, 0.0f);
  std::vector<float> y = poisoned(rows * cols);
  asrt_layer_norm_fwd(&ctx, ASRT_DTYPE_F32, x.data(), gamma.data(), beta.data(),
                      y.data(), rows, cols, kEps);
  std::vector<double> ref(rows * cols);
  for (int64_t i = 0; i < rows; ++i) {
    // eps would dominate a variance of 3e-5; compare with it included.
    RowRef s = layerNormRow(x.data() + i * cols, cols);
    for (int64_t j = 0; j < cols; ++j)
      ref[i * cols + j] = (x[i * cols + j] - s.mean) * s.rstd;
  }
  EXPECT_TRUE(allNear(y, ref, 1e-5, 1e-6));
}

TEST_F(NormEdgeTest, ConstantRowsGiveBetaAndFiniteGradients) {
  const int64_t rows = 2, cols = 5;
  std::vector<float> x(rows * cols, 7.0f), gamma = {1, 2, 3, 4, 5},
                                           beta = {-1, 0, 1, 2, 3};
  std::vector<float> y = poisoned(rows * cols);
  asrt_layer_norm_fwd(&ctx, ASRT_DTYPE_F32, x.data(), gamma.data(), beta.data(),
                      y.data(), rows, cols, kEps);
  for (int64_t i = 0; i < rows * cols; ++i)
    EXPECT_EQ(y[i], beta[i % cols]);
  std::vector<float> dy = uniformFloats(rows * cols, 8, -1.0f, 1.0f);
  std::vector<float> dx = poisoned(rows * cols), dgamma = poisoned(cols),
                     dbeta = poisoned(cols);
  asrt_layer_norm_grad(&ctx, ASRT_DTYPE_F32, dy.data(), x.data(), gamma.data(),
                       dx.data(), dgamma.data(), dbeta.data(), rows, cols,
                       kEps);
  // With var = 0, rstd = eps^-1/2 and xhat = 0: dx = rstd (g - mean(g)).
  NormGradRef ref = normGradRef(true, x, gamma, dy, rows, cols);
  EXPECT_TRUE(allWithin(dx, ref.dx, ref.dxTol));
  EXPECT_TRUE(allNear(dgamma, std::vector<double>(cols, 0.0), 0.0, 0.0));
}

TEST_F(NormEdgeTest, BadArgumentsAreFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float v = 1.0f, out = 0.0f;
  EXPECT_DEATH(
      asrt_layer_norm_fwd(&ctx, ASRT_DTYPE_F32, &v, &v, &v, &out, 1, 1, -1.0f),
      "layer_norm_fwd: eps = -1 must be non-negative");
  EXPECT_DEATH(
      asrt_rms_norm_fwd(&ctx, ASRT_DTYPE_F32, &v, nullptr, &out, 1, 1, kEps),
      "rms_norm_fwd: the weight pointer is null");
  EXPECT_DEATH(asrt_layer_norm_grad(&ctx, ASRT_DTYPE_F32, &v, &v, &v, &out,
                                    &out, nullptr, 1, 1, kEps),
               "layer_norm_grad: the dbeta pointer is null");
}

} // namespace
} // namespace autoshard::rt::test
