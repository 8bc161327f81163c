// Tests of the CPU losses: the softmax cross-entropy (references,
// differences, stability) and the negative log-likelihood.
#include "TestUtil.h"

#include "autoshard/rt/abi.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>

namespace autoshard::rt::test {
namespace {

/// -log softmax(z)[label] of one row, in double.
double rowLossRef(const float *z, int64_t classes, int32_t label) {
  double m = z[0];
  for (int64_t j = 1; j < classes; ++j)
    m = std::max(m, static_cast<double>(z[j]));
  double sum = 0.0;
  for (int64_t j = 0; j < classes; ++j)
    sum += std::exp(z[j] - m);
  return std::log(sum) + m - z[label];
}

double lossRef(const std::vector<float> &logits,
               const std::vector<int32_t> &labels, int64_t rows,
               int64_t classes) {
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r)
    total += rowLossRef(logits.data() + r * classes, classes, labels[r]);
  return total / rows;
}

/// (softmax - onehot) / rows * dloss, and per element the magnitude
/// (p + onehot) / rows * |dloss| that sizes its f32 tolerance.
void gradRef(const std::vector<float> &logits,
             const std::vector<int32_t> &labels, int64_t rows, int64_t classes,
             double dloss, std::vector<double> &grad,
             std::vector<double> &mag) {
  grad.assign(rows * classes, 0.0);
  mag.assign(rows * classes, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float *z = logits.data() + r * classes;
    double m = z[0];
    for (int64_t j = 1; j < classes; ++j)
      m = std::max(m, static_cast<double>(z[j]));
    double sum = 0.0;
    for (int64_t j = 0; j < classes; ++j)
      sum += std::exp(z[j] - m);
    for (int64_t j = 0; j < classes; ++j) {
      double p = std::exp(z[j] - m) / sum;
      double onehot = j == labels[r] ? 1.0 : 0.0;
      grad[r * classes + j] = (p - onehot) / rows * dloss;
      mag[r * classes + j] = (p + onehot) / rows * std::fabs(dloss);
    }
  }
}

std::vector<int32_t> randomLabels(int64_t rows, int64_t classes,
                                  uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(
      0, static_cast<int32_t>(classes - 1));
  std::vector<int32_t> labels(rows);
  for (int32_t &l : labels)
    l = dist(rng);
  return labels;
}

class SoftmaxXentTest
    : public CpuKernelTest,
      public ::testing::WithParamInterface<std::tuple<int64_t, int64_t>> {
protected:
  void SetUp() override {
    std::tie(rows, classes) = GetParam();
    logits = uniformFloats(rows * classes, 100 + rows, -4.0f, 4.0f);
    labels = randomLabels(rows, classes, 200 + classes);
  }

  float kernelLoss(const std::vector<float> &z) {
    float loss = std::numeric_limits<float>::quiet_NaN();
    asrt_softmax_xent_fwd(&ctx, ASRT_DTYPE_F32, z.data(), labels.data(), &loss,
                          rows, classes, ASRT_NO_IGNORE_INDEX);
    return loss;
  }

  std::vector<float> kernelGrad(const float *dloss) {
    std::vector<float> g = poisoned(rows * classes);
    asrt_softmax_xent_grad(&ctx, ASRT_DTYPE_F32, logits.data(), labels.data(),
                           dloss, g.data(), rows, classes, ASRT_NO_IGNORE_INDEX);
    return g;
  }

  int64_t rows = 0, classes = 0;
  std::vector<float> logits;
  std::vector<int32_t> labels;
};

TEST_P(SoftmaxXentTest, ForwardMatchesReference) {
  EXPECT_TRUE(allNear(std::vector<float>{kernelLoss(logits)},
                      {lossRef(logits, labels, rows, classes)}, 1e-6, 1e-7));
}

TEST_P(SoftmaxXentTest, GradMatchesAnalyticReference) {
  std::vector<double> ref, mag;
  for (double dloss : {1.0, 2.5, -0.5}) {
    float d = static_cast<float>(dloss);
    // dloss == 1 goes through the null pointer, as abi.h allows.
    std::vector<float> g = kernelGrad(dloss == 1.0 ? nullptr : &d);
    gradRef(logits, labels, rows, classes, dloss, ref, mag);
    std::vector<double> tol(mag.size());
    for (size_t i = 0; i < tol.size(); ++i)
      tol[i] = 1e-5 * mag[i] + 1e-30;
    EXPECT_TRUE(allWithin(g, ref, tol)) << "dloss " << dloss;
  }
}

TEST_P(SoftmaxXentTest, GradMatchesFiniteDifferencesOfReferenceLoss) {
  const float dloss = 2.5f;
  std::vector<float> g = kernelGrad(&dloss);
  std::vector<double> ref, mag;
  gradRef(logits, labels, rows, classes, dloss, ref, mag);
  std::vector<float> probed;
  std::vector<double> fd, tol;
  for (size_t i : probeIndices(g.size())) {
    // Only row r's term changes; differencing it alone keeps the step's
    // effect far above the rounding of the mean.
    int64_t r = static_cast<int64_t>(i) / classes;
    int64_t j = static_cast<int64_t>(i) % classes;
    std::vector<float> row(logits.begin() + r * classes,
                           logits.begin() + (r + 1) * classes);
    // The perturbed row in double, so that the step is exactly h.
    auto rowLoss = [&](double zj) {
      double m = zj;
      for (int64_t k = 0; k < classes; ++k)
        m = k == j ? m : std::max(m, static_cast<double>(row[k]));
      double sum = 0.0;
      for (int64_t k = 0; k < classes; ++k)
        sum += std::exp((k == j ? zj : row[k]) - m);
      return std::log(sum) + m - (labels[r] == j ? zj : row[labels[r]]);
    };
    double h = 1e-5, zj = row[j];
    probed.push_back(g[i]);
    fd.push_back(dloss * (rowLoss(zj + h) - rowLoss(zj - h)) / (2 * h) / rows);
    tol.push_back(1e-5 * mag[i] + 1e-9);
  }
  EXPECT_TRUE(allWithin(probed, fd, tol));
}

TEST_P(SoftmaxXentTest, GradMatchesFiniteDifferencesOfKernelLoss) {
  std::vector<float> g = kernelGrad(nullptr);
  std::vector<float> probed;
  std::vector<double> fd, tol;
  std::vector<float> z = logits;
  for (size_t i : probeIndices(g.size(), 64)) {
    const float h = 1e-2f;
    float zi = z[i], zp = zi + h, zm = zi - h;
    z[i] = zp;
    float lp = kernelLoss(z);
    z[i] = zm;
    float lm = kernelLoss(z);
    z[i] = zi;
    double step = static_cast<double>(zp) - zm;
    probed.push_back(g[i]);
    fd.push_back((static_cast<double>(lp) - lm) / step);
    // The f32 loss is rounded to half an ulp in each evaluation; truncation
    // (h^2/6 of a third derivative below 1/rows) is far smaller.
    double ulp = std::nextafter(std::fabs(lp), INFINITY) - std::fabs(lp);
    tol.push_back(2.0 * ulp / step + 1e-3 * std::fabs(fd.back()) +
                  h * h / rows);
  }
  EXPECT_TRUE(allWithin(probed, fd, tol));
}

TEST_P(SoftmaxXentTest, GradMayOverwriteLogits) {
  std::vector<float> outOfPlace = kernelGrad(nullptr);
  std::vector<float> inPlace = logits;
  asrt_softmax_xent_grad(&ctx, ASRT_DTYPE_F32, inPlace.data(), labels.data(),
                         nullptr, inPlace.data(), rows, classes, ASRT_NO_IGNORE_INDEX);
  EXPECT_TRUE(bitwiseEqual(inPlace, outOfPlace));
}

TEST_P(SoftmaxXentTest, Bf16IsRoundedF32) {
  logits = bf16Rounded(logits);
  std::vector<uint16_t> logitsB = toBf16(logits);
  // The loss is f32 for both and computed from the same values: equal.
  float lossB = std::numeric_limits<float>::quiet_NaN();
  asrt_softmax_xent_fwd(&ctx, ASRT_DTYPE_BF16, logitsB.data(), labels.data(),
                        &lossB, rows, classes, ASRT_NO_IGNORE_INDEX);
  EXPECT_EQ(lossB, kernelLoss(logits));
  EXPECT_TRUE(allNear(std::vector<float>{lossB},
                      {lossRef(logits, labels, rows, classes)}, 1e-6, 1e-7));

  const float dloss = 2.5f;
  std::vector<uint16_t> gB = poisonedBf16(rows * classes);
  asrt_softmax_xent_grad(&ctx, ASRT_DTYPE_BF16, logitsB.data(), labels.data(),
                         &dloss, gB.data(), rows, classes, ASRT_NO_IGNORE_INDEX);
  std::vector<float> g = kernelGrad(&dloss);
  EXPECT_TRUE(bf16IsRoundedF32(gB, g));
  // In place, bf16 logits overwritten by their gradient.
  std::vector<uint16_t> inPlace = logitsB;
  asrt_softmax_xent_grad(&ctx, ASRT_DTYPE_BF16, inPlace.data(), labels.data(),
                         &dloss, inPlace.data(), rows, classes, ASRT_NO_IGNORE_INDEX);
  EXPECT_EQ(inPlace, gB);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SoftmaxXentTest,
    ::testing::Values(std::make_tuple(1, 1), std::make_tuple(1, 5),
                      std::make_tuple(7, 13), std::make_tuple(16, 1000),
                      std::make_tuple(3, 50257)),
    [](const ::testing::TestParamInfo<std::tuple<int64_t, int64_t>> &p) {
      return "r" + std::to_string(std::get<0>(p.param)) + "_c" +
             std::to_string(std::get<1>(p.param));
    });

using SoftmaxXentEdgeTest = CpuKernelTest;

TEST_F(SoftmaxXentEdgeTest, LargeLogitsStayFiniteAndCorrect) {
  const int64_t rows = 3, classes = 7;
  // Without the max shift exp(1e4) overflows and the loss is inf or NaN.
  std::vector<float> logits = {
      1e4f,  1e4f,     1e4f,     1e4f,     1e4f,     1e4f,     1e4f,     //
      1e4f,  1e4f - 1, 1e4f - 2, 1e4f - 3, 1e4f - 4, 1e4f - 5, 1e4f - 6, //
      -1e4f, 1e4f,     0.0f,     -1e4f,    5e3f,     -5e3f,    1e4f - 0.5f};
  std::vector<int32_t> labels = {3, 2, 0};
  // By hand: row 0 is uniform; row 1 is 2 below its max; row 2's label is
  // 2e4 below the max, whose only non-negligible rival is 0.5 below it.
  double row1 = 0.0;
  for (int k = 0; k <= 6; ++k)
    row1 += std::exp(-k);
  double expected = (std::log(7.0) + (2.0 + std::log(row1)) +
                     (2e4 + std::log(1.0 + std::exp(-0.5)))) /
                    3.0;
  float loss = 0.0f;
  asrt_softmax_xent_fwd(&ctx, ASRT_DTYPE_F32, logits.data(), labels.data(),
                        &loss, rows, classes, ASRT_NO_IGNORE_INDEX);
  ASSERT_TRUE(std::isfinite(loss));
  EXPECT_TRUE(allNear(std::vector<float>{loss}, {expected}, 1e-6, 0.0));

  std::vector<float> g = poisoned(rows * classes);
  asrt_softmax_xent_grad(&ctx, ASRT_DTYPE_F32, logits.data(), labels.data(),
                         nullptr, g.data(), rows, classes, ASRT_NO_IGNORE_INDEX);
  std::vector<double> ref, mag;
  gradRef(logits, labels, rows, classes, 1.0, ref, mag);
  for (size_t i = 0; i < mag.size(); ++i)
    mag[i] = 1e-5 * mag[i] + 1e-30;
  EXPECT_TRUE(allWithin(g, ref, mag));
  // Row 0 by hand: 1/7 everywhere, minus 1 at the label, over 3 rows.
  EXPECT_NEAR(g[3], (1.0 / 7 - 1.0) / 3, 1e-7);
  EXPECT_NEAR(g[0], 1.0 / 21, 1e-7);
}

TEST_F(SoftmaxXentEdgeTest, SingleClassHasZeroLossAndGradient) {
  std::vector<float> logits = {3.0f, -1e4f};
  std::vector<int32_t> labels = {0, 0};
  float loss = 1.0f;
  asrt_softmax_xent_fwd(&ctx, ASRT_DTYPE_F32, logits.data(), labels.data(),
                        &loss, 2, 1, ASRT_NO_IGNORE_INDEX);
  EXPECT_EQ(loss, 0.0f);
  std::vector<float> g = poisoned(2);
  asrt_softmax_xent_grad(&ctx, ASRT_DTYPE_F32, logits.data(), labels.data(),
                         nullptr, g.data(), 2, 1, ASRT_NO_IGNORE_INDEX);
  EXPECT_TRUE(allNear(g, {0.0, 0.0}, 0.0, 0.0));
}

TEST_F(SoftmaxXentEdgeTest, OutOfRangeLabelIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const int64_t rows = 3, classes = 10;
  std::vector<float> logits(rows * classes, 0.0f), out(rows * classes);
  std::vector<int32_t> tooLarge = {0, 9, 10}, negative = {-1, 0, 0};
  float loss = 0.0f;
  EXPECT_DEATH(asrt_softmax_xent_fwd(&ctx, ASRT_DTYPE_F32, logits.data(),
                                     tooLarge.data(), &loss, rows, classes, ASRT_NO_IGNORE_INDEX),
               "softmax_xent_fwd: row 2 has label 10, outside \\[0, 10\\) "
               "for 10 classes");
  EXPECT_DEATH(asrt_softmax_xent_grad(&ctx, ASRT_DTYPE_F32, logits.data(),
                                      negative.data(), nullptr, out.data(),
                                      rows, classes, ASRT_NO_IGNORE_INDEX),
               "softmax_xent_grad: row 0 has label -1, outside \\[0, 10\\)");
}


// torch.nn.functional.cross_entropy(ignore_index=-100): rows labelled with
// the ignore index neither count towards the mean nor get a gradient.
TEST_F(SoftmaxXentEdgeTest, IgnoredRowsLeaveTheMeanAndGetZeroGradient) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float ln3 = std::log(3.0f);
  // Rows 1 and 3 are ignored; their logits are NaN, which must not reach
  // the loss or the other rows' gradients.
  std::vector<float> logits = {0.0f, 0.0f, nan, nan, ln3, 0.0f, nan, 1e4f};
  std::vector<int32_t> labels = {0, -100, 1, -100};
  // By hand: row 0 is uniform over 2 classes, -log(1/2); row 2 has
  // softmax (3/4, 1/4) and label 1, -log(1/4). The mean over the 2 counted
  // rows is (ln 2 + ln 4) / 2 = 1.5 ln 2.
  float loss = nan;
  asrt_softmax_xent_fwd(&ctx, ASRT_DTYPE_F32, logits.data(), labels.data(),
                        &loss, 4, 2, -100);
  EXPECT_NEAR(loss, 1.5 * std::log(2.0), 1e-7);

