// The learning-rate schedule: warmup, cosine and linear decay, its options.
#include "driver/LrSchedule.h"
#include "driver/Options.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace autoshard::rt;

namespace {

TEST(LrScheduleTest, WarmupRisesLinearlyToThePeak) {
  LrScheduleOptions warmup;
  warmup.warmupSteps = 4;
  EXPECT_DOUBLE_EQ(scheduledLr(warmup, 1e-3, 0, 10), 0.25e-3);
  EXPECT_DOUBLE_EQ(scheduledLr(warmup, 1e-3, 1, 10), 0.5e-3);
  EXPECT_DOUBLE_EQ(scheduledLr(warmup, 1e-3, 3, 10), 1e-3);
  // A constant schedule stays at the peak after it.
  EXPECT_DOUBLE_EQ(scheduledLr(warmup, 1e-3, 9, 10), 1e-3);
  EXPECT_TRUE(warmup.active());
  EXPECT_FALSE(LrScheduleOptions().active());
}

TEST(LrScheduleTest, CosineDecaysFromThePeakToTheMinimum) {
  LrScheduleOptions cosine;
  cosine.kind = LrSchedule::Cosine;
  cosine.warmupSteps = 2;
  cosine.minLr = 1e-4;
  // The decay runs from step 2 (the peak) to step 12 (the minimum).
  EXPECT_DOUBLE_EQ(scheduledLr(cosine, 1e-3, 2, 12), 1e-3);
  EXPECT_NEAR(scheduledLr(cosine, 1e-3, 7, 12), 0.55e-3, 1e-15);
  EXPECT_NEAR(scheduledLr(cosine, 1e-3, 12, 12), 1e-4, 1e-15);
  EXPECT_NEAR(scheduledLr(cosine, 1e-3, 40, 12), 1e-4, 1e-15);
  // A quarter of the way (step 4 of a decay from step 2 to step 10).
  double quarter = 1e-4 + 0.5 * (1 + std::cos(M_PI * 0.25)) * 0.9e-3;
  EXPECT_NEAR(scheduledLr(cosine, 1e-3, 4, 10), quarter, 1e-15);
  for (int64_t step = 2; step < 12; ++step)
    EXPECT_GT(scheduledLr(cosine, 1e-3, step, 12),
              scheduledLr(cosine, 1e-3, step + 1, 12))
        << "step " << step;
}

TEST(LrScheduleTest, LinearDecayIsAStraightLine) {
  LrScheduleOptions linear;
  linear.kind = LrSchedule::Linear;
  EXPECT_DOUBLE_EQ(scheduledLr(linear, 0.4, 0, 4), 0.4);
  EXPECT_DOUBLE_EQ(scheduledLr(linear, 0.4, 1, 4), 0.3);
  EXPECT_DOUBLE_EQ(scheduledLr(linear, 0.4, 3, 4), 0.1);
  EXPECT_DOUBLE_EQ(scheduledLr(linear, 0.4, 4, 4), 0.0);
}

TEST(LrScheduleTest, OptionsParseAndRefuseWhatWouldBeIgnored) {
  Expected<Options> cosine =
      parseOptions({"--lr-schedule", "cosine", "--warmup-steps=5",
                    "--min-lr", "3e-5", "--decay-steps", "100"});
  ASSERT_TRUE(cosine.ok()) << cosine.message();
  EXPECT_EQ(cosine->lrSchedule.kind, LrSchedule::Cosine);
  EXPECT_EQ(cosine->lrSchedule.warmupSteps, 5);
  EXPECT_DOUBLE_EQ(cosine->lrSchedule.minLr, 3e-5);
  EXPECT_EQ(cosine->lrSchedule.decaySteps, 100);

  auto error = [](std::vector<std::string> args) {
    Expected<Options> o = parseOptions(args);
    return o.ok() ? std::string("ok") : o.message();
  };
  EXPECT_EQ(error({"--lr-schedule=step"}),
            "--lr-schedule: 'step' is not valid; expected constant, cosine "
            "or linear");
  EXPECT_EQ(error({"--warmup-steps=-1"}),
            "--warmup-steps: '-1' is not valid; expected an integer >= 0");
  EXPECT_EQ(error({"--min-lr", "1e-5"}),
            "--min-lr shapes a decaying learning rate: it applies to "
            "--lr-schedule cosine or linear");
  EXPECT_EQ(error({"--decay-steps", "10"}),
            "--decay-steps shapes a decaying learning rate: it applies to "
            "--lr-schedule cosine or linear");
  EXPECT_EQ(error({"--lr-schedule=linear", "--warmup-steps=10",
                   "--decay-steps=10"}),
            "--decay-steps 10 must be after the warmup's 10 steps "
            "(--warmup-steps): the decay starts when the warmup ends");
  EXPECT_EQ(error({"--warmup-steps=3"}), "ok") << "constant with warmup";
}

} // namespace
