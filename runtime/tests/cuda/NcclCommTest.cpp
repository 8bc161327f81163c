// NcclComm on the lent GPU: a world of one rank over a 1 x 1 grid, so that
// one GPU runs the communicator's life (the nonblocking init and its
// polling, every collective kind and reduction, f32 and bf16, the barrier,
// finalize and destroy) and its abort. Two ranks need two GPUs (NCCL
// refuses two ranks on one), which no machine here has: the group splits
// (every group of a world of one is the world) and the padded flat-shard
// staging are NcclPlanTest's, on the host. Label `gpu`: skipped without a
// device.
#include "CudaDevice.h"
#include "CudaTestUtil.h"

#include "nccl/NcclComm.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace autoshard::rt::cuda::test {
namespace {

class NcclCommTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string error;
    if (deviceCount(error) <= 0)
      GTEST_SKIP() << error;
    device = std::make_unique<CudaDevice>(0);
    comm = createNcclComm(0, 1, {1, 1}, ncclUniqueIdBytes(),
                          device->stream(Lane::Comm), *device, 60.0);
  }
  void TearDown() override {
    comm.reset();
    for (void *p : buffers)
      device->release(p);
    device.reset();
  }

  float *upload(const std::vector<float> &values) {
    auto *p = static_cast<float *>(
        device->allocate(int64_t(values.size() * sizeof(float))));
    buffers.push_back(p);
    device->toDevice(Lane::Comm, p, values.data(),
                     int64_t(values.size() * sizeof(float)));
    return p;
  }
  std::vector<float> download(const float *p, size_t n) {
    std::vector<float> values(n);
    device->toHost(Lane::Comm, values.data(), p, int64_t(n * sizeof(float)));
    return values;
  }

  std::unique_ptr<CudaDevice> device;
  std::unique_ptr<Comm> comm;
  std::vector<void *> buffers;
};

TEST_F(NcclCommTest, AWorldOfOneRunsEveryCollective) {
  const std::vector<float> x = {1.5f, -2.0f, 3.25f, 4.0f, -5.5f};
  // Every mask of the 1 x 1 grid (each group is the world, of one rank,
  // where every reduction is the identity).
  for (int32_t mask : {3, 1, 2}) {
    SCOPED_TRACE(mask);
    float *a = upload(x);
    for (asrt_reduce_op op : {ASRT_REDUCE_SUM, ASRT_REDUCE_AVG,
                              ASRT_REDUCE_MAX, ASRT_REDUCE_MIN})
      comm->allReduce(a, a, 5, ASRT_DTYPE_F32, op, mask);
    EXPECT_EQ(download(a, 5), x);
    float *gathered = upload(std::vector<float>(5, 0.0f));
    comm->allGather(a, gathered, 5, ASRT_DTYPE_F32, mask);
    EXPECT_EQ(download(gathered, 5), x);
    float *scattered = upload(std::vector<float>(5, 0.0f));
    comm->reduceScatter(a, scattered, 5, ASRT_DTYPE_F32, ASRT_REDUCE_SUM,
                        mask);
    EXPECT_EQ(download(scattered, 5), x);
    float *full = upload(std::vector<float>(5, 0.0f));
    comm->allGatherShards(a, full, 5, ASRT_DTYPE_F32, mask);
    EXPECT_EQ(download(full, 5), x);
    float *shard = upload(std::vector<float>(5, 0.0f));
    comm->reduceScatterShards(full, shard, 5, ASRT_DTYPE_F32,
                              ASRT_REDUCE_AVG, mask);
    EXPECT_EQ(download(shard, 5), x);
  }
  // bf16 reduces as bf16; the bits of 1.0 and -2.0 survive.
  const std::vector<uint16_t> bits = {0x3f80, 0xc000};
  auto *b = static_cast<uint16_t *>(device->allocate(4));
  buffers.push_back(b);
  device->toDevice(Lane::Comm, b, bits.data(), 4);
  comm->allReduce(b, b, 2, ASRT_DTYPE_BF16, ASRT_REDUCE_SUM, 3);
  std::vector<uint16_t> back(2);
  device->toHost(Lane::Comm, back.data(), b, 4);
  EXPECT_EQ(back, bits);
  comm->barrier();
}

TEST_F(NcclCommTest, AnAbortedCommunicatorIsFatalNotHung) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        abortNcclComms();
        comm->barrier();
      },
      "aborted");
}

} // namespace
} // namespace autoshard::rt::cuda::test