  // (softmax - onehot) / 2 on the counted rows, 0 on the ignored ones.
  std::vector<float> g = poisoned(8);
  const float dloss = 2.0f;
  asrt_softmax_xent_grad(&ctx, ASRT_DTYPE_F32, logits.data(), labels.data(),
                         &dloss, g.data(), 4, 2, -100);
  EXPECT_TRUE(allNear(g,
                      {2 * -0.25, 2 * 0.25, 0.0, 0.0, 2 * 0.375, 2 * -0.375,
                       0.0, 0.0},
                      1e-7, 1e-7));
  EXPECT_EQ(g[2], 0.0f);
  EXPECT_EQ(g[7], 0.0f);
}

TEST_F(SoftmaxXentEdgeTest, IgnoringRowsEqualsLeavingThemOut) {
  // The kernel over all rows with some ignored computes exactly what it
  // computes over the counted rows alone, loss and gradient rows, bit for
  // bit (the same sums in the same order); in f32 and bf16.
  const int64_t rows = 9, classes = 37;
  std::vector<float> logits =
      bf16Rounded(uniformFloats(rows * classes, 7, -5.0f, 5.0f));
  std::vector<int32_t> labels = randomLabels(rows, classes, 8);
  std::vector<float> kept;
  std::vector<int32_t> keptLabels;
  for (int64_t r = 0; r < rows; ++r) {
    if (r % 3 == 1) {
      labels[r] = 7; // a valid class, ignored all the same
      continue;
    }
    if (labels[r] == 7)
      labels[r] = 8;
    kept.insert(kept.end(), logits.begin() + r * classes,
                logits.begin() + (r + 1) * classes);
    keptLabels.push_back(labels[r]);
  }
  const int64_t keptRows = static_cast<int64_t>(keptLabels.size());
  const float dloss = 0.75f;
  for (int32_t dtype : {ASRT_DTYPE_F32, ASRT_DTYPE_BF16}) {
    SCOPED_TRACE(dtype == ASRT_DTYPE_F32 ? "f32" : "bf16");
    bool bf16 = dtype == ASRT_DTYPE_BF16;
    size_t width = bf16 ? 2 : 4;
    auto bytes = [&](const std::vector<float> &v) {
      std::vector<char> out(v.size() * width);
      if (bf16) {
        std::vector<uint16_t> b = toBf16(v);
        std::memcpy(out.data(), b.data(), out.size());
      } else {
        std::memcpy(out.data(), v.data(), out.size());
      }
      return out;
    };
    std::vector<char> all = bytes(logits), some = bytes(kept);
    float lossAll = -1.0f, lossSome = -2.0f;
    asrt_softmax_xent_fwd(&ctx, dtype, all.data(), labels.data(), &lossAll,
                          rows, classes, 7);
    asrt_softmax_xent_fwd(&ctx, dtype, some.data(), keptLabels.data(),
                          &lossSome, keptRows, classes, ASRT_NO_IGNORE_INDEX);
    EXPECT_EQ(lossAll, lossSome);
    std::vector<char> gAll(all.size(), 0x7f), gSome(some.size(), 0x7f);
    asrt_softmax_xent_grad(&ctx, dtype, all.data(), labels.data(), &dloss,
                           gAll.data(), rows, classes, 7);
    asrt_softmax_xent_grad(&ctx, dtype, some.data(), keptLabels.data(),
                           &dloss, gSome.data(), keptRows, classes,
                           ASRT_NO_IGNORE_INDEX);
    size_t rowBytes = static_cast<size_t>(classes) * width, k = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const char *row = gAll.data() + r * rowBytes;
      if (r % 3 == 1) {
        EXPECT_EQ(std::vector<char>(row, row + rowBytes),
                  std::vector<char>(rowBytes, 0))
            << "ignored row " << r;
        continue;
      }
      EXPECT_EQ(std::memcmp(row, gSome.data() + k++ * rowBytes, rowBytes), 0)
          << "row " << r;
    }
    // In place too.
    std::vector<char> inPlace = all;
    asrt_softmax_xent_grad(&ctx, dtype, inPlace.data(), labels.data(), &dloss,
                           inPlace.data(), rows, classes, 7);
    EXPECT_EQ(inPlace, gAll);
  }
}

