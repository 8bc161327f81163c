// The learning-rate schedule of the training binary.
#include "driver/LrSchedule.h"

#include <algorithm>
#include <cmath>

namespace autoshard::rt {

const char *lrScheduleName(LrSchedule schedule) {
  switch (schedule) {
  case LrSchedule::Constant:
    return "constant";
  case LrSchedule::Cosine:
    return "cosine";
  case LrSchedule::Linear:
    return "linear";
  }
  return "constant";
}

std::optional<LrSchedule> parseLrSchedule(std::string_view text) {
  for (LrSchedule schedule :
       {LrSchedule::Constant, LrSchedule::Cosine, LrSchedule::Linear})
    if (text == lrScheduleName(schedule))
      return schedule;
  return std::nullopt;
}

double scheduledLr(const LrScheduleOptions &options, double peak, int64_t step,
                   int64_t decaySteps) {
  const int64_t warmup = options.warmupSteps;
  if (step < warmup)
    return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (options.kind == LrSchedule::Constant)
    return peak;
  double progress = std::clamp(static_cast<double>(step - warmup) /
                                   static_cast<double>(decaySteps - warmup),
                               0.0, 1.0);
  double span = peak - options.minLr;
  if (options.kind == LrSchedule::Linear)
    return peak - span * progress;
  return options.minLr + 0.5 * (1.0 + std::cos(M_PI * progress)) * span;
}

} // namespace autoshard::rt
