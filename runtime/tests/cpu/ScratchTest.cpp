// Tests of the CPU kernels' scratch arena: reuse, growth, memory bounds.
#include "TestUtil.h"

#include "autoshard/rt/abi.h"
#include "cpu/Scratch.h"

#include <thread>

namespace autoshard::rt::test {
namespace {

using cpu::ScratchFrame;
using cpu::ScratchStats;
using cpu::scratchStats;

/// Runs `body` on a new thread, whose arena starts empty, and returns that
/// arena's statistics afterwards.
template <typename Body> ScratchStats onFreshThread(Body &&body) {
  ScratchStats stats;
  std::thread worker([&] {
    body();
    stats = scratchStats();
  });
  worker.join();
  return stats;
}

/// Whether [p, p + pBytes) and [q, q + qBytes) do not overlap.
bool disjoint(const void *p, size_t pBytes, const void *q, size_t qBytes) {
  auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(q);
  return a + pBytes <= b || b + qBytes <= a;
}

using ScratchTest = CpuKernelTest;

TEST_F(ScratchTest, FrameRegionsAreAlignedDistinctAndReused) {
  ScratchStats after = onFreshThread([] {
    {
      ScratchFrame frame("test");
      float *a = frame.take<float>(3);
      double *b = frame.take<double>(100);
      int64_t *c = frame.take<int64_t>(0);
      for (void *p : {static_cast<void *>(a), static_cast<void *>(b),
                      static_cast<void *>(c)})
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
      // Regions do not overlap (the first frame's come from the heap, in
      // no particular order).
      EXPECT_TRUE(disjoint(a, 3 * sizeof(float), b, 100 * sizeof(double)));
      EXPECT_TRUE(disjoint(a, 3 * sizeof(float), c, 1));
      EXPECT_TRUE(disjoint(b, 100 * sizeof(double), c, 1));
    }
    // The first frame came from the heap and grew the block to fit it all
    // (each region rounded up to 64 bytes).
    ScratchStats grown = scratchStats();
    EXPECT_GT(grown.heapAllocations, 0);
    EXPECT_GE(grown.capacityBytes, 64 + 832 + 64);
    {
      ScratchFrame frame("test");
      float *a = frame.take<float>(3);
      double *b = frame.take<double>(100);
      EXPECT_TRUE(disjoint(a, 3 * sizeof(float), b, 100 * sizeof(double)));
    }
    // The same requests again fit the block: no heap allocation.
    EXPECT_EQ(scratchStats().heapAllocations, grown.heapAllocations);
    {
      // A larger frame grows the block once more.
      ScratchFrame frame("test");
      frame.take<float>(1000);
    }
    EXPECT_GE(scratchStats().capacityBytes, 4000);
  });
  EXPECT_GT(after.heapAllocations, 0);
}

TEST_F(ScratchTest, RepeatedKernelCallsDoNotAllocate) {
  // A training loop repeats its shapes: after the first call of each, the
  // kernels' scratch comes from the arena.
  const int64_t batch = 2, seq = 100, heads = 4, kvHeads = 2, dim = 16;
  const size_t qn = batch * seq * heads * dim,
               kvn = batch * seq * kvHeads * dim;
  std::vector<uint16_t> q = toBf16(uniformFloats(qn, 1, -1, 1));
  std::vector<uint16_t> k = toBf16(uniformFloats(kvn, 2, -1, 1));
  std::vector<uint16_t> v = toBf16(uniformFloats(kvn, 3, -1, 1));
  std::vector<uint16_t> out(qn), dq(qn), dk(kvn), dv(kvn);
  std::vector<float> lse(batch * heads * seq);
  std::vector<uint16_t> w = toBf16(uniformFloats(64 * 48, 4, -1, 1));
  std::vector<uint16_t> y(batch * seq * heads * 48);
  auto step = [&] {
    asrt_causal_attention_fwd(&ctx, ASRT_DTYPE_BF16, q.data(), k.data(),
                              v.data(), out.data(), lse.data(), batch, seq,
                              heads, kvHeads, dim, 0.25f);
    asrt_causal_attention_grad(&ctx, ASRT_DTYPE_BF16, out.data(), q.data(),
                               k.data(), v.data(), out.data(), lse.data(),
                               dq.data(), dk.data(), dv.data(), batch, seq,
                               heads, kvHeads, dim, 0.25f);
    asrt_linear_fwd(&ctx, ASRT_DTYPE_BF16, q.data(), w.data(), nullptr,
                    y.data(), batch * seq * heads * dim / 64, 64, 48);
    asrt_layer_norm_fwd(&ctx, ASRT_DTYPE_BF16, q.data(), w.data(), w.data(),
                        out.data(), batch * seq * heads, dim, 1e-5f);
  };
  onFreshThread([&] {
    step();
    ScratchStats warm = scratchStats();
    step();
    step();
    ScratchStats later = scratchStats();
    EXPECT_EQ(later.heapAllocations, warm.heapAllocations);
    EXPECT_EQ(later.capacityBytes, warm.capacityBytes);
  });
}

TEST_F(ScratchTest, AttentionScratchIsLinearInSequence) {
  // seq = 2048: a full score matrix per head would be 16 MiB; the row
  // blocks need 64 rows of scores (512 KiB) forward and twice that plus
  // the key/value gradient accumulators (2 * seq * head_dim) backward.
  const int64_t seq = 2048, dim = 8;
  std::vector<float> q = uniformFloats(seq * dim, 5, -1, 1);
  std::vector<float> out(seq * dim), lse(seq), dq(seq * dim), dk(seq * dim),
      dv(seq * dim);
  ScratchStats fwd = onFreshThread([&] {
    asrt_causal_attention_fwd(&ctx, ASRT_DTYPE_F32, q.data(), q.data(),
                              q.data(), out.data(), lse.data(), 1, seq, 1, 1,
                              dim, 0.35f);
  });
  EXPECT_LE(fwd.capacityBytes, 64 * seq * 4 + 64);
  ScratchStats bwd = onFreshThread([&] {
    asrt_causal_attention_grad(&ctx, ASRT_DTYPE_F32, out.data(), q.data(),
                               q.data(), q.data(), out.data(), lse.data(),
                               dq.data(), dk.data(), dv.data(), 1, seq, 1, 1,
                               dim, 0.35f);
  });
  EXPECT_LE(bwd.capacityBytes,
            (2 * 64 * seq + 64 + 2 * seq * dim) * 4 + 5 * 64);
}

TEST_F(ScratchTest, NestedFramesAreFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        ScratchFrame outer("outer_op");
        ScratchFrame inner("inner_op");
      },
      "inner_op: kernel scratch frame opened inside another one");
}

} // namespace
} // namespace autoshard::rt::test
