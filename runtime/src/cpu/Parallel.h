// How the CPU kernels split a loop over the context's host threads.
#pragma once

#include "core/Context.h"
#include "core/ThreadPool.h"

#include <algorithm>
#include <cstdint>

namespace autoshard::rt::cpu {

/// No thread gets less work than this many element updates, so small loops
/// stay on the calling thread: waking a worker costs tens of microseconds,
/// about what this many elements of AdamW take on one core.
constexpr int64_t kMinWorkPerThread = int64_t(1) << 15;
/// Chunk boundaries of cheap items are multiples of this many items: whole
/// 64-byte cache lines of every f32 and bf16 array (no two threads write
/// one line) and whole vectors.
constexpr int64_t kChunkAlignment = 64;

/// Calls body(begin, end) on contiguous chunks that cover [0, n), on at
/// most `maxThreads` of the context's compute threads
/// (asrt_context::computePool) when the loop's work, n items of `cost`
/// element updates each, is large enough to split; on the calling thread
/// otherwise. A chunk's items are computed exactly as they would be on one
/// thread, so a kernel whose items are independent (each output element
/// written by one item, in a fixed order of its own) gives the same bits
/// whatever the thread count.
template <typename Body>
void forEachChunkOn(asrt_context *ctx, int maxThreads, int64_t n, int64_t cost,
                    const Body &body) {
  ThreadPool *pool = ctx ? ctx->computePool.get() : nullptr;
  int64_t perItem = std::max<int64_t>(cost, 1);
  // n * cost, saturated: only compared with the thread count below.
  int64_t work = n > INT64_MAX / perItem ? INT64_MAX : n * perItem;
  int64_t tasks = pool ? std::min<int64_t>({pool->threads(), maxThreads,
                                            work / kMinWorkPerThread, n})
                       : 1;
  if (tasks <= 1) {
    if (n > 0)
      body(int64_t(0), n);
    return;
  }
  int64_t chunk = (n + tasks - 1) / tasks;
  // Expensive items (a long reduction each) are few: aligning their chunks
  // would leave threads idle, and their outputs are not the contended part.
  if (chunk >= 4 * kChunkAlignment)
    chunk = (chunk + kChunkAlignment - 1) / kChunkAlignment * kChunkAlignment;
  tasks = (n + chunk - 1) / chunk;
  pool->run(tasks, [&](int64_t task) {
    int64_t begin = task * chunk;
    body(begin, std::min(n, begin + chunk));
  });
}

/// forEachChunkOn the kernel threads (--threads): the generic tensor
/// kernels' and dropout's loops.
template <typename Body>
void forEachChunk(asrt_context *ctx, int64_t n, int64_t cost,
                  const Body &body) {
  forEachChunkOn(ctx, ctx ? ctx->kernelThreads() : 1, n, cost, body);
}

/// forEachChunkOn the optimizer threads (--optimizer-threads): the
/// optimizer updates' loops.
template <typename Body>
void forEachOptimizerChunk(asrt_context *ctx, int64_t n, int64_t cost,
                           const Body &body) {
  forEachChunkOn(ctx, ctx ? ctx->optimizerThreads() : 1, n, cost, body);
}

} // namespace autoshard::rt::cpu
