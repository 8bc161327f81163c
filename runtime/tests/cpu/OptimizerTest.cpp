// Tests of the CPU optimizer updates against torch's SGD and AdamW.
#include "TestUtil.h"

#include "autoshard/rt/abi.h"

#include <optional>
#include <string>
#include <tuple>

namespace autoshard::rt::test {
namespace {

/// torch.optim.SGD's documented step (dampening 0), in double, after
/// clipping has scaled the gradient:
///   g = grad_scale * grad + wd * p
///   b = g on the first step, momentum * b + g afterwards   (momentum != 0)
///   g = nesterov ? g + momentum * b : b
///   p = p - lr * g
/// The buffer starts absent, as in torch, rather than zero as in the ABI;
/// the two agree, which is part of what the test checks.
struct TorchSgd {
  double momentum, weightDecay;
  bool nesterov;
  std::vector<double> param;
  std::optional<std::vector<double>> buf;

  void step(const std::vector<float> &grad, double lr, double gradScale = 1.0) {
    for (size_t i = 0; i < param.size(); ++i) {
      double g = gradScale * grad[i] + weightDecay * param[i];
      if (momentum != 0.0) {
        if (!buf)
          buf.emplace(param.size(), 0.0);
        double b = buf->at(i);
        b = firstStep ? g : momentum * b + g;
        (*buf)[i] = b;
        g = nesterov ? g + momentum * b : b;
      }
      param[i] -= lr * g;
    }
    firstStep = false;
  }

