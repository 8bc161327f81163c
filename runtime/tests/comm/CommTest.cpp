// The ABI collectives over MPI on the world and on 2x2 grid groups.
// Run under mpirun with 1, 2 and 4 ranks; every rank runs every test.
#include "comm/Comm.h"
#include "comm/MpiWords.h"
#include "core/OpenBucket.h"
#include "core/Context.h"
#include "core/Dtype.h"
#include "core/InFlightBuckets.h"
#include "stats/Stats.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <csignal>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <thread>
#include <numeric>
#include <string>

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

// ---- Flat shards: expectations written out independently of FlatShard.h --

/// k, and the elements of shard i that lie inside a numel-element tensor.
int64_t shardChunk(int64_t numel, int64_t n) { return (numel + n - 1) / n; }
int64_t shardValid(int64_t numel, int64_t n, int64_t i) {
  int64_t k = shardChunk(numel, n);
  return std::max<int64_t>(0, std::min(k, numel - i * k));
}

/// Sizes covering the layout's cases for a group of n: one element, fewer
/// elements than ranks (some shards hold only padding), exactly n, not
/// divisible, divisible, and a shard count whose last block is empty.
std::vector<int64_t> shardSizes(int64_t n) {
  return {1, std::max<int64_t>(1, n - 1), n, 2 * n + 1, 4 * n, 10, 3 * n - 3};
}

/// The group of a flat-shard test: its members' world ranks in group order
/// and this rank's index among them.
struct ShardGroup {
  int32_t mask = 1;
  std::vector<int> members;
  int me = 0;
  int64_t n() const { return static_cast<int64_t>(members.size()); }
};

constexpr float kGuard = -12345.0f;

/// asrt_shard_of: the block at me*k, zero past numel, nothing written past k.
/// No bytes are counted: nothing is sent.
void checkShardOf(asrt_context &ctx, const ShardGroup &g) {
  for (int64_t numel : shardSizes(g.n())) {
    int64_t k = shardChunk(numel, g.n());
    std::vector<float> full(numel);
    for (int64_t e = 0; e < numel; ++e)
      full[e] = 1000.0f + e;
    std::vector<float> shard(k + 2, kGuard);
    asrt_shard_of(&ctx, ASRT_DTYPE_F32, full.data(), shard.data(), numel,
                  g.mask);
    for (int64_t j = 0; j < k; ++j) {
      int64_t e = g.me * k + j;
      EXPECT_EQ(shard[j], e < numel ? 1000.0f + e : 0.0f)
          << "numel " << numel << " j " << j << " mask " << g.mask;
    }
    EXPECT_EQ(shard[k], kGuard) << "numel " << numel;
    EXPECT_EQ(shard[k + 1], kGuard) << "numel " << numel;

    // Any dtype: 8-byte and 16-bit elements move bit for bit.
    std::vector<int64_t> full64(numel);
    std::vector<uint16_t> full16(numel);
    for (int64_t e = 0; e < numel; ++e) {
      full64[e] = (int64_t(1) << 40) + e;
      full16[e] = static_cast<uint16_t>(0x7fc1 + e);
    }
    std::vector<int64_t> shard64(k + 1, -1);
    std::vector<uint16_t> shard16(k + 1, 0xdead);
    asrt_shard_of(&ctx, ASRT_DTYPE_I64, full64.data(), shard64.data(), numel,
                  g.mask);
    asrt_shard_of(&ctx, ASRT_DTYPE_BF16, full16.data(), shard16.data(), numel,
                  g.mask);
    for (int64_t j = 0; j < k; ++j) {
      int64_t e = g.me * k + j;
      EXPECT_EQ(shard64[j], e < numel ? full64[e] : 0) << "j " << j;
      EXPECT_EQ(shard16[j], e < numel ? full16[e] : 0) << "j " << j;
    }
    EXPECT_EQ(shard64[k], -1);
    EXPECT_EQ(shard16[k], 0xdead);
  }
}

/// asrt_all_gather_shards of f32 shards whose padding holds garbage: full
/// gets every member's valid elements at their global place, in group
/// order, and nothing past numel. Returns the bytes it expects counted.
int64_t checkAllGatherShards(asrt_context &ctx, const ShardGroup &g) {
  int64_t bytes = 0;
  for (int64_t numel : shardSizes(g.n())) {
    int64_t k = shardChunk(numel, g.n());
    // Element e, held by group member e / k, carries that member's world
    // rank, so a block from the wrong member shows.
    auto value = [&](int64_t e) {
      return g.members[e / k] * 1000.0f + static_cast<float>(e);
    };
    std::vector<float> shard(k);
    for (int64_t j = 0; j < k; ++j) {
      int64_t e = g.me * k + j;
      shard[j] = e < numel ? value(e) : 77.0f; // padding must not travel
    }
    std::vector<float> full(numel + 3, kGuard);
    asrt_all_gather_shards(&ctx, ASRT_DTYPE_F32, shard.data(), full.data(),
                           numel, g.mask);
    for (int64_t e = 0; e < numel; ++e)
      EXPECT_EQ(full[e], value(e))
          << "numel " << numel << " e " << e << " mask " << g.mask;
    for (int64_t e = numel; e < numel + 3; ++e)
      EXPECT_EQ(full[e], kGuard) << "written past numel " << numel;
    bytes += ringBytes(false, numel, g.n(), 4);
  }
  return bytes;
}

/// asrt_all_gather_shards moves any dtype: i64 values beyond 32 bits and
/// raw 16-bit words (a NaN payload) arrive bit for bit.
int64_t checkAllGatherShardsDtypes(asrt_context &ctx, const ShardGroup &g) {
  const int64_t numel = 2 * g.n() + 1;
  const int64_t k = shardChunk(numel, g.n());
  std::vector<int64_t> shard64(k, 0);
  std::vector<uint16_t> shard16(k, 0);
  for (int64_t j = 0; j < shardValid(numel, g.n(), g.me); ++j) {
    int64_t e = g.me * k + j;
    shard64[j] = (int64_t(1) << 40) + e;
    shard16[j] = static_cast<uint16_t>(0x7fc1 + e);
  }
  std::vector<int64_t> full64(numel + 1, -1);
  asrt_all_gather_shards(&ctx, ASRT_DTYPE_I64, shard64.data(), full64.data(),
                         numel, g.mask);
  for (asrt_dtype dtype : {ASRT_DTYPE_BF16, ASRT_DTYPE_F16, ASRT_DTYPE_U16}) {
    std::vector<uint16_t> full16(numel + 1, 0xdead);
    asrt_all_gather_shards(&ctx, dtype, shard16.data(), full16.data(), numel,
                           g.mask);
    for (int64_t e = 0; e < numel; ++e)
      EXPECT_EQ(full16[e], 0x7fc1 + e) << dtypeName(dtype) << " e " << e;
    EXPECT_EQ(full16[numel], 0xdead) << dtypeName(dtype);
  }
  for (int64_t e = 0; e < numel; ++e)
    EXPECT_EQ(full64[e], (int64_t(1) << 40) + e) << e;
  EXPECT_EQ(full64[numel], -1);
  return ringBytes(false, numel, g.n(), 8) +
         3 * ringBytes(false, numel, g.n(), 2);
}

/// asrt_reduce_scatter_shards of f32, i32 and i64 with every reduction:
/// this rank's block of the reduction, zero padding (over garbage), nothing
/// written past k. Member r contributes r * 100 + e at element e.
int64_t checkReduceScatterShards(asrt_context &ctx, const ShardGroup &g,
                                 int rank) {
  int64_t bytes = 0;
  int64_t rankSum = 0, rankMax = 0, rankMin = g.members[0];
  for (int r : g.members) {
    rankSum += r;
    rankMax = std::max<int64_t>(rankMax, r);
    rankMin = std::min<int64_t>(rankMin, r);
  }
  for (int64_t numel : shardSizes(g.n())) {
    int64_t k = shardChunk(numel, g.n());
    std::vector<float> full(numel);
    std::vector<int32_t> full32(numel);
    std::vector<int64_t> full64(numel);
    for (int64_t e = 0; e < numel; ++e) {
      full[e] = rank * 100.0f + e;
      full32[e] = static_cast<int32_t>(rank * 100 + e);
      full64[e] = (int64_t(rank) << 33) + e;
    }
    struct Case {
      asrt_reduce_op op;
      double (*expected)(int64_t sum, int64_t max, int64_t min, int64_t n,
                         int64_t e);
    };
    const Case cases[] = {
        {ASRT_REDUCE_SUM, [](int64_t s, int64_t, int64_t, int64_t n,
                             int64_t e) { return 100.0 * s + n * e; }},
        {ASRT_REDUCE_AVG, [](int64_t s, int64_t, int64_t, int64_t n,
                             int64_t e) { return (100.0 * s + n * e) / n; }},
        {ASRT_REDUCE_MAX, [](int64_t, int64_t mx, int64_t, int64_t,
                             int64_t e) { return 100.0 * mx + e; }},
        {ASRT_REDUCE_MIN, [](int64_t, int64_t, int64_t mn, int64_t,
                             int64_t e) { return 100.0 * mn + e; }},
    };
    for (const Case &c : cases) {
      std::vector<float> shard(k + 1, 9.5f);
      asrt_reduce_scatter_shards(&ctx, ASRT_DTYPE_F32, full.data(),
                                 shard.data(), numel, c.op, g.mask);
      for (int64_t j = 0; j < k; ++j) {
        int64_t e = g.me * k + j;
        float want = e < numel ? static_cast<float>(c.expected(
                                     rankSum, rankMax, rankMin, g.n(), e))
                               : 0.0f;
        EXPECT_FLOAT_EQ(shard[j], want)
            << reduceOpName(c.op) << " numel " << numel << " j " << j
            << " mask " << g.mask;
      }
      EXPECT_EQ(shard[k], 9.5f) << "written past k, numel " << numel;
      bytes += ringBytes(false, numel, g.n(), 4);
      if (c.op == ASRT_REDUCE_AVG)
        continue; // integer averages are rejected: they would truncate
      std::vector<int32_t> shard32(k + 1, -7);
      asrt_reduce_scatter_shards(&ctx, ASRT_DTYPE_I32, full32.data(),
                                 shard32.data(), numel, c.op, g.mask);
      std::vector<int64_t> shard64(k + 1, -7);
      asrt_reduce_scatter_shards(&ctx, ASRT_DTYPE_I64, full64.data(),
                                 shard64.data(), numel, c.op, g.mask);
      for (int64_t j = 0; j < k; ++j) {
        int64_t e = g.me * k + j;
        int64_t want32 = e < numel ? static_cast<int64_t>(c.expected(
                                         rankSum, rankMax, rankMin, g.n(), e))
                                   : 0;
        EXPECT_EQ(shard32[j], want32) << reduceOpName(c.op) << " j " << j;
        int64_t s = rankSum, mx = rankMax, mn = rankMin;
        int64_t want64 = c.op == ASRT_REDUCE_SUM   ? (s << 33) + g.n() * e
                         : c.op == ASRT_REDUCE_MAX ? (mx << 33) + e
                                                   : (mn << 33) + e;
        EXPECT_EQ(shard64[j], e < numel ? want64 : 0)
            << reduceOpName(c.op) << " j " << j;
      }
      EXPECT_EQ(shard32[k], -7);
      EXPECT_EQ(shard64[k], -7);
      bytes +=
          ringBytes(false, numel, g.n(), 4) + ringBytes(false, numel, g.n(), 8);
    }
  }
  return bytes;
}

