// asrt_dropout on the CPU: Philox masks drawn where they are applied.
#include "Element.h"
#include "Parallel.h"
#include "core/ArgChecks.h"
#include "core/Context.h"
#include "data/Dropout.h"

using namespace autoshard::rt;
using namespace autoshard::rt::cpu;

extern "C" void asrt_dropout(asrt_context *ctx, int32_t dtype, const void *x,
                             void *y, int64_t n, int64_t row_elems,
                             int64_t row_offset, int64_t rank_rows, float p,
                             int64_t stream) {
  OpTimer timer(ctx, "dropout");
  const char *op = "dropout";
  const uint64_t first = static_cast<uint64_t>(checkDropoutArgs(
      op, n, row_elems, row_offset, rank_rows, ctx->batchRank(), p));
  const DropoutMask mask =
      dropoutMask(ctx->randomSeed(), ctx->randomStep(), stream, p);
  const float scale = 1.0f / (1.0f - p);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x);
    T *out = static_cast<T *>(y);
    // Philox's cost per element dominates: a chunk is worth a thread early.
    forEachChunk(ctx, n, 16, [&](int64_t begin, int64_t end) {
      uint32_t words[4];
      uint64_t blockIndex = UINT64_MAX;
      for (int64_t i = begin; i < end; ++i) {
        uint64_t index = first + static_cast<uint64_t>(i);
        if (index / 4 != blockIndex) {
          blockIndex = index / 4;
          mask.block(blockIndex, words);
        }
        // Element i is read before it is written: y may be x.
        store(out, i,
              mask.keepsWord(words[index % 4]) ? load(in, i) * scale : 0.0f);
      }
    });
  });
}
