// The context's memory functions, op timing, and fatal().
#include "HostBackedDevice.h"
#include "core/Context.h"
#include "stats/Stats.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

using namespace autoshard::rt;

namespace {

TEST(ContextTest, AllocationsAreAlignedAndCounted) {
  asrt_context ctx;
  void *a = asrt_alloc(&ctx, 100);
  void *b = asrt_alloc(&ctx, 1);
  void *c = asrt_alloc(&ctx, 0);
  for (void *p : {a, b, c}) {
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  }
  EXPECT_NE(c, a);
  EXPECT_NE(c, b);
  EXPECT_EQ(ctx.stats->snapshot().currentBytes, 101);
  asrt_free(&ctx, a);
  void *d = asrt_alloc(&ctx, 10);
  Stats::Snapshot s = ctx.stats->snapshot();
  EXPECT_EQ(s.currentBytes, 11);
  EXPECT_EQ(s.peakBytes, 101);
  asrt_free(&ctx, b);
  asrt_free(&ctx, c);
  asrt_free(&ctx, d);
  asrt_free(&ctx, nullptr); // like free(NULL)
  EXPECT_EQ(ctx.stats->snapshot().currentBytes, 0);
}

TEST(ContextTest, CopyHandlesSelfAndOverlap) {
  asrt_context ctx;
  char data[16] = "abcdefghijklmno";
  asrt_copy(&ctx, data, data, 16); // no-op
  EXPECT_STREQ(data, "abcdefghijklmno");
  asrt_copy(&ctx, data + 1, data, 4); // overlapping, like memmove
  EXPECT_EQ(std::memcmp(data, "aabcdfgh", 8), 0);
  char out[4];
  asrt_copy(&ctx, out, "xyz", 4);
  EXPECT_STREQ(out, "xyz");
  asrt_copy(&ctx, nullptr, nullptr, 0);
  EXPECT_EQ(ctx.stats->snapshot().ops.at("copy").calls, 4);
}

TEST(ContextTest, OpTimerRecordsOneCall) {
  asrt_context ctx;
  { OpTimer timer(&ctx, "my_op"); }
  { OpTimer timer(nullptr, "ignored"); }
  Stats::Snapshot s = ctx.stats->snapshot();
  ASSERT_EQ(s.ops.count("my_op"), 1u);
  EXPECT_EQ(s.ops.at("my_op").calls, 1);
  EXPECT_GE(s.ops.at("my_op").totalNs, 0);
  EXPECT_EQ(s.ops.count("ignored"), 0u);
}

/// Host memory whose compute lane "runs" each op for 1000 ns: every time
/// mark is 1000 ns after the one before. Counts the marks taken.
class MarkingDevice final : public test::HostBackedDevice {
public:
  MarkingDevice() : HostBackedDevice("marking", /*hostAccessible=*/true) {}
  TimeMark markTime(Lane lane) override {
    EXPECT_EQ(lane, Lane::Compute);
    return std::make_shared<int64_t>(1000 * ++marks);
  }
  int64_t elapsedNs(const TimeMark &begin, const TimeMark &end) override {
    return *static_cast<int64_t *>(end.get()) -
           *static_cast<int64_t *>(begin.get());
  }

