// The Gloo communicator: ranks as threads on 127.0.0.1, each with its own
// TCP control plane and Gloo pairs, checked against sums computed here.
#include "comm/GlooComm.h"
#include "comm/Rendezvous.h"
#include "core/Dtype.h"
#include "core/FlatShard.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace autoshard::rt;

namespace {

/// Runs `body(comm)` on `size` ranks arranged as `grid`, each a thread with
/// its own control plane and Gloo communicator, and fails the test with
/// any rank's setup error. gtest's EXPECTs are thread-safe.
void onRanks(const std::vector<int64_t> &grid,
             const std::function<void(Comm &)> &body,
             double timeoutSeconds = 60, bool endWithBarrier = true) {
  int size = 1;
  for (int64_t d : grid)
    size *= static_cast<int>(d);
  Expected<TcpListener> listener = TcpListener::open(0, "127.0.0.1");
  ASSERT_TRUE(listener) << listener.message();
  int port = listener->port();
  std::mutex mutex;
  std::vector<std::string> errors;
  auto rank = [&](int r, std::optional<TcpListener> own) {
    LaunchEnv env;
    env.rank = r;
    env.worldSize = size;
    env.localRank = r;
    env.localWorldSize = size;
    env.masterAddr = "127.0.0.1";
    env.masterPort = port;
    Expected<TcpGroup> group =
        r == 0 ? TcpGroup::accept(std::move(*own), size)
               : TcpGroup::connect("127.0.0.1", port, r, size);
    if (!group) {
      std::lock_guard<std::mutex> lock(mutex);
      errors.push_back(group.message());
      return;
    }
    std::unique_ptr<ControlPlane> control =
        createTcpControl(std::move(*group), env);
    control->setTimeout(timeoutSeconds);
    Expected<std::unique_ptr<Comm>> comm =
        createGlooComm(*control, grid, "127.0.0.1");
    if (!comm) {
      std::lock_guard<std::mutex> lock(mutex);
      errors.push_back(comm.message());
      return;
    }
    body(**comm);
    if (endWithBarrier)
      (*comm)->barrier();
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < size; ++r)
    threads.emplace_back(rank, r, std::nullopt);
  rank(0, std::move(*listener));
  for (std::thread &t : threads)
    t.join();
  for (const std::string &e : errors)
    ADD_FAILURE() << e;
}

/// Rank r's value of element i: distinct per rank and element, exact in
/// float and bf16 sums of a few ranks.
float valueOf(int r, int64_t i) {
  return static_cast<float>((r + 1) * 4 + (i % 7)) * 0.5f;
}

float sumOver(const std::vector<int> &ranks, int64_t i) {
  float s = 0;
  for (int r : ranks)
    s += valueOf(r, i);
  return s;
}

class GlooCommTest : public testing::TestWithParam<int> {};

TEST_P(GlooCommTest, AllReduceF32SumAvgMaxMin) {
  int n = GetParam();
  onRanks({n}, [&](Comm &comm) {
    std::vector<int> all = comm.groupRanks(1);
    // Counts of none, below, at and above the group size: empty ring
    // blocks too.
    for (int64_t count : {int64_t(0), int64_t(1), int64_t(n), int64_t(1000)}) {
      std::vector<float> send(count), recv(count);
      for (int64_t i = 0; i < count; ++i)
        send[i] = valueOf(comm.rank(), i);
      comm.allReduce(send.data(), recv.data(), count, ASRT_DTYPE_F32,
                     ASRT_REDUCE_SUM, 1);
      for (int64_t i = 0; i < count; ++i)
        ASSERT_EQ(recv[i], sumOver(all, i)) << "count " << count << " i " << i;
      // In place, averaged.
      comm.allReduce(send.data(), send.data(), count, ASRT_DTYPE_F32,
                     ASRT_REDUCE_AVG, 1);
      for (int64_t i = 0; i < count; ++i)
        ASSERT_EQ(send[i], sumOver(all, i) / n);
    }
    std::vector<float> mine(5, static_cast<float>(comm.rank())), out(5);
    comm.allReduce(mine.data(), out.data(), 5, ASRT_DTYPE_F32, ASRT_REDUCE_MAX,
                   1);
    EXPECT_EQ(out[4], static_cast<float>(n - 1));
    comm.allReduce(mine.data(), out.data(), 5, ASRT_DTYPE_F32, ASRT_REDUCE_MIN,
                   1);
    EXPECT_EQ(out[0], 0.0f);
  });
}

TEST_P(GlooCommTest, AllReduceIntegersAndBf16) {
  int n = GetParam();
  onRanks({n}, [&](Comm &comm) {
    std::vector<int64_t> big(7, (int64_t(1) << 40) + comm.rank());
    comm.allReduce(big.data(), big.data(), 7, ASRT_DTYPE_I64, ASRT_REDUCE_SUM,
                   1);
    EXPECT_EQ(big[6], n * (int64_t(1) << 40) + n * (n - 1) / 2);
    std::vector<int32_t> small(3, -comm.rank());
    comm.allReduce(small.data(), small.data(), 3, ASRT_DTYPE_I32,
                   ASRT_REDUCE_MIN, 1);
    EXPECT_EQ(small[0], -(n - 1));
    // bf16: words combined as floats; sums of halves are exact.
    std::vector<uint16_t> h(9, floatToBf16(0.5f * (comm.rank() + 1)));
    comm.allReduce(h.data(), h.data(), 9, ASRT_DTYPE_BF16, ASRT_REDUCE_SUM, 1);
    EXPECT_EQ(bf16ToFloat(h[8]), 0.25f * n * (n + 1));
    std::vector<uint16_t> hmax(2, floatToBf16(-1.0f * comm.rank()));
    comm.allReduce(hmax.data(), hmax.data(), 2, ASRT_DTYPE_BF16,
                   ASRT_REDUCE_MAX, 1);
    EXPECT_EQ(bf16ToFloat(hmax[1]), 0.0f);
    std::vector<uint16_t> twos(4, floatToBf16(2.0f));
    comm.allReduce(twos.data(), twos.data(), 4, ASRT_DTYPE_BF16,
                   ASRT_REDUCE_AVG, 1);
    EXPECT_EQ(bf16ToFloat(twos[3]), 2.0f);
  });
}

TEST_P(GlooCommTest, AllGatherAndReduceScatter) {
  int n = GetParam();
  onRanks({n}, [&](Comm &comm) {
    int me = comm.rank();
    std::vector<int> all = comm.groupRanks(1);
    const int64_t k = 6;
    // all_gather: block r is rank r's, also in place and in 16-bit words.
    std::vector<float> send(k), gathered(n * k);
    for (int64_t i = 0; i < k; ++i)
      send[i] = valueOf(me, i);
    comm.allGather(send.data(), gathered.data(), k, ASRT_DTYPE_F32, 1);
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < k; ++i)
        ASSERT_EQ(gathered[r * k + i], valueOf(r, i));
    std::vector<uint16_t> words(n * 3, 0);
    for (int i = 0; i < 3; ++i)
      words[me * 3 + i] = static_cast<uint16_t>(0xfff0 + me);
    comm.allGather(words.data() + me * 3, words.data(), 3, ASRT_DTYPE_U16, 1);
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(words[r * 3 + 2], 0xfff0 + r);
    // reduce_scatter: rank r gets the sum of block r, and in place the
    // result lands at the buffer's start.
    std::vector<float> full(n * k), block(k);
    for (int64_t i = 0; i < n * k; ++i)
      full[i] = valueOf(me, i);
    std::vector<float> copy = full;
    comm.reduceScatter(full.data(), block.data(), k, ASRT_DTYPE_F32,
                       ASRT_REDUCE_SUM, 1);
    EXPECT_EQ(full, copy) << "the input is left alone";
    for (int64_t i = 0; i < k; ++i)
      ASSERT_EQ(block[i], sumOver(all, me * k + i));
    comm.reduceScatter(full.data(), full.data(), k, ASRT_DTYPE_F32,
                       ASRT_REDUCE_AVG, 1);
    for (int64_t i = 0; i < k; ++i)
      ASSERT_EQ(full[i], sumOver(all, me * k + i) / n);
  });
}

