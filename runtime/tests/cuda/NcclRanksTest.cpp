// NcclComm with several ranks: a thread per rank, rank r on GPU r, every
// collective kind, reduction and dtype, on the world and on the groups of a
// 2 x 2 grid (the split communicators) with the flat-shard layout's padding,
// and a collective that a peer never joins, ended by abortNcclComms. On the
// emulator (asrt_nccl_ranks_emu_test) they run everywhere; built for a
// real GPU (label gpu) they run where the machine has a GPU per rank.
#include "CudaDevice.h"

#include "comm/Comm.h"
#include "nccl/NcclComm.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace autoshard::rt::cuda::test {
namespace {

/// Device buffers of one rank, released with it.
class Buffers {
public:
  explicit Buffers(CudaDevice &device) : device(device) {}
  ~Buffers() {
    for (void *p : owned)
      device.release(p);
  }
  template <typename T> T *upload(const std::vector<T> &values) {
    auto *p = static_cast<T *>(device.allocate(bytes(values)));
    owned.push_back(p);
    device.toDevice(Lane::Comm, p, values.data(), bytes(values));
    return p;
  }
  template <typename T> std::vector<T> download(const T *p, size_t n) {
    std::vector<T> values(n);
    device.toHost(Lane::Comm, values.data(), p, bytes(values));
    return values;
  }

private:
  template <typename T> static int64_t bytes(const std::vector<T> &v) {
    return static_cast<int64_t>(v.size() * sizeof(T));
  }
  CudaDevice &device;
  std::vector<void *> owned;
};

using RankBody = std::function<void(int rank, Comm &comm, Buffers &buffers)>;

/// Runs `body` on `n` threads, rank r on GPU r with its own device and the
/// world communicator over `grid`, then destroys them (collectively).
void onRanks(int n, const std::vector<int64_t> &grid, const RankBody &body) {
  const std::string id = ncclUniqueIdBytes();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      CudaDevice device(r);
      {
        std::unique_ptr<Comm> comm = createNcclComm(
            r, n, grid, id, device.stream(Lane::Comm), device, 60.0);
        Buffers buffers(device);
        body(r, *comm, buffers);
      }
    });
  for (std::thread &t : threads)
    t.join();
}

bool haveGpus(int n) {
  std::string error;
  return deviceCount(error) >= n;
}

/// Rank r's element i: small integers, exact in f32, bf16 and their sums.
float value(int rank, int64_t i) { return float(rank * 8 + i); }

std::vector<float> valuesOf(int rank, int64_t n) {
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = value(rank, i);
  return out;
}

uint16_t bf16Bits(float v) { // exact for the values above
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return uint16_t(bits >> 16);
}

TEST(NcclRanksTest, EveryCollectiveOnThreeRanks) {
  if (!haveGpus(3))
    GTEST_SKIP() << "needs 3 GPUs";
  const int n = 3;
  const int64_t count = 7; // not a multiple of the ranks
  onRanks(n, {3}, [&](int rank, Comm &comm, Buffers &buffers) {
    std::vector<float> mine = valuesOf(rank, count);
    std::vector<float> sum(count), high(count), low(count);
    for (int64_t i = 0; i < count; ++i) {
      sum[i] = value(0, i) + value(1, i) + value(2, i);
      high[i] = value(2, i);
      low[i] = value(0, i);
    }
    float *a = buffers.upload(mine);
    comm.allReduce(a, a, count, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 1);
    EXPECT_EQ(buffers.download(a, count), sum) << "rank " << rank;
    float *b = buffers.upload(mine);
    float *out = buffers.upload(std::vector<float>(count, -1.0f));
    comm.allReduce(b, out, count, ASRT_DTYPE_F32, ASRT_REDUCE_MAX, 1);
    EXPECT_EQ(buffers.download(out, count), high);
    comm.allReduce(b, out, count, ASRT_DTYPE_F32, ASRT_REDUCE_MIN, 1);
    EXPECT_EQ(buffers.download(out, count), low);
    comm.allReduce(b, out, count, ASRT_DTYPE_F32, ASRT_REDUCE_AVG, 1);
    std::vector<float> avg = buffers.download(out, count);
    for (int64_t i = 0; i < count; ++i)
      EXPECT_NEAR(avg[i], sum[i] / n, 1e-5f * sum[i]) << i;

    std::vector<int32_t> ints(count);
    for (int64_t i = 0; i < count; ++i)
      ints[i] = int32_t(value(rank, i));
    int32_t *c = buffers.upload(ints);
    comm.allReduce(c, c, count, ASRT_DTYPE_I32, ASRT_REDUCE_SUM, 1);
    std::vector<int32_t> intSum(sum.begin(), sum.end());
    EXPECT_EQ(buffers.download(c, count), intSum);

    std::vector<uint16_t> bits(count), sumBits(count);
    for (int64_t i = 0; i < count; ++i) {
      bits[i] = bf16Bits(mine[i]);
      sumBits[i] = bf16Bits(sum[i]);
    }
    uint16_t *d = buffers.upload(bits);
    comm.allReduce(d, d, count, ASRT_DTYPE_BF16, ASRT_REDUCE_SUM, 1);
    EXPECT_EQ(buffers.download(d, count), sumBits);

    // Gathers: out of place, and in place (this rank's block of recv).
    std::vector<float> gathered;
    for (int r = 0; r < n; ++r)
      for (float v : valuesOf(r, count))
        gathered.push_back(v);
    float *all = buffers.upload(std::vector<float>(n * count, -1.0f));
    comm.allGather(buffers.upload(mine), all, count,
                   ASRT_DTYPE_F32, 1);
    EXPECT_EQ(buffers.download(all, n * count), gathered);
    std::vector<float> inPlace(n * count, -1.0f);
    std::copy(mine.begin(), mine.end(), inPlace.begin() + rank * count);
    float *g = buffers.upload(inPlace);
    comm.allGather(g + rank * count, g, count, ASRT_DTYPE_F32, 1);
    EXPECT_EQ(buffers.download(g, n * count), gathered);

    // Reduce-scatter of n blocks: block `rank` of the sum; then the ABI's
    // in place (the result at the start of the buffer).
    std::vector<float> blocks = valuesOf(rank, n * count);
    std::vector<float> expected(count);
    for (int64_t i = 0; i < count; ++i)
      for (int r = 0; r < n; ++r)
        expected[i] += value(r, rank * count + i);
    float *s = buffers.upload(blocks);
    float *piece = buffers.upload(std::vector<float>(count, -1.0f));
    comm.reduceScatter(s, piece, count, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 1);
    EXPECT_EQ(buffers.download(piece, count), expected);
    comm.reduceScatter(s, s, count, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 1);
    EXPECT_EQ(buffers.download(s, count), expected);
    comm.barrier();
  });
}

