// How a thread that polls for completion waits without spinning for long.
#pragma once

#include <chrono>

namespace autoshard::rt {

/// The pause between two polls of something that completes on its own time
/// (an MPI request, a NCCL stream): the waiting thread yields for the first
/// kSpin of a wait, then sleeps for a tenth of the time waited so far, at
/// least kMinSleep and at most kMaxSleep.
///
/// Why this shape: most waits of a step are short (a small collective, a
/// peer a few microseconds behind), and a sleep there would add its timer
/// slack to every collective; a wait for a dead or stopped peer lasts the
/// whole collective timeout, minutes at 100% of a core that the other
/// ranks on the node need. Sleeping a fraction of the time already waited
/// adds at most about a tenth to any wait past the spin, and reaches the
/// cap within ~10 ms, after which an idle wait polls a thousand times a
/// second at a negligible CPU cost. An MPI without a progress thread
/// advances a non-blocking operation only inside its polls, so the spin is
/// also what keeps a collective of many rounds from being slowed by
/// sleeps between them; kSpin covers the collectives of a step on one
/// node.
class Backoff {
public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::microseconds kSpin{2000};
  static constexpr std::chrono::microseconds kMinSleep{20};
  static constexpr std::chrono::microseconds kMaxSleep{1000};

  /// The pause after a poll made `waited` into a wait: zero means yield
  /// (and poll again at once). A pure function of `waited`, for tests.
  static std::chrono::microseconds pauseAfter(std::chrono::nanoseconds waited);

  /// Pauses as pauseAfter says for the time since this object was made.
  void pause();

private:
  Clock::time_point start = Clock::now();
};

} // namespace autoshard::rt
