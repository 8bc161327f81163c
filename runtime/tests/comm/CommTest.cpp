// The ABI collectives over MPI on the world and on 2x2 grid groups.
// Run under mpirun with 1, 2 and 4 ranks; every rank runs every test.
#include "comm/Comm.h"
#include "core/Context.h"
#include "core/Dtype.h"
#include "core/Stats.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <numeric>

using namespace autoshard::rt;

namespace {

int worldRank() {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int worldSize() {
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

/// Expected bytes of one call, written out here rather than taken from
/// ringBytesSent so that the test checks the formula, not itself.
int64_t ringBytes(bool allReduce, int64_t fullCount, int64_t n, int64_t b) {
  if (n == 1)
    return 0;
  int64_t k = (fullCount + n - 1) / n;
  return (allReduce ? 2 : 1) * (n - 1) * k * b;
}

// ---- The grid (pure) --------------------------------------------------------

TEST(GridTest, CoordinatesAreRowMajor) {
  std::vector<int64_t> grid{2, 3};
  EXPECT_EQ(gridCoordinates(5, grid), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(gridCoordinates(3, grid), (std::vector<int64_t>{1, 0}));
  for (int64_t r = 0; r < 6; ++r)
    EXPECT_EQ(gridRank(gridCoordinates(r, grid), grid), r);
}

TEST(GridTest, GroupsVaryOnlyTheMaskedAxes) {
  std::vector<int64_t> g22{2, 2};
  EXPECT_EQ(gridGroup(3, g22, 1), (std::vector<int>{1, 3}));
  EXPECT_EQ(gridGroup(3, g22, 2), (std::vector<int>{2, 3}));
  EXPECT_EQ(gridGroup(0, g22, 1), (std::vector<int>{0, 2}));
  EXPECT_EQ(gridGroup(2, g22, 3), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(gridGroup(2, g22, 0), (std::vector<int>{2}));
  // 2x3x2, rank 7 = (1, 0, 1); axes 0 and 2 vary.
  std::vector<int64_t> g232{2, 3, 2};
  EXPECT_EQ(gridGroup(7, g232, 0b101), (std::vector<int>{0, 1, 6, 7}));
  EXPECT_EQ(gridGroupSize(g232, 0b101), 4);
  EXPECT_EQ(gridGroupSize(g232, 0b010), 3);
  EXPECT_EQ(gridGroup(7, g232, 0b010), (std::vector<int>{7, 9, 11}));
}

TEST(GridTest, MasksNamingMissingAxesAreRejected) {
  EXPECT_TRUE(checkGridMask(3, {2, 2}).ok());
  EXPECT_TRUE(checkGridMask(0, {2, 2}).ok());
  Status bad = checkGridMask(4, {2, 2});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "grid_axes_mask 4 names an axis the grid 2x2 does "
                           "not have; valid masks are 0..3");
  EXPECT_FALSE(checkGridMask(-1, {4}).ok());
}

// ---- Without a Comm: a group of one
// -------------------------------------------

TEST(NoCommTest, CollectivesCopy) {
  asrt_context ctx;
  float in[3] = {1, 2, 3}, out[3] = {0, 0, 0};
  asrt_all_reduce(&ctx, in, out, 3, ASRT_DTYPE_F32, ASRT_REDUCE_AVG, 1);
  EXPECT_EQ(std::vector<float>(out, out + 3), std::vector<float>(in, in + 3));
  float gathered[3] = {0, 0, 0};
  asrt_all_gather(&ctx, in, gathered, 3, ASRT_DTYPE_F32, 1);
  EXPECT_EQ(gathered[2], 3.0f);
  float scattered[3] = {0, 0, 0};
  asrt_reduce_scatter(&ctx, in, scattered, 3, ASRT_DTYPE_F32, ASRT_REDUCE_SUM,
                      1);
  EXPECT_EQ(scattered[1], 2.0f);
  asrt_all_reduce(&ctx, in, in, 3, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 1);
  EXPECT_EQ(in[0], 1.0f);
  Stats::Snapshot s = ctx.stats->snapshot();
  EXPECT_EQ(s.collectives[0].calls, 2);
  EXPECT_EQ(s.collectives[0].bytesSent, 0);
  EXPECT_EQ(s.ops.at("all_reduce").calls, 2);
}

// ---- On the world
// -------------------------------------------------------------

class WorldTest : public ::testing::Test {
protected:
  void SetUp() override {
    rank = worldRank();
    n = worldSize();
    comm = createMpiComm({n});
    ctx.comm = comm.get();
  }
  int64_t bytes(CollectiveKind kind) const {
    return ctx.stats->snapshot().collectives[static_cast<int>(kind)].bytesSent;
  }

  int rank = 0, n = 1;
  std::unique_ptr<Comm> comm;
  asrt_context ctx;
};

TEST_F(WorldTest, AllReduceF32) {
  const int count = 10; // not a multiple of 4: chunks are padded
  std::vector<float> send(count), recv(count);
  for (int i = 0; i < count; ++i)
    send[i] = static_cast<float>(rank) + 0.5f * i;
  float rankSum = n * (n - 1) / 2.0f;

  asrt_all_reduce(&ctx, send.data(), recv.data(), count, ASRT_DTYPE_F32,
                  ASRT_REDUCE_SUM, 1);
  for (int i = 0; i < count; ++i)
    EXPECT_FLOAT_EQ(recv[i], rankSum + n * 0.5f * i) << i;
  asrt_all_reduce(&ctx, send.data(), recv.data(), count, ASRT_DTYPE_F32,
                  ASRT_REDUCE_AVG, 1);
  for (int i = 0; i < count; ++i)
    EXPECT_FLOAT_EQ(recv[i], rankSum / n + 0.5f * i) << i;
  asrt_all_reduce(&ctx, send.data(), recv.data(), count, ASRT_DTYPE_F32,
                  ASRT_REDUCE_MAX, 1);
  EXPECT_FLOAT_EQ(recv[3], (n - 1) + 1.5f);
  asrt_all_reduce(&ctx, send.data(), recv.data(), count, ASRT_DTYPE_F32,
                  ASRT_REDUCE_MIN, 1);
  EXPECT_FLOAT_EQ(recv[3], 1.5f);
  EXPECT_EQ(bytes(CollectiveKind::AllReduce), 4 * ringBytes(true, count, n, 4));
}

TEST_F(WorldTest, AllReduceIntegers) {
  int32_t send32[2] = {rank + 1, -rank}, recv32[2];
  asrt_all_reduce(&ctx, send32, recv32, 2, ASRT_DTYPE_I32, ASRT_REDUCE_SUM, 1);
  EXPECT_EQ(recv32[0], n * (n + 1) / 2);
  EXPECT_EQ(recv32[1], -n * (n - 1) / 2);
  asrt_all_reduce(&ctx, send32, recv32, 2, ASRT_DTYPE_I32, ASRT_REDUCE_MAX, 1);
  EXPECT_EQ(recv32[0], n);
  EXPECT_EQ(recv32[1], 0);
  asrt_all_reduce(&ctx, send32, recv32, 2, ASRT_DTYPE_I32, ASRT_REDUCE_MIN, 1);
  EXPECT_EQ(recv32[0], 1);
  EXPECT_EQ(recv32[1], -(n - 1));
  // Values beyond 32 bits survive: the type really is 64-bit.
  int64_t send64 = (int64_t(1) << 40) + rank, recv64 = 0;
  asrt_all_reduce(&ctx, &send64, &recv64, 1, ASRT_DTYPE_I64, ASRT_REDUCE_SUM,
                  1);
  EXPECT_EQ(recv64, n * (int64_t(1) << 40) + n * (n - 1) / 2);
  EXPECT_EQ(bytes(CollectiveKind::AllReduce),
            3 * ringBytes(true, 2, n, 4) + ringBytes(true, 1, n, 8));
}

TEST_F(WorldTest, AllReduceBf16AccumulatesInFloat) {
  const int count = 5;
  std::vector<uint16_t> send(count), recv(count);
  for (int i = 0; i < count; ++i)
    send[i] = floatToBf16(static_cast<float>(rank + 1 + i));
  float rankSum = n * (n + 1) / 2.0f;
  asrt_all_reduce(&ctx, send.data(), recv.data(), count, ASRT_DTYPE_BF16,
                  ASRT_REDUCE_SUM, 1);
  for (int i = 0; i < count; ++i)
    EXPECT_EQ(bf16ToFloat(recv[i]), rankSum + n * i) << i;
  asrt_all_reduce(&ctx, send.data(), recv.data(), count, ASRT_DTYPE_BF16,
                  ASRT_REDUCE_AVG, 1);
  for (int i = 0; i < count; ++i)
    EXPECT_EQ(bf16ToFloat(recv[i]), rankSum / n + i) << i;
  asrt_all_reduce(&ctx, send.data(), recv.data(), count, ASRT_DTYPE_BF16,
                  ASRT_REDUCE_MAX, 1);
  EXPECT_EQ(bf16ToFloat(recv[2]), static_cast<float>(n + 2));
  asrt_all_reduce(&ctx, send.data(), recv.data(), count, ASRT_DTYPE_BF16,
                  ASRT_REDUCE_MIN, 1);
  EXPECT_EQ(bf16ToFloat(recv[2]), 3.0f);
  // A raw 16-bit sum would be garbage; bf16 1.0 + 1.0 must be 2.0.
  uint16_t one = floatToBf16(1.0f), sum = 0;
  asrt_all_reduce(&ctx, &one, &sum, 1, ASRT_DTYPE_BF16, ASRT_REDUCE_SUM, 1);
  EXPECT_EQ(bf16ToFloat(sum), static_cast<float>(n));
  EXPECT_EQ(bytes(CollectiveKind::AllReduce),
            4 * ringBytes(true, count, n, 2) + ringBytes(true, 1, n, 2));
}

TEST_F(WorldTest, AllReduceInPlace) {
  float data[3] = {1.0f, static_cast<float>(rank), 2.0f};
  asrt_all_reduce(&ctx, data, data, 3, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 1);
  EXPECT_EQ(data[0], static_cast<float>(n));
  EXPECT_EQ(data[1], n * (n - 1) / 2.0f);
  EXPECT_EQ(data[2], 2.0f * n);
}

TEST_F(WorldTest, AllGatherF32) {
  const int count = 3;
  float send[count];
  for (int j = 0; j < count; ++j)
    send[j] = rank * 10.0f + j;
  std::vector<float> recv(n * count, -1.0f);
  asrt_all_gather(&ctx, send, recv.data(), count, ASRT_DTYPE_F32, 1);
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < count; ++j)
      EXPECT_EQ(recv[r * count + j], r * 10.0f + j);
  EXPECT_EQ(bytes(CollectiveKind::AllGather),
            ringBytes(false, n * count, n, 4));
}

TEST_F(WorldTest, AllGatherMovesRaw16BitWords) {
  // A NaN payload and a subnormal must arrive bit for bit.
  for (asrt_dtype dtype : {ASRT_DTYPE_BF16, ASRT_DTYPE_F16, ASRT_DTYPE_U16}) {
    uint16_t send[2] = {static_cast<uint16_t>(0x7fc1 + rank), 0x0001};
    std::vector<uint16_t> recv(2 * n, 0);
    asrt_all_gather(&ctx, send, recv.data(), 2, dtype, 1);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(recv[2 * r], 0x7fc1 + r) << dtypeName(dtype);
      EXPECT_EQ(recv[2 * r + 1], 0x0001) << dtypeName(dtype);
    }
  }
  EXPECT_EQ(bytes(CollectiveKind::AllGather),
            3 * ringBytes(false, 2 * n, n, 2));
}

TEST_F(WorldTest, AllGatherInPlace) {
  std::vector<int32_t> data(2 * n, -1);
  data[2 * rank] = rank;
  data[2 * rank + 1] = 100 + rank;
  asrt_all_gather(&ctx, data.data() + 2 * rank, data.data(), 2, ASRT_DTYPE_I32,
                  1);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(data[2 * r], r);
    EXPECT_EQ(data[2 * r + 1], 100 + r);
  }
}

TEST_F(WorldTest, ReduceScatterF32) {
  const int count = 2;
  std::vector<float> send(n * count);
  for (int b = 0; b < n; ++b)
    for (int j = 0; j < count; ++j)
      send[b * count + j] = rank * 100.0f + b * 10.0f + j;
  float recv[count];
  float rankSum = 100.0f * n * (n - 1) / 2;
  asrt_reduce_scatter(&ctx, send.data(), recv, count, ASRT_DTYPE_F32,
                      ASRT_REDUCE_SUM, 1);
  for (int j = 0; j < count; ++j)
    EXPECT_FLOAT_EQ(recv[j], rankSum + n * (rank * 10.0f + j));
  asrt_reduce_scatter(&ctx, send.data(), recv, count, ASRT_DTYPE_F32,
                      ASRT_REDUCE_AVG, 1);
  for (int j = 0; j < count; ++j)
    EXPECT_FLOAT_EQ(recv[j], rankSum / n + rank * 10.0f + j);
  asrt_reduce_scatter(&ctx, send.data(), recv, count, ASRT_DTYPE_F32,
                      ASRT_REDUCE_MAX, 1);
  EXPECT_FLOAT_EQ(recv[1], (n - 1) * 100.0f + rank * 10.0f + 1);
  EXPECT_EQ(bytes(CollectiveKind::ReduceScatter),
            3 * ringBytes(false, n * count, n, 4));
}

TEST_F(WorldTest, ReduceScatterBf16AndInPlace) {
  std::vector<uint16_t> send(n);
  for (int b = 0; b < n; ++b)
    send[b] = floatToBf16(static_cast<float>(b + 1));
  uint16_t recv = 0;
  asrt_reduce_scatter(&ctx, send.data(), &recv, 1, ASRT_DTYPE_BF16,
                      ASRT_REDUCE_SUM, 1);
  EXPECT_EQ(bf16ToFloat(recv), static_cast<float>(n * (rank + 1)));

  std::vector<int64_t> data(n);
  for (int b = 0; b < n; ++b)
    data[b] = b * 1000 + rank;
  asrt_reduce_scatter(&ctx, data.data(), data.data(), 1, ASRT_DTYPE_I64,
                      ASRT_REDUCE_SUM, 1);
  EXPECT_EQ(data[0], int64_t(rank) * 1000 * n + n * (n - 1) / 2);
}

TEST_F(WorldTest, MaskZeroIsAGroupOfOne) {
  float in = static_cast<float>(rank), out = -1;
  asrt_all_reduce(&ctx, &in, &out, 1, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 0);
  EXPECT_EQ(out, static_cast<float>(rank));
  EXPECT_EQ(bytes(CollectiveKind::AllReduce), 0);
  EXPECT_EQ(comm->groupRanks(0), std::vector<int>{rank});
}

// ---- On a 2x2 grid
// --------------------------------------------------------------

class Grid2x2Test : public ::testing::Test {
protected:
  void SetUp() override {
    if (worldSize() != 4)
      GTEST_SKIP() << "needs 4 ranks";
    rank = worldRank();
    comm = createMpiComm({2, 2});
    ctx.comm = comm.get();
  }
  int64_t bytes(CollectiveKind kind) const {
    return ctx.stats->snapshot().collectives[static_cast<int>(kind)].bytesSent;
  }

