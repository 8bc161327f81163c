// The communication stream: issue order, waits, timeouts, exposed time.
//
// The accounting tests run the stream on a fake clock that only the test
// moves, and hold operations until the main thread is blocked on them
// (blockedWaiters), so that every duration they check is exact: no test
// here depends on how fast the machine is.
#include "core/CommStream.h"
#include "core/Context.h"
#include "stats/Stats.h"
#include "stats/Trace.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

using namespace autoshard::rt;

namespace {

std::atomic<int64_t> fakeNow{0};
int64_t fakeClock() { return fakeNow.load(); }

StreamOpInfo asyncInfo(int64_t handle) {
  StreamOpInfo info;
  info.name = "bucket_all_reduce";
  info.mask = 1;
  info.groupSize = 2;
  info.bytes = 64;
  info.members = 2;
  info.handle = handle;
  return info;
}

StreamOpInfo blockingInfo() {
  StreamOpInfo info;
  info.name = "all_reduce";
  info.dtype = ASRT_DTYPE_BF16;
  info.mask = 3;
  info.groupSize = 4;
  info.bytes = 12;
  return info;
}

/// Spins (yielding) until `ready` holds: structural synchronisation with
/// the communication thread, no timing.
template <typename Ready> void spinUntil(Ready ready) {
  while (!ready())
    std::this_thread::yield();
}

/// An operation given as a lambda, for issue(); the lambda must outlive it.
template <typename Fn> void runLambda(void *fn) { (*static_cast<Fn *>(fn))(); }
template <typename Fn>
uint64_t issueLambda(CommStream &stream, Fn &fn, const StreamOpInfo &info) {
  return stream.issue(&runLambda<Fn>, &fn, info);
}

TEST(CommStreamTest, RunsInIssueOrderOnItsOwnThread) {
  Stats stats;
  CommStream stream(stats);
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  std::vector<std::function<void()>> ops;
  for (int i = 0; i < 6; ++i)
    ops.emplace_back([&, i] {
      order.push_back(i);
      threads.push_back(std::this_thread::get_id());
    });
  uint64_t last = 0;
  for (int i = 0; i < 6; ++i) {
    uint64_t seq = issueLambda(stream, ops[i], asyncInfo(i + 1));
    EXPECT_EQ(seq, last + 1) << "sequence numbers count the issues";
    last = seq;
  }
  EXPECT_EQ(stream.lastIssued(), 6u);
  stream.wait(6, "test", asyncInfo(6));
  // Waiting for the last waited for all: they run in order.
  for (uint64_t seq = 1; seq <= 6; ++seq)
    EXPECT_TRUE(stream.isComplete(seq)) << seq;
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  ASSERT_EQ(threads.size(), 6u);
  for (std::thread::id id : threads) {
    EXPECT_EQ(id, threads[0]) << "one communication thread";
    EXPECT_NE(id, std::this_thread::get_id()) << "not the issuing thread";
  }
}

TEST(CommStreamTest, WaitsInAnyOrder) {
  Stats stats;
  CommStream stream(stats);
  std::atomic<int> ran{0};
  auto op = [&] { ran.fetch_add(1); };
  for (int64_t h = 1; h <= 3; ++h)
    issueLambda(stream, op, asyncInfo(h));
  stream.wait(3, "test", asyncInfo(3));
  stream.wait(1, "test", asyncInfo(1));
  stream.wait(2, "test", asyncInfo(2));
  EXPECT_EQ(ran.load(), 3);
  SideThreadTime c = stats.snapshot().comm;
  EXPECT_EQ(c.asyncCalls, 3);
  EXPECT_EQ(c.asyncWaits, 3);
  EXPECT_EQ(c.blockingCalls, 0);
}

TEST(CommStreamTest, BlockingOperationsRunAfterTheOnesInFlight) {
  Stats stats;
  CommStream stream(stats);
  std::atomic<bool> release{false};
  auto held = [&] { spinUntil([&] { return release.load(); }); };
  auto quick = [] {};
  uint64_t first = issueLambda(stream, held, asyncInfo(1));
  uint64_t second = issueLambda(stream, quick, asyncInfo(2));
  // Released only once the main thread is blocked in runBlocking below.
  std::thread releaser([&] {
    spinUntil([&] { return stream.blockedWaiters() > 0; });
    release.store(true);
  });
  bool earlierDone = false;
  bool onStreamThread = false;
  std::thread::id mainThread = std::this_thread::get_id();
  stream.runBlocking("test", blockingInfo(), [&] {
    earlierDone = stream.isComplete(first) && stream.isComplete(second);
    onStreamThread = std::this_thread::get_id() != mainThread;
  });
  releaser.join();
  EXPECT_TRUE(earlierDone);
  EXPECT_TRUE(onStreamThread);
  EXPECT_EQ(stream.lastIssued(), 3u);
  SideThreadTime c = stats.snapshot().comm;
  EXPECT_EQ(c.blockingCalls, 1);
  EXPECT_EQ(c.asyncCalls, 2);
}

TEST(CommStreamTest, DrainWaitsOnlyWhenSomethingIsInFlight) {
  Stats stats;
  CommStream stream(stats);
  stream.drain("test", blockingInfo());
  EXPECT_EQ(stats.snapshot().comm.blockingCalls, 0) << "idle: nothing waited";
  std::atomic<bool> ran{false};
  auto op = [&] { ran.store(true); };
  issueLambda(stream, op, asyncInfo(1));
  stream.drain("test", blockingInfo());
  EXPECT_TRUE(ran.load());
  EXPECT_TRUE(stream.isComplete(1));
}

TEST(CommStreamTest, DestructorRunsWhatIsQueued) {
  Stats stats;
  std::atomic<int> ran{0};
  auto op = [&] { ran.fetch_add(1); };
  {
    CommStream stream(stats);
    issueLambda(stream, op, asyncInfo(1));
    issueLambda(stream, op, asyncInfo(2));
  }
  EXPECT_EQ(ran.load(), 2);
}

// ---- Accounting: exposed (blocked) time against communication time -------

TEST(CommStreamTest, CommunicationHiddenByComputeIsNotExposed) {
  Stats stats;
  CommStream stream(stats, &fakeClock);
  fakeNow = 0;
  auto comm = [] { fakeNow += 300; };
  uint64_t seq = issueLambda(stream, comm, asyncInfo(1));
  // It completes while the main thread computes...
  spinUntil([&] { return stream.isComplete(seq); });
  fakeNow += 1000;
  // ... so the wait finds it done.
  stream.wait(seq, "asrt_wait", asyncInfo(1));
  SideThreadTime c = stats.snapshot().comm;
  EXPECT_EQ(c.asyncNs, 300);
  EXPECT_EQ(c.threadNs, 300);
  EXPECT_EQ(c.asyncWaitNs, 0);
  EXPECT_EQ(c.exposedNs(), 0);
  EXPECT_LT(c.exposedNs(), c.asyncNs);
}

TEST(CommStreamTest, CommunicationWaitedForIsExposed) {
  Stats stats;
  CommStream stream(stats, &fakeClock);
  fakeNow = 0;
  // All of it happens while the main thread is blocked in the wait.
  auto comm = [&] {
    spinUntil([&] { return stream.blockedWaiters() > 0; });
    fakeNow += 300;
  };
  uint64_t seq = issueLambda(stream, comm, asyncInfo(1));
  stream.wait(seq, "asrt_wait", asyncInfo(1));
  SideThreadTime c = stats.snapshot().comm;
  EXPECT_EQ(c.asyncNs, 300);
  EXPECT_EQ(c.asyncWaitNs, 300);
  EXPECT_EQ(c.asyncWaits, 1);
  EXPECT_EQ(c.exposedNs(), 300);
}

TEST(CommStreamTest, OnlyTheUnhiddenPartIsExposed) {
  Stats stats;
  CommStream stream(stats, &fakeClock);
  fakeNow = 0;
  std::atomic<bool> firstPartDone{false};
  // 100 ns during the main thread's compute, 200 ns while it waits.
  auto comm = [&] {
    fakeNow += 100;
    firstPartDone.store(true);
    spinUntil([&] { return stream.blockedWaiters() > 0; });
    fakeNow += 200;
  };
  uint64_t seq = issueLambda(stream, comm, asyncInfo(1));
  spinUntil([&] { return firstPartDone.load(); });
  stream.wait(seq, "asrt_wait", asyncInfo(1));
  SideThreadTime c = stats.snapshot().comm;
  EXPECT_EQ(c.asyncNs, 300);
  EXPECT_EQ(c.asyncWaitNs, 200);
  EXPECT_EQ(c.exposedNs(), 200);
}

TEST(CommStreamTest, BlockingCollectivesAreExposedWhole) {
  Stats stats;
  CommStream stream(stats, &fakeClock);
  fakeNow = 0;
  stream.runBlocking("asrt_all_reduce", blockingInfo(), [&] {
    spinUntil([&] { return stream.blockedWaiters() > 0; });
    fakeNow += 50;
  });
  SideThreadTime c = stats.snapshot().comm;
  EXPECT_EQ(c.blockingCalls, 1);
  EXPECT_EQ(c.blockingWaitNs, 50);
  EXPECT_EQ(c.threadNs, 50);
  EXPECT_EQ(c.asyncNs, 0) << "not an asynchronous collective";
  EXPECT_EQ(c.exposedNs(), 50);
}

TEST(CommStreamTest, DescribesCollectives) {
  EXPECT_EQ(describeStreamOp(asyncInfo(3)),
            "bucket_all_reduce of handle 3 (f32, 2 members, sending 64 bytes "
            "over grid_axes_mask 1, a group of 2 ranks)");
  EXPECT_EQ(describeStreamOp(blockingInfo()),
            "all_reduce (bf16, sending 12 bytes over grid_axes_mask 3, a "
            "group of 4 ranks)");
}

// ---- The offload role: the same stream, offload's records ----------------

/// An asynchronous NVMe read of argument 3 (b.momentum) on the offload
/// stream.
StreamOpInfo readInfo(int64_t handle) {
  StreamOpInfo info;
  info.name = "nvme_read";
  info.bytes = 16;
  info.handle = handle;
  info.arg = 3;
  info.argName = "b.momentum";
  return info;
}

/// A synchronous host-to-device copy.
StreamOpInfo copyInfo() {
  StreamOpInfo info;
  info.name = "to_device";
  info.bytes = 4096;
  return info;
}

TEST(CommStreamTest, TheOffloadStreamRecordsOffloadTimeNotCommunication) {
  Stats stats;
  CommStream stream(stats, StreamRole::Offload, &fakeClock);
  EXPECT_EQ(stream.role(), StreamRole::Offload);
  fakeNow = 0;
  // 100 ns hidden by compute, 200 ns waited for.
  std::atomic<bool> firstPartDone{false};
  auto read = [&] {
    fakeNow += 100;
    firstPartDone.store(true);
    spinUntil([&] { return stream.blockedWaiters() > 0; });
    fakeNow += 200;
  };
  uint64_t seq = issueLambda(stream, read, readInfo(1));
  spinUntil([&] { return firstPartDone.load(); });
  stream.wait(seq, "asrt_transfer_wait", readInfo(1));
  // A synchronous copy: exposed whole.
  stream.runBlocking("asrt_copy_to_device", copyInfo(), [&] {
    spinUntil([&] { return stream.blockedWaiters() > 0; });
    fakeNow += 50;
  });
  Stats::Snapshot s = stats.snapshot();
  EXPECT_EQ(s.offload.asyncCalls, 1);
  EXPECT_EQ(s.offload.asyncNs, 300);
  EXPECT_EQ(s.offload.asyncWaits, 1);
  EXPECT_EQ(s.offload.asyncWaitNs, 200);
  EXPECT_EQ(s.offload.blockingCalls, 1);
  EXPECT_EQ(s.offload.blockingWaitNs, 50);
  EXPECT_EQ(s.offload.threadNs, 350);
  EXPECT_EQ(s.offload.exposedNs(), 250);
  // Nothing of it is communication.
  EXPECT_EQ(s.comm.threadNs, 0);
  EXPECT_EQ(s.comm.asyncCalls, 0);
  EXPECT_EQ(s.comm.blockingCalls, 0);
  EXPECT_EQ(s.comm.exposedNs(), 0);
}

TEST(CommStreamTest, TheCommunicationStreamRecordsNoOffloadTime) {
  Stats stats;
  CommStream stream(stats, &fakeClock);
  EXPECT_EQ(stream.role(), StreamRole::Communication);
  fakeNow = 0;
  auto comm = [] { fakeNow += 300; };
  stream.wait(issueLambda(stream, comm, asyncInfo(1)), "asrt_wait",
              asyncInfo(1));
  Stats::Snapshot s = stats.snapshot();
  EXPECT_EQ(s.comm.threadNs, 300);
  EXPECT_EQ(s.offload.threadNs, 0);
  EXPECT_EQ(s.offload.asyncWaits, 0);
}

TEST(CommStreamTest, TheOffloadStreamTracesOnTheOffloadTrack) {
  Stats stats;
  Trace trace(0);
  CommStream stream(stats, StreamRole::Offload, &fakeClock);
  stream.setTrace(&trace);
  fakeNow = 1000;
  std::thread::id ranOn;
  auto read = [&] {
    ranOn = std::this_thread::get_id();
    fakeNow += 500;
  };
  stream.wait(issueLambda(stream, read, readInfo(2)), "asrt_transfer_wait",
              readInfo(2));
  stream.setTrace(nullptr);
  std::vector<TraceEvent> events = trace.events();
  ASSERT_EQ(events.size(), 1u);
  const TraceEvent &e = events[0];
  EXPECT_STREQ(e.name, "nvme_read");
  EXPECT_STREQ(e.category, "offload");
  EXPECT_EQ(e.track, TraceTrack::Offload);
  EXPECT_EQ(e.startNs, 1000);
  EXPECT_EQ(e.endNs, 1500);
  EXPECT_EQ(e.seq, 1);
  EXPECT_EQ(e.handle, 2);
  EXPECT_EQ(e.bytes, 16);
  EXPECT_EQ(e.arg, 3);
  // A transfer has no grid mask or dtype.
  EXPECT_EQ(e.mask, -1);
  EXPECT_EQ(e.dtype, nullptr);
  EXPECT_NE(ranOn, std::this_thread::get_id()) << "recorded by the stream";
}

TEST(CommStreamTest, DescribesTransfers) {
  EXPECT_EQ(describeTransfer(readInfo(2)),
            "nvme_read of handle 2 (argument 3 b.momentum, 16 bytes)");
  EXPECT_EQ(describeTransfer(copyInfo()), "to_device (4096 bytes)");
}

// ---- Timeouts ----------------------------------------------------------

/// An operation that never completes, as a collective whose peer died;
/// it sets the flag `started` points to first.
void hang(void *started) {
  static_cast<std::atomic<bool> *>(started)->store(true);
  while (true)
    std::this_thread::sleep_for(std::chrono::seconds(1));
}

TEST(CommStreamDeathTest, AWaitPastTheTimeoutIsFatal) {
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_DEATH(
      {
        Stats stats;
        CommStream stream(stats);
        stream.setTimeout(0.2);
        std::atomic<bool> started{false};
        uint64_t seq = stream.issue(&hang, &started, asyncInfo(3));
        // Running, so that the message can say so on any machine.
        spinUntil([&] { return started.load(); });
        stream.wait(seq, "asrt_wait", asyncInfo(3));
      },
      "asrt_wait: bucket_all_reduce of handle 3 \\(f32, 2 members, sending "
      "64 bytes over grid_axes_mask 1, a group of 2 ranks\\) did not "
      "complete within the collective timeout of 0.2 s \\(waited [0-9.]+ "
      "s\\); it has been running on the communication thread for [0-9.]+ s. "
      "A rank of the group has probably died or hung; --collective-timeout "
      "sets the limit \\(0 waits forever\\)");
}

// What the rank was running and which ranks its group's collective may be
// waiting for, when the driver has said (setPhase, setGroupNamer); the
// namer is asked about the waited collective's mask.
TEST(CommStreamDeathTest, TheMessageNamesThePhaseAndTheGroupsOtherMembers) {
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_DEATH(
      {
        Stats stats;
        CommStream stream(stats);
        stream.setTimeout(0.1);
        stream.setPhase("the evaluation after step 2");
        stream.setGroupNamer([](int32_t mask) {
          return "ranks 1, 2, 3 (mask " + std::to_string(mask) + ")";
        });
        std::atomic<bool> started{false};
        uint64_t seq = stream.issue(&hang, &started, blockingInfo());
        spinUntil([&] { return started.load(); });
        stream.wait(seq, "asrt_all_reduce", blockingInfo());
      },
      "asrt_all_reduce: all_reduce \\(bf16, sending 12 bytes over "
      "grid_axes_mask 3, a group of 4 ranks\\) did not complete within the "
      "collective timeout of 0.1 s \\(waited [0-9.]+ s\\) in the evaluation "
      "after step 2; it has been running on the communication thread for "
      "[0-9.]+ s. A rank of the group has probably died or hung \\(its other "
      "members: ranks 1, 2, 3 \\(mask 3\\)\\); --collective-timeout");
}

// The communicator's word on whom the running collective waits for
// (setWaitReporter) follows the group's members, inside their parentheses.
TEST(CommStreamDeathTest, TheMessageAddsWhomTheCommunicatorSaysItWaitsFor) {
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_DEATH(
      {
        Stats stats;
        CommStream stream(stats);
        stream.setTimeout(0.1);
        stream.setGroupNamer(
            [](int32_t) { return std::string("ranks 1, 2, 3"); });
        stream.setWaitReporter([] {
          return std::string("rank 2 has not reached it; ranks 1, 3 wait in "
                             "it too");
        });
        std::atomic<bool> started{false};
        uint64_t seq = stream.issue(&hang, &started, blockingInfo());
        spinUntil([&] { return started.load(); });
        stream.wait(seq, "asrt_all_reduce", blockingInfo());
      },
      "\\(its other members: ranks 1, 2, 3; rank 2 has not reached it; "
      "ranks 1, 3 wait in it too\\); --collective-timeout");
}

// A communicator that cannot tell (an empty word) adds nothing: the
// members alone.
TEST(CommStreamDeathTest, AnEmptyWordAddsNothing) {
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_DEATH(
      {
        Stats stats;
        CommStream stream(stats);
        stream.setTimeout(0.1);
        stream.setGroupNamer(
            [](int32_t) { return std::string("ranks 1, 2, 3"); });
        stream.setWaitReporter([] { return std::string(); });
        std::atomic<bool> started{false};
        uint64_t seq = stream.issue(&hang, &started, blockingInfo());
        spinUntil([&] { return started.load(); });
        stream.wait(seq, "asrt_all_reduce", blockingInfo());
      },
      "\\(its other members: ranks 1, 2, 3\\); --collective-timeout");
}

// When the thread is stuck in an earlier collective than the one waited
// for, the word is about that one, and the message says so.
TEST(CommStreamDeathTest, TheWordIsAboutTheCollectiveThatIsStuck) {
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_DEATH(
      {
        Stats stats;
        CommStream stream(stats);
        stream.setTimeout(0.1);
        stream.setGroupNamer(
            [](int32_t) { return std::string("ranks 1, 2, 3"); });
        stream.setWaitReporter(
            [] { return std::string("rank 2 has not reached it"); });
        // The thread is held in a first operation, so the second, waited
        // for, has not started.
        std::atomic<bool> started{false};
        stream.issue(&hang, &started, asyncInfo(1));
        spinUntil([&] { return started.load(); });
        uint64_t seq = stream.issue(&hang, &started, blockingInfo());
        stream.wait(seq, "asrt_all_reduce", blockingInfo());
      },
      "its other members: ranks 1, 2, 3; in the one the communication thread "
      "is stuck in, rank 2 has not reached it\\); --collective-timeout");
}

TEST(CommStreamDeathTest, TheMessageNamesTheCollectiveThatIsStuck) {
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_DEATH(
      {
        Stats stats;
        CommStream stream(stats);
        stream.setTimeout(0.1);
        std::atomic<bool> started{false};
        stream.issue(&hang, &started, asyncInfo(1));
        spinUntil([&] { return started.load(); });
        stream.runBlocking("asrt_all_reduce", blockingInfo(), [] {});
      },
      "asrt_all_reduce: all_reduce \\(bf16, sending 12 bytes over "
      "grid_axes_mask 3, a group of 4 ranks\\) did not complete within the "
      "collective timeout of 0.1 s \\(waited [0-9.]+ s\\); the communication "
      "thread is still running bucket_all_reduce of handle 1 \\(.*\\), "
      "issued before it, after [0-9.]+ s");
}

TEST(CommStreamDeathTest, AnOffloadWaitPastTheTimeoutNamesTheStuckTransfer) {
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_DEATH(
      {
        Stats stats;
        CommStream stream(stats, StreamRole::Offload);
        stream.setTimeout(0.1);
        std::atomic<bool> started{false};
        stream.issue(&hang, &started, readInfo(1));
        spinUntil([&] { return started.load(); });
        stream.runBlocking("asrt_copy_to_device", copyInfo(), [] {});
      },
      "asrt_copy_to_device: to_device \\(4096 bytes\\) did not complete "
      "within the collective timeout of 0.1 s \\(waited [0-9.]+ s\\); the "
      "offload thread is still running nvme_read of handle 1 \\(argument 3 "
      "b.momentum, 16 bytes\\), started before it, after [0-9.]+ s. The "
      "disk or the copy has probably hung \\(a transfer is local to this "
      "rank\\); --collective-timeout sets the limit \\(0 waits forever\\)");
}

TEST(CommStreamDeathTest, TimeoutsAreSeconds) {
  GTEST_FLAG_SET(death_test_style, "fast");
  Stats stats;
  CommStream stream(stats);
  EXPECT_EQ(stream.timeout(), CommStream::kDefaultTimeoutSeconds);
  stream.setTimeout(0);
  EXPECT_EQ(stream.timeout(), 0.0) << "0 waits forever";
  EXPECT_DEATH(stream.setTimeout(-1), "collective timeout -1 s is not a number "
                                      "of seconds >= 0");
}

} // namespace