  bool firstStep = true;
};

class SgdTest : public CpuKernelTest,
                public ::testing::WithParamInterface<
                    std::tuple<float, float, bool>> { // momentum, wd, nesterov
};

TEST_P(SgdTest, ThreeStepsMatchTorchSgd) {
  auto [momentum, weightDecay, nesterov] = GetParam();
  const int64_t n = 37;
  std::vector<float> param = uniformFloats(n, 1, -1.0f, 1.0f);
  // The driver zero-initialises momentum buffers.
  std::vector<float> buf(n, 0.0f);
  TorchSgd ref{momentum, weightDecay, nesterov, toDouble(param), {}};
  const float lrs[] = {0.1f, 0.05f, 0.2f}; // a schedule, read from memory
  for (int s = 0; s < 3; ++s) {
    std::vector<float> grad = uniformFloats(n, 10 + s, -2.0f, 2.0f);
    float lr = lrs[s];
    bool useBuf = momentum != 0.0f;
    asrt_sgd_update(&ctx, ASRT_DTYPE_F32, param.data(), grad.data(), &lr,
                    useBuf ? buf.data() : nullptr, nullptr, param.data(),
                    useBuf ? buf.data() : nullptr, n, momentum, weightDecay,
                    nesterov);
    ref.step(grad, lr);
  }
  EXPECT_TRUE(allNear(param, ref.param, 1e-6, 1e-6));
  if (momentum != 0.0f) {
    EXPECT_TRUE(allNear(buf, *ref.buf, 1e-6, 1e-6));
  }
}

TEST_P(SgdTest, InPlaceEqualsOutOfPlace) {
  auto [momentum, weightDecay, nesterov] = GetParam();
  const int64_t n = 29;
  std::vector<float> param = uniformFloats(n, 2, -1.0f, 1.0f);
  std::vector<float> buf = momentum != 0.0f ? uniformFloats(n, 3, -1.0f, 1.0f)
                                            : std::vector<float>();
  std::vector<float> grad = uniformFloats(n, 4, -1.0f, 1.0f);
  float lr = 0.03f;
  float *bufIn = buf.empty() ? nullptr : buf.data();

  std::vector<float> paramOut = poisoned(n), bufOut = poisoned(buf.size());
  asrt_sgd_update(&ctx, ASRT_DTYPE_F32, param.data(), grad.data(), &lr, bufIn,
                  nullptr, paramOut.data(), bufIn ? bufOut.data() : nullptr, n,
                  momentum, weightDecay, nesterov);
  std::vector<float> paramIn = param, bufInPlace = buf;
  asrt_sgd_update(&ctx, ASRT_DTYPE_F32, paramIn.data(), grad.data(), &lr,
                  bufIn ? bufInPlace.data() : nullptr, nullptr, paramIn.data(),
                  bufIn ? bufInPlace.data() : nullptr, n, momentum, weightDecay,
                  nesterov);
  EXPECT_TRUE(bitwiseEqual(paramIn, paramOut));
  EXPECT_TRUE(bitwiseEqual(bufInPlace, bufOut));
  // The out-of-place call must not have touched its inputs.
  EXPECT_TRUE(bitwiseEqual(param, uniformFloats(n, 2, -1.0f, 1.0f)));
}

INSTANTIATE_TEST_SUITE_P(
    Settings, SgdTest,
    ::testing::Combine(::testing::Values(0.0f, 0.9f),
                       ::testing::Values(0.0f, 0.01f), ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<float, float, bool>> &p) {
      // No structured binding: its commas would split the macro argument.
      return std::string(std::get<0>(p.param) != 0.0f ? "momentum" : "plain") +
             (std::get<1>(p.param) != 0.0f ? "_decay" : "") +
             (std::get<2>(p.param) ? "_nesterov" : "");
    });

TEST_P(SgdTest, ScaledBf16GradientsMatchTorchSgd) {
  auto [momentum, weightDecay, nesterov] = GetParam();
  const int64_t n = 41;
  std::vector<float> param = uniformFloats(n, 5, -1.0f, 1.0f);
  std::vector<float> buf(n, 0.0f);
  TorchSgd ref{momentum, weightDecay, nesterov, toDouble(param), {}};
  const float scales[] = {0.37f, 1.0f, 0.05f}; // clipping coefficients
  for (int s = 0; s < 3; ++s) {
    // The model sees the bf16 gradient's exact values.
    std::vector<float> grad =
        bf16Rounded(uniformFloats(n, 20 + s, -2.0f, 2.0f));
    std::vector<uint16_t> gradB = toBf16(grad);
    float lr = 0.1f, scale = scales[s];
    bool useBuf = momentum != 0.0f;
    asrt_sgd_update(&ctx, ASRT_DTYPE_BF16, param.data(), gradB.data(), &lr,
                    useBuf ? buf.data() : nullptr, &scale, param.data(),
                    useBuf ? buf.data() : nullptr, n, momentum, weightDecay,
                    nesterov);
    ref.step(grad, lr, scale);
  }
  EXPECT_TRUE(allNear(param, ref.param, 1e-6, 1e-6));
  if (momentum != 0.0f) {
    EXPECT_TRUE(allNear(buf, *ref.buf, 1e-6, 1e-6));
  }
}

using SgdEdgeTest = CpuKernelTest;

// p = 1, grad = 0.5 on both steps, lr = 0.1, weight decay 0.1, buffer
// starting at 0. Numbers worked out by hand from torch's documentation.
TEST_F(SgdEdgeTest, TwoStepsByHand) {
  struct Case {
    float momentum;
    int32_t nesterov;
    float p1, p2, b2;
  };
  const Case cases[] = {
      // g1 = 0.6, p1 = 1 - 0.06; g2 = 0.5 + 0.094 = 0.594,
      // p2 = 0.94 - 0.0594.
      {0.0f, 0, 0.94f, 0.8806f, 0.0f},
      // b1 = 0.6, p1 = 0.94; g2 = 0.594, b2 = 0.54 + 0.594 = 1.134,
      // p2 = 0.94 - 0.1134.
      {0.9f, 0, 0.94f, 0.8266f, 1.134f},
      // b1 = 0.6, step1 = 0.6 + 0.54 = 1.14, p1 = 0.886;
      // g2 = 0.5 + 0.0886 = 0.5886, b2 = 0.54 + 0.5886 = 1.1286,
      // step2 = 0.5886 + 1.01574 = 1.60434, p2 = 0.886 - 0.160434.
      {0.9f, 1, 0.886f, 0.725566f, 1.1286f},
  };
  for (const Case &c : cases) {
    float p = 1.0f, b = 0.0f, grad = 0.5f, lr = 0.1f;
    float *buf = c.momentum != 0.0f ? &b : nullptr;
    asrt_sgd_update(&ctx, ASRT_DTYPE_F32, &p, &grad, &lr, buf, nullptr, &p, buf,
                    1, c.momentum, 0.1f, c.nesterov);
    EXPECT_NEAR(p, c.p1, 1e-6)
        << "momentum " << c.momentum << " nesterov " << c.nesterov;
    asrt_sgd_update(&ctx, ASRT_DTYPE_F32, &p, &grad, &lr, buf, nullptr, &p, buf,
                    1, c.momentum, 0.1f, c.nesterov);
    EXPECT_NEAR(p, c.p2, 1e-6)
        << "momentum " << c.momentum << " nesterov " << c.nesterov;
    EXPECT_NEAR(b, c.b2, 1e-6);
  }
}

TEST_F(SgdEdgeTest, MissingBuffersOrRateAreFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float p = 1.0f, g = 1.0f, lr = 0.1f, b = 0.0f;
  EXPECT_DEATH(asrt_sgd_update(&ctx, ASRT_DTYPE_F32, &p, &g, &lr, nullptr,
                               nullptr, &p, &b, 1, 0.9f, 0.0f, 0),
               "sgd_update: momentum 0.9 needs both momentum buffers");
  EXPECT_DEATH(asrt_sgd_update(&ctx, ASRT_DTYPE_F32, &p, &g, nullptr, nullptr,
                               nullptr, &p, nullptr, 1, 0.0f, 0.0f, 0),
               "sgd_update: the learning-rate pointer is null");
}

/// torch.optim.AdamW's documented algorithm, in double (the ABI's float
/// hyperparameters widened):
///   p = p (1 - lr wd)                                (decoupled decay)
///   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
///   p = p - lr (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
/// with t counting from 1 and g the clipped gradient.
struct TorchAdamW {
  double beta1, beta2, eps, weightDecay;
  std::vector<double> param, m, v;
  int t = 0;

