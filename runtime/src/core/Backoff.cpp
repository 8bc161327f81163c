// How a thread that polls for completion waits without spinning for long.
#include "core/Backoff.h"

#include <algorithm>
#include <thread>

namespace autoshard::rt {

std::chrono::microseconds Backoff::pauseAfter(std::chrono::nanoseconds waited) {
  if (waited < kSpin)
    return std::chrono::microseconds(0);
  auto tenth =
      std::chrono::duration_cast<std::chrono::microseconds>(waited) / 10;
  return std::clamp(tenth, kMinSleep, kMaxSleep);
}

void Backoff::pause() {
  std::chrono::microseconds pause = pauseAfter(Clock::now() - start);
  if (pause.count() == 0)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(pause);
}

} // namespace autoshard::rt