TEST_F(SoftmaxXentEdgeTest, NoCountedRowGivesZeroLossAndGradient) {
  // torch gives NaN (0 / 0); a rank whose rows are all ignored must not
  // turn the average over ranks into NaN.
  std::vector<float> logits = uniformFloats(3 * 4, 9, -2.0f, 2.0f);
  std::vector<int32_t> labels = {-100, -100, -100};
  float loss = std::numeric_limits<float>::quiet_NaN();
  asrt_softmax_xent_fwd(&ctx, ASRT_DTYPE_F32, logits.data(), labels.data(),
                        &loss, 3, 4, -100);
  EXPECT_EQ(loss, 0.0f);
  std::vector<float> g = poisoned(3 * 4);
  const float dloss = 1.0f;
  asrt_softmax_xent_grad(&ctx, ASRT_DTYPE_F32, logits.data(), labels.data(),
                         &dloss, g.data(), 3, 4, -100);
  EXPECT_EQ(g, std::vector<float>(3 * 4, 0.0f));
}

TEST_F(SoftmaxXentEdgeTest, IgnoreIndexDoesNotExcuseOtherBadLabels) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> logits(3 * 4, 0.0f), out(3 * 4);
  std::vector<int32_t> labels = {-100, -1, 0};
  float loss = 0.0f;
  EXPECT_DEATH(asrt_softmax_xent_fwd(&ctx, ASRT_DTYPE_F32, logits.data(),
                                     labels.data(), &loss, 3, 4, -100),
               "softmax_xent_fwd: row 1 has label -1, outside \\[0, 4\\) "
               "for 4 classes and not the ignore index");
  EXPECT_DEATH(asrt_softmax_xent_grad(&ctx, ASRT_DTYPE_F32, logits.data(),
                                      labels.data(), nullptr, out.data(), 3, 4,
                                      -100),
               "softmax_xent_grad: row 1 has label -1, outside \\[0, 4\\)");
  // No ignore index: -100 is a bad label like any other.
  std::vector<int32_t> padded = {0, -100, 0};
  EXPECT_DEATH(asrt_softmax_xent_fwd(&ctx, ASRT_DTYPE_F32, logits.data(),
                                     padded.data(), &loss, 3, 4,
                                     ASRT_NO_IGNORE_INDEX),
               "row 1 has label -100, outside \\[0, 4\\) for 4 classes\n");
}

