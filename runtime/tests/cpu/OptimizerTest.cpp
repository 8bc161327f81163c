// Tests of the CPU SGD update against torch.optim.SGD's documented algorithm.
#include "TestUtil.h"

#include "autoshard/rt/abi.h"

#include <optional>
#include <string>
#include <tuple>

namespace autoshard::rt::test {
namespace {

/// torch.optim.SGD's documented step (dampening 0), in double:
///   g = grad + wd * p
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

  void step(const std::vector<float> &grad, double lr) {
    for (size_t i = 0; i < param.size(); ++i) {
      double g = grad[i] + weightDecay * param[i];
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
    asrt_sgd_update_f32(&ctx, param.data(), grad.data(), &lr,
                        useBuf ? buf.data() : nullptr, param.data(),
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
  asrt_sgd_update_f32(&ctx, param.data(), grad.data(), &lr, bufIn,
                      paramOut.data(), bufIn ? bufOut.data() : nullptr, n,
                      momentum, weightDecay, nesterov);
  std::vector<float> paramIn = param, bufInPlace = buf;
  asrt_sgd_update_f32(&ctx, paramIn.data(), grad.data(), &lr,
                      bufIn ? bufInPlace.data() : nullptr, paramIn.data(),
                      bufIn ? bufInPlace.data() : nullptr, n, momentum,
                      weightDecay, nesterov);
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
    asrt_sgd_update_f32(&ctx, &p, &grad, &lr, buf, &p, buf, 1, c.momentum, 0.1f,
                        c.nesterov);
    EXPECT_NEAR(p, c.p1, 1e-6)
        << "momentum " << c.momentum << " nesterov " << c.nesterov;
    asrt_sgd_update_f32(&ctx, &p, &grad, &lr, buf, &p, buf, 1, c.momentum, 0.1f,
                        c.nesterov);
    EXPECT_NEAR(p, c.p2, 1e-6)
        << "momentum " << c.momentum << " nesterov " << c.nesterov;
    EXPECT_NEAR(b, c.b2, 1e-6);
  }
}

TEST_F(SgdEdgeTest, MissingBuffersOrRateAreFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float p = 1.0f, g = 1.0f, lr = 0.1f, b = 0.0f;
  EXPECT_DEATH(
      asrt_sgd_update_f32(&ctx, &p, &g, &lr, nullptr, &p, &b, 1, 0.9f, 0.0f, 0),
      "sgd_update_f32: momentum 0.9 needs both momentum buffers");
  EXPECT_DEATH(asrt_sgd_update_f32(&ctx, &p, &g, nullptr, nullptr, &p, nullptr,
                                   1, 0.0f, 0.0f, 0),
               "sgd_update_f32: the learning-rate pointer is null");
}

} // namespace
} // namespace autoshard::rt::test