  int marks = 0;
};

TEST(ContextTest, DeviceOpTimesMarkComputeOpsAndResolveAfterTheStep) {
  asrt_context ctx;
  auto owned = std::make_unique<MarkingDevice>();
  MarkingDevice &device = *owned;
  ctx.device = std::move(owned);
  // Off (the default): no marks.
  { OpTimer timer(&ctx, "op_a"); }
  EXPECT_EQ(device.marks, 0);
  ctx.setDeviceOpTimes(true);
  { OpTimer timer(&ctx, "op_a"); }
  { OpTimer timer(&ctx, "op_a"); }
  { OpTimer timer(&ctx, "op_b"); }
  // Issuing and waiting for collectives queue no compute work.
  { OpTimer timer(&ctx, "wait", "wait"); }
  EXPECT_EQ(device.marks, 6);
  // Nothing is read before the step has passed its marks.
  EXPECT_EQ(ctx.stats->snapshot().ops.at("op_a").deviceCalls, 0);
  ctx.resolveDeviceOpTimes();
  EXPECT_TRUE(!ctx.hasPendingDeviceTimes());
  Stats::Snapshot s = ctx.stats->snapshot();
  EXPECT_EQ(s.ops.at("op_a").calls, 3);
  EXPECT_EQ(s.ops.at("op_a").deviceCalls, 2);
  EXPECT_EQ(s.ops.at("op_a").deviceNs, 2000);
  EXPECT_EQ(s.ops.at("op_b").deviceCalls, 1);
  EXPECT_EQ(s.ops.at("op_b").deviceNs, 1000);
  EXPECT_EQ(s.ops.at("wait").deviceCalls, 0);
  // The host device marks nothing, whatever the flag says.
  asrt_context host;
  host.setDeviceOpTimes(true);
  { OpTimer timer(&host, "op_a"); }
  EXPECT_TRUE(!host.hasPendingDeviceTimes());
}

TEST(ContextDeathTest, FatalNamesRankAndMessage) {
  EXPECT_EXIT(fatal("bad value %d", 42), ::testing::ExitedWithCode(1),
              "autoshard runtime error \\(rank 0\\): bad value 42");
}

TEST(ContextDeathTest, BadMemoryCallsAreFatal) {
  asrt_context ctx;
  EXPECT_EXIT(asrt_alloc(&ctx, -5), ::testing::ExitedWithCode(1),
              "asrt_alloc: size -5 bytes is negative");
  EXPECT_EXIT(asrt_alloc(nullptr, 8), ::testing::ExitedWithCode(1),
              "asrt_alloc: context is null");
  int local = 0;
  EXPECT_EXIT(asrt_free(&ctx, &local), ::testing::ExitedWithCode(1),
              "was not returned by asrt_alloc");
  void *p = asrt_alloc(&ctx, 8);
  asrt_free(&ctx, p);
  EXPECT_EXIT(asrt_free(&ctx, p), ::testing::ExitedWithCode(1),
              "or was already freed");
  EXPECT_EXIT(asrt_copy(&ctx, &local, nullptr, 4), ::testing::ExitedWithCode(1),
              "source pointer is null");
  EXPECT_EXIT(asrt_alloc(&ctx, INT64_MAX - 100), ::testing::ExitedWithCode(1),
              "out of memory allocating");
  // With the compiler's plan known, the error names it too.
  ctx.setPlannedPeakBytes(4096);
  EXPECT_EXIT(asrt_alloc(&ctx, INT64_MAX - 100), ::testing::ExitedWithCode(1),
              "out of memory allocating [0-9]+ bytes of device memory on host "
              "\\([0-9]+ bytes already allocated by this rank, peak so far "
              "[0-9]+; the compiler planned a peak of 4096 bytes\\)");
}

TEST(ContextTest, ArenaIsTheDriversBuffer) {
  asrt_context ctx;
  ctx.setArena(asrt_alloc(&ctx, 256));
  EXPECT_EQ(asrt_arena(&ctx), ctx.arena());
  asrt_free(&ctx, ctx.arena());
}

TEST(ContextDeathTest, ArenaWithoutOneIsFatal) {
  asrt_context ctx;
  EXPECT_EXIT(asrt_arena(&ctx), ::testing::ExitedWithCode(1),
              "asrt_arena: this context has no arena");
  EXPECT_EXIT(asrt_arena(nullptr), ::testing::ExitedWithCode(1),
              "asrt_arena: context is null");
}

void firstCleanup() { std::fprintf(stderr, "cleanup one\n"); }
void secondCleanup() { std::fprintf(stderr, "cleanup two\n"); }

// fatal() runs every cleanup hook once, in the order added; a hook added
// twice runs once.
TEST(ContextTest, FatalRunsEachCleanupHookOnceInOrder) {
  EXPECT_EXIT(
      {
        addFatalCleanupHook(firstCleanup);
        addFatalCleanupHook(secondCleanup);
        addFatalCleanupHook(firstCleanup);
        fatal("the end");
      },
      ::testing::ExitedWithCode(1),
      "error \\(rank 0\\): the end\ncleanup one\ncleanup two\n$");
}

} // namespace