  int rank = 0;
  std::unique_ptr<Comm> comm;
  asrt_context ctx;
};

TEST_F(Grid2x2Test, GroupsAreTheRanksAlongTheMaskedAxis) {
  int c0 = rank / 2, c1 = rank % 2;
  // Mask 1 (axis 0): same c1. Mask 2 (axis 1): same c0.
  const std::vector<int> expected[3] = {{}, {c1, 2 + c1}, {2 * c0, 2 * c0 + 1}};
  for (int32_t mask : {1, 2}) {
    EXPECT_EQ(comm->groupRanks(mask), expected[mask]);
    EXPECT_EQ(comm->groupSize(mask), 2);
    int32_t me = rank;
    int32_t members[2] = {-1, -1};
    asrt_all_gather(&ctx, &me, members, 1, ASRT_DTYPE_I32, mask);
    EXPECT_EQ(std::vector<int>(members, members + 2), expected[mask])
        << "mask " << mask;
    int32_t sum = 0;
    asrt_all_reduce(&ctx, &me, &sum, 1, ASRT_DTYPE_I32, ASRT_REDUCE_SUM, mask);
    EXPECT_EQ(sum, expected[mask][0] + expected[mask][1]) << "mask " << mask;
  }
  int32_t me = rank, all = 0;
  asrt_all_reduce(&ctx, &me, &all, 1, ASRT_DTYPE_I32, ASRT_REDUCE_SUM, 3);
  EXPECT_EQ(all, 6);
  EXPECT_EQ(bytes(CollectiveKind::AllGather), 2 * ringBytes(false, 2, 2, 4));
  EXPECT_EQ(bytes(CollectiveKind::AllReduce),
            2 * ringBytes(true, 1, 2, 4) + ringBytes(true, 1, 4, 4));
}

TEST_F(Grid2x2Test, ReduceScatterWithinAGroup) {
  // Along axis 1 (mask 2) the group of rank r is {2 c0, 2 c0 + 1}; its
  // member with group rank g receives block g.
  int c0 = rank / 2, g = rank % 2;
  float send[6];
  for (int i = 0; i < 6; ++i)
    send[i] = static_cast<float>(rank * 100 + i);
  float recv[3];
  asrt_reduce_scatter(&ctx, send, recv, 3, ASRT_DTYPE_F32, ASRT_REDUCE_AVG, 2);
  for (int j = 0; j < 3; ++j) {
    float a = (2 * c0) * 100.0f + g * 3 + j;
    float b = (2 * c0 + 1) * 100.0f + g * 3 + j;
    EXPECT_FLOAT_EQ(recv[j], (a + b) / 2) << j;
  }
  EXPECT_EQ(bytes(CollectiveKind::ReduceScatter), ringBytes(false, 6, 2, 4));
}

/// Prints failures of ranks other than 0, whose normal output is silenced,
/// with the rank in front.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
public:
  explicit RankFailurePrinter(int rank) : rank(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult &result) override {
    if (!result.failed())
      return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank,
                 result.file_name() ? result.file_name() : "?",
                 result.line_number(), result.message());
  }

private:
  int rank;
};

} // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  installMpiFatalHandler();
  ::testing::InitGoogleTest(&argc, argv);
  int rank = worldRank();
  if (rank != 0) {
    ::testing::TestEventListeners &listeners =
        ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  int result = RUN_ALL_TESTS();
  // Every rank exits with the worst result, so a failure on any rank fails
  // the ctest test no matter which exit status mpirun reports.
  int worst = 0;
  MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && worst != result)
    std::fprintf(stderr, "another rank failed (see its [rank N] lines)\n");
  MPI_Finalize();
  return worst;
}