TEST_P(GlooCommTest, FlatShardsDropThePadding) {
  int n = GetParam();
  onRanks({n}, [&](Comm &comm) {
    int me = comm.rank();
    std::vector<int> all = comm.groupRanks(1);
    // 10 elements over 3 ranks: shards of 4, 4 and 2 valid (+2 padding).
    for (int64_t numel : {int64_t(1), int64_t(10), int64_t(37)}) {
      FlatShardLayout layout{numel, n};
      int64_t chunk = layout.chunk();
      std::vector<float> shard(chunk, -1.0f);
      for (int64_t j = 0; j < layout.validCount(me); ++j)
        shard[j] = valueOf(me, layout.begin(me) + j);
      std::vector<float> full(numel + 1, 99.0f); // one past: untouched
      comm.allGatherShards(shard.data(), full.data(), numel, ASRT_DTYPE_F32, 1);
      for (int64_t i = 0; i < numel; ++i) {
        int owner = static_cast<int>(i / chunk);
        ASSERT_EQ(full[i], valueOf(owner, i)) << "numel " << numel;
      }
      EXPECT_EQ(full[numel], 99.0f);
      std::vector<float> mine(numel), reduced(chunk, 7.0f);
      for (int64_t i = 0; i < numel; ++i)
        mine[i] = valueOf(me, i);
      comm.reduceScatterShards(mine.data(), reduced.data(), numel,
                               ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 1);
      for (int64_t j = 0; j < layout.validCount(me); ++j)
        ASSERT_EQ(reduced[j], sumOver(all, layout.begin(me) + j));
      // Padding is the caller's: left as it was.
      for (int64_t j = layout.validCount(me); j < chunk; ++j)
        EXPECT_EQ(reduced[j], 7.0f);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooCommTest, testing::Values(2, 3, 4),
                         [](const testing::TestParamInfo<int> &info) {
                           return std::to_string(info.param);
                         });

TEST(GlooCommGridTest, GroupsAreTheRanksAlongTheMaskedAxes) {
  // 2x2: mask 1 (axis 0) groups {c1, 2 + c1}; mask 2 (axis 1) groups
  // {2 c0, 2 c0 + 1}; mask 3 is the world.
  onRanks({2, 2}, [&](Comm &comm) {
    for (int32_t mask : {1, 2, 3}) {
      std::vector<int> group = comm.groupRanks(mask);
      std::vector<float> v(5, static_cast<float>(1 << comm.rank()));
      comm.allReduce(v.data(), v.data(), 5, ASRT_DTYPE_F32, ASRT_REDUCE_SUM,
                     mask);
      float expected = 0;
      for (int r : group)
        expected += static_cast<float>(1 << r);
      EXPECT_EQ(v[4], expected) << "mask " << mask << " rank " << comm.rank();
      std::vector<float> gathered(group.size());
      float mine = static_cast<float>(comm.rank());
      comm.allGather(&mine, gathered.data(), 1, ASRT_DTYPE_F32, mask);
      for (size_t i = 0; i < group.size(); ++i)
        EXPECT_EQ(gathered[i], static_cast<float>(group[i]));
    }
  });
  // An axis of extent 1 selects the same group as none: 1x3's mask 3 is
  // its mask 2.
  onRanks({1, 3}, [&](Comm &comm) {
    std::vector<float> v(2, 1.0f);
    comm.allReduce(v.data(), v.data(), 2, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 3);
    comm.allReduce(v.data(), v.data(), 2, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, 2);
    EXPECT_EQ(v[1], 9.0f);
  });
}

/// Runs an all-reduce of `count` elements on 4 ranks of which rank 1
/// joins `lateBy` late, and returns what each other rank's communicator
/// said it waited for, asked `askAfter` into its wait.
std::vector<std::string> wordsOfALateRank(int64_t count,
                                          std::chrono::milliseconds askAfter,
                                          std::chrono::milliseconds lateBy) {
  std::vector<std::string> said(4);
  onRanks({4}, [&](Comm &comm) {
    std::vector<float> v(static_cast<size_t>(count), 1.0f);
    if (comm.rank() == 1)
      std::this_thread::sleep_for(lateBy);
    std::thread asker;
    if (comm.rank() != 1)
      asker = std::thread([&, r = comm.rank()] {
        std::this_thread::sleep_for(askAfter);
        said[static_cast<size_t>(r)] = comm.describeWait();
      });
    comm.allReduce(v.data(), v.data(), count, ASRT_DTYPE_F32, ASRT_REDUCE_SUM,
                   1);
    if (asker.joinable())
      asker.join();
    EXPECT_EQ(v[0], 4.0f);
  });
  return said;
}

// The ring names the one peer it waits for, and whether that peer reached
// the collective: rank 1's successor and predecessor get nothing of it
// and say so; rank 3, whose predecessor rank 2 sent its first block, says
// rank 2 waits itself and does not blame it.
TEST(GlooCommWaitTest, TheRingSaysWhichPeerHasNotReachedTheCollective) {
  std::vector<std::string> said = wordsOfALateRank(
      8, std::chrono::milliseconds(500), std::chrono::milliseconds(2500));
  EXPECT_EQ(said[2], "gloo's ring waits to receive ring step 1 of 6 from "
                     "rank 1 (its ring predecessor): nothing of this "
                     "collective has arrived from rank 1: it has not reached "
                     "it");
  EXPECT_EQ(said[0], "gloo's ring waits for rank 1 (its ring successor) to "
                     "take its block of ring step 1 of 6: rank 1 has taken "
                     "nothing of this collective: it has not reached it");
  EXPECT_EQ(said[3], "gloo's ring waits to receive ring step 2 of 6 from "
                     "rank 2 (its ring predecessor): rank 2 reached it (1 of "
                     "its blocks arrived) and waits itself, for its own "
                     "predecessor rank 1 or one before");
}

// With fewer elements than members the first ring steps carry no data, so
// nothing having arrived from a predecessor no longer proves it absent:
// rank 3 waits for rank 2, which waits for the late rank 1, and says it
// cannot tell which, rather than blaming rank 2.
TEST(GlooCommWaitTest, EmptyEarlyStepsMakeNoAbsentPeer) {
  std::vector<std::string> said = wordsOfALateRank(
      1, std::chrono::milliseconds(500), std::chrono::milliseconds(2500));
  EXPECT_EQ(said[3], "gloo's ring waits to receive ring step 2 of 6 from "
                     "rank 2 (its ring predecessor): nothing of this "
                     "collective has arrived from rank 2, whose earlier ring "
                     "steps carried no data: it has not reached it, or waits "
                     "itself for its own predecessor rank 1");
  EXPECT_EQ(said[2], "gloo's ring waits to receive ring step 1 of 6 from "
                     "rank 1 (its ring predecessor): nothing of this "
                     "collective has arrived from rank 1: it has not reached "
                     "it");
}

// Nothing to say while no collective waits.
TEST(GlooCommWaitTest, AnIdleCommunicatorSaysNothing) {
  onRanks({2}, [](Comm &comm) { EXPECT_EQ(comm.describeWait(), ""); });
}

// A failed collective is fatal (it ends the process, as in a training
// binary): death tests, each run in a fresh process.
class GlooCommDeathTest : public testing::Test {
protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

bool exitedWithError(int status) {
  return WIFEXITED(status) && WEXITSTATUS(status) != 0;
}

TEST_F(GlooCommDeathTest, AHungPeerIsBoundedByTheCollectiveTimeout) {
  // Rank 1 never joins the all-reduce: rank 0's wait for it in the ring
  // ends at the 1 s timeout (Gloo's own bound, no CommStream here), naming
  // the collective and rank 1.
  EXPECT_EXIT(onRanks(
                  {2},
                  [](Comm &comm) {
                    std::vector<float> v(4, 1.0f);
                    if (comm.rank() == 1)
                      std::this_thread::sleep_for(std::chrono::seconds(30));
                    comm.allReduce(v.data(), v.data(), 4, ASRT_DTYPE_F32,
                                   ASRT_REDUCE_SUM, 1);
                  },
                  /*timeoutSeconds=*/1),
              exitedWithError,
              "autoshard runtime error \\(rank [0-9]\\): gloo all_reduce over "
              "the world \\(2 ranks, grid 2\\) failed: receiving from rank 1 "
              "\\(its ring predecessor\\) in ring step 1: .*[Tt]imed out.*"
              "collective timeout of 1 s");
}

TEST_F(GlooCommDeathTest, APeerThatLeavesFailsTheCollectiveAtOnce) {
  // Rank 1 closes its connections (as a dead process's are closed) while
  // rank 0 waits in an all-gather: rank 0 fails long before the 60 s
  // timeout, naming rank 1.
  EXPECT_EXIT(onRanks(
                  {2},
                  [](Comm &comm) {
                    if (comm.rank() == 1)
                      return; // destroys its communicator
                    std::this_thread::sleep_for(std::chrono::milliseconds(200));
                    std::vector<float> out(2);
                    float mine = 1.0f;
                    comm.allGather(&mine, out.data(), 1, ASRT_DTYPE_F32, 1);
                    std::this_thread::sleep_for(std::chrono::seconds(30));
                  },
                  /*timeoutSeconds=*/60, /*endWithBarrier=*/false),
              exitedWithError,
              "autoshard runtime error \\(rank [0-9]\\): gloo all_gather over "
              "the world \\(2 ranks, grid 2\\) failed: (receiving from|sending "
              "to) rank 1 \\(its ring (predecessor|successor)\\)");
}

TEST(GlooCommSetupTest, AGridThatIsNotTheWorldIsAnError) {
  Expected<TcpListener> listener = TcpListener::open(0, "127.0.0.1");
  ASSERT_TRUE(listener) << listener.message();
  Expected<TcpGroup> group = TcpGroup::accept(std::move(*listener), 1);
  ASSERT_TRUE(group) << group.message();
  std::unique_ptr<ControlPlane> control =
      createTcpControl(std::move(*group), LaunchEnv{});
  Expected<std::unique_ptr<Comm>> comm =
      createGlooComm(*control, {2}, "127.0.0.1");
  ASSERT_FALSE(comm);
  EXPECT_EQ(comm.message(), "gloo: grid 2 has 2 ranks but the job has 1");
}

TEST(GlooCommSetupTest, AnUnresolvableMasterAddrIsAnError) {
  Expected<TcpListener> listener = TcpListener::open(0, "127.0.0.1");
  ASSERT_TRUE(listener) << listener.message();
  Expected<TcpGroup> group = TcpGroup::accept(std::move(*listener), 1);
  ASSERT_TRUE(group) << group.message();
  std::unique_ptr<ControlPlane> control =
      createTcpControl(std::move(*group), LaunchEnv{});
  Expected<std::unique_ptr<Comm>> comm =
      createGlooComm(*control, {1}, "no-such-host.invalid");
  ASSERT_FALSE(comm);
  EXPECT_EQ(comm.message().rfind("cannot resolve MASTER_ADDR "
                                 "'no-such-host.invalid': ",
                                 0),
            0u)
      << comm.message();
}

} // namespace
