// The driver's side of offload: --offload-dir checks and staged NVMe args.
#include "driver/OffloadArgs.h"
#include "core/Context.h"
#include "memory/Device.h"

#include "../ckpt/TempDir.h"
#include "HostBackedDevice.h"

#include <gtest/gtest.h>

#include <vector>

using namespace autoshard::rt;
using autoshard::rt::testing::TempDir;

namespace {

// A param on the device, an optimizer state in host memory and two in
// NVMe files (a sharded f32 one and the i32 step).
const char *kOffloaded =
    "autoshard-manifest 1\n"
    "abi 6\n"
    "step train\n"
    "strategy zero3\n"
    "grid 2\n"
    "arg 0 param w f32 4 init=zeros\n"
    "arg 1 opt_state w.m f32 4 init=zeros memory=host\n"
    "arg 2 opt_state w.v f32 2 init=zeros full=4 shard_axes=1 memory=nvme\n"
    "arg 3 opt_state step i32 scalar init=zeros memory=nvme\n"
    "result 0 param w f32 4 updates=0\n"
    "result 1 opt_state w.m f32 4 updates=1 memory=host\n"
    "result 2 opt_state w.v f32 2 updates=2 full=4 shard_axes=1 memory=nvme\n"
    "result 3 opt_state step i32 scalar updates=3 memory=nvme\n"
    "result 4 loss loss f32 scalar\n"
    "end\n";

Manifest parse(const char *text) {
  Expected<Manifest> m = parseManifest(text);
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? *m : Manifest();
}

TEST(OffloadArgsTest, NvmeArgumentsNeedAnOffloadDir) {
  Manifest m = parse(kOffloaded);
  EXPECT_EQ(checkOffloadDirGiven(m, "").message(),
            "this binary keeps 2 tensors (12 bytes per rank) in NVMe files: "
            "pass --offload-dir DIR, a directory on a fast local disk");
  EXPECT_TRUE(checkOffloadDirGiven(m, "/some/dir").ok());

  // Without nvme arguments the directory is neither needed nor opened.
  Manifest none =
      parse("autoshard-manifest 1\nabi 6\nstep s\nstrategy none\ngrid 1\n"
            "arg 0 param w f32 4 init=zeros memory=host\n"
            "result 0 loss loss f32 scalar\nend\n");
  EXPECT_TRUE(checkOffloadDirGiven(none, "").ok());
  Expected<std::unique_ptr<NvmeStore>> store =
      openNvmeStore(none, "/no/such/dir", 0);
  ASSERT_TRUE(store.ok()) << store.message();
  EXPECT_EQ(store->get(), nullptr);
}

TEST(OffloadArgsTest, OpenNamesTheBadDirectory) {
  Manifest m = parse(kOffloaded);
  TempDir tmp;
  Expected<std::unique_ptr<NvmeStore>> store =
      openNvmeStore(m, tmp / "missing", 1);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.message(), "--offload-dir: '" + (tmp / "missing") +
                                 "' does not exist (No such file or "
                                 "directory)");
  store = openNvmeStore(m, tmp.path(), 1);
  ASSERT_TRUE(store.ok()) << store.message();
  ASSERT_NE(store->get(), nullptr);
  EXPECT_NE((*store)->directory().find("-rank1-"), std::string::npos);
}

