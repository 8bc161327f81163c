// The learning-rate schedule of the training binary (--lr-schedule): a
// pure function of the step number, so that a resumed run continues it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace autoshard::rt {

enum class LrSchedule { Constant, Cosine, Linear };

/// "constant", "cosine", "linear".
const char *lrScheduleName(LrSchedule schedule);
std::optional<LrSchedule> parseLrSchedule(std::string_view text);

struct LrScheduleOptions {
  LrSchedule kind = LrSchedule::Constant;
  /// Steps of linear warmup from peak / W up to the peak (0: none).
  int64_t warmupSteps = 0;
  /// Where a decaying schedule ends.
  double minLr = 0.0;
  /// The step a decaying schedule reaches minLr at (0: the run's last).
  int64_t decaySteps = 0;

  /// Whether the learning rate changes from step to step.
  bool active() const {
    return kind != LrSchedule::Constant || warmupSteps > 0;
  }
};

/// The learning rate of the 0-based step `step` for the peak rate `peak`:
/// (step + 1) / W * peak during the W warmup steps; then the peak
/// (constant), or from the peak down to minLr by the step `decaySteps` by
/// half a cosine (nanoGPT's get_lr, PyTorch's CosineAnnealingLR) or
/// linearly, and minLr after it. `decaySteps` > W when decaying.
double scheduledLr(const LrScheduleOptions &options, double peak, int64_t step,
                   int64_t decaySteps);

} // namespace autoshard::rt