TEST(NcclRanksTest, GroupsOfATwoByTwoGridAndPaddedShards) {
  if (!haveGpus(4))
    GTEST_SKIP() << "needs 4 GPUs";
  const std::vector<int64_t> grid = {2, 2};
  const int64_t numel = 7; // pads to 8 for groups of 2 and of 4
  onRanks(4, grid, [&](int rank, Comm &comm, Buffers &buffers) {
    for (int32_t mask : {1, 2, 3}) {
      SCOPED_TRACE("mask " + std::to_string(mask) + ", rank " +
                   std::to_string(rank));
      const std::vector<int> group = gridGroup(rank, grid, mask);
      const int64_t size = static_cast<int64_t>(group.size());
      const int64_t me = gridGroupIndex(rank, grid, mask);

      std::vector<float> sum(numel);
      for (int member : group)
        for (int64_t i = 0; i < numel; ++i)
          sum[i] += value(member, i);
      float *a = buffers.upload(valuesOf(rank, numel));
      comm.allReduce(a, a, numel, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, mask);
      EXPECT_EQ(buffers.download(a, numel), sum);

      // The flat-shard layout: shard j holds [j k, min((j + 1) k, numel)).
      const int64_t k = (numel + size - 1) / size;
      std::vector<float> shard(k, -7.0f), whole(numel);
      for (int64_t t = 0; t < k && me * k + t < numel; ++t)
        shard[t] = value(rank, me * k + t);
      for (int64_t j = 0; j < numel; ++j)
        whole[j] = value(group[j / k], j);
      float *piece = buffers.upload(shard);
      float *full = buffers.upload(std::vector<float>(numel, -1.0f));
      comm.allGatherShards(piece, full, numel, ASRT_DTYPE_F32, mask);
      EXPECT_EQ(buffers.download(full, numel), whole);

      // Each member's whole tensor reduced into this rank's shard; the
      // shard's padding is left as it was.
      std::vector<float> reduced(shard);
      for (int64_t t = 0; t < k && me * k + t < numel; ++t) {
        reduced[t] = 0;
        for (int member : group)
          reduced[t] += value(member, me * k + t);
      }
      float *mineFull = buffers.upload(valuesOf(rank, numel));
      float *out = buffers.upload(shard);
      comm.reduceScatterShards(mineFull, out, numel, ASRT_DTYPE_F32,
                               ASRT_REDUCE_SUM, mask);
      EXPECT_EQ(buffers.download(out, k), reduced);
    }
    comm.barrier();
  });
}

TEST(NcclRanksTest, ACollectiveAPeerNeverJoinsIsAbortedNotHung) {
  if (!haveGpus(2))
    GTEST_SKIP() << "needs 2 GPUs";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::promise<void> never;
        std::shared_future<void> forever = never.get_future().share();
        std::atomic<bool> calling{false};
        // Once rank 0 is in its collective (not before: an abort during
        // setup fails the setup instead), what the collective timeout
        // calls.
        std::thread watchdog([&] {
          while (!calling.load())
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          abortNcclComms();
        });
        onRanks(2, {2}, [&](int rank, Comm &comm, Buffers &buffers) {
          if (rank == 1)
            forever.wait(); // never calls the collective
          float *a = buffers.upload(std::vector<float>{1, 2, 3});
          calling.store(true);
          comm.allReduce(a, a, 3, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 1);
        });
        watchdog.join();
      },
      ::testing::ExitedWithCode(1),
      // abortNcclComms aborts both ranks' communicators (one process):
      // rank 0 sees its own abort, or first rank 1's closed connection.
      "rank 0\\): nccl all_reduce over the world \\(2 ranks, grid 2\\)"
      "(: the NCCL communicators were aborted| failed: remote process "
      "exited)");
}

} // namespace
} // namespace autoshard::rt::cuda::test
