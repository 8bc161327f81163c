// Asynchronous offload transfers: asrt_transfer_start / asrt_transfer_wait.
#include "core/CommStream.h"
#include "core/Context.h"
#include "memory/InFlightTransfers.h"
#include "memory/NvmeStore.h"
#include "stats/Stats.h"
#include "stats/Trace.h"

#include "../ckpt/TempDir.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

using namespace autoshard::rt;
using autoshard::rt::testing::TempDir;

namespace {

/// Bit patterns a float copy could change (NaN payloads, a negative zero, a
/// denormal), so that the round trips are checked bit for bit.
std::vector<uint32_t> pattern(size_t n, uint32_t salt) {
  std::vector<uint32_t> words(n);
  const uint32_t special[] = {0x7fc00001u, 0xffa00002u, 0x80000000u,
                              0x00000001u};
  for (size_t i = 0; i < n; ++i)
    words[i] = i < 4 ? special[i] ^ salt
                     : static_cast<uint32_t>(i * 2654435761u) ^ salt;
  return words;
}

constexpr int kMomentum = 3, kParam = 5;
constexpr int64_t kMomentumBytes = 16, kParamBytes = 4096;

/// A context with an NVMe store holding argument 3 (16 bytes) and argument
/// 5 (4096 bytes), both initialised to known bit patterns.
struct TransferTest : ::testing::Test {
  void SetUp() override {
    Expected<std::unique_ptr<NvmeStore>> made =
        NvmeStore::create(tmp.path(), 0);
    ASSERT_TRUE(made.ok()) << made.message();
    store = std::move(*made);
    ASSERT_TRUE(
        store->add(kMomentum, "b.momentum", momentum.data(), kMomentumBytes)
            .ok());
    ASSERT_TRUE(store->add(kParam, "w", param.data(), kParamBytes).ok());
    ctx.setNvme(store.get());
  }
  std::vector<uint32_t> momentum = pattern(4, 0x11);
  std::vector<uint32_t> param = pattern(1024, 0x22);
  TempDir tmp;
  std::unique_ptr<NvmeStore> store;
  // Last: destroyed first, so its offload thread never outlives the store.
  asrt_context ctx;
};
using TransferDeathTest = TransferTest;

const TransferStats &transfer(const Stats::Snapshot &s, TransferKind kind) {
  return s.transfers[static_cast<int>(kind)];
}

TEST_F(TransferTest, RoundTripsOfEveryKindInStartOrder) {
  std::vector<uint32_t> host(1024), device(1024), back(1024), again(1024);
  // Each transfer depends on the one before it: the stream runs them one
  // at a time, in start order, so all six may be in flight together.
  int64_t read = asrt_transfer_start(&ctx, ASRT_TRANSFER_NVME_READ, kParam,
                                     host.data(), nullptr, kParamBytes);
  int64_t toDevice =
      asrt_transfer_start(&ctx, ASRT_TRANSFER_TO_DEVICE, -1, device.data(),
                          host.data(), kParamBytes);
  int64_t toHost = asrt_transfer_start(&ctx, ASRT_TRANSFER_TO_HOST, -1,
                                       back.data(), device.data(), kParamBytes);
  // The momentum file gets the param's first 16 bytes, and is read back.
  int64_t write = asrt_transfer_start(&ctx, ASRT_TRANSFER_NVME_WRITE, kMomentum,
                                      nullptr, back.data(), kMomentumBytes);
  int64_t readBack =
      asrt_transfer_start(&ctx, ASRT_TRANSFER_NVME_READ, kMomentum,
                          again.data(), nullptr, kMomentumBytes);
  EXPECT_EQ(read, 1);
  EXPECT_EQ(toDevice, 2);
  EXPECT_EQ(toHost, 3);
  EXPECT_EQ(write, 4);
  EXPECT_EQ(readBack, 5);
  EXPECT_EQ(ctx.transfers->inFlight(), 5u);

  // Waiting the last waits for all before it.
  asrt_transfer_wait(&ctx, readBack);
  for (uint64_t seq = 1; seq <= 5; ++seq)
    EXPECT_TRUE(ctx.offloadStream->isComplete(seq)) << seq;
  EXPECT_EQ(host, param);
  EXPECT_EQ(device, param);
  EXPECT_EQ(back, param);
  EXPECT_EQ(0, std::memcmp(again.data(), param.data(), kMomentumBytes));
  // The others, in any order.
  for (int64_t h : {toHost, read, write, toDevice})
    asrt_transfer_wait(&ctx, h);
  EXPECT_EQ(ctx.transfers->inFlight(), 0u);
  // Handles keep counting; slots are reused.
  EXPECT_EQ(asrt_transfer_start(&ctx, ASRT_TRANSFER_TO_HOST, -1, host.data(),
                                device.data(), 0),
            6);
  asrt_transfer_wait(&ctx, 6);
  EXPECT_EQ(ctx.transfers->slots(), 5u);
}

TEST_F(TransferTest, RunOnTheOffloadThreadApartFromTheCommunicationThread) {
  std::vector<uint32_t> host(4);
  asrt_transfer_wait(&ctx, asrt_transfer_start(&ctx, ASRT_TRANSFER_NVME_READ,
                                               kMomentum, host.data(), nullptr,
                                               kMomentumBytes));
  EXPECT_EQ(host, momentum);
  EXPECT_EQ(ctx.offloadStream->lastIssued(), 1u);
  EXPECT_EQ(ctx.stream->lastIssued(), 0u) << "no collective was issued";
}

TEST_F(TransferTest, SynchronousCallsRunAfterTheTransfersInFlight) {
  std::vector<uint32_t> fresh = pattern(4, 0x33), host(4), device(4);
  int64_t write = asrt_transfer_start(&ctx, ASRT_TRANSFER_NVME_WRITE, kMomentum,
                                      nullptr, fresh.data(), kMomentumBytes);
  // Ordered after the write on the same stream: it reads what was written.
  asrt_nvme_read(&ctx, kMomentum, host.data(), kMomentumBytes);
  EXPECT_EQ(host, fresh);
  EXPECT_TRUE(ctx.offloadStream->isComplete(1));
  int64_t copy =
      asrt_transfer_start(&ctx, ASRT_TRANSFER_TO_DEVICE, -1, device.data(),
                          host.data(), kMomentumBytes);
  std::vector<uint32_t> check(4);
  asrt_copy_to_host(&ctx, check.data(), device.data(), kMomentumBytes);
  EXPECT_EQ(check, fresh);
  // Still to be waited, though complete.
  EXPECT_EQ(ctx.transfers->inFlight(), 2u);
  asrt_transfer_wait(&ctx, write);
  asrt_transfer_wait(&ctx, copy);
}

TEST_F(TransferTest, AsynchronousTransfersAreCountedAsTheSynchronousOnes) {
  std::vector<uint32_t> host(1024), device(1024);
  int64_t a = asrt_transfer_start(&ctx, ASRT_TRANSFER_NVME_READ, kParam,
                                  host.data(), nullptr, kParamBytes);
  int64_t b = asrt_transfer_start(&ctx, ASRT_TRANSFER_TO_DEVICE, -1,
                                  device.data(), host.data(), 1000);
  int64_t c = asrt_transfer_start(&ctx, ASRT_TRANSFER_TO_HOST, -1, host.data(),
                                  device.data(), 24);
  int64_t d = asrt_transfer_start(&ctx, ASRT_TRANSFER_NVME_WRITE, kMomentum,
                                  nullptr, host.data(), kMomentumBytes);
  for (int64_t h : {d, a, c, b})
    asrt_transfer_wait(&ctx, h);
  asrt_copy_to_device(&ctx, device.data(), host.data(), 8);

  Stats::Snapshot s = ctx.stats->snapshot();
  EXPECT_EQ(transfer(s, TransferKind::NvmeRead).calls, 1);
  EXPECT_EQ(transfer(s, TransferKind::NvmeRead).bytes, kParamBytes);
  EXPECT_EQ(transfer(s, TransferKind::ToDevice).calls, 2);
  EXPECT_EQ(transfer(s, TransferKind::ToDevice).bytes, 1008);
  EXPECT_EQ(transfer(s, TransferKind::ToHost).calls, 1);
  EXPECT_EQ(transfer(s, TransferKind::ToHost).bytes, 24);
  EXPECT_EQ(transfer(s, TransferKind::NvmeWrite).calls, 1);
  EXPECT_EQ(transfer(s, TransferKind::NvmeWrite).bytes, kMomentumBytes);
  // Four asynchronous transfers, each waited once; one synchronous call.
  EXPECT_EQ(s.offload.asyncCalls, 4);
  EXPECT_EQ(s.offload.asyncWaits, 4);
  EXPECT_EQ(s.offload.blockingCalls, 1);
  // The offload thread ran the synchronous copy too.
  EXPECT_GE(s.offload.threadNs, s.offload.asyncNs);
  EXPECT_GT(s.offload.asyncNs, 0) << "a 4 KiB read takes time";
  // The main thread's side, per op.
  EXPECT_EQ(s.ops.at("transfer_start").calls, 4);
  EXPECT_EQ(s.ops.at("transfer_wait").calls, 4);
  EXPECT_EQ(s.ops.at("copy_to_device").calls, 1);
  // Not communication.
  EXPECT_EQ(s.comm.asyncCalls, 0);
  EXPECT_EQ(s.comm.threadNs, 0);
}

TEST_F(TransferTest, ATransferDoneDuringComputeIsNotExposed) {
  // The context's offload stream on a clock that never moves: a wait that
  // finds its transfer complete blocks for no time at all, and the
  // synchronous call's blocked time is what the clock says.
  static std::atomic<int64_t> now{0};
  ctx.offloadStream = std::make_unique<CommStream>(
      *ctx.stats, StreamRole::Offload, [] { return now.load(); });
  std::vector<uint32_t> host(4);
  int64_t h = asrt_transfer_start(&ctx, ASRT_TRANSFER_NVME_READ, kMomentum,
                                  host.data(), nullptr, kMomentumBytes);
  // Compute until it has completed.
  while (!ctx.offloadStream->isComplete(1))
    std::this_thread::yield();
  now += 1000;
  asrt_transfer_wait(&ctx, h);
  Stats::Snapshot s = ctx.stats->snapshot();
  EXPECT_EQ(s.offload.asyncWaits, 1);
  EXPECT_EQ(s.offload.asyncWaitNs, 0);
  EXPECT_EQ(s.offload.exposedNs(), 0);
}

TEST_F(TransferTest, TheTraceShowsTransfersOnTheOffloadThread) {
  Trace trace(0);
  ctx.setTrace(&trace);
  std::vector<uint32_t> host(1024), device(1024);
  int64_t read = asrt_transfer_start(&ctx, ASRT_TRANSFER_NVME_READ, kParam,
                                     host.data(), nullptr, kParamBytes);
  int64_t copy = asrt_transfer_start(&ctx, ASRT_TRANSFER_TO_DEVICE, -1,
                                     device.data(), host.data(), kParamBytes);
  {
    // Compute that lasts until both have completed: they overlap it.
    OpTimer compute(&ctx, "fake_compute");
    while (!ctx.offloadStream->isComplete(2))
      std::this_thread::yield();
  }
  asrt_transfer_wait(&ctx, copy);
  asrt_transfer_wait(&ctx, read);
  ctx.setTrace(nullptr);

  std::vector<TraceEvent> events = trace.events();
  auto find = [&](const char *name, const char *category,
                  int64_t handle) -> const TraceEvent * {
    for (const TraceEvent &e : events)
      if (std::strcmp(e.name, name) == 0 &&
          std::strcmp(e.category, category) == 0 && e.handle == handle)
        return &e;
    return nullptr;
  };
  const TraceEvent *compute = find("fake_compute", "compute", -1);
  ASSERT_NE(compute, nullptr);
  for (auto [name, handle] :
       {std::pair<const char *, int64_t>{"nvme_read", read},
        std::pair<const char *, int64_t>{"to_device", copy}}) {
    SCOPED_TRACE(name);
    const TraceEvent *start = find("transfer_start", "issue", handle);
    const TraceEvent *wait = find("transfer_wait", "wait", handle);
    const TraceEvent *moved = find(name, "offload", handle);
    ASSERT_TRUE(start && wait && moved);
    EXPECT_EQ(start->track, TraceTrack::Main);
    EXPECT_EQ(wait->track, TraceTrack::Main);
    EXPECT_EQ(moved->track, TraceTrack::Offload);
    EXPECT_EQ(moved->seq, handle) << "the first transfers on the stream";
    EXPECT_EQ(start->seq, moved->seq);
    EXPECT_EQ(wait->seq, moved->seq);
    EXPECT_EQ(moved->bytes, kParamBytes);
    EXPECT_EQ(moved->arg, handle == read ? kParam : -1);
    // Its real start and end: after it was started, before the compute
    // ended, so before its wait began.
    EXPECT_GE(moved->startNs, start->startNs);
    EXPECT_LE(moved->endNs, compute->endNs);
    EXPECT_LE(moved->endNs, wait->startNs);
  }
  std::string json = trace.jsonEvents(0);
  EXPECT_NE(json.find("\"args\": {\"seq\": 1, \"handle\": 1, \"bytes\": "
                      "4096, \"arg\": 5}}"),
            std::string::npos)
      << json;
}

TEST_F(TransferDeathTest, WaitingTwiceOrAnUnknownHandleIsFatal) {
  std::vector<uint32_t> host(4);
  int64_t h = asrt_transfer_start(&ctx, ASRT_TRANSFER_NVME_READ, kMomentum,
                                  host.data(), nullptr, kMomentumBytes);
  asrt_transfer_wait(&ctx, h);
  EXPECT_EXIT(asrt_transfer_wait(&ctx, h), ::testing::ExitedWithCode(1),
              "asrt_transfer_wait: handle 1 was already waited; wait each "
              "handle exactly once");
  EXPECT_EXIT(asrt_transfer_wait(&ctx, 7), ::testing::ExitedWithCode(1),
              "asrt_transfer_wait: handle 7 was not returned by "
              "asrt_transfer_start on this context \\(its handles are "
              "1..1\\)");
  asrt_context fresh;
  EXPECT_EXIT(asrt_transfer_wait(&fresh, 1), ::testing::ExitedWithCode(1),
              "asrt_transfer_wait: handle 1 was not returned by "
              "asrt_transfer_start on this context \\(it has started "
              "none\\)");
}

TEST_F(TransferDeathTest, TheSynchronousChecksApply) {
  std::vector<uint32_t> host(4);
  EXPECT_EXIT(asrt_transfer_start(&ctx, ASRT_TRANSFER_NVME_READ, kMomentum,
                                  host.data(), nullptr, 12),
              ::testing::ExitedWithCode(1),
              "asrt_transfer_start \\(nvme_read\\): argument 3 "
              "\\(b.momentum\\) is 16 bytes in '[^']*/arg3-b.momentum.bin', "
              "but 12 bytes were asked for; reads and writes move the whole "
              "tensor");
  EXPECT_EXIT(asrt_transfer_start(&ctx, ASRT_TRANSFER_NVME_WRITE, 4, nullptr,
                                  host.data(), 16),
              ::testing::ExitedWithCode(1),
              "asrt_transfer_start \\(nvme_write\\): argument 4 has no NVMe "
              "file \\(only memory=nvme arguments have one; this store holds "
              "arguments 3, 5\\)");
  EXPECT_EXIT(asrt_transfer_start(&ctx, ASRT_TRANSFER_NVME_READ, kMomentum,
                                  nullptr, nullptr, 16),
              ::testing::ExitedWithCode(1),
              "asrt_transfer_start \\(nvme_read\\): the destination pointer "
              "is null for argument 3's 16 bytes");
  EXPECT_EXIT(asrt_transfer_start(&ctx, ASRT_TRANSFER_TO_DEVICE, -1,
                                  host.data(), nullptr, 16),
              ::testing::ExitedWithCode(1),
              "asrt_transfer_start \\(to_device\\): source pointer is null "
              "for a copy of 16 bytes");
  EXPECT_EXIT(asrt_transfer_start(&ctx, ASRT_TRANSFER_TO_HOST, -1, host.data(),
                                  host.data(), -4),
              ::testing::ExitedWithCode(1),
              "asrt_transfer_start \\(to_host\\): size -4 bytes is negative");
  asrt_context noStore;
  EXPECT_EXIT(asrt_transfer_start(&noStore, ASRT_TRANSFER_NVME_READ, 3,
                                  host.data(), nullptr, 16),
              ::testing::ExitedWithCode(1),
              "asrt_transfer_start \\(nvme_read\\): this context has no NVMe "
              "store; the driver makes one under --offload-dir");
  // Nothing was started.
  EXPECT_EQ(ctx.transfers->lastHandle(), 0);
}

TEST_F(TransferDeathTest, KindsAndDirectionsAreChecked) {
  std::vector<uint32_t> host(4);
  EXPECT_EXIT(asrt_transfer_start(&ctx, 4, -1, host.data(), host.data(), 16),
              ::testing::ExitedWithCode(1),
              "asrt_transfer_start: transfer kind 4 is none of "
              "ASRT_TRANSFER_TO_HOST \\(0\\), ASRT_TRANSFER_TO_DEVICE \\(1\\), "
              "ASRT_TRANSFER_NVME_READ \\(2\\) and ASRT_TRANSFER_NVME_WRITE "
              "\\(3\\)");
  EXPECT_EXIT(asrt_transfer_start(&ctx, ASRT_TRANSFER_NVME_READ, kMomentum,
                                  host.data(), host.data(), 16),
              ::testing::ExitedWithCode(1),
              "asrt_transfer_start \\(nvme_read\\): a read from argument 3's "
              "NVMe file takes no source pointer \\(src must be null");
  EXPECT_EXIT(asrt_transfer_start(&ctx, ASRT_TRANSFER_NVME_WRITE, kMomentum,
                                  host.data(), host.data(), 16),
              ::testing::ExitedWithCode(1),
              "asrt_transfer_start \\(nvme_write\\): a write to argument 3's "
              "NVMe file takes no destination pointer \\(dst must be null");
}

/// Holds the offload thread, as a disk that stopped answering; sets the
/// flag `started` points to first.
void hang(void *started) {
  static_cast<std::atomic<bool> *>(started)->store(true);
  while (true)
    std::this_thread::sleep_for(std::chrono::seconds(1));
}

/// Waits a copy while the offload thread is stuck in an operation started
/// before it, with a timeout of 0.2 s.
void waitBehindAStuckTransfer(asrt_context &ctx) {
  ctx.offloadStream->setTimeout(0.2);
  std::vector<uint32_t> host(4), device(4);
  int64_t read = asrt_transfer_start(&ctx, ASRT_TRANSFER_NVME_READ, kMomentum,
                                     host.data(), nullptr, kMomentumBytes);
  asrt_transfer_wait(&ctx, read);
  std::atomic<bool> started{false};
  StreamOpInfo stuck;
  stuck.name = "nvme_write";
  stuck.bytes = 4096;
  stuck.arg = 5;
  stuck.argName = "w";
  ctx.offloadStream->issue(&hang, &started, stuck);
  while (!started.load())
    std::this_thread::yield();
  int64_t copy =
      asrt_transfer_start(&ctx, ASRT_TRANSFER_TO_DEVICE, -1, device.data(),
                          host.data(), kMomentumBytes);
  asrt_transfer_wait(&ctx, copy);
}

TEST_F(TransferDeathTest, AWaitPastTheTimeoutIsFatal) {
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_DEATH(
      waitBehindAStuckTransfer(ctx),
      "asrt_transfer_wait: to_device of handle 2 \\(16 bytes\\) did not "
      "complete within the collective timeout of 0.2 s \\(waited [0-9.]+ "
      "s\\); the offload thread is still running nvme_write \\(argument 5 "
      "w, 4096 bytes\\), started before it, after [0-9.]+ s. The disk or the "
      "copy has probably hung");
}

// ---- The bookkeeping ----------------------------------------------------

TEST(InFlightTransfersTest, NamesTheTransfersNotWaited) {
  InFlightTransfers inflight;
  EXPECT_TRUE(inflight.checkAllWaited("step 1 returned").ok());
  InFlightTransfer &read = inflight.start();
  read.info.name = "nvme_read";
  read.info.bytes = 16;
  read.info.handle = read.handle;
  read.info.arg = 3;
  read.info.argName = "b.momentum";
  InFlightTransfer &copy = inflight.start();
  copy.info.name = "to_device";
  copy.info.bytes = 128;
  copy.info.handle = copy.handle;
  EXPECT_EQ(read.handle, 1);
  EXPECT_EQ(copy.handle, 2);
  inflight.release(copy);
  Status one = inflight.checkAllWaited("step 2 returned");
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.message(),
            "step 2 returned with 1 asynchronous transfer not waited: "
            "nvme_read of handle 1 (argument 3 b.momentum, 16 bytes); every "
            "asrt_transfer_start handle must be waited with "
            "asrt_transfer_wait before the step returns");
  // The freed slot serves the next transfer, with a fresh handle.
  InFlightTransfer &next = inflight.start();
  EXPECT_EQ(&next, &copy);
  EXPECT_EQ(next.handle, 3);
  EXPECT_EQ(next.info.name[0], '\0') << "a reused slot starts empty";
  next.info.name = "to_host";
  next.info.bytes = 8;
  next.info.handle = 3;
  Status two = inflight.checkAllWaited("step 3 returned");
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.message().find("with 2 asynchronous transfers not waited: "
                               "nvme_read of handle 1 (argument 3 "
                               "b.momentum, 16 bytes); to_host of handle 3 "
                               "(8 bytes); every"),
            std::string::npos)
      << two.message();
  EXPECT_EQ(inflight.slots(), 2u);
}

} // namespace