/// bf16 sums and averages combine in float (1 + 1 is 2, not a raw-word
/// sum) and pad with bf16 zeros.
int64_t checkReduceScatterShardsBf16(asrt_context &ctx, const ShardGroup &g,
                                     int rank) {
  const int64_t numel = 2 * g.n() + 1;
  const int64_t k = shardChunk(numel, g.n());
  std::vector<uint16_t> full(numel);
  for (int64_t e = 0; e < numel; ++e)
    full[e] = floatToBf16(static_cast<float>(rank + 1 + e % 3));
  float rankSum = 0;
  for (int r : g.members)
    rankSum += static_cast<float>(r);
  for (asrt_reduce_op op : {ASRT_REDUCE_SUM, ASRT_REDUCE_AVG}) {
    std::vector<uint16_t> shard(k + 1, floatToBf16(3.25f));
    asrt_reduce_scatter_shards(&ctx, ASRT_DTYPE_BF16, full.data(), shard.data(),
                               numel, op, g.mask);
    for (int64_t j = 0; j < k; ++j) {
      int64_t e = g.me * k + j;
      float sum = rankSum + g.n() * static_cast<float>(1 + e % 3);
      float want = e >= numel              ? 0.0f
                   : op == ASRT_REDUCE_SUM ? sum
                                           : sum / g.n();
      EXPECT_EQ(bf16ToFloat(shard[j]), want)
          << reduceOpName(op) << " j " << j << " mask " << g.mask;
      if (e >= numel)
        EXPECT_EQ(shard[j], 0) << "padding is +0.0";
    }
    EXPECT_EQ(bf16ToFloat(shard[k]), 3.25f);
  }
  return 2 * ringBytes(false, numel, g.n(), 2);
}

/// reduce_scatter_shards then all_gather_shards is an all-reduce; both
/// also work in place (the shard at its own place in full).
int64_t checkShardRoundTripAndInPlace(asrt_context &ctx, const ShardGroup &g,
                                      int rank) {
  int64_t bytes = 0;
  const int64_t numel = 3 * g.n() + 2;
  const int64_t k = shardChunk(numel, g.n());
  std::vector<float> x(numel), reduced(numel);
  for (int64_t e = 0; e < numel; ++e)
    x[e] = 0.25f * (rank + 1) * e;
  asrt_all_reduce(&ctx, x.data(), reduced.data(), numel, ASRT_DTYPE_F32,
                  ASRT_REDUCE_SUM, g.mask);
  std::vector<float> shard(k), back(numel);
  asrt_reduce_scatter_shards(&ctx, ASRT_DTYPE_F32, x.data(), shard.data(),
                             numel, ASRT_REDUCE_SUM, g.mask);
  asrt_all_gather_shards(&ctx, ASRT_DTYPE_F32, shard.data(), back.data(), numel,
                         g.mask);
  EXPECT_EQ(back, reduced);
  bytes +=
      ringBytes(true, numel, g.n(), 4) + 2 * ringBytes(false, numel, g.n(), 4);

  // In place: the result lands at the start of full, the padding after it
  // is zeroed.
  std::vector<float> inPlace = x;
  asrt_reduce_scatter_shards(&ctx, ASRT_DTYPE_F32, inPlace.data(),
                             inPlace.data(), numel, ASRT_REDUCE_SUM, g.mask);
  for (int64_t j = 0; j < k; ++j) {
    int64_t e = g.me * k + j;
    EXPECT_EQ(inPlace[j], e < numel ? reduced[e] : 0.0f) << "in place " << j;
  }
  bytes += ringBytes(false, numel, g.n(), 4);

  // A divisible tensor, so that every shard fits inside full.
  const int64_t even = 3 * g.n();
  std::vector<float> gathered(even, kGuard);
  for (int64_t j = 0; j < 3; ++j)
    gathered[g.me * 3 + j] = static_cast<float>(g.members[g.me] * 10 + j);
  asrt_all_gather_shards(&ctx, ASRT_DTYPE_F32, gathered.data() + g.me * 3,
                         gathered.data(), even, g.mask);
  for (int64_t e = 0; e < even; ++e)
    EXPECT_EQ(gathered[e], g.members[e / 3] * 10.0f + e % 3) << e;
  bytes += ringBytes(false, even, g.n(), 4);
  return bytes;
}

/// Every flat-shard check on one group; the collective byte counters must
/// grow by exactly what the checks expect.
void checkFlatShardGroup(asrt_context &ctx, const ShardGroup &g, int rank) {
  auto counted = [&](CollectiveKind kind) {
    return ctx.stats->snapshot().collectives[static_cast<int>(kind)].bytesSent;
  };
  int64_t gather0 = counted(CollectiveKind::AllGather);
  int64_t scatter0 = counted(CollectiveKind::ReduceScatter);
  int64_t reduce0 = counted(CollectiveKind::AllReduce);

  checkShardOf(ctx, g);
  EXPECT_EQ(counted(CollectiveKind::AllGather), gather0) << "shard_of sends";
  EXPECT_EQ(counted(CollectiveKind::ReduceScatter), scatter0);

  int64_t gathered = checkAllGatherShards(ctx, g);
  gathered += checkAllGatherShardsDtypes(ctx, g);
  EXPECT_EQ(counted(CollectiveKind::AllGather) - gather0, gathered);
  int64_t scattered = checkReduceScatterShards(ctx, g, rank);
  scattered += checkReduceScatterShardsBf16(ctx, g, rank);
  EXPECT_EQ(counted(CollectiveKind::ReduceScatter) - scatter0, scattered);

  gather0 = counted(CollectiveKind::AllGather);
  scatter0 = counted(CollectiveKind::ReduceScatter);
  int64_t mixed = checkShardRoundTripAndInPlace(ctx, g, rank);
  EXPECT_EQ(counted(CollectiveKind::AllGather) - gather0 +
                counted(CollectiveKind::ReduceScatter) - scatter0 +
                counted(CollectiveKind::AllReduce) - reduce0,
            mixed);
}

// ---- Buckets: every kind against its single-tensor function ---------------

/// A tensor of any dtype, as bytes, read and written through doubles.
struct Tensor {
  asrt_dtype dtype;
  std::vector<unsigned char> bytes;

  Tensor(asrt_dtype dtype, int64_t count, double fill)
      : dtype(dtype), bytes(static_cast<size_t>(count * dtypeSize(dtype))) {
    for (int64_t i = 0; i < count; ++i)
      set(i, fill);
  }
  int64_t size() const {
    return static_cast<int64_t>(bytes.size()) / dtypeSize(dtype);
  }
  void *data() { return bytes.data(); }
  void set(int64_t i, double v) { storeElement(bytes.data(), dtype, i, v); }
  double get(int64_t i) const { return loadElement(bytes.data(), dtype, i); }
};

