// The ABI's offload calls: host memory, host/device copies, NVMe transfers.
#include "core/Context.h"
#include "memory/NvmeStore.h"
#include "stats/Stats.h"
#include "stats/Trace.h"

#include "../ckpt/TempDir.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

using namespace autoshard::rt;
using autoshard::rt::testing::TempDir;

namespace {

const TransferStats &transfer(const Stats::Snapshot &s, TransferKind kind) {
  return s.transfers[static_cast<int>(kind)];
}

TEST(OffloadTest, HostMemoryIsCountedApartFromDeviceMemory) {
  asrt_context ctx;
  void *device = asrt_alloc(&ctx, 100);
  void *host = hostAlloc(&ctx, 300);
  void *empty = hostAlloc(&ctx, 0);
  for (void *p : {host, empty}) {
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  }
  Stats::Snapshot s = ctx.stats->snapshot();
  EXPECT_EQ(s.currentBytes, 100);
  EXPECT_EQ(s.peakBytes, 100);
  EXPECT_EQ(s.hostCurrentBytes, 300);
  EXPECT_EQ(s.hostPeakBytes, 300);
  hostFree(&ctx, host);
  hostFree(&ctx, empty);
  hostFree(&ctx, nullptr);
  void *again = hostAlloc(&ctx, 50);
  s = ctx.stats->snapshot();
  EXPECT_EQ(s.hostCurrentBytes, 50);
  EXPECT_EQ(s.hostPeakBytes, 300);
  EXPECT_EQ(s.peakBytes, 100);
  hostFree(&ctx, again);
  asrt_free(&ctx, device);
}

TEST(OffloadDeathTest, HostAndDevicePointersDoNotMix) {
  asrt_context ctx;
  void *host = hostAlloc(&ctx, 8);
  void *device = asrt_alloc(&ctx, 8);
  EXPECT_EXIT(asrt_free(&ctx, host), ::testing::ExitedWithCode(1),
              "asrt_free: .* was not returned by asrt_alloc");
  EXPECT_EXIT(hostFree(&ctx, device), ::testing::ExitedWithCode(1),
              "hostFree: .* was not returned by hostAlloc");
  EXPECT_EXIT(hostAlloc(&ctx, -1), ::testing::ExitedWithCode(1),
              "hostAlloc: size -1 bytes is negative");
  EXPECT_EXIT(hostAlloc(&ctx, INT64_MAX - 100), ::testing::ExitedWithCode(1),
              "hostAlloc: out of memory allocating .* bytes of host memory");
  hostFree(&ctx, host);
  asrt_free(&ctx, device);
}

TEST(OffloadTest, HostArenaIsTheDriversBuffer) {
  asrt_context ctx;
  ctx.setHostArena(hostAlloc(&ctx, 128));
  EXPECT_EQ(asrt_host_arena(&ctx), ctx.hostArena());
  hostFree(&ctx, ctx.hostArena());
}

TEST(OffloadDeathTest, HostArenaWithoutOneIsFatal) {
  asrt_context ctx;
  ctx.setArena(asrt_alloc(&ctx, 64)); // a device arena is not a host one
  EXPECT_EXIT(asrt_host_arena(&ctx), ::testing::ExitedWithCode(1),
              "asrt_host_arena: this context has no host arena; the driver "
              "allocates the one the step's manifest asks for \\(memory "
              "record, host_arena=BYTES\\)");
  asrt_free(&ctx, ctx.arena());
}

TEST(OffloadTest, CopiesAreCountedAsOffloadTraffic) {
  asrt_context ctx;
  std::vector<float> device = {1, 2, 3, 4}, host(4);
  asrt_copy_to_host(&ctx, host.data(), device.data(), 16);
  EXPECT_EQ(host, device);
  std::vector<float> back(4);
  asrt_copy_to_device(&ctx, back.data(), host.data(), 16);
  asrt_copy_to_device(&ctx, back.data(), host.data(), 8);
  asrt_copy_to_device(&ctx, nullptr, nullptr, 0);
  EXPECT_EQ(back, device);
  Stats::Snapshot s = ctx.stats->snapshot();
  EXPECT_EQ(transfer(s, TransferKind::ToHost).calls, 1);
  EXPECT_EQ(transfer(s, TransferKind::ToHost).bytes, 16);
  EXPECT_EQ(transfer(s, TransferKind::ToDevice).calls, 3);
  EXPECT_EQ(transfer(s, TransferKind::ToDevice).bytes, 24);
  EXPECT_EQ(transfer(s, TransferKind::NvmeRead).calls, 0);
  EXPECT_EQ(s.ops.at("copy_to_host").calls, 1);
  EXPECT_EQ(s.ops.at("copy_to_device").calls, 3);
  // Nothing of this is allocation.
  EXPECT_EQ(s.peakBytes, 0);
  EXPECT_EQ(s.hostPeakBytes, 0);
}

TEST(OffloadDeathTest, BadCopiesAreFatal) {
  asrt_context ctx;
  float x = 0;
  EXPECT_EXIT(asrt_copy_to_host(&ctx, &x, nullptr, 4),
              ::testing::ExitedWithCode(1),
              "asrt_copy_to_host: source pointer is null for a copy of 4 "
              "bytes");
  EXPECT_EXIT(asrt_copy_to_device(&ctx, &x, &x, -4),
              ::testing::ExitedWithCode(1),
              "asrt_copy_to_device: size -4 bytes is negative");
}

/// A context with a store holding argument 3 (4 floats) under a temporary
/// directory.
struct WithStore : ::testing::Test {
  void SetUp() override {
    Expected<std::unique_ptr<NvmeStore>> made =
        NvmeStore::create(tmp.path(), 0);
    ASSERT_TRUE(made.ok()) << made.message();
    store = std::move(*made);
    std::vector<float> init = {1, 2, 3, 4};
    ASSERT_TRUE(store->add(3, "w.exp_avg", init.data(), 16).ok());
    ctx.setNvme(store.get());
  }
  TempDir tmp;
  std::unique_ptr<NvmeStore> store;
  asrt_context ctx;
};

using OffloadNvmeTest = WithStore;
using OffloadNvmeDeathTest = WithStore;

TEST_F(OffloadNvmeTest, ReadsAndWritesAreCountedAndTraced) {
  Trace trace(0);
  ctx.setTrace(&trace);
  std::vector<float> host(4);
  asrt_nvme_read(&ctx, 3, host.data(), 16);
  EXPECT_EQ(host, (std::vector<float>{1, 2, 3, 4}));
  host = {5, 6, 7, 8};
  asrt_nvme_write(&ctx, 3, host.data(), 16);
  std::vector<float> back(4);
  asrt_nvme_read(&ctx, 3, back.data(), 16);
  EXPECT_EQ(back, host);
  ctx.setTrace(nullptr);

  Stats::Snapshot s = ctx.stats->snapshot();
  EXPECT_EQ(transfer(s, TransferKind::NvmeRead).calls, 2);
  EXPECT_EQ(transfer(s, TransferKind::NvmeRead).bytes, 32);
  EXPECT_EQ(transfer(s, TransferKind::NvmeWrite).calls, 1);
  EXPECT_EQ(transfer(s, TransferKind::NvmeWrite).bytes, 16);
  EXPECT_EQ(s.ops.at("nvme_read").calls, 2);
  // Synchronous: exposed whole, nothing asynchronous.
  EXPECT_EQ(s.offload.blockingCalls, 3);
  EXPECT_EQ(s.offload.asyncCalls, 0);
  EXPECT_EQ(s.offload.asyncWaits, 0);

  // Each call: a "transfer" event on the main track and, inside it, the
  // transfer itself on the offload track.
  std::string json = trace.jsonEvents(0);
  EXPECT_NE(json.find("\"tid\": 3, \"args\": {\"name\": \"offload\"}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("{\"name\": \"nvme_write\", \"cat\": \"transfer\", "
                      "\"ph\": \"X\", \"pid\": 0, \"tid\": 1"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("{\"name\": \"nvme_write\", \"cat\": \"offload\", "
                      "\"ph\": \"X\", \"pid\": 0, \"tid\": 3"),
            std::string::npos)
      << json;
  // The third transfer on the offload stream; the main thread's call
  // carries the same seq.
  EXPECT_NE(json.find("\"args\": {\"seq\": 2, \"bytes\": 16, \"arg\": 3}}"),
            std::string::npos)
      << json;
  EXPECT_EQ(trace.size(), 6u);
  for (const TraceEvent &e : trace.events())
    EXPECT_GE(e.seq, 1) << e.name << " is tied to its stream operation";
}

TEST_F(OffloadNvmeDeathTest, AMismatchedSizeIsFatal) {
  std::vector<float> host(4);
  EXPECT_EXIT(asrt_nvme_read(&ctx, 3, host.data(), 12),
              ::testing::ExitedWithCode(1),
              "asrt_nvme_read: argument 3 \\(w.exp_avg\\) is 16 bytes in "
              "'[^']*/arg3-w.exp_avg.bin', but 12 bytes were asked for");
  EXPECT_EXIT(asrt_nvme_write(&ctx, 3, host.data(), 20),
              ::testing::ExitedWithCode(1),
              "asrt_nvme_write: argument 3 \\(w.exp_avg\\) is 16 bytes");
}

TEST_F(OffloadNvmeDeathTest, AnArgumentWithoutAFileIsFatal) {
  std::vector<float> host(4);
  EXPECT_EXIT(asrt_nvme_write(&ctx, 2, host.data(), 16),
              ::testing::ExitedWithCode(1),
              "asrt_nvme_write: argument 2 has no NVMe file \\(only "
              "memory=nvme arguments have one; this store holds arguments "
              "3\\)");
  EXPECT_EXIT(asrt_nvme_read(&ctx, 3, nullptr, 16),
              ::testing::ExitedWithCode(1),
              "asrt_nvme_read: the destination pointer is null for argument "
              "3's 16 bytes");
}

TEST(OffloadDeathTest, NvmeWithoutAStoreIsFatal) {
  asrt_context ctx;
  float x[4];
  EXPECT_EXIT(asrt_nvme_read(&ctx, 0, x, 16), ::testing::ExitedWithCode(1),
              "asrt_nvme_read: this context has no NVMe store; the driver "
              "makes one under --offload-dir when the step's manifest has "
              "memory=nvme arguments");
}

} // namespace
