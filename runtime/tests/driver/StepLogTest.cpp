// The per-step log: which steps are logged, the text line, the JSON object,
// the device file's peak.
#include "driver/StepLog.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace autoshard::rt;

namespace {

TEST(StepLogTest, LineKeepsTheOldPrefix) {
  StepLogEntry e;
  e.step = 3;
  e.loss = 0.693147182;
  e.ms = 1.25;
  EXPECT_EQ(formatStepLine(e), "step 3 loss 0.69314718 ms 1.250");
  e.step = 10;
  e.loss = 12345678.9;
  e.ms = 0.0004;
  EXPECT_EQ(formatStepLine(e), "step 10 loss 12345679 ms 0.000");
}

TEST(StepLogTest, LineWithEveryField) {
  StepLogEntry e;
  e.step = 50;
  e.loss = 2.3623633;
  e.ms = 400.0;
  e.lr = 0.00023180194;
  e.gradNorm = 1.23456789;
  // 32 x 128 tokens in 0.4 s: 10240 tokens/s.
  e.tokens = 4096;
  e.samples = 32;
  // 10 GFLOP in 0.4 s against 100 GFLOP/s: 25%.
  e.flops = 10'000'000'000;
  e.peakFlopPerS = 100e9;
  e.memoryBytes = 83788880;
  e.peakMemoryBytes = 83805268;
  EXPECT_EQ(formatStepLine(e),
            "step 50 loss 2.3623633 ms 400.000 lr 0.000231802 grad_norm "
            "1.23457 tokens/s 10240 mfu 25% mem 79.9 MiB peak 79.9 MiB");
  EXPECT_DOUBLE_EQ(*e.mfu(), 0.25);
}

TEST(StepLogTest, SamplesWithoutTokensAndNoMfuWithoutAPeak) {
  StepLogEntry e;
  e.step = 4;
  e.loss = 2.5;
  e.ms = 8.0;
  e.samples = 16; // 2000 samples/s
  e.flops = 1000;
  e.memoryBytes = 160;
  e.peakMemoryBytes = 2048;
  EXPECT_FALSE(e.mfu().has_value()) << "no peak";
  EXPECT_EQ(formatStepLine(e), "step 4 loss 2.5 ms 8.000 samples/s 2000 mem "
                               "160 B peak 2.0 KiB");
  // Below 100 per second, four digits.
  e.ms = 1000.0 / 3.0;
  e.samples = 16;
  EXPECT_NE(formatStepLine(e).find(" samples/s 48 "), std::string::npos)
      << formatStepLine(e);
  e.ms = 1000.0;
  e.samples = 5;
  EXPECT_NE(formatStepLine(e).find(" samples/s 5 "), std::string::npos);
  e.peakFlopPerS = 1e9;
  e.flops = 0;
  EXPECT_FALSE(e.mfu().has_value()) << "no FLOPs";
  // A small MFU keeps three significant digits rather than rounding to 0.
  e.flops = 1234;
  EXPECT_NE(formatStepLine(e).find(" mfu 0.000123% "), std::string::npos)
      << formatStepLine(e);
}

TEST(StepLogTest, NonFiniteValuesPrintAsNanAndInf) {
  StepLogEntry e;
  e.step = 5;
  e.loss = -std::nan("");
  e.ms = 1.0;
  e.gradNorm = INFINITY;
  EXPECT_EQ(formatStepLine(e), "step 5 loss nan ms 1.000 grad_norm inf");
  EXPECT_EQ(formatStepJson(e),
            "{\"step\": 5, \"loss\": null, \"ms\": 1.000, \"grad_norm\": "
            "null}");
}

TEST(StepLogTest, Json) {
  StepLogEntry e;
  e.step = 2;
  e.loss = 5.5133371;
  e.ms = 7.785;
  e.lr = 0.001;
  e.tokens = 512;
  e.flops = 163600000;
  e.peakFlopPerS = 1e11;
  e.memoryBytes = 1000;
  e.peakMemoryBytes = 2000;
  EXPECT_EQ(formatStepJson(e),
            "{\"step\": 2, \"loss\": 5.5133371, \"ms\": 7.785, \"lr\": "
            "0.001, \"tokens_per_s\": 65767.5, \"mfu\": 0.210148, "
            "\"memory_bytes\": 1000, \"peak_memory_bytes\": 2000}");
  EXPECT_EQ(formatEvalJson(6, 5.5617658, 3, 12.299, false),
            "{\"eval_after_step\": 6, \"loss\": 5.5617658, \"batches\": 3, "
            "\"ms\": 12.299}");
  EXPECT_EQ(formatEvalJson(3, 1.5, 1, 2, true),
            "{\"eval_after_step\": 3, \"loss\": 1.5, \"batches\": 1, \"ms\": "
            "2.000, \"saved_best\": true}");
}

TEST(StepLogTest, LoggedSteps) {
  // --log-every 50 over 120 steps: 1, 50, 100, 120.
  std::vector<int64_t> logged;
  for (int64_t step = 1; step <= 120; ++step)
    if (isLoggedStep(step, 1, 50, 120))
      logged.push_back(step);
  EXPECT_EQ(logged, (std::vector<int64_t>{1, 50, 100, 120}));
  // Resumed after step 60: its first step, 61, then as before.
  logged.clear();
  for (int64_t step = 61; step <= 120; ++step)
    if (isLoggedStep(step, 61, 50, 120))
      logged.push_back(step);
  EXPECT_EQ(logged, (std::vector<int64_t>{61, 100, 120}));
}

TEST(StepLogTest, ParseLogFormat) {
  EXPECT_EQ(parseLogFormat("text"), LogFormat::Text);
  EXPECT_EQ(parseLogFormat("json"), LogFormat::Json);
  EXPECT_FALSE(parseLogFormat("JSON").has_value());
  EXPECT_FALSE(parseLogFormat("").has_value());
}

const char *kDevice = R"({"schema": "autoshard-device/1", "name": "h100-80gb",
  "figures": {"peak_bf16_flop_per_s": {"value": 9.895e14},
              "peak_f32_flop_per_s": {"value": 6.7e13}}})";

