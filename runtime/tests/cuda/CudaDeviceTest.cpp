// The CUDA backend's device and hooks: memory round trips, overlapping
// copies and fences on a GPU (skipped without one), and the failures that
// must be clean on any machine: no device, no CUDA device in the context.
#include "CudaDevice.h"

#include "core/Backend.h"
#include "core/Context.h"
#include "stats/Stats.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace autoshard::rt::cuda::test {
namespace {

/// A child that exited with a non-zero status; a signal (a crash) is not.
bool exitedNonZero(int status) {
  return WIFEXITED(status) && WEXITSTATUS(status) != 0;
}

int visibleDevices() {
  std::string error;
  return deviceCount(error);
}

// ---- Without a device (these run on the build machines) ----

TEST(CudaBackend, NameIsCuda) { EXPECT_STREQ(backendName(), "cuda"); }

TEST(CudaBackend, InitWithoutADeviceExitsNamingIt) {
  if (int count = visibleDevices(); count > 0)
    GTEST_SKIP() << count << " CUDA device(s) present";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        asrt_context ctx;
        initBackend(&ctx, BackendOptions{});
      },
      exitedNonZero, "autoshard runtime error \\(rank 0\\): no CUDA device");
}

// The choice is read before anything touches the device, so this runs on
// machines without a GPU too.
TEST(CudaBackend, AnUnknownAttentionChoiceIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  asrt_context ctx;
  float lse = 0.0f;
  EXPECT_DEATH(
      {
        setenv("ASRT_CUDA_ATTENTION", "tensorcore", 1);
        asrt_causal_attention_fwd(&ctx, ASRT_DTYPE_F32, nullptr, nullptr,
                                  nullptr, nullptr, &lse, 1, 1, 1, 1, 1, 1.0f);
      },
      "ASRT_CUDA_ATTENTION=tensorcore: expected flash \\(the default\\), "
      "gemm or wmma");
}

TEST(CudaBackend, ComputeWithoutTheCudaDeviceIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float x = 1.0f, y = 0.0f;
  // A context initBackend has not seen keeps the host device.
  asrt_context ctx;
  EXPECT_DEATH(cudaDevice(&ctx, "copy_test"),
               "copy_test: the context's device is host, not a CUDA device: "
               "the CUDA backend's initBackend has not installed its device");
  EXPECT_DEATH(asrt_relu_fwd(&ctx, ASRT_DTYPE_F32, &x, &y, 1),
               "relu_fwd: the context's device is host, not a CUDA device");
  EXPECT_DEATH(
      asrt_linear_fwd(nullptr, ASRT_DTYPE_F32, &x, &x, nullptr, &y, 1, 1, 1),
      "linear_fwd: context is null");
}

// ---- On a device ----

class CudaDeviceTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string error;
    count = deviceCount(error);
    if (count <= 0)
      GTEST_SKIP() << error;
    BackendOptions options;
    // Not device 0 when there are several: the modulo is what is checked.
    options.localRank = count + (count > 1 ? 1 : 0);
    initBackend(&ctx, options);
    gpu = &cudaDevice(&ctx, "CudaDeviceTest");
  }

  /// A device buffer released at the end of the test.
  void *deviceBuffer(int64_t bytes) {
    void *p = gpu->allocate(bytes);
    EXPECT_NE(p, nullptr) << bytes << " bytes";
    buffers.push_back(p);
    return p;
  }
  void TearDown() override {
    for (void *p : buffers)
      gpu->release(p);
  }

  static std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i)
      v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
    return v;
  }

  int count = 0;
  asrt_context ctx;
  CudaDevice *gpu = nullptr;
  std::vector<void *> buffers;
};

TEST_F(CudaDeviceTest, InitInstallsTheLocalRanksGpu) {
  int expected = (count + (count > 1 ? 1 : 0)) % count;
  EXPECT_EQ(gpu->ordinal(), expected);
  EXPECT_EQ(std::string(ctx.device->name()),
            "cuda:" + std::to_string(expected));
  EXPECT_FALSE(ctx.device->hostAccessible());
  EXPECT_EQ(gpu->blas().stream(), gpu->stream(Lane::Compute));
  EXPECT_NE(gpu->stream(Lane::Compute), gpu->stream(Lane::Comm));
  EXPECT_NE(gpu->stream(Lane::Comm), gpu->stream(Lane::Offload));
}

TEST_F(CudaDeviceTest, CopyZeroAndRoundTrips) {
  const int64_t n = (1 << 20) + 13;
  std::vector<uint8_t> src = pattern(n, 3);
  void *a = deviceBuffer(n), *b = deviceBuffer(n);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  // Pageable host memory in, pinned host memory out.
  gpu->toDevice(Lane::Offload, a, src.data(), n);
  gpu->copy(Lane::Compute, b, a, n);
  gpu->zero(Lane::Compute, static_cast<uint8_t *>(b) + 100, 1000);
  auto *pinned = static_cast<uint8_t *>(gpu->allocateHost(n));
  ASSERT_NE(pinned, nullptr);
  std::memset(pinned, 0xab, n);
  gpu->toHost(Lane::Compute, pinned, b, n);
  std::vector<uint8_t> expected = src;
  std::memset(expected.data() + 100, 0, 1000);
  EXPECT_EQ(std::memcmp(pinned, expected.data(), n), 0);
  gpu->releaseHost(pinned);
  // Zero-byte operations do nothing (and touch no pointer).
  gpu->copy(Lane::Compute, nullptr, nullptr, 0);
  gpu->zero(Lane::Compute, nullptr, 0);
}