// torch.nn.functional.nll_loss(input, labels, ignore_index=-100): the mean
// of -input[r, labels[r]] over the counted rows, by hand.
using NllLossTest = CpuKernelTest;

TEST_F(NllLossTest, MeanOverCountedRowsAndOneHotGradient) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Row 1 is ignored: its NaNs must reach neither the loss nor a gradient.
  std::vector<float> input = {-0.5f, -1.0f,  -2.0f, -3.0f, //
                              nan,   nan,    nan,   nan,   //
                              -4.0f, -0.25f, -1.5f, 7.0f};
  std::vector<int32_t> labels = {2, -100, 0};
  float loss = nan;
  asrt_nll_loss_fwd(&ctx, ASRT_DTYPE_F32, input.data(), labels.data(), &loss, 3,
                    4, -100);
  EXPECT_EQ(loss, 3.0f); // (2 + 4) / 2
  std::vector<float> g = poisoned(3 * 4);
  const float dloss = 3.0f;
  asrt_nll_loss_grad(&ctx, ASRT_DTYPE_F32, labels.data(), &dloss, g.data(), 3,
                     4, -100);
  std::vector<float> expected(3 * 4, 0.0f);
  expected[0 * 4 + 2] = expected[2 * 4 + 0] = -1.5f; // -3 / 2
  EXPECT_EQ(g, expected);
  // No dloss means 1; without an ignore index every row counts.
  std::vector<int32_t> all = {2, 1, 0};
  std::vector<float> finite = input;
  std::fill(finite.begin() + 4, finite.begin() + 8, -6.0f);
  asrt_nll_loss_fwd(&ctx, ASRT_DTYPE_F32, finite.data(), all.data(), &loss, 3,
                    4, ASRT_NO_IGNORE_INDEX);
  EXPECT_FLOAT_EQ(loss, 4.0f); // (2 + 6 + 4) / 3
  asrt_nll_loss_grad(&ctx, ASRT_DTYPE_F32, all.data(), nullptr, g.data(), 3, 4,
                     ASRT_NO_IGNORE_INDEX);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t j = 0; j < 4; ++j)
      EXPECT_EQ(g[r * 4 + j], j == all[r] ? -1.0f / 3.0f : 0.0f)
          << "row " << r << ", class " << j;
}