  void step(const std::vector<float> &grad, double lr, double gradScale) {
    ++t;
    const double bc1 = 1.0 - std::pow(beta1, t);
    const double bc2 = 1.0 - std::pow(beta2, t);
    for (size_t i = 0; i < param.size(); ++i) {
      double g = gradScale * grad[i];
      param[i] *= 1.0 - lr * weightDecay;
      m[i] = beta1 * m[i] + (1.0 - beta1) * g;
      v[i] = beta2 * v[i] + (1.0 - beta2) * g * g;
      param[i] -= lr * (m[i] / bc1) / (std::sqrt(v[i] / bc2) + eps);
    }
  }
};

class AdamWTest : public CpuKernelTest,
                  public ::testing::WithParamInterface<
                      std::tuple<float, bool, bool>> { // wd, scaled, bf16
};

TEST_P(AdamWTest, TwoStepsMatchTorchAdamW) {
  auto [weightDecay, scaled, bf16] = GetParam();
  const int64_t n = 37;
  const float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  std::vector<float> param = uniformFloats(n, 1, -1.0f, 1.0f);
  // The driver zero-initialises the moments and the step counter.
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  int32_t step = 0;
  TorchAdamW ref{beta1,
                 beta2,
                 eps,
                 weightDecay,
                 toDouble(param),
                 std::vector<double>(n, 0.0),
                 std::vector<double>(n, 0.0)};
  const float lrs[] = {3e-3f, 1e-2f};
  const float scales[] = {0.25f, 0.6f};
  for (int s = 0; s < 2; ++s) {
    std::vector<float> grad = uniformFloats(n, 10 + s, -1.0f, 1.0f);
    // Small and zero gradients: the eps and the v -> 0 paths.
    grad[0] = 0.0f;
    grad[1] = 1e-6f;
    if (bf16)
      grad = bf16Rounded(grad);
    std::vector<uint16_t> gradB = toBf16(grad);
    float lr = lrs[s], scale = scales[s];
    asrt_increment_i32(&ctx, &step, &step);
    asrt_adamw_update(
        &ctx, bf16 ? ASRT_DTYPE_BF16 : ASRT_DTYPE_F32, param.data(),
        bf16 ? static_cast<const void *>(gradB.data())
             : static_cast<const void *>(grad.data()),
        m.data(), v.data(), &lr, &step, scaled ? &scale : nullptr, param.data(),
        m.data(), v.data(), n, beta1, beta2, eps, weightDecay);
    ref.step(grad, lr, scaled ? scale : 1.0);
  }
  EXPECT_EQ(step, 2);
  EXPECT_TRUE(allNear(param, ref.param, 1e-6, 1e-7)) << "param";
  // m sums terms of ~0.1 |g| that can cancel: absolute slack of a few f32
  // roundings of such a term.
  EXPECT_TRUE(allNear(m, ref.m, 1e-6, 3e-8)) << "exp_avg";
  EXPECT_TRUE(allNear(v, ref.v, 1e-6, 1e-18)) << "exp_avg_sq";
}

TEST_P(AdamWTest, InPlaceEqualsOutOfPlace) {
  auto [weightDecay, scaled, bf16] = GetParam();
  const int64_t n = 29;
  std::vector<float> param = uniformFloats(n, 2, -1.0f, 1.0f);
  std::vector<float> m = uniformFloats(n, 3, -0.1f, 0.1f);
  std::vector<float> v = uniformFloats(n, 4, 0.0f, 0.01f);
  std::vector<float> grad = bf16Rounded(uniformFloats(n, 5, -1.0f, 1.0f));
  std::vector<uint16_t> gradB = toBf16(grad);
  const void *g = bf16 ? static_cast<const void *>(gradB.data())
                       : static_cast<const void *>(grad.data());
  const int32_t dtype = bf16 ? ASRT_DTYPE_BF16 : ASRT_DTYPE_F32;
  float lr = 0.01f, scale = 0.5f;
  int32_t step = 3;
  std::vector<float> pOut = poisoned(n), mOut = poisoned(n), vOut = poisoned(n);
  asrt_adamw_update(&ctx, dtype, param.data(), g, m.data(), v.data(), &lr,
                    &step, scaled ? &scale : nullptr, pOut.data(), mOut.data(),
                    vOut.data(), n, 0.9f, 0.999f, 1e-8f, weightDecay);
  std::vector<float> p2 = param, m2 = m, v2 = v;
  asrt_adamw_update(&ctx, dtype, p2.data(), g, m2.data(), v2.data(), &lr, &step,
                    scaled ? &scale : nullptr, p2.data(), m2.data(), v2.data(),
                    n, 0.9f, 0.999f, 1e-8f, weightDecay);
  EXPECT_TRUE(bitwiseEqual(p2, pOut));
  EXPECT_TRUE(bitwiseEqual(m2, mOut));
  EXPECT_TRUE(bitwiseEqual(v2, vOut));
  // bf16 and f32 gradients of the same values give the same update.
  std::vector<float> p3 = poisoned(n), m3 = poisoned(n), v3 = poisoned(n);
  asrt_adamw_update(&ctx, ASRT_DTYPE_F32, param.data(), grad.data(), m.data(),
                    v.data(), &lr, &step, scaled ? &scale : nullptr, p3.data(),
                    m3.data(), v3.data(), n, 0.9f, 0.999f, 1e-8f, weightDecay);
  EXPECT_TRUE(bitwiseEqual(p3, pOut));
}

INSTANTIATE_TEST_SUITE_P(
    Settings, AdamWTest,
    ::testing::Combine(::testing::Values(0.0f, 0.1f), ::testing::Bool(),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<float, bool, bool>> &p) {
      return std::string(std::get<0>(p.param) != 0.0f ? "decay" : "nodecay") +
             (std::get<1>(p.param) ? "_scaled" : "") +
             (std::get<2>(p.param) ? "_bf16" : "_f32");
    });

// The multi-tensor call is the single one over each tensor, bit for bit:
// tensors of several sizes (an empty one included), each with its own
// weight decay, in place and not.
TEST_P(AdamWTest, MultiEqualsOneCallPerTensor) {
  auto [weightDecay, scaled, bf16] = GetParam();
  const int64_t sizes[] = {29, 0, 1, 300, 7};
  const int32_t dtype = bf16 ? ASRT_DTYPE_BF16 : ASRT_DTYPE_F32;
  float lr = 0.01f, scale = 0.5f;
  int32_t step = 3;
  const float *gradScale = scaled ? &scale : nullptr;
  struct Tensor {
    std::vector<float> param, m, v, grad, pOut, mOut, vOut;
    std::vector<uint16_t> gradB;
    float decay;
    const void *g() const {
      return gradB.empty() ? static_cast<const void *>(grad.data())
                           : static_cast<const void *>(gradB.data());
    }
  };
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    int64_t n = sizes[i];
    uint32_t seed = 10 * uint32_t(i);
    Tensor t{uniformFloats(n, seed + 1, -1.0f, 1.0f),
             uniformFloats(n, seed + 2, -0.1f, 0.1f),
             uniformFloats(n, seed + 3, 0.0f, 0.01f),
             bf16Rounded(uniformFloats(n, seed + 4, -1.0f, 1.0f)),
             poisoned(n),
             poisoned(n),
             poisoned(n),
             {},
             // Every other tensor decays (biases and norms do not).
             i % 2 ? 0.0f : weightDecay};
    if (bf16)
      t.gradB = toBf16(t.grad);
    tensors.push_back(std::move(t));
  }
  // One descriptor per tensor, writing to the outputs or in place.
  auto updateAll = [&](bool inPlace) {
    std::vector<asrt_adamw_tensor> list;
    for (Tensor &t : tensors)
      list.push_back({t.param.data(), t.g(), t.m.data(), t.v.data(),
                      inPlace ? t.param.data() : t.pOut.data(),
                      inPlace ? t.m.data() : t.mOut.data(),
                      inPlace ? t.v.data() : t.vOut.data(),
                      int64_t(t.param.size()), t.decay});
    asrt_adamw_update_multi(&ctx, dtype, list.data(), int64_t(list.size()),
                            &lr, &step, gradScale, 0.9f, 0.999f, 1e-8f);
  };
  updateAll(/*inPlace=*/false);
  for (size_t i = 0; i < tensors.size(); ++i) {
    Tensor &t = tensors[i];
    int64_t n = int64_t(t.param.size());
    std::vector<float> p1 = poisoned(n), m1 = poisoned(n), v1 = poisoned(n);
    asrt_adamw_update(&ctx, dtype, t.param.data(), t.g(), t.m.data(),
                      t.v.data(), &lr, &step, gradScale, p1.data(), m1.data(),
                      v1.data(), n, 0.9f, 0.999f, 1e-8f, t.decay);
    EXPECT_TRUE(bitwiseEqual(t.pOut, p1)) << "tensor " << i;
    EXPECT_TRUE(bitwiseEqual(t.mOut, m1)) << "tensor " << i;
    EXPECT_TRUE(bitwiseEqual(t.vOut, v1)) << "tensor " << i;
  }
  // In place gives the same.
  updateAll(/*inPlace=*/true);
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_TRUE(bitwiseEqual(tensors[i].param, tensors[i].pOut))
        << "tensor " << i;
    EXPECT_TRUE(bitwiseEqual(tensors[i].m, tensors[i].mOut)) << "tensor " << i;
    EXPECT_TRUE(bitwiseEqual(tensors[i].v, tensors[i].vOut)) << "tensor " << i;
  }
}