// asrt_copy may meet host memory (a memory=host result copied from the
// host arena): copy() lets CUDA tell the memory from the pointers.
TEST_F(CudaDeviceTest, CopyBetweenPinnedHostAndDeviceMemory) {
  const int64_t n = 4099;
  std::vector<uint8_t> src = pattern(n, 9);
  auto *in = static_cast<uint8_t *>(gpu->allocateHost(n));
  auto *out = static_cast<uint8_t *>(gpu->allocateHost(n));
  ASSERT_NE(in, nullptr);
  ASSERT_NE(out, nullptr);
  std::memcpy(in, src.data(), n);
  std::memset(out, 0, n);
  void *dev = deviceBuffer(n);
  gpu->copy(Lane::Compute, dev, in, n);  // host to device
  gpu->copy(Lane::Compute, out, dev, n); // device to host
  gpu->synchronize(Lane::Compute);
  EXPECT_EQ(std::memcmp(out, src.data(), n), 0);
  std::memset(out, 0, n);
  gpu->copy(Lane::Compute, out, in, n); // host to host
  gpu->synchronize(Lane::Compute);
  EXPECT_EQ(std::memcmp(out, src.data(), n), 0);
  gpu->releaseHost(in);
  gpu->releaseHost(out);
}

TEST_F(CudaDeviceTest, OverlappingCopiesAreMemmoves) {
  const int64_t n = 1 << 16;
  std::vector<uint8_t> host = pattern(n, 11);
  auto *buf = static_cast<uint8_t *>(deviceBuffer(n));
  std::vector<uint8_t> out(n);
  for (int64_t shift : {int64_t(1), int64_t(8), int64_t(4097)}) {
    for (bool forward : {true, false}) {
      gpu->toDevice(Lane::Compute, buf, host.data(), n);
      std::vector<uint8_t> expected = host;
      int64_t len = n - shift;
      uint8_t *dst = forward ? buf + shift : buf;
      const uint8_t *src = forward ? buf : buf + shift;
      gpu->copy(Lane::Compute, dst, src, len);
      std::memmove(expected.data() + (forward ? shift : 0),
                   expected.data() + (forward ? 0 : shift), len);
      gpu->toHost(Lane::Compute, out.data(), buf, n);
      EXPECT_EQ(out, expected)
          << "shift " << shift << (forward ? " forward" : " backward");
    }
  }
}

TEST_F(CudaDeviceTest, FenceOrdersWorkAcrossLanesAndThreads) {
  // Large enough that the comm lane's copy would overtake the compute
  // lane's if the fence did not hold it back.
  const int64_t n = int64_t(256) << 20;
  std::vector<uint8_t> src = pattern(n, 5);
  void *a = deviceBuffer(n), *b = deviceBuffer(n), *c = deviceBuffer(n);
  gpu->toDevice(Lane::Compute, a, src.data(), n);
  gpu->zero(Lane::Compute, b, n);
  gpu->zero(Lane::Comm, c, n);
  gpu->synchronize(Lane::Comm);
  for (int round = 0; round < 3; ++round) {
    gpu->zero(Lane::Compute, b, n);
    gpu->copy(Lane::Compute, b, a, n);
    Fence f = gpu->fence(Lane::Compute);
    ASSERT_NE(f, nullptr);
    // The comm lane's own thread, as the communication stream's would.
    std::thread comm([&] {
      gpu->waitFence(Lane::Comm, f);
      gpu->copy(Lane::Comm, c, b, n);
      gpu->synchronize(Lane::Comm);
    });
    comm.join();
    std::vector<uint8_t> out(n);
    gpu->toHost(Lane::Offload, out.data(), c, n);
    ASSERT_EQ(std::memcmp(out.data(), src.data(), n), 0) << "round " << round;
  }
  // A null fence waits for nothing; many fences reuse the pool's events.
  gpu->waitFence(Lane::Comm, nullptr);
  for (int i = 0; i < 1000; ++i) {
    Fence f = gpu->fence(Lane::Offload);
    gpu->waitFence(Lane::Compute, f);
  }
  gpu->synchronize(Lane::Compute);
}

TEST_F(CudaDeviceTest, ExhaustionReturnsNullAndLeavesNoError) {
  // A petabyte: no GPU has it.
  EXPECT_EQ(gpu->allocate(int64_t(1) << 50), nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  void *p = deviceBuffer(64);
  gpu->zero(Lane::Compute, p, 64);
  gpu->synchronize(Lane::Compute);
}

TEST_F(CudaDeviceTest, AbiComputeRunsOnTheComputeStreamAndIsTimed) {
  const int64_t n = 1000;
  std::vector<float> a(n), b(n), y(n);
  std::iota(a.begin(), a.end(), 0.0f);
  std::iota(b.begin(), b.end(), 1000.0f);
  const int64_t bytes = n * int64_t(sizeof(float));
  void *da = deviceBuffer(bytes), *db = deviceBuffer(bytes),
       *dy = deviceBuffer(bytes);
  gpu->toDevice(Lane::Compute, da, a.data(), bytes);
  gpu->toDevice(Lane::Compute, db, b.data(), bytes);
  asrt_add(&ctx, ASRT_DTYPE_F32, da, db, dy, n);
  gpu->toHost(Lane::Compute, y.data(), dy, bytes);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(y[i], a[i] + b[i]) << "element " << i;
  EXPECT_EQ(ctx.stats->snapshot().ops.count("add"), 1u);
}

} // namespace
} // namespace autoshard::rt::cuda::test
