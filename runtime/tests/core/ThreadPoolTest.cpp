// ThreadPool: every task once, really in parallel, clean shutdown; and the
// context's compute pool, shared by the kernels and the optimizer.
#include "core/ThreadPool.h"
#include "core/Context.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

using namespace autoshard::rt;

namespace {

TEST(ThreadPoolTest, RunsEveryTaskExactlyOnce) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.threads(), 4);
  // Many short jobs back to back: a worker that woke late, or a job that
  // returned before its last task did, would show as a count of 0 or 2.
  for (int64_t tasks : {1, 2, 3, 4, 5, 17, 1000}) {
    for (int round = 0; round < 50; ++round) {
      std::vector<std::atomic<int>> runs(static_cast<size_t>(tasks));
      pool.run(tasks, [&](int64_t i) { runs[static_cast<size_t>(i)]++; });
      for (int64_t i = 0; i < tasks; ++i)
        ASSERT_EQ(runs[static_cast<size_t>(i)].load(), 1)
            << "task " << i << " of " << tasks << ", round " << round;
    }
  }
}

TEST(ThreadPoolTest, TasksRunConcurrently) {
  ThreadPool pool(2);
  // Each task waits until both have started: that returns only when two
  // threads run them at once. A pool that ran them one after the other
  // would time out here instead of hanging the test.
  std::atomic<int> started{0};
  std::atomic<bool> timedOut{false};
  pool.run(2, [&](int64_t) {
    started++;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (started.load() < 2) {
      if (std::chrono::steady_clock::now() > deadline) {
        timedOut = true;
        return;
      }
      std::this_thread::yield();
    }
  });
  EXPECT_FALSE(timedOut.load());
  EXPECT_EQ(started.load(), 2);
}

TEST(ThreadPoolTest, OneThreadRunsOnTheCaller) {
  ThreadPool pool(1);
  std::set<std::thread::id> ids;
  pool.run(8, [&](int64_t) { ids.insert(std::this_thread::get_id()); });
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(*ids.begin(), std::this_thread::get_id());
}

TEST(ThreadPoolTest, NoTasksIsANoOp) {
  ThreadPool pool(3);
  int calls = 0;
  pool.run(0, [&](int64_t) { ++calls; });
  pool.run(-1, [&](int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ThreadPoolTest, DestructionJoinsIdleAndUnstartedPools) {
  // Workers start at the first job; either way the destructor returns.
  for (int i = 0; i < 20; ++i) {
    ThreadPool unstarted(4);
    ThreadPool started(4);
    std::atomic<int> sum{0};
    started.run(4, [&](int64_t t) { sum += static_cast<int>(t); });
    EXPECT_EQ(sum.load(), 6);
  }
}

TEST(ThreadPoolTest, BadThreadCountIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(ThreadPool(0), "thread pool: thread count 0 must be at least 1");
}

TEST(ContextComputeThreadsTest, DefaultIsOneAndThePoolHasTheLargerShare) {
  asrt_context ctx;
  // Ranks usually share a node's cores: one thread unless the driver says.
  EXPECT_EQ(ctx.computePool->threads(), 1);
  EXPECT_EQ(ctx.kernelThreads(), 1);
  EXPECT_EQ(ctx.optimizerThreads(), 1);
  ctx.setOptimizerThreads(3);
  EXPECT_EQ(ctx.computePool->threads(), 3);
  std::atomic<int> runs{0};
  ctx.computePool->run(6, [&](int64_t) { runs++; });
  EXPECT_EQ(runs.load(), 6);
  // One pool for both: the kernels' 2 threads fit in the optimizer's 3.
  ctx.setKernelThreads(2);
  EXPECT_EQ(ctx.computePool->threads(), 3);
  EXPECT_EQ(ctx.kernelThreads(), 2);
  ctx.setOptimizerThreads(1); // joins the started workers
  EXPECT_EQ(ctx.computePool->threads(), 2);
  EXPECT_EQ(ctx.optimizerThreads(), 1);
  ctx.setKernelThreads(4);
  EXPECT_EQ(ctx.computePool->threads(), 4);
  ctx.setKernelThreads(1);
  EXPECT_EQ(ctx.computePool->threads(), 1);
}

TEST(ContextComputeThreadsTest, BadCountsAreFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  asrt_context ctx;
  EXPECT_DEATH(ctx.setOptimizerThreads(0),
               "optimizer threads: 0 must be at least 1");
  EXPECT_DEATH(ctx.setKernelThreads(-1),
               "kernel threads: -1 must be at least 1");
}

} // namespace