TEST(StepLogTest, DeviceFilePeak) {
  Expected<ComputePeak> bf16 = peakFromDeviceFile(kDevice, "h100.json", true);
  ASSERT_TRUE(bf16.ok()) << bf16.message();
  EXPECT_EQ(bf16->flopPerS, 9.895e14);
  EXPECT_EQ(bf16->source, "h100-80gb's peak_bf16_flop_per_s (--device-spec)");
  Expected<ComputePeak> f32 = peakFromDeviceFile(kDevice, "h100.json", false);
  ASSERT_TRUE(f32.ok()) << f32.message();
  EXPECT_EQ(f32->flopPerS, 6.7e13);
}

TEST(StepLogTest, DeviceFileErrors) {
  EXPECT_EQ(peakFromDeviceFile("{", "d.json", false).message(),
            "--device-spec: 'd.json' is not JSON: at byte 1: unexpected end, "
            "expected a member name (a string)");
  EXPECT_EQ(peakFromDeviceFile(R"({"schema": "other"})", "d.json", false)
                .message(),
            "--device-spec: 'd.json' is not a device file (its \"schema\" is "
            "not \"autoshard-device/1\"; see data/devices/)");
  EXPECT_EQ(
      peakFromDeviceFile(R"({"schema": "autoshard-device/1", "figures":
                            {"peak_f32_flop_per_s": {"value": 6.7e13}}})",
                         "d.json", true)
          .message(),
      "--device-spec: 'd.json' has no positive "
      "figures.peak_bf16_flop_per_s.value, the peak this step's MFU needs "
      "(it computes in 16-bit floats)");
  EXPECT_FALSE(peakFromDeviceFile(R"({"schema": "autoshard-device/1",
      "figures": {"peak_f32_flop_per_s": {"value": 0}}})",
                                  "d.json", false)
                   .ok());
}

} // namespace
