// The pauses of a polling wait: a short spin, then sleeps that grow to a cap.
#include "core/Backoff.h"

#include <gtest/gtest.h>

#include <sys/resource.h>

namespace autoshard::rt {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST(BackoffTest, ShortWaitsOnlyYield) {
  EXPECT_EQ(Backoff::pauseAfter(microseconds(0)).count(), 0);
  EXPECT_EQ(Backoff::pauseAfter(Backoff::kSpin - microseconds(1)).count(), 0);
}

TEST(BackoffTest, LongerWaitsSleepATenthOfTheTimeWaitedUpToTheCap) {
  EXPECT_EQ(Backoff::pauseAfter(Backoff::kSpin), microseconds(200));
  EXPECT_EQ(Backoff::pauseAfter(milliseconds(5)), microseconds(500));
  EXPECT_EQ(Backoff::pauseAfter(milliseconds(10)), Backoff::kMaxSleep);
  EXPECT_EQ(Backoff::pauseAfter(std::chrono::seconds(300)), Backoff::kMaxSleep);
  // Never shorter than the floor, never longer than the cap, and never
  // shrinking as the wait goes on.
  microseconds previous(0);
  for (microseconds waited(0); waited < milliseconds(50);
       waited += microseconds(37)) {
    microseconds pause = Backoff::pauseAfter(waited);
    EXPECT_GE(pause, previous) << "after " << waited.count() << " us";
    EXPECT_LE(pause, Backoff::kMaxSleep);
    if (waited >= Backoff::kSpin)
      EXPECT_GE(pause, Backoff::kMinSleep);
    previous = pause;
  }
}

double cpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  auto seconds = [](const timeval &t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// A wait for something that never comes (a stopped peer) sleeps: the
// polling thread uses a small share of the time it waits. A ratio, not a
// duration, so a loaded machine cannot break it (a descheduled thread uses
// less CPU, not more).
TEST(BackoffTest, ALongWaitMostlySleeps) {
  auto begin = Backoff::Clock::now();
  double cpuBegin = cpuSeconds();
  Backoff backoff;
  while (Backoff::Clock::now() - begin < milliseconds(500))
    backoff.pause();
  double wall =
      std::chrono::duration<double>(Backoff::Clock::now() - begin).count();
  double cpu = cpuSeconds() - cpuBegin;
  EXPECT_LT(cpu, 0.2 * wall) << "cpu " << cpu << " s of " << wall << " s";
}

} // namespace
} // namespace autoshard::rt