TEST_F(NllLossTest, Bf16InputGivesTheF32LossAndRoundedGradient) {
  const int64_t rows = 5, classes = 6;
  std::vector<float> input =
      bf16Rounded(uniformFloats(rows * classes, 3, -4.0f, 0.0f));
  std::vector<int32_t> labels = {5, 0, 3, 3, 1};
  float lossF = 0.0f, lossB = 0.0f;
  asrt_nll_loss_fwd(&ctx, ASRT_DTYPE_F32, input.data(), labels.data(), &lossF,
                    rows, classes, ASRT_NO_IGNORE_INDEX);
  std::vector<uint16_t> inputB = toBf16(input);
  asrt_nll_loss_fwd(&ctx, ASRT_DTYPE_BF16, inputB.data(), labels.data(), &lossB,
                    rows, classes, ASRT_NO_IGNORE_INDEX);
  EXPECT_EQ(lossF, lossB);
  const float dloss = 0.7f;
  std::vector<float> g = poisoned(rows * classes);
  asrt_nll_loss_grad(&ctx, ASRT_DTYPE_F32, labels.data(), &dloss, g.data(),
                     rows, classes, ASRT_NO_IGNORE_INDEX);
  std::vector<uint16_t> gB = poisonedBf16(rows * classes);
  asrt_nll_loss_grad(&ctx, ASRT_DTYPE_BF16, labels.data(), &dloss, gB.data(),
                     rows, classes, ASRT_NO_IGNORE_INDEX);
  EXPECT_TRUE(bf16IsRoundedF32(gB, g));
}