using AdamWEdgeTest = CpuKernelTest;

// p = 1, lr = 0.1, weight decay 0.1, betas (0.9, 0.999), eps 1e-8, and a
// gradient of 0.5 on both steps (given as 1.0 scaled by 0.5 in the second
// run). Worked out by hand from torch's documentation:
//   step 1: p' = 0.99, m = 0.05, v = 0.00025, m^ = 0.5, v^ = 0.25,
//           p = 0.99 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.890000002
//   step 2: p' = 0.8811, m = 0.095, v = 0.00049975, m^ = 0.095 / 0.19 = 0.5,
//           v^ = 0.00049975 / 0.001999 = 0.25, p = 0.781100002
// A coupled (L2) decay would give p1 = 0.9; decaying after the Adam step
// would give p1 = 0.891.
TEST_F(AdamWEdgeTest, TwoStepsByHand) {
  for (bool scaled : {false, true}) {
    float p = 1.0f, m = 0.0f, v = 0.0f, lr = 0.1f;
    float grad = scaled ? 1.0f : 0.5f, scale = 0.5f;
    const float *gradScale = scaled ? &scale : nullptr;
    int32_t step = 1;
    asrt_adamw_update(&ctx, ASRT_DTYPE_F32, &p, &grad, &m, &v, &lr, &step,
                      gradScale, &p, &m, &v, 1, 0.9f, 0.999f, 1e-8f, 0.1f);
    EXPECT_NEAR(p, 0.890000002, 1e-6) << "scaled " << scaled;
    EXPECT_NEAR(m, 0.05, 1e-7); // 1 - 0.9f is 0.1 + 2.4e-8
    EXPECT_NEAR(v, 0.00025, 2e-8);
    step = 2;
    asrt_adamw_update(&ctx, ASRT_DTYPE_F32, &p, &grad, &m, &v, &lr, &step,
                      gradScale, &p, &m, &v, 1, 0.9f, 0.999f, 1e-8f, 0.1f);
    EXPECT_NEAR(p, 0.781100002, 1e-6) << "scaled " << scaled;
    EXPECT_NEAR(m, 0.095, 1e-7);
    EXPECT_NEAR(v, 0.00049975, 2e-8);
  }
}