TEST(OffloadArgsTest, StagingReadsNvmeArgumentsAndWritesThemBack) {
  Manifest m = parse(kOffloaded);
  TempDir tmp;
  Expected<std::unique_ptr<NvmeStore>> opened = openNvmeStore(m, tmp.path(), 0);
  ASSERT_TRUE(opened.ok()) << opened.message();
  NvmeStore &store = **opened;
  std::vector<float> v = {1.5f, -2.0f};
  int32_t step = 41;
  ASSERT_TRUE(store.add(2, "w.v", v.data(), 8).ok());
  ASSERT_TRUE(store.add(3, "step", &step, 4).ok());

  float w[4] = {}, mom[4] = {};
  std::vector<void *> args = {w, mom, nullptr, nullptr};
  asrt_context ctx;
  ctx.setNvme(&store);
  {
    StagedArgs staged(ctx, m, args);
    ASSERT_EQ(staged.size(), 2u);
    // Device and host arguments pass through; nvme ones hold their files.
    EXPECT_EQ(staged.args()[0], w);
    EXPECT_EQ(staged.args()[1], mom);
    ASSERT_NE(staged.args()[2], nullptr);
    EXPECT_EQ(static_cast<float *>(staged.args()[2])[1], -2.0f);
    EXPECT_EQ(*static_cast<int32_t *>(staged.args()[3]), 41);
    // A load changes the host copies; writeBack stores them.
    static_cast<float *>(staged.args()[2])[0] = 9.0f;
    *static_cast<int32_t *>(staged.args()[3]) = 7;
    staged.writeBack();
  }
  std::vector<float> v2(2);
  ASSERT_TRUE(store.read(2, v2.data(), 8).ok());
  EXPECT_EQ(v2, (std::vector<float>{9.0f, -2.0f}));
  ASSERT_TRUE(store.read(3, &step, 4).ok());
  EXPECT_EQ(step, 7);

  // Only one role.
  StagedArgs params(ctx, m, args, {Role::Param});
  EXPECT_EQ(params.size(), 0u);
  EXPECT_EQ(params.args(), args);
}

/// A device whose memory host code must not touch, as a GPU's: host memory
/// underneath, but reporting itself not host-accessible and counting the
/// copies the driver makes through it.
class CountingDevice final : public test::HostBackedDevice {
public:
  CountingDevice() : HostBackedDevice("counting", /*hostAccessible=*/false) {}
  void toHost(Lane l, void *d, const void *s, int64_t n) override {
    ++downloads;
    HostBackedDevice::toHost(l, d, s, n);
  }
  void toDevice(Lane l, void *d, const void *s, int64_t n) override {
    ++uploads;
    HostBackedDevice::toDevice(l, d, s, n);
  }

  int downloads = 0, uploads = 0;
};

TEST(OffloadArgsTest, DeviceArgumentsOfAGpuAreStagedThroughHostCopies) {
  Manifest m = parse(kOffloaded);
  TempDir tmp;
  Expected<std::unique_ptr<NvmeStore>> opened = openNvmeStore(m, tmp.path(), 0);
  ASSERT_TRUE(opened.ok()) << opened.message();
  std::vector<float> v = {1.5f, -2.0f};
  int32_t step = 41;
  ASSERT_TRUE((*opened)->add(2, "w.v", v.data(), 8).ok());
  ASSERT_TRUE((*opened)->add(3, "step", &step, 4).ok());
  asrt_context ctx;
  auto owned = std::make_unique<CountingDevice>();
  CountingDevice &device = *owned;
  ctx.device = std::move(owned);
  ctx.setNvme(opened->get());

  float w[4] = {1, 2, 3, 4}, mom[4] = {};
  std::vector<void *> args = {w, mom, nullptr, nullptr};
  {
    StagedArgs staged(ctx, m, args);
    // The device param is a host copy now; the host state passes through.
    EXPECT_EQ(staged.size(), 3u);
    ASSERT_NE(staged.args()[0], static_cast<void *>(w));
    EXPECT_EQ(static_cast<float *>(staged.args()[0])[3], 4.0f);
    EXPECT_EQ(staged.args()[1], static_cast<void *>(mom));
    EXPECT_EQ(device.downloads, 1);
    static_cast<float *>(staged.args()[0])[0] = 7.0f;
    staged.writeBack();
    EXPECT_EQ(device.uploads, 1);
    EXPECT_EQ(w[0], 7.0f);
  }
  // WriteOnly (batches) reads nothing down; NvmeOnly leaves the device
  // argument where it is.
  StagedArgs batch(ctx, m, args, {Role::Param}, Staging::WriteOnly);
  EXPECT_EQ(batch.size(), 1u);
  EXPECT_EQ(device.downloads, 1);
  StagedArgs nvmeOnly(ctx, m, args, {}, Staging::NvmeOnly);
  EXPECT_EQ(nvmeOnly.size(), 2u);
  EXPECT_EQ(nvmeOnly.args()[0], static_cast<void *>(w));
  EXPECT_EQ(device.downloads, 1);
}

} // namespace