/// Bit for bit (a -0.0 for +0.0 padding would show), naming the element.
void expectSameElements(const Tensor &got, const Tensor &want,
                        const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t b = dtypeSize(got.dtype);
  for (int64_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(std::memcmp(&got.bytes[i * b], &want.bytes[i * b], b) == 0)
        << what << ": element " << i << " is " << got.get(i) << ", expected "
        << want.get(i);
}

/// Small integers: sums over up to four ranks and their averages are exact
/// in bf16 and f32 whatever order MPI combines them in, so bucketed and
/// single-tensor results can be compared exactly. The value changes with
/// the rank, the member and the element, so a block taken from the wrong
/// place shows.
double bucketValue(int rank, int64_t member, int64_t e) {
  return 1 + rank + (e * 7 + member * 3) % 29;
}

/// Member sizes for a group of n: one member, or three of different sizes,
/// one not divisible by n, one smaller than n (when n > 1) and one
/// divisible.
std::vector<std::vector<int64_t>> bucketSizes(int64_t n) {
  return {{2 * n + 1}, {3 * n + 1, std::max<int64_t>(1, n - 1), 4 * n}};
}

/// The collective counters, for before-and-after differences.
struct Counted {
  int64_t bytes = 0, calls = 0, timed = 0;
};
Counted counted(asrt_context &ctx, CollectiveKind kind, const char *timer) {
  Stats::Snapshot s = ctx.stats->snapshot();
  Counted c;
  c.bytes = s.collectives[static_cast<int>(kind)].bytesSent;
  c.calls = s.collectives[static_cast<int>(kind)].calls;
  auto it = s.ops.find(timer);
  c.timed = it == s.ops.end() ? 0 : it->second.calls;
  return c;
}

/// Checks the counters of one bucket against the members' single-tensor
/// calls: the same bytes (and the formula's), one collective call instead
/// of one per member, and one timed bucket op.
void expectBucketCounted(const Counted &before, const Counted &singles,
                         const Counted &bucketed, int64_t expectedBytes,
                         size_t members, const std::string &what) {
  EXPECT_EQ(singles.bytes - before.bytes, expectedBytes) << what;
  EXPECT_EQ(bucketed.bytes - singles.bytes, singles.bytes - before.bytes)
      << what << ": a bucket sends what its members would";
  EXPECT_EQ(singles.calls - before.calls, static_cast<int64_t>(members))
      << what;
  EXPECT_EQ(bucketed.calls - singles.calls, 1) << what;
  EXPECT_EQ(bucketed.timed - singles.timed, 1) << what;
}

/// How a check closes its buckets: asrt_bucket_end, or asrt_bucket_start
/// and an immediate asrt_wait. Both must give the single-tensor results.
enum class BucketMode { Blocking, Async };

void endBucket(asrt_context &ctx, BucketMode mode) {
  if (mode == BucketMode::Blocking)
    return asrt_bucket_end(&ctx);
  int64_t handle = asrt_bucket_start(&ctx);
  EXPECT_GT(handle, 0);
  asrt_wait(&ctx, handle);
}

/// The op timer that counts one bucket of `mode`: the blocking call's, or
/// the issue of an asynchronous one.
const char *bucketTimer(const char *blockingTimer, BucketMode mode) {
  return mode == BucketMode::Blocking ? blockingTimer : "bucket_start";
}

std::string bucketCaseName(const char *kind, asrt_dtype dtype,
                           asrt_reduce_op op, const std::vector<int64_t> &sizes,
                           int32_t mask) {
  std::string name = std::string(kind) + " " + dtypeName(dtype) + " " +
                     reduceOpName(op) + " mask " + std::to_string(mask) +
                     " sizes";
  for (int64_t s : sizes)
    name += " " + std::to_string(s);
  return name;
}

/// ALL_REDUCE: equal to asrt_all_reduce per member, out of place and in
/// place, writing nothing past numel.
void checkAllReduceBucket(asrt_context &ctx, const ShardGroup &g, int rank,
                          asrt_dtype dtype, asrt_reduce_op op,
                          const std::vector<int64_t> &sizes, BucketMode mode) {
  std::string what = bucketCaseName("all_reduce", dtype, op, sizes, g.mask);
  std::vector<Tensor> send, want, got, inPlace;
  for (size_t m = 0; m < sizes.size(); ++m) {
    send.emplace_back(dtype, sizes[m], 0.0);
    for (int64_t e = 0; e < sizes[m]; ++e)
      send[m].set(e, bucketValue(rank, m, e));
    want.emplace_back(dtype, sizes[m] + 1, kGuard);
    got.emplace_back(dtype, sizes[m] + 1, kGuard);
    inPlace.push_back(send[m]);
    inPlace[m].bytes.resize((sizes[m] + 1) * dtypeSize(dtype));
    inPlace[m].set(sizes[m], kGuard);
  }
  const char *timer = bucketTimer("bucket_all_reduce", mode);
  Counted before = counted(ctx, CollectiveKind::AllReduce, timer);
  int64_t expectedBytes = 0;
  for (size_t m = 0; m < sizes.size(); ++m) {
    asrt_all_reduce(&ctx, send[m].data(), want[m].data(), sizes[m], dtype, op,
                    g.mask);
    expectedBytes += ringBytes(true, sizes[m], g.n(), dtypeSize(dtype));
  }
  Counted singles = counted(ctx, CollectiveKind::AllReduce, timer);
  asrt_bucket_begin(&ctx, ASRT_BUCKET_ALL_REDUCE, dtype, op, g.mask);
  for (size_t m = 0; m < sizes.size(); ++m)
    asrt_bucket_add(&ctx, send[m].data(), got[m].data(), sizes[m]);
  endBucket(ctx, mode);
  Counted bucketed = counted(ctx, CollectiveKind::AllReduce, timer);
  expectBucketCounted(before, singles, bucketed, expectedBytes, sizes.size(),
                      what);

  asrt_bucket_begin(&ctx, ASRT_BUCKET_ALL_REDUCE, dtype, op, g.mask);
  for (size_t m = 0; m < sizes.size(); ++m)
    asrt_bucket_add(&ctx, inPlace[m].data(), inPlace[m].data(), sizes[m]);
  endBucket(ctx, mode);
  for (size_t m = 0; m < sizes.size(); ++m) {
    expectSameElements(got[m], want[m], what + " member " + std::to_string(m));
    expectSameElements(inPlace[m], want[m],
                       what + " in place, member " + std::to_string(m));
  }
}

/// REDUCE_SCATTER_SHARDS: equal to asrt_reduce_scatter_shards per member
/// (over the same garbage in recv, so the zero padding is checked), writing
/// nothing past k.
void checkReduceScatterBucket(asrt_context &ctx, const ShardGroup &g, int rank,
                              asrt_dtype dtype, asrt_reduce_op op,
                              const std::vector<int64_t> &sizes,
                              BucketMode mode) {
  std::string what =
      bucketCaseName("reduce_scatter_shards", dtype, op, sizes, g.mask);
  std::vector<Tensor> send, want, got;
  for (size_t m = 0; m < sizes.size(); ++m) {
    int64_t k = shardChunk(sizes[m], g.n());
    send.emplace_back(dtype, sizes[m], 0.0);
    for (int64_t e = 0; e < sizes[m]; ++e)
      send[m].set(e, bucketValue(rank, m, e));
    want.emplace_back(dtype, k + 1, kGuard);
    got.emplace_back(dtype, k + 1, kGuard);
  }
  const char *timer = bucketTimer("bucket_reduce_scatter_shards", mode);
  Counted before = counted(ctx, CollectiveKind::ReduceScatter, timer);
  int64_t expectedBytes = 0;
  for (size_t m = 0; m < sizes.size(); ++m) {
    asrt_reduce_scatter_shards(&ctx, dtype, send[m].data(), want[m].data(),
                               sizes[m], op, g.mask);
    expectedBytes += ringBytes(false, sizes[m], g.n(), dtypeSize(dtype));
  }
  Counted singles = counted(ctx, CollectiveKind::ReduceScatter, timer);
  asrt_bucket_begin(&ctx, ASRT_BUCKET_REDUCE_SCATTER_SHARDS, dtype, op, g.mask);
  for (size_t m = 0; m < sizes.size(); ++m)
    asrt_bucket_add(&ctx, send[m].data(), got[m].data(), sizes[m]);
  endBucket(ctx, mode);
  Counted bucketed = counted(ctx, CollectiveKind::ReduceScatter, timer);
  expectBucketCounted(before, singles, bucketed, expectedBytes, sizes.size(),
                      what);
  for (size_t m = 0; m < sizes.size(); ++m)
    expectSameElements(got[m], want[m], what + " member " + std::to_string(m));
}

/// ALL_GATHER_SHARDS: equal to asrt_all_gather_shards per member, from
/// shards whose padding holds garbage that must not arrive, writing
/// nothing past numel. The reduce_op is ignored (it is AVG here).
void checkAllGatherBucket(asrt_context &ctx, const ShardGroup &g,
                          asrt_dtype dtype, const std::vector<int64_t> &sizes,
                          BucketMode mode) {
  std::string what = bucketCaseName("all_gather_shards", dtype, ASRT_REDUCE_AVG,
                                    sizes, g.mask);
  std::vector<Tensor> shard, want, got;
  for (size_t m = 0; m < sizes.size(); ++m) {
    int64_t k = shardChunk(sizes[m], g.n());
    shard.emplace_back(dtype, k, 77.0);
    for (int64_t j = 0; j < shardValid(sizes[m], g.n(), g.me); ++j)
      shard[m].set(j, bucketValue(g.members[g.me], m, g.me * k + j));
    want.emplace_back(dtype, sizes[m] + 1, kGuard);
    got.emplace_back(dtype, sizes[m] + 1, kGuard);
  }
  const char *timer = bucketTimer("bucket_all_gather_shards", mode);
  Counted before = counted(ctx, CollectiveKind::AllGather, timer);
  int64_t expectedBytes = 0;
  for (size_t m = 0; m < sizes.size(); ++m) {
    asrt_all_gather_shards(&ctx, dtype, shard[m].data(), want[m].data(),
                           sizes[m], g.mask);
    expectedBytes += ringBytes(false, sizes[m], g.n(), dtypeSize(dtype));
  }
  Counted singles = counted(ctx, CollectiveKind::AllGather, timer);
  asrt_bucket_begin(&ctx, ASRT_BUCKET_ALL_GATHER_SHARDS, dtype, ASRT_REDUCE_AVG,
                    g.mask);
  for (size_t m = 0; m < sizes.size(); ++m)
    asrt_bucket_add(&ctx, shard[m].data(), got[m].data(), sizes[m]);
  endBucket(ctx, mode);
  Counted bucketed = counted(ctx, CollectiveKind::AllGather, timer);
  expectBucketCounted(before, singles, bucketed, expectedBytes, sizes.size(),
                      what);
  for (size_t m = 0; m < sizes.size(); ++m) {
    expectSameElements(got[m], want[m], what + " member " + std::to_string(m));
    // Independently of the single-tensor function: member r's elements.
    int64_t k = shardChunk(sizes[m], g.n());
    for (int64_t e = 0; e < sizes[m]; ++e)
      EXPECT_EQ(got[m].get(e), bucketValue(g.members[e / k], m, e))
          << what << " member " << m << " e " << e;
  }
}

/// Every bucket kind on one group: f32 and bf16, SUM and AVG, one member
/// and three.
void checkBucketsOnGroup(asrt_context &ctx, const ShardGroup &g, int rank,
                         BucketMode mode = BucketMode::Blocking) {
  for (asrt_dtype dtype : {ASRT_DTYPE_F32, ASRT_DTYPE_BF16}) {
    for (const std::vector<int64_t> &sizes : bucketSizes(g.n())) {
      for (asrt_reduce_op op : {ASRT_REDUCE_SUM, ASRT_REDUCE_AVG}) {
        checkAllReduceBucket(ctx, g, rank, dtype, op, sizes, mode);
        checkReduceScatterBucket(ctx, g, rank, dtype, op, sizes, mode);
      }
      checkAllGatherBucket(ctx, g, dtype, sizes, mode);
    }
  }
}

// ---- Asynchronous buckets: several in flight at once ------------------------

/// One bucket of checkSeveralInFlight: its collective and group, this
/// rank's inputs, and the results of the blocking run (want) and of the
/// asynchronous one (got), each with a guard element past its end.
struct FlightBucket {
  asrt_bucket_kind kind = ASRT_BUCKET_ALL_REDUCE;
  asrt_dtype dtype = ASRT_DTYPE_F32;
  asrt_reduce_op op = ASRT_REDUCE_SUM;
  ShardGroup group;
  std::vector<int64_t> sizes;
  /// Member 0 of an all-reduce is in place: its recv is its send.
  bool firstInPlace = false;
  std::vector<Tensor> send, want, got;
};

FlightBucket flightBucket(asrt_bucket_kind kind, asrt_dtype dtype,
                          asrt_reduce_op op, const ShardGroup &g,
                          std::vector<int64_t> sizes, int rank,
                          bool firstInPlace = false) {
  FlightBucket b;
  b.kind = kind;
  b.dtype = dtype;
  b.op = op;
  b.group = g;
  b.sizes = std::move(sizes);
  b.firstInPlace = firstInPlace;
  for (size_t m = 0; m < b.sizes.size(); ++m) {
    int64_t numel = b.sizes[m], k = shardChunk(numel, g.n());
    if (kind == ASRT_BUCKET_ALL_GATHER_SHARDS) {
      // A shard whose padding holds garbage that must not arrive.
      b.send.emplace_back(dtype, k, 77.0);
      for (int64_t j = 0; j < shardValid(numel, g.n(), g.me); ++j)
        b.send[m].set(j, bucketValue(g.members[g.me], m, g.me * k + j));
    } else {
      b.send.emplace_back(dtype, numel, 0.0);
      for (int64_t e = 0; e < numel; ++e)
        b.send[m].set(e, bucketValue(rank, m, e));
    }
    int64_t out = kind == ASRT_BUCKET_REDUCE_SCATTER_SHARDS ? k : numel;
    if (m == 0 && firstInPlace) {
      Tensor inPlace = b.send[m];
      inPlace.bytes.resize((out + 1) * dtypeSize(dtype));
      inPlace.set(out, kGuard);
      b.want.push_back(inPlace);
    } else {
      b.want.emplace_back(dtype, out + 1, kGuard);
    }
  }
  b.got = b.want;
  return b;
}

/// Opens `b`'s bucket and adds its members, receiving into `recv`.
void addFlightBucket(asrt_context &ctx, FlightBucket &b,
                     std::vector<Tensor> &recv) {
  asrt_bucket_begin(&ctx, b.kind, b.dtype, b.op, b.group.mask);
  for (size_t m = 0; m < b.sizes.size(); ++m) {
    void *out = recv[m].data();
    const void *in = m == 0 && b.firstInPlace ? out : b.send[m].data();
    asrt_bucket_add(&ctx, in, out, b.sizes[m]);
  }
}

int64_t opCalls(const Stats::Snapshot &s, const char *op) {
  auto it = s.ops.find(op);
  return it == s.ops.end() ? 0 : it->second.calls;
}

/// Four buckets of every kind, three dtypes and `groups`' masks in flight
/// at once, with a blocking collective issued among them, waited in
/// another order than issued, twice (two "steps"): each gives the blocking
/// bucket's results bit for bit and counts the same bytes.
void checkSeveralInFlight(asrt_context &ctx,
                          const std::vector<ShardGroup> &groups, int rank) {
  const ShardGroup &g0 = groups[0];
  const ShardGroup &g1 = groups[1 % groups.size()];
  const ShardGroup &g2 = groups[2 % groups.size()];
  std::vector<FlightBucket> buckets;
  buckets.push_back(flightBucket(
      ASRT_BUCKET_ALL_REDUCE, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, g0,
      {2 * g0.n() + 1, std::max<int64_t>(1, g0.n() - 1), 4 * g0.n()}, rank,
      /*firstInPlace=*/true));
  buckets.push_back(flightBucket(ASRT_BUCKET_REDUCE_SCATTER_SHARDS,
                                 ASRT_DTYPE_BF16, ASRT_REDUCE_AVG, g1,
                                 {3 * g1.n() + 1, 4 * g1.n()}, rank));
  buckets.push_back(flightBucket(ASRT_BUCKET_ALL_GATHER_SHARDS, ASRT_DTYPE_I32,
                                 ASRT_REDUCE_SUM, g2, {2 * g2.n() + 1, 1},
                                 rank));
  buckets.push_back(flightBucket(ASRT_BUCKET_ALL_REDUCE, ASRT_DTYPE_I64,
                                 ASRT_REDUCE_MAX, g0, {5}, rank));

  Stats::Snapshot before = ctx.stats->snapshot();
  for (FlightBucket &b : buckets) {
    addFlightBucket(ctx, b, b.want);
    asrt_bucket_end(&ctx);
  }
  Stats::Snapshot blocking = ctx.stats->snapshot();
  const std::vector<FlightBucket> fresh = buckets;

  for (int step = 1; step <= 2; ++step) {
    for (size_t i = 0; i < buckets.size(); ++i)
      buckets[i].got = fresh[i].got;
    Stats::Snapshot start = ctx.stats->snapshot();
    int64_t handles[4];
    addFlightBucket(ctx, buckets[0], buckets[0].got);
    handles[0] = asrt_bucket_start(&ctx);
    addFlightBucket(ctx, buckets[1], buckets[1].got);
    handles[1] = asrt_bucket_start(&ctx);
    // A blocking collective among them runs after the two in flight, on
    // every rank, so that MPI matches the same collectives everywhere.
    int32_t one = 1, ranks = 0;
    asrt_all_reduce(&ctx, &one, &ranks, 1, ASRT_DTYPE_I32, ASRT_REDUCE_SUM,
                    g0.mask);
    EXPECT_EQ(ranks, g0.n());
    addFlightBucket(ctx, buckets[2], buckets[2].got);
    handles[2] = asrt_bucket_start(&ctx);
    addFlightBucket(ctx, buckets[3], buckets[3].got);
    handles[3] = asrt_bucket_start(&ctx);
    EXPECT_GT(handles[0], 0);
    for (int i = 1; i < 4; ++i)
      EXPECT_EQ(handles[i], handles[i - 1] + 1) << "handles in issue order";
    EXPECT_EQ(ctx.inflight->inFlight(), 4u);
    for (int i : {2, 0, 3, 1})
      asrt_wait(&ctx, handles[i]);
    EXPECT_EQ(ctx.inflight->inFlight(), 0u);

    for (size_t i = 0; i < buckets.size(); ++i)
      for (size_t m = 0; m < buckets[i].sizes.size(); ++m)
        expectSameElements(buckets[i].got[m], buckets[i].want[m],
                           "step " + std::to_string(step) + ", bucket " +
                               std::to_string(i) + " (" +
                               bucketKindName(buckets[i].kind) + "), member " +
                               std::to_string(m));

    // The same bytes and calls as the blocking buckets, plus the blocking
    // all-reduce of one i32.
    Stats::Snapshot end = ctx.stats->snapshot();
    for (int k = 0; k < kNumCollectiveKinds; ++k) {
      bool allReduce = k == static_cast<int>(CollectiveKind::AllReduce);
      EXPECT_EQ(end.collectives[k].bytesSent - start.collectives[k].bytesSent,
                blocking.collectives[k].bytesSent -
                    before.collectives[k].bytesSent +
                    (allReduce ? ringBytes(true, 1, g0.n(), 4) : 0))
          << collectiveKindName(static_cast<CollectiveKind>(k)) << " step "
          << step;
      EXPECT_EQ(end.collectives[k].calls - start.collectives[k].calls,
                blocking.collectives[k].calls - before.collectives[k].calls +
                    (allReduce ? 1 : 0))
          << collectiveKindName(static_cast<CollectiveKind>(k));
    }
    EXPECT_EQ(end.comm.asyncCalls - start.comm.asyncCalls, 4);
    EXPECT_EQ(end.comm.asyncWaits - start.comm.asyncWaits, 4);
    EXPECT_EQ(opCalls(end, "bucket_start") - opCalls(start, "bucket_start"), 4);
    EXPECT_EQ(opCalls(end, "wait") - opCalls(start, "wait"), 4);
  }
  // Four slots, one per bucket in flight, served both steps.
  EXPECT_EQ(ctx.inflight->slots(), 4u);
}

// ---- The grid (pure) --------------------------------------------------------

// What a timeout says of the other members, from their words: the ones
// without a word have not reached the collective, and only those are
// blamed; one waiting in another collective is named with it.
TEST(PeerWordsTest, OnlyMembersWithoutAWordAreSaidToBeMissing) {
  using S = PeerWord::State;
  EXPECT_EQ(
      describePeerWords({{1, S::None, ""}, {2, S::Here, ""}, {3, S::Here, ""}}),
      "rank 1 has not reached it; ranks 2, 3 wait in it too");
  EXPECT_EQ(
      describePeerWords({{1, S::None, ""}, {3, S::None, ""}, {2, S::Here, ""}}),
      "ranks 1, 3 have not reached it; rank 2 waits in it too");
  EXPECT_EQ(describePeerWords({{1, S::Elsewhere,
                                "all_reduce #4 over "
                                "grid_axes_mask 2"},
                               {2, S::Here, ""}}),
            "rank 1 waits itself, in all_reduce #4 over grid_axes_mask 2; "
            "rank 2 waits in it too");
  // Every member waits: nobody is blamed.
  EXPECT_EQ(describePeerWords({{0, S::Here, ""}, {2, S::Here, ""}}),
            "every other member waits in it too");
  EXPECT_EQ(describePeerWords({}), "");
}

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

TEST(GridTest, GroupIndexIsThePositionInTheGroup) {
  for (const std::vector<int64_t> &grid :
       {std::vector<int64_t>{4}, {2, 2}, {2, 3, 2}}) {
    int64_t world = 1;
    for (int64_t d : grid)
      world *= d;
    int32_t masks = (1 << grid.size()) - 1;
    for (int32_t mask = 0; mask <= masks; ++mask) {
      for (int rank = 0; rank < world; ++rank) {
        std::vector<int> group = gridGroup(rank, grid, mask);
        int64_t index = gridGroupIndex(rank, grid, mask);
        ASSERT_LT(index, static_cast<int64_t>(group.size()));
        EXPECT_EQ(group[index], rank) << "mask " << mask;
      }
    }
  }
  // 2x3x2, rank 7 = (1, 0, 1): along axes 0 and 2 it is (1, 1) -> 3.
  EXPECT_EQ(gridGroupIndex(7, {2, 3, 2}, 0b101), 3);
  EXPECT_EQ(gridGroupIndex(7, {2, 3, 2}, 0b010), 0);
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

TEST(MpiThreadLevelTest, OnlyMultipleWillDo) {
  EXPECT_EQ(mpiThreadLevelError(MPI_THREAD_MULTIPLE), "");
  EXPECT_EQ(mpiThreadLevelError(MPI_THREAD_SERIALIZED),
            "the MPI library provides only MPI_THREAD_SERIALIZED; the runtime "
            "needs MPI_THREAD_MULTIPLE (its communication thread runs the "
            "collectives while the main thread computes, and the main thread "
            "ends a hung job with MPI_Abort): initialise MPI with "
            "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) and use an MPI "
            "built with thread support");
  EXPECT_NE(mpiThreadLevelError(MPI_THREAD_SINGLE).find("MPI_THREAD_SINGLE"),
            std::string::npos);
}

// ---- Buckets: bookkeeping (pure) -------------------------------------------

TEST(OpenBucketTest, MembersKeepTheirShardBoundaries) {
  OpenBucket b;
  float x[16];
  ASSERT_TRUE(b.begin(ASRT_BUCKET_REDUCE_SCATTER_SHARDS, ASRT_DTYPE_BF16,
                      ASRT_REDUCE_AVG, 1, 4)
                  .ok());
  // 13 elements over 4 ranks: k = 4; 3: k = 1 (one rank holds padding
  // only); 16: k = 4; an empty member takes no room.
  for (int64_t numel : {13, 3, 16, 0})
    ASSERT_TRUE(b.add(x, x, numel).ok());
  ASSERT_EQ(b.members().size(), 4u);
  const int64_t chunks[] = {4, 1, 4, 0}, offsets[] = {0, 4, 5, 9};
  for (size_t m = 0; m < 4; ++m) {
    EXPECT_EQ(b.members()[m].chunk, chunks[m]) << m;
    EXPECT_EQ(b.members()[m].chunkOffset, offsets[m]) << m;
  }
  EXPECT_EQ(b.totalChunk(), 9);
  ASSERT_TRUE(b.close().ok());
  // Closed, the members stay readable for the collective.
  EXPECT_FALSE(b.isOpen());
  EXPECT_EQ(b.kind(), ASRT_BUCKET_REDUCE_SCATTER_SHARDS);
  EXPECT_EQ(b.dtype(), ASRT_DTYPE_BF16);
  EXPECT_EQ(b.reduceOp(), ASRT_REDUCE_AVG);
  EXPECT_EQ(b.groupSize(), 4);
  EXPECT_EQ(b.members().size(), 4u);
  // The next bucket starts empty, on its own group.
  ASSERT_TRUE(
      b.begin(ASRT_BUCKET_ALL_REDUCE, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 0, 1)
          .ok());
  EXPECT_TRUE(b.members().empty());
  EXPECT_EQ(b.totalChunk(), 0);
  ASSERT_TRUE(b.add(x, x, 13).ok());
  EXPECT_EQ(b.members()[0].chunk, 13);
  EXPECT_EQ(b.totalChunk(), 13);
}

TEST(OpenBucketTest, GatherIgnoresTheReduction) {
  // asrt_all_gather_shards has no reduce_op, so any value passes, and f16
  // moves as raw words.
  OpenBucket b;
  EXPECT_TRUE(
      b.begin(ASRT_BUCKET_ALL_GATHER_SHARDS, ASRT_DTYPE_F16, 42, 1, 2).ok());
}

TEST(OpenBucketTest, MisuseIsAnError) {
  float x = 0;
  auto message = [](const Status &s) { return s.ok() ? "ok" : s.message(); };
  OpenBucket b;
  EXPECT_EQ(message(b.add(&x, &x, 1)),
            "no bucket is open; call asrt_bucket_begin before adding tensors");
  EXPECT_EQ(message(b.close()), "no bucket is open; asrt_bucket_end closes "
                                "the bucket asrt_bucket_begin opened");
  EXPECT_EQ(message(b.begin(3, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 1, 2)),
            "kind 3 is not an asrt_bucket_kind; expected 0 (all_reduce), 1 "
            "(all_gather_shards) or 2 (reduce_scatter_shards)");
  EXPECT_EQ(message(b.begin(ASRT_BUCKET_ALL_GATHER_SHARDS, 9, 0, 1, 2)),
            "dtype 9 is not an asrt_dtype; expected 0..5 (f32, i32, bf16, "
            "f16, i64, u16)");
  EXPECT_EQ(message(b.begin(ASRT_BUCKET_ALL_REDUCE, ASRT_DTYPE_I32,
                            ASRT_REDUCE_AVG, 1, 2)),
            "all_reduce bucket: avg of i32 would truncate; average only f32 "
            "or bf16 (or use sum)");
  EXPECT_EQ(message(b.begin(ASRT_BUCKET_REDUCE_SCATTER_SHARDS, ASRT_DTYPE_F16,
                            ASRT_REDUCE_SUM, 1, 2)),
            "reduce_scatter_shards bucket: reductions of f16 are not "
            "supported; reduce f32, i32, i64 or bf16");
  EXPECT_EQ(message(b.begin(ASRT_BUCKET_ALL_REDUCE, ASRT_DTYPE_F32, 7, 1, 2)),
            "all_reduce bucket: reduce_op 7 is not an asrt_reduce_op; "
            "expected 0 (sum), 1 (avg), 2 (max) or 3 (min)");
  EXPECT_FALSE(b.isOpen()) << "a refused begin opens nothing";

  ASSERT_TRUE(
      b.begin(ASRT_BUCKET_ALL_REDUCE, ASRT_DTYPE_BF16, ASRT_REDUCE_SUM, 1, 2)
          .ok());
  EXPECT_EQ(message(b.close()),
            "the open all_reduce bucket (bf16 over grid_axes_mask 1, 0 "
            "members) is empty; add at least one tensor with asrt_bucket_add "
            "before asrt_bucket_end");
  EXPECT_TRUE(b.isOpen()) << "a refused close leaves the bucket open";
  EXPECT_EQ(message(b.add(&x, &x, -2)),
            "member 0 of the open all_reduce bucket (bf16 over grid_axes_mask "
            "1, 0 members): numel -2 is negative; expected 0 or more "
            "elements");
  EXPECT_EQ(message(b.add(&x, nullptr, 5)),
            "member 0 of the open all_reduce bucket (bf16 over grid_axes_mask "
            "1, 0 members): receive buffer is null for 5 elements");
  EXPECT_TRUE(b.add(nullptr, nullptr, 0).ok()) << "empty members need no "
                                                  "buffers";
  EXPECT_EQ(message(b.add(nullptr, &x, 1)),
            "member 1 of the open all_reduce bucket (bf16 over grid_axes_mask "
            "1, 1 member): send buffer is null for 1 elements");
  EXPECT_EQ(message(b.begin(ASRT_BUCKET_ALL_GATHER_SHARDS, ASRT_DTYPE_F32,
                            ASRT_REDUCE_SUM, 2, 2)),
            "a bucket is already open: the open all_reduce bucket (bf16 over "
            "grid_axes_mask 1, 1 member); end it with asrt_bucket_end (or "
            "issue it with asrt_bucket_start) before beginning another");
  EXPECT_EQ(b.kind(), ASRT_BUCKET_ALL_REDUCE) << "the open bucket survives";
}

TEST(OpenBucketTest, PackBufferIsChecked) {
  float x[8] = {};
  char pack[64];
  auto message = [](const Status &s) { return s.ok() ? "ok" : s.message(); };
  OpenBucket b;
  EXPECT_EQ(message(b.packInto(pack, 64)),
            "no bucket is open; call asrt_bucket_begin before giving it a "
            "pack buffer");
  // Two members of 3 and 5 f32 over 2 ranks: 2 * (2 + 3) elements, 40 bytes.
  ASSERT_TRUE(
      b.begin(ASRT_BUCKET_ALL_REDUCE, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 1, 2)
          .ok());
  ASSERT_TRUE(b.add(x, x, 3).ok());
  ASSERT_TRUE(b.add(x, x, 5).ok());
  EXPECT_EQ(b.packedBytes(), 40);
  EXPECT_EQ(message(b.packInto(nullptr, 40)),
            "the pack buffer of the open all_reduce bucket (f32 over "
            "grid_axes_mask 1, 2 members) is null for 40 bytes; expected a "
            "buffer of at least the packed size");
  EXPECT_EQ(message(b.packInto(pack, -1)),
            "the pack buffer of the open all_reduce bucket (f32 over "
            "grid_axes_mask 1, 2 members) is -1 bytes; expected a buffer of "
            "at least the packed size");
  ASSERT_TRUE(b.packInto(pack, 36).ok());
  EXPECT_EQ(message(b.close()),
            "the pack buffer of the open all_reduce bucket (f32 over "
            "grid_axes_mask 1, 2 members) has 36 bytes; packing 2 members "
            "over 2 ranks takes 40 (group size x the members' chunks x the "
            "element size)");
  EXPECT_TRUE(b.isOpen()) << "a refused close leaves the bucket open";
  ASSERT_TRUE(b.packInto(pack, 40).ok());
  ASSERT_TRUE(b.close().ok());
  EXPECT_EQ(b.packBuffer(), pack);
  // The next bucket packs into the runtime's scratch unless told otherwise;
  // a group of one packs nothing, so any buffer will do.
  ASSERT_TRUE(
      b.begin(ASRT_BUCKET_ALL_REDUCE, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 0, 1)
          .ok());
  EXPECT_EQ(b.packBuffer(), nullptr);
  ASSERT_TRUE(b.add(x, x, 8).ok());
  ASSERT_TRUE(b.packInto(pack, 0).ok());
  EXPECT_TRUE(b.close().ok());
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

TEST(NoCommTest, FlatShardsAreAGroupOfOne) {
  asrt_context ctx;
  float full[5] = {1, 2, 3, 4, 5};
  float shard[6], back[6];
  std::fill(shard, shard + 6, kGuard);
  std::fill(back, back + 6, kGuard);
  asrt_shard_of(&ctx, ASRT_DTYPE_F32, full, shard, 5, 1);
  EXPECT_EQ(std::vector<float>(shard, shard + 6),
            (std::vector<float>{1, 2, 3, 4, 5, kGuard}));
  asrt_all_gather_shards(&ctx, ASRT_DTYPE_F32, shard, back, 5, 1);
  EXPECT_EQ(std::vector<float>(back, back + 6),
            (std::vector<float>{1, 2, 3, 4, 5, kGuard}));
  std::fill(shard, shard + 6, kGuard);
  asrt_reduce_scatter_shards(&ctx, ASRT_DTYPE_F32, full, shard, 5,
                             ASRT_REDUCE_AVG, 1);
  EXPECT_EQ(std::vector<float>(shard, shard + 6),
            (std::vector<float>{1, 2, 3, 4, 5, kGuard}));
  // An empty tensor is nothing to do, even with null buffers.
  asrt_all_gather_shards(&ctx, ASRT_DTYPE_F32, nullptr, nullptr, 0, 1);
  Stats::Snapshot s = ctx.stats->snapshot();
  EXPECT_EQ(s.collectives[int(CollectiveKind::AllGather)].calls, 2);
  EXPECT_EQ(s.collectives[int(CollectiveKind::AllGather)].bytesSent, 0);
  EXPECT_EQ(s.collectives[int(CollectiveKind::ReduceScatter)].calls, 1);
  EXPECT_EQ(s.collectives[int(CollectiveKind::ReduceScatter)].bytesSent, 0);
  EXPECT_EQ(s.ops.at("shard_of").calls, 1);
  EXPECT_EQ(s.ops.at("all_gather_shards").calls, 2);
  EXPECT_EQ(s.ops.at("reduce_scatter_shards").calls, 1);
}

TEST(NoCommTest, BucketsCopy) {
  // Without a Comm every group is this rank alone: each member's result is
  // its input, the counters count one call of 0 bytes per bucket.
  asrt_context ctx;
  float a[3] = {1, 2, 3}, b[1] = {4};
  float ra[4] = {0, 0, 0, kGuard}, rb[2] = {0, kGuard};
  for (int32_t kind : {ASRT_BUCKET_ALL_REDUCE, ASRT_BUCKET_ALL_GATHER_SHARDS,
                       ASRT_BUCKET_REDUCE_SCATTER_SHARDS}) {
    std::fill(ra, ra + 3, 0.0f);
    rb[0] = 0;
    asrt_bucket_begin(&ctx, kind, ASRT_DTYPE_F32, ASRT_REDUCE_AVG, 1);
    asrt_bucket_add(&ctx, a, ra, 3);
    asrt_bucket_add(&ctx, nullptr, nullptr, 0);
    asrt_bucket_add(&ctx, b, rb, 1);
    asrt_bucket_end(&ctx);
    EXPECT_EQ(std::vector<float>(ra, ra + 4),
              (std::vector<float>{1, 2, 3, kGuard}))
        << bucketKindName(kind);
    EXPECT_EQ(std::vector<float>(rb, rb + 2), (std::vector<float>{4, kGuard}))
        << bucketKindName(kind);
  }
  // In place.
  asrt_bucket_begin(&ctx, ASRT_BUCKET_ALL_REDUCE, ASRT_DTYPE_F32,
                    ASRT_REDUCE_SUM, 1);
  asrt_bucket_add(&ctx, a, a, 3);
  asrt_bucket_end(&ctx);
  EXPECT_EQ(a[2], 3.0f);
  Stats::Snapshot s = ctx.stats->snapshot();
  EXPECT_EQ(s.collectives[int(CollectiveKind::AllReduce)].calls, 2);
  EXPECT_EQ(s.collectives[int(CollectiveKind::AllGather)].calls, 1);
  EXPECT_EQ(s.collectives[int(CollectiveKind::ReduceScatter)].calls, 1);
  for (const CollectiveStats &c : s.collectives)
    EXPECT_EQ(c.bytesSent, 0);
  EXPECT_EQ(s.ops.at("bucket_all_reduce").calls, 2);
  EXPECT_EQ(s.ops.at("bucket_all_gather_shards").calls, 1);
  EXPECT_EQ(s.ops.at("bucket_reduce_scatter_shards").calls, 1);
}

TEST(NoCommTest, AsyncBucketsCopy) {
  // A group of one: asynchronous buckets copy too, on the communication
  // thread, and count what blocking ones count.
  asrt_context ctx;
  float a[3] = {1, 2, 3}, b[2] = {4, 5};
  float ra[4] = {0, 0, 0, kGuard}, rb[3] = {0, 0, kGuard};
  asrt_bucket_begin(&ctx, ASRT_BUCKET_REDUCE_SCATTER_SHARDS, ASRT_DTYPE_F32,
                    ASRT_REDUCE_AVG, 1);
  asrt_bucket_add(&ctx, a, ra, 3);
  int64_t first = asrt_bucket_start(&ctx);
  asrt_bucket_begin(&ctx, ASRT_BUCKET_ALL_REDUCE, ASRT_DTYPE_F32,
                    ASRT_REDUCE_SUM, 1);
  asrt_bucket_add(&ctx, b, b, 2); // in place
  asrt_bucket_add(&ctx, nullptr, nullptr, 0);
  asrt_bucket_add(&ctx, b, rb, 2);
  int64_t second = asrt_bucket_start(&ctx);
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 2);
  asrt_wait(&ctx, second);
  asrt_wait(&ctx, first);
  EXPECT_EQ(std::vector<float>(ra, ra + 4),
            (std::vector<float>{1, 2, 3, kGuard}));
  EXPECT_EQ(std::vector<float>(b, b + 2), (std::vector<float>{4, 5}));
  EXPECT_EQ(std::vector<float>(rb, rb + 3), (std::vector<float>{4, 5, kGuard}));
  Stats::Snapshot s = ctx.stats->snapshot();
  EXPECT_EQ(s.collectives[int(CollectiveKind::AllReduce)].calls, 1);
  EXPECT_EQ(s.collectives[int(CollectiveKind::ReduceScatter)].calls, 1);
  for (const CollectiveStats &c : s.collectives)
    EXPECT_EQ(c.bytesSent, 0);
  EXPECT_EQ(s.ops.at("bucket_start").calls, 2);
  EXPECT_EQ(s.ops.at("wait").calls, 2);
  EXPECT_EQ(s.comm.asyncCalls, 2);
  EXPECT_EQ(s.comm.asyncWaits, 2);
  EXPECT_EQ(ctx.inflight->inFlight(), 0u);
}

/// Runs `misuse` in a forked child that must die with `message`. Death
/// tests and MPI mix only this way: "fast" (fork) style, since the
/// "threadsafe" style re-executes the binary, whose MPI_Init would join the
/// job as a second copy of this rank; and without the MPI abort hook in
/// the child, whose MPI_Abort would end the whole job instead of the
/// child. The child touches no MPI.
#define EXPECT_FATAL_WITHOUT_MPI(misuse, message)                              \
  do {                                                                         \
    GTEST_FLAG_SET(death_test_style, "fast");                                  \
    EXPECT_DEATH(                                                              \
        {                                                                      \
          setFatalAbortHook(nullptr);                                          \
          misuse;                                                              \
        },                                                                     \
        message);                                                              \
  } while (0)

TEST(NoCommDeathTest, BucketMisuseIsFatal) {
  asrt_context ctx;
  float x = 0;
  EXPECT_FATAL_WITHOUT_MPI(asrt_bucket_add(&ctx, &x, &x, 1),
                           "asrt_bucket_add: no bucket is open");
  EXPECT_FATAL_WITHOUT_MPI(asrt_bucket_end(&ctx),
                           "asrt_bucket_end: no bucket is open");
  EXPECT_FATAL_WITHOUT_MPI(asrt_bucket_pack_buffer(&ctx, &x, 4),
                           "asrt_bucket_pack_buffer: no bucket is open");
  EXPECT_FATAL_WITHOUT_MPI(
      {
        asrt_bucket_begin(&ctx, ASRT_BUCKET_ALL_REDUCE, ASRT_DTYPE_F32,
                          ASRT_REDUCE_SUM, 1);
        asrt_bucket_begin(&ctx, ASRT_BUCKET_ALL_REDUCE, ASRT_DTYPE_F32,
                          ASRT_REDUCE_SUM, 1);
      },
      "asrt_bucket_begin: a bucket is already open");
  EXPECT_FATAL_WITHOUT_MPI(
      {
        asrt_bucket_begin(&ctx, ASRT_BUCKET_ALL_GATHER_SHARDS, ASRT_DTYPE_F32,
                          ASRT_REDUCE_SUM, 1);
        asrt_bucket_end(&ctx);
      },
      "asrt_bucket_end: the open all_gather_shards bucket .* is empty");
  EXPECT_FATAL_WITHOUT_MPI(
      asrt_bucket_begin(&ctx, ASRT_BUCKET_REDUCE_SCATTER_SHARDS, ASRT_DTYPE_I64,
                        ASRT_REDUCE_AVG, 1),
      "asrt_bucket_begin: reduce_scatter_shards bucket: avg of i64 would "
      "truncate");
  EXPECT_FATAL_WITHOUT_MPI(
      asrt_bucket_begin(&ctx, 5, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 1),
      "asrt_bucket_begin: kind 5 is not an asrt_bucket_kind");
  EXPECT_FATAL_WITHOUT_MPI(
      asrt_bucket_begin(nullptr, 0, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 1),
      "asrt_bucket_begin: context is null");
  // The parent's context never opened a bucket: the misuse stayed in the
  // children.
  EXPECT_FALSE(ctx.bucket->isOpen());
}

TEST(NoCommDeathTest, AsyncMisuseIsFatal) {
  // Each child makes its own context: a communication thread started in
  // the parent would not exist in a forked child.
  float x[2] = {1, 2};
  EXPECT_FATAL_WITHOUT_MPI(
      {
        asrt_context ctx;
        asrt_wait(&ctx, 5);
      },
      "asrt_wait: handle 5 was not returned by asrt_bucket_start on this "
      "context \\(it has issued none\\)");
  EXPECT_FATAL_WITHOUT_MPI(
      {
        asrt_context ctx;
        asrt_bucket_begin(&ctx, ASRT_BUCKET_ALL_REDUCE, ASRT_DTYPE_F32,
                          ASRT_REDUCE_SUM, 1);
        asrt_bucket_add(&ctx, x, x, 2);
        int64_t handle = asrt_bucket_start(&ctx);
        asrt_wait(&ctx, handle);
        asrt_wait(&ctx, handle);
      },
      "asrt_wait: handle 1 was already waited; wait each handle exactly once");
  EXPECT_FATAL_WITHOUT_MPI(
      {
        asrt_context ctx;
        asrt_bucket_begin(&ctx, ASRT_BUCKET_ALL_REDUCE, ASRT_DTYPE_F32,
                          ASRT_REDUCE_SUM, 1);
        asrt_bucket_add(&ctx, x, x, 2);
        asrt_wait(&ctx, asrt_bucket_start(&ctx) + 1);
      },
      "asrt_wait: handle 2 was not returned by asrt_bucket_start on this "
      "context \\(its handles are 1..1\\)");
  EXPECT_FATAL_WITHOUT_MPI(
      {
        asrt_context ctx;
        asrt_bucket_start(&ctx);
      },
      "asrt_bucket_start: no bucket is open; asrt_bucket_start closes the "
      "bucket asrt_bucket_begin opened");
  EXPECT_FATAL_WITHOUT_MPI(
      {
        asrt_context ctx;
        asrt_bucket_begin(&ctx, ASRT_BUCKET_REDUCE_SCATTER_SHARDS,
                          ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 1);
        asrt_bucket_start(&ctx);
      },
      "asrt_bucket_start: the open reduce_scatter_shards bucket .* is empty; "
      "add at least one tensor with asrt_bucket_add before asrt_bucket_start");
  EXPECT_FATAL_WITHOUT_MPI(asrt_bucket_start(nullptr),
                           "asrt_bucket_start: context is null");
  EXPECT_FATAL_WITHOUT_MPI(asrt_wait(nullptr, 1), "asrt_wait: context is null");
}

// ---- On the world
// -------------------------------------------------------------

class WorldTest : public ::testing::Test {
protected:
  void SetUp() override {
    rank = worldRank();
    n = worldSize();
    comm = createMpiComm({n});
    // The comm.mpi_np*_staged runs: every collective through host copies,
    // as a GPU's memory goes to an MPI that cannot read it.
    if (const char *staged = std::getenv("ASRT_COMM_TEST_STAGED");
        staged && std::string(staged) == "1")
      comm = stageThroughHost(std::move(comm), *ctx.device);
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

/// CPU seconds this process (every thread) has used.
double processCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval &t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

/// Runs `wait` on rank 0 while the other ranks join it `lateBy` late, and
/// returns rank 0's CPU time over that wait as a share of its wall time
/// (0 elsewhere).
template <typename Wait> double cpuShareOfALateWait(int rank, Wait wait) {
  const auto lateBy = std::chrono::milliseconds(1500);
  if (rank != 0) {
    std::this_thread::sleep_for(lateBy);
    wait();
    return 0;
  }
  auto begin = std::chrono::steady_clock::now();
  double cpuBegin = processCpuSeconds();
  wait();
  double wall = std::chrono::duration<double>(
                    std::chrono::steady_clock::now() - begin)
                    .count();
  double cpu = processCpuSeconds() - cpuBegin;
  EXPECT_GE(wall, 1.0) << "rank 0 did not wait for the late ranks";
  return cpu / wall;
}

// A rank whose peer is late (or hung, until the collective timeout) waits
// without spinning: in a step's collective its communication thread polls
// with pauses, and so does the control plane's exchange between steps.
// OpenMPI's blocking calls would keep a core busy the whole time. A share
// of CPU time, not a duration: a loaded machine only lowers it.
TEST_F(WorldTest, WaitingForALatePeerLeavesTheCpuIdle) {
  if (n == 1)
    GTEST_SKIP() << "needs a peer";
  float value = 1, sum = 0;
  double collective = cpuShareOfALateWait(rank, [&] {
    asrt_all_reduce(&ctx, &value, &sum, 1, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 1);
  });
  EXPECT_FLOAT_EQ(sum, static_cast<float>(n));
  EXPECT_LT(collective, 0.5) << "all_reduce";

  std::unique_ptr<ControlPlane> control = createMpiControl(nullptr, nullptr);
  std::vector<std::string> all;
  double exchange = cpuShareOfALateWait(
      rank, [&] { all = control->allGather(std::to_string(rank)); });
  ASSERT_EQ(all.size(), static_cast<size_t>(n));
  EXPECT_EQ(all.back(), std::to_string(n - 1));
  EXPECT_LT(exchange, 0.5) << "control plane allGather";
}

// A rank whose own process is stopped past its control-plane deadline (a
// debugger, a suspended VM, a scheduler) while its peers do their part
// finds the operation complete when it resumes, and returns. It used to
// end the job blaming no one ("rank 1 still waits for the answer of ranks
// ."): MPI_Testall's "not done" predates the progress it makes. A child
// process stops rank 1 0.3 s into its allGather (timeout 1.5 s) and
// resumes it at 2.5 s; rank 0 answers at 1 s, while rank 1 is stopped.
TEST_F(WorldTest, ARankResumedPastItsDeadlineKeepsWhatItsPeersSent) {
  if (n == 1)
    GTEST_SKIP() << "needs a peer";
  std::unique_ptr<ControlPlane> control = createMpiControl(nullptr, nullptr);
  control->setTimeout(rank == 1 ? 1.5 : 60);
  std::vector<std::string> all;
  if (rank == 1) {
    pid_t stopper = fork();
    ASSERT_GE(stopper, 0);
    if (stopper == 0) {
      usleep(300000);
      kill(getppid(), SIGSTOP);
      usleep(2200000);
      kill(getppid(), SIGCONT);
      _exit(0);
    }
    all = control->allGather("late");
    waitpid(stopper, nullptr, 0);
  } else {
    if (rank == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    all = control->allGather(std::to_string(rank));
  }
  ASSERT_EQ(all.size(), static_cast<size_t>(n));
  EXPECT_EQ(all[0], "0");
  EXPECT_EQ(all[1], "late");
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

TEST_F(WorldTest, FlatShards) {
  ShardGroup g;
  g.mask = 1;
  for (int r = 0; r < n; ++r)
    g.members.push_back(r);
  g.me = rank;
  EXPECT_EQ(comm->groupIndex(1), rank);
  checkFlatShardGroup(ctx, g, rank);
}

TEST_F(WorldTest, FlatShardsOverMaskZeroAreLocal) {
  // Mask 0: every rank is its own group and holds the whole tensor.
  float full[3] = {1, 2, static_cast<float>(rank)}, shard[3] = {0, 0, 0};
  asrt_reduce_scatter_shards(&ctx, ASRT_DTYPE_F32, full, shard, 3,
                             ASRT_REDUCE_SUM, 0);
  EXPECT_EQ(shard[2], static_cast<float>(rank));
  asrt_shard_of(&ctx, ASRT_DTYPE_F32, full, shard, 3, 0);
  EXPECT_EQ(shard[1], 2.0f);
  EXPECT_EQ(bytes(CollectiveKind::ReduceScatter), 0);
}

TEST_F(WorldTest, MaskZeroIsAGroupOfOne) {
  float in = static_cast<float>(rank), out = -1;
  asrt_all_reduce(&ctx, &in, &out, 1, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 0);
  EXPECT_EQ(out, static_cast<float>(rank));
  EXPECT_EQ(bytes(CollectiveKind::AllReduce), 0);
  EXPECT_EQ(comm->groupRanks(0), std::vector<int>{rank});
}

TEST_F(WorldTest, Buckets) {
  ShardGroup g;
  g.mask = 1;
  for (int r = 0; r < n; ++r)
    g.members.push_back(r);
  g.me = rank;
  checkBucketsOnGroup(ctx, g, rank);
}

TEST_F(WorldTest, AsyncBuckets) {
  ShardGroup g;
  g.mask = 1;
  for (int r = 0; r < n; ++r)
    g.members.push_back(r);
  g.me = rank;
  checkBucketsOnGroup(ctx, g, rank, BucketMode::Async);
}

TEST_F(WorldTest, SeveralAsyncBucketsInFlight) {
  ShardGroup world;
  world.mask = 1;
  for (int r = 0; r < n; ++r)
    world.members.push_back(r);
  world.me = rank;
  ShardGroup self;
  self.mask = 0;
  self.members = {rank};
  // The world and a group of one, interleaved.
  checkSeveralInFlight(ctx, {world, self, world}, rank);
}

TEST_F(WorldTest, BucketOverMaskZeroCopies) {
  float a[2] = {1, static_cast<float>(rank)}, ra[2] = {0, 0};
  asrt_bucket_begin(&ctx, ASRT_BUCKET_REDUCE_SCATTER_SHARDS, ASRT_DTYPE_F32,
                    ASRT_REDUCE_SUM, 0);
  asrt_bucket_add(&ctx, a, ra, 2);
  asrt_bucket_end(&ctx);
  EXPECT_EQ(ra[1], static_cast<float>(rank));
  EXPECT_EQ(bytes(CollectiveKind::ReduceScatter), 0);
}

TEST_F(WorldTest, BucketOfEmptyMembersSendsNothing) {
  // Every rank adds the same empty members and skips the collective.
  asrt_bucket_begin(&ctx, ASRT_BUCKET_ALL_GATHER_SHARDS, ASRT_DTYPE_F32,
                    ASRT_REDUCE_SUM, 1);
  asrt_bucket_add(&ctx, nullptr, nullptr, 0);
  asrt_bucket_end(&ctx);
  EXPECT_EQ(bytes(CollectiveKind::AllGather), 0);
  EXPECT_EQ(
      ctx.stats->snapshot().collectives[int(CollectiveKind::AllGather)].calls,
      1);
}

TEST_F(WorldTest, BucketsPackIntoTheCallersBuffer) {
  // asrt_bucket_pack_buffer: the bucket packs into the caller's memory (the
  // step's arena in generated code), which the collective overwrites up to
  // the packed size and not past it, with the single-tensor results.
  const float kSentinel = -7.0f;
  for (BucketMode mode : {BucketMode::Blocking, BucketMode::Async}) {
    std::vector<float> a(3), b(5), wantA(3), wantB(5), gotA(3), gotB(5);
    for (int i = 0; i < 3; ++i)
      a[i] = static_cast<float>(rank * 10 + i);
    for (int i = 0; i < 5; ++i)
      b[i] = static_cast<float>(rank * 100 + i);
    asrt_all_reduce(&ctx, a.data(), wantA.data(), 3, ASRT_DTYPE_F32,
                    ASRT_REDUCE_SUM, 1);
    asrt_all_reduce(&ctx, b.data(), wantB.data(), 5, ASRT_DTYPE_F32,
                    ASRT_REDUCE_SUM, 1);
    // n * (ceil(3/n) + ceil(5/n)) elements, and one guard past them.
    const int64_t packed = n * (shardChunk(3, n) + shardChunk(5, n));
    std::vector<float> pack(packed + 1, kSentinel);
    asrt_bucket_begin(&ctx, ASRT_BUCKET_ALL_REDUCE, ASRT_DTYPE_F32,
                      ASRT_REDUCE_SUM, 1);
    asrt_bucket_add(&ctx, a.data(), gotA.data(), 3);
    asrt_bucket_add(&ctx, b.data(), gotB.data(), 5);
    asrt_bucket_pack_buffer(&ctx, pack.data(),
                            packed * static_cast<int64_t>(sizeof(float)));
    endBucket(ctx, mode);
    EXPECT_EQ(gotA, wantA);
    EXPECT_EQ(gotB, wantB);
    // A group of one copies each member and packs nothing.
    if (n > 1)
      EXPECT_EQ(pack[0], wantA[0]) << "the packed sums are in the buffer";
    EXPECT_EQ(pack[packed], kSentinel) << "nothing past the packed size";
  }
}

TEST_F(WorldTest, PackBufferOnlyGrows) {
  // Steady-state steps reuse the buffer: a request no larger than the
  // largest so far returns the same memory.
  auto pack = [&](int64_t bytes) {
    return ctx.inflight->blockingPackBuffer(*ctx.device, bytes);
  };
  void *first = pack(1000);
  EXPECT_EQ(pack(10), first);
  EXPECT_EQ(pack(1000), first);
  void *larger = pack(100000);
  EXPECT_EQ(pack(1000), larger);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(larger) % 64, 0u);
}

// gtest runs *DeathTest suites first; the fixture is WorldTest's.
using WorldDeathTest = WorldTest;

TEST_F(WorldDeathTest, BucketMaskOutsideTheGridIsFatal) {
  EXPECT_FATAL_WITHOUT_MPI(asrt_bucket_begin(&ctx, ASRT_BUCKET_ALL_REDUCE,
                                             ASRT_DTYPE_F32, ASRT_REDUCE_SUM,
                                             2),
                           "asrt_bucket_begin: grid_axes_mask 2 names an axis "
                           "the grid");
}

// ---- On a 2x2 grid
// --------------------------------------------------------------

// MPI does not say whom a collective waits for; the word waiting ranks
// send each other does. On a 2x2 grid rank 3 is 3 s late; its pair
// partner rank 2 waits for it over grid axis 1 while ranks 0 and 1,
// done with theirs, wait over the world. Asked 1.5 s in (the word goes out
// a quarter of the 2 s timeout in): rank 2 names rank 3 as missing; ranks
// 0 and 1 name rank 3 too, and rank 2 as waiting itself, not missing. The
// communicators of both masks exist first, so nobody waits in a split.
TEST(MpiWordTest, WaitingRanksNameTheMissingOneAndTheOnesWaitingElsewhere) {
  if (worldSize() != 4)
    GTEST_SKIP() << "needs 4 ranks";
  int rank = worldRank();
  std::unique_ptr<Comm> comm = createMpiComm({2, 2}, 2.0);
  EXPECT_EQ(comm->describeWait(), "");
  float one = 1, sum = 0;
  comm->allReduce(&one, &sum, 1, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 2);
  comm->allReduce(&one, &sum, 1, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 3);
  if (rank == 3)
    std::this_thread::sleep_for(std::chrono::seconds(3));
  std::string said;
  std::thread asker;
  if (rank != 3)
    asker = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      said = comm->describeWait();
    });
  comm->allReduce(&one, &sum, 1, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 2);
  EXPECT_EQ(sum, 2.0f);
  comm->allReduce(&one, &sum, 1, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 3);
  EXPECT_EQ(sum, 4.0f);
  if (asker.joinable())
    asker.join();
  const std::string why =
      " (by the word that ranks waiting longer than a quarter of the "
      "timeout send each other: MPI does not say which member a collective "
      "waits for)";
  if (rank == 2)
    EXPECT_EQ(said, "rank 3 has not reached it" + why);
  if (rank == 0)
    EXPECT_EQ(said, "rank 3 has not reached it; rank 2 waits itself, in "
                    "all_reduce #2 over grid_axes_mask 2; rank 1 waits in it "
                    "too" +
                        why);
  if (rank == 1)
    EXPECT_EQ(said, "rank 3 has not reached it; rank 2 waits itself, in "
                    "all_reduce #2 over grid_axes_mask 2; rank 0 waits in it "
                    "too" +
                        why);
  // Nothing waits now.
  EXPECT_EQ(comm->describeWait(), "");
  MPI_Barrier(MPI_COMM_WORLD);
}

// The board of words NCCL's members post under mpirun (ControlPlane::
// waitWords), which MpiComm's words travel on too: each rank reads every
// other's latest word, a word taken back (empty) reads as none, and rank 3,
// which neither posts nor reads, holds nobody up (its posts never come, the
// sends to it stay open until the board ends).
TEST(MpiWordBoardTest, EachRankReadsEveryOthersLatestWord) {
  if (worldSize() != 4)
    GTEST_SKIP() << "needs 4 ranks";
  int rank = worldRank();
  MPI_Comm comm;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
  {
    MpiWordBoard board(comm, 3);
    // Polls until `want` holds or 10 s have passed; the last words read.
    auto readUntil = [&](auto want) {
      std::vector<std::string> words;
      auto deadline =
          std::chrono::steady_clock::now() + std::chrono::seconds(10);
      do {
        Expected<std::vector<std::string>> read = board.read();
        EXPECT_TRUE(read) << read.message();
        if (!read)
          return words;
        words = std::move(*read);
        if (want(words))
          break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      } while (std::chrono::steady_clock::now() < deadline);
      return words;
    };
    if (rank != 3) {
      board.post("old " + std::to_string(rank));
      board.post("word " + std::to_string(rank));
      std::vector<std::string> words =
          readUntil([](const std::vector<std::string> &w) {
            return w[0] == "word 0" && w[1] == "word 1" && w[2] == "word 2";
          });
      EXPECT_EQ(words,
                (std::vector<std::string>{"word 0", "word 1", "word 2", ""}));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 2)
      board.post("");
    if (rank != 3) {
      std::vector<std::string> words = readUntil(
          [](const std::vector<std::string> &w) { return w[2].empty(); });
      EXPECT_EQ(words, (std::vector<std::string>{"word 0", "word 1", "", ""}));
    }
    EXPECT_STREQ(board.how(), "send each other over MPI");
  }
  MPI_Comm_free(&comm);
  MPI_Barrier(MPI_COMM_WORLD);
}

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

TEST_F(Grid2x2Test, FlatShardsWithinAGroup) {
  for (int32_t mask : {1, 2}) {
    ShardGroup g;
    g.mask = mask;
    g.members = comm->groupRanks(mask);
    // Mask 1 (axis 0): index c0; mask 2 (axis 1): index c1.
    g.me = mask == 1 ? rank / 2 : rank % 2;
    EXPECT_EQ(comm->groupIndex(mask), g.me) << "mask " << mask;
    checkFlatShardGroup(ctx, g, rank);
  }
  // The whole grid: four shards, in rank order.
  ShardGroup all;
  all.mask = 3;
  all.members = {0, 1, 2, 3};
  all.me = rank;
  checkFlatShardGroup(ctx, all, rank);
}

TEST_F(Grid2x2Test, BucketsWithinAGroup) {
  for (int32_t mask : {1, 2}) {
    ShardGroup g;
    g.mask = mask;
    g.members = comm->groupRanks(mask);
    g.me = mask == 1 ? rank / 2 : rank % 2;
    checkBucketsOnGroup(ctx, g, rank);
  }
}

TEST_F(Grid2x2Test, AsyncBucketsWithinAGroup) {
  for (int32_t mask : {1, 2}) {
    ShardGroup g;
    g.mask = mask;
    g.members = comm->groupRanks(mask);
    g.me = mask == 1 ? rank / 2 : rank % 2;
    checkBucketsOnGroup(ctx, g, rank, BucketMode::Async);
  }
}

TEST_F(Grid2x2Test, AsyncBucketsOfDifferentGroupsInFlight) {
  // Buckets over axis 0, axis 1 and the whole grid in flight together.
  std::vector<ShardGroup> groups;
  for (int32_t mask : {1, 2, 3}) {
    ShardGroup g;
    g.mask = mask;
    g.members = comm->groupRanks(mask);
    g.me = comm->groupIndex(mask);
    groups.push_back(g);
  }
  checkSeveralInFlight(ctx, groups, rank);
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