TEST_F(AdamWEdgeTest, BadStepOrRateIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float p = 1.0f, g = 1.0f, m = 0.0f, v = 0.0f, lr = 0.1f;
  int32_t zero = 0;
  EXPECT_DEATH(asrt_adamw_update(&ctx, ASRT_DTYPE_F32, &p, &g, &m, &v, &lr,
                                 &zero, nullptr, &p, &m, &v, 1, 0.9f, 0.999f,
                                 1e-8f, 0.0f),
               "adamw_update: step 0 must be at least 1");
  int32_t one = 1;
  EXPECT_DEATH(asrt_adamw_update(&ctx, ASRT_DTYPE_F32, &p, &g, &m, &v, nullptr,
                                 &one, nullptr, &p, &m, &v, 1, 0.9f, 0.999f,
                                 1e-8f, 0.0f),
               "adamw_update: the learning-rate pointer is null");
  asrt_adamw_tensor t{&p, &g, &m, &v, &p, &m, &v, 1, 0.0f};
  EXPECT_DEATH(asrt_adamw_update_multi(&ctx, ASRT_DTYPE_F32, &t, 1, &lr, &zero,
                                       nullptr, 0.9f, 0.999f, 1e-8f),
               "adamw_update_multi: step 0 must be at least 1");
  EXPECT_DEATH(asrt_adamw_update_multi(&ctx, ASRT_DTYPE_F32, &t, 0, &lr, &one,
                                       nullptr, 0.9f, 0.999f, 1e-8f),
               "adamw_update_multi: count = 0; a multi-tensor update needs at "
               "least one tensor");
  EXPECT_DEATH(asrt_adamw_update_multi(&ctx, ASRT_DTYPE_F32, nullptr, 1, &lr,
                                       &one, nullptr, 0.9f, 0.999f, 1e-8f),
               "adamw_update_multi: the tensors pointer is null");
  asrt_adamw_tensor list[2] = {t, t};
  list[1].n = -4;
  EXPECT_DEATH(asrt_adamw_update_multi(&ctx, ASRT_DTYPE_F32, list, 2, &lr,
                                       &one, nullptr, 0.9f, 0.999f, 1e-8f),
               "adamw_update_multi: tensor 1: n = -4 is negative");
}

using IncrementTest = CpuKernelTest;

TEST_F(IncrementTest, AddsOneAndMayBeInPlace) {
  int32_t x = 41, y = 0;
  asrt_increment_i32(&ctx, &x, &y);
  EXPECT_EQ(y, 42);
  EXPECT_EQ(x, 41);
  asrt_increment_i32(&ctx, &y, &y);
  EXPECT_EQ(y, 43);
  int32_t negative = -1;
  asrt_increment_i32(&ctx, &negative, &negative);
  EXPECT_EQ(negative, 0);
}

TEST_F(IncrementTest, OverflowIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int32_t x = std::numeric_limits<int32_t>::max(), y = 0;
  EXPECT_DEATH(asrt_increment_i32(&ctx, &x, &y),
               "increment_i32: 2147483647 \\+ 1 overflows int32");
}

} // namespace
} // namespace autoshard::rt::test
