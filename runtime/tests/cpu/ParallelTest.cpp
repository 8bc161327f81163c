// Tests of how the CPU kernels split a loop over the context's threads.
#include "cpu/Parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace autoshard::rt::cpu {
namespace {

using Chunks = std::vector<std::pair<int64_t, int64_t>>;

/// The chunks `split` calls its body with, in order of their begin.
template <typename Split> Chunks chunksOf(const Split &split) {
  std::mutex mutex;
  Chunks chunks;
  split([&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mutex);
    chunks.emplace_back(begin, end);
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

/// Whether the chunks cover [0, n) in order, with no gap or overlap.
bool cover(const Chunks &chunks, int64_t n) {
  int64_t next = 0;
  for (auto [begin, end] : chunks) {
    if (begin != next || end <= begin)
      return false;
    next = end;
  }
  return next == n;
}

TEST(ParallelTest, SmallLoopsStayOnTheCallingThread) {
  asrt_context ctx;
  ctx.setKernelThreads(4);
  // Below kMinWorkPerThread per thread: no dispatch, one call here.
  std::thread::id caller = std::this_thread::get_id(), ran;
  int calls = 0;
  forEachChunk(&ctx, 2 * kMinWorkPerThread - 1, 1,
               [&](int64_t begin, int64_t end) {
                 ++calls;
                 ran = std::this_thread::get_id();
                 EXPECT_EQ(begin, 0);
                 EXPECT_EQ(end, 2 * kMinWorkPerThread - 1);
               });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(ran, caller);
}

TEST(ParallelTest, LargeLoopsSplitIntoAlignedChunksOnTheKernelThreads) {
  asrt_context ctx;
  const int64_t n = (int64_t(1) << 20) + 3;
  ctx.setKernelThreads(3);
  Chunks chunks =
      chunksOf([&](const auto &body) { forEachChunk(&ctx, n, 1, body); });
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_TRUE(cover(chunks, n));
  for (size_t i = 0; i + 1 < chunks.size(); ++i)
    EXPECT_EQ(chunks[i].second % kChunkAlignment, 0);
  // Rows of a long reduction each: split by work, not by count, unaligned.
  Chunks rows = chunksOf([&](const auto &body) {
    forEachChunk(&ctx, 10, kMinWorkPerThread, body);
  });
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_TRUE(cover(rows, 10));
}

TEST(ParallelTest, KernelsAndOptimizerTakeTheirOwnShareOfOnePool) {
  asrt_context ctx;
  ctx.setKernelThreads(2);
  ctx.setOptimizerThreads(4);
  const int64_t n = int64_t(1) << 20;
  Chunks kernel =
      chunksOf([&](const auto &body) { forEachChunk(&ctx, n, 1, body); });
  Chunks optimizer = chunksOf(
      [&](const auto &body) { forEachOptimizerChunk(&ctx, n, 1, body); });
  EXPECT_EQ(kernel.size(), 2u);
  EXPECT_EQ(optimizer.size(), 4u);
  EXPECT_TRUE(cover(kernel, n));
  EXPECT_TRUE(cover(optimizer, n));
}

} // namespace
} // namespace autoshard::rt::cpu