TEST_F(NllLossTest, NoCountedRowGivesZeroLossAndGradient) {
  std::vector<float> input = uniformFloats(2 * 3, 4, -2.0f, 0.0f);
  std::vector<int32_t> labels = {-100, -100};
  float loss = std::numeric_limits<float>::quiet_NaN();
  asrt_nll_loss_fwd(&ctx, ASRT_DTYPE_F32, input.data(), labels.data(), &loss, 2,
                    3, -100);
  EXPECT_EQ(loss, 0.0f);
  std::vector<float> g = poisoned(2 * 3);
  asrt_nll_loss_grad(&ctx, ASRT_DTYPE_F32, labels.data(), nullptr, g.data(), 2,
                     3, -100);
  EXPECT_EQ(g, std::vector<float>(2 * 3, 0.0f));
}

TEST_F(NllLossTest, OutOfRangeLabelIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> input(3 * 4, -1.0f), out(3 * 4);
  std::vector<int32_t> labels = {0, 4, -100};
  float loss = 0.0f;
  EXPECT_DEATH(asrt_nll_loss_fwd(&ctx, ASRT_DTYPE_F32, input.data(),
                                 labels.data(), &loss, 3, 4, -100),
               "nll_loss_fwd: row 1 has label 4, outside \\[0, 4\\) for 4 "
               "classes and not the ignore index");
  EXPECT_DEATH(asrt_nll_loss_grad(&ctx, ASRT_DTYPE_F32, labels.data(), nullptr,
                                  out.data(), 3, 4, ASRT_NO_IGNORE_INDEX),
               "nll_loss_grad: row 1 has label 4, outside \\[0, 4\\)");
}

} // namespace
} // namespace autoshard::rt::test
