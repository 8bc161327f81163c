// The NCCL communicator's group splits and staging plans, run on the host:
// every rank's plan executed by a simulation of NCCL's collectives that
// also enforces NCCL's rules on overlapping buffers.
#include "nccl/NcclPlan.h"
#include "comm/Comm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <ostream>
#include <string>
#include <vector>

using namespace autoshard::rt;

namespace {

// ---- Splits ----------------------------------------------------------------

TEST(NcclSplit, ColorsAndKeysFormTheGridGroups) {
  const std::vector<std::vector<int64_t>> grids = {
      {4}, {2, 2}, {2, 3}, {3, 1, 2}, {2, 2, 2}};
  for (const std::vector<int64_t> &grid : grids) {
    int size = 1;
    for (int64_t d : grid)
      size *= static_cast<int>(d);
    for (int32_t mask = 0; mask < (1 << grid.size()); ++mask) {
      // ncclCommSplit: ranks of one color form a communicator, numbered by
      // increasing key.
      std::map<int, std::vector<std::pair<int, int>>> byColor;
      for (int r = 0; r < size; ++r) {
        NcclSplit s = ncclSplitFor(r, grid, mask);
        EXPECT_GE(s.color, 0) << "negative colors mean NCCL_SPLIT_NOCOLOR";
        byColor[s.color].push_back({s.key, r});
      }
      for (int r = 0; r < size; ++r) {
        auto members = byColor[ncclSplitFor(r, grid, mask).color];
        std::sort(members.begin(), members.end());
        std::vector<int> ranks;
        for (auto &[key, member] : members)
          ranks.push_back(member);
        std::string where = "grid of " + std::to_string(grid.size()) +
                            " axes, mask " + std::to_string(mask) + ", rank " +
                            std::to_string(r);
        EXPECT_EQ(ranks, gridGroup(r, grid, mask)) << where;
        int position = static_cast<int>(
            std::find(ranks.begin(), ranks.end(), r) - ranks.begin());
        EXPECT_EQ(position, gridGroupIndex(r, grid, mask)) << where;
      }
    }
  }
}

// ---- A host simulation of the plans ----------------------------------------

using Plan = std::vector<NcclStep>;
constexpr int64_t kB = sizeof(float);

bool isCollective(const NcclStep &s) {
  return s.kind == NcclStep::Kind::AllGather ||
         s.kind == NcclStep::Kind::ReduceScatter;
}

bool disjoint(const void *a, int64_t aCount, const void *b, int64_t bCount) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x + aCount * kB <= y || y + bCount * kB <= x;
}

const float *f(const void *p) { return static_cast<const float *>(p); }
float *f(void *p) { return static_cast<float *>(p); }

/// Runs every rank's plan: a rank's local steps in order, collectives when
/// every rank reaches them (checking they match, as NCCL needs, and that
/// their buffers are disjoint or in NCCL's in-place form).
void simulate(const std::vector<Plan> &plans) {
  const int n = static_cast<int>(plans.size());
  std::vector<size_t> next(n, 0);
  while (true) {
    for (int r = 0; r < n; ++r) {
      for (; next[r] < plans[r].size() && !isCollective(plans[r][next[r]]);
           ++next[r]) {
        const NcclStep &s = plans[r][next[r]];
        ASSERT_GE(s.count, 0);
        if (s.kind == NcclStep::Kind::Copy)
          std::memmove(s.dst, s.src, s.count * kB);
        else
          std::memset(s.dst, 0, s.count * kB);
      }
    }
    int done = 0;
    for (int r = 0; r < n; ++r)
      done += next[r] == plans[r].size();
    if (done == n)
      return;
    ASSERT_EQ(done, 0) << "some ranks have collectives left, others not";
    const NcclStep &first = plans[0][next[0]];
    for (int r = 0; r < n; ++r) {
      const NcclStep &s = plans[r][next[r]];
      ASSERT_EQ(s.kind, first.kind) << "rank " << r;
      ASSERT_EQ(s.count, first.count) << "rank " << r;
    }
    const int64_t c = first.count;
    if (first.kind == NcclStep::Kind::AllGather) {
      std::vector<std::vector<float>> sends;
      for (int r = 0; r < n; ++r) {
        const NcclStep &s = plans[r][next[r]];
        ASSERT_TRUE(s.src == f(s.dst) + r * c ||
                    disjoint(s.src, c, s.dst, n * c))
            << "all-gather buffers of rank " << r << " overlap";
        sends.emplace_back(f(s.src), f(s.src) + c);
      }
      for (int r = 0; r < n; ++r)
        for (int j = 0; j < n; ++j)
          std::copy(sends[j].begin(), sends[j].end(),
                    f(plans[r][next[r]].dst) + j * c);
    } else {
      std::vector<std::vector<float>> sends;
      for (int r = 0; r < n; ++r) {
        const NcclStep &s = plans[r][next[r]];
        ASSERT_TRUE(s.dst == f(s.src) + r * c ||
                    disjoint(s.dst, c, s.src, n * c))
            << "reduce-scatter buffers of rank " << r << " overlap";
        sends.emplace_back(f(s.src), f(s.src) + n * c);
      }
      for (int r = 0; r < n; ++r)
        for (int64_t t = 0; t < c; ++t) {
          float sum = 0;
          for (int j = 0; j < n; ++j)
            sum += sends[j][r * c + t];
          f(plans[r][next[r]].dst)[t] = sum;
        }
    }
    for (int r = 0; r < n; ++r)
      ++next[r];
  }
}

// Expectations written out here, independently of FlatShard.h.
int64_t chunkOf(int64_t numel, int64_t n) { return (numel + n - 1) / n; }
int64_t validOf(int64_t numel, int64_t n, int64_t i) {
  int64_t k = chunkOf(numel, n);
  return std::max<int64_t>(0, std::min(k, numel - i * k));
}

/// Sizes covering the layout's cases: one element, fewer elements than
/// ranks, exactly n, not divisible, divisible, and empty last blocks.
std::vector<int64_t> sizesFor(int64_t n) {
  return {1, std::max<int64_t>(1, n - 1), n, 2 * n + 1, 4 * n, 10, 3 * n - 3};
}

constexpr float kUntouched = -7.0f;
constexpr float kShardPadding = 999.0f;
constexpr int64_t kGuard = 4;

enum class Aliasing { Separate, OwnBlock, SameBuffer };
const char *aliasingName(Aliasing a) {
  switch (a) {
  case Aliasing::Separate:
    return "separate buffers";
  case Aliasing::OwnBlock:
    return "shard at its block of full";
  case Aliasing::SameBuffer:
    return "shard == full";
  }
  return "?";
}

void PrintTo(Aliasing aliasing, std::ostream *out) {
  *out << aliasingName(aliasing);
}

class ShardPlans : public testing::TestWithParam<Aliasing> {};

TEST_P(ShardPlans, AllGatherShardsRebuildsTheTensorAndWritesNothingElse) {
  const Aliasing aliasing = GetParam();
  for (int n : {2, 3, 4, 5}) {
    for (int64_t numel : sizesFor(n)) {
      const int64_t k = chunkOf(numel, n);
      std::string where = std::string(aliasingName(aliasing)) +
                          ", n=" + std::to_string(n) +
                          ", numel=" + std::to_string(numel);
      // Every rank's full (room for the padded layout and a guard, so
      // that a shard at its block stays inside), shard and scratch.
      std::vector<std::vector<float>> fulls(n), shards(n), scratches(n);
      std::vector<Plan> plans;
      std::vector<std::vector<float>> tailsBefore;
      for (int r = 0; r < n; ++r) {
        fulls[r].assign(n * k + kGuard, kUntouched);
        float *shard = nullptr;
        int64_t valid = validOf(numel, n, r);
        if (aliasing == Aliasing::Separate) {
          shards[r].assign(k, kShardPadding);
          shard = shards[r].data();
        } else if (aliasing == Aliasing::OwnBlock) {
          shard = fulls[r].data() + r * k;
          std::fill(shard, shard + k, kShardPadding);
        } else {
          shard = fulls[r].data();
        }
        for (int64_t t = 0; t < valid; ++t)
          shard[t] = static_cast<float>(r * k + t + 1);
        tailsBefore.emplace_back(fulls[r].begin() + numel, fulls[r].end());
        int64_t bytes = allGatherShardsStagingBytes(shard, fulls[r].data(),
                                                    numel, kB, n, r);
        ASSERT_EQ(bytes % kB, 0) << where;
        scratches[r].assign(bytes / kB + 1, kUntouched);
        void *scratch = bytes ? scratches[r].data() : nullptr;
        plans.push_back(planAllGatherShards(shard, fulls[r].data(), scratch,
                                            numel, kB, n, r));
      }
      simulate(plans);
      if (HasFatalFailure())
        return;
      for (int r = 0; r < n; ++r) {
        for (int64_t i = 0; i < numel; ++i)
          ASSERT_EQ(fulls[r][i], static_cast<float>(i + 1))
              << where << ", rank " << r << ", element " << i;
        std::vector<float> tail(fulls[r].begin() + numel, fulls[r].end());
        EXPECT_EQ(tail, tailsBefore[r])
            << where << ", rank " << r << ": written past numel";
      }
    }
  }
}

TEST_P(ShardPlans, ReduceScatterShardsLeavesTheValidReducedPart) {
  const Aliasing aliasing = GetParam();
  for (int n : {2, 3, 4, 5}) {
    for (int64_t numel : sizesFor(n)) {
      const int64_t k = chunkOf(numel, n);
      std::string where = std::string(aliasingName(aliasing)) +
                          ", n=" + std::to_string(n) +
                          ", numel=" + std::to_string(numel);
      std::vector<std::vector<float>> fulls(n), shards(n), scratches(n);
      std::vector<float *> shardOf(n);
      std::vector<Plan> plans;
      for (int r = 0; r < n; ++r) {
        // Room for the padded layout: a shard at its block stays inside.
        fulls[r].assign(std::max(numel, n * k) + kGuard, kUntouched);
        for (int64_t i = 0; i < numel; ++i)
          fulls[r][i] = static_cast<float>((r + 1) * (i + 1));
        if (aliasing == Aliasing::Separate) {
          shards[r].assign(k + kGuard, kUntouched);
          shardOf[r] = shards[r].data();
        } else if (aliasing == Aliasing::OwnBlock) {
          shardOf[r] = fulls[r].data() + r * k;
        } else {
          shardOf[r] = fulls[r].data();
        }
        int64_t bytes = reduceScatterShardsStagingBytes(
            fulls[r].data(), shardOf[r], numel, kB, n, r);
        scratches[r].assign(bytes / kB + 1, kUntouched);
        void *scratch = bytes ? scratches[r].data() : nullptr;
        plans.push_back(planReduceScatterShards(fulls[r].data(), shardOf[r],
                                                scratch, numel, kB, n, r));
      }
      simulate(plans);
      if (HasFatalFailure())
        return;
      const float ranksSum = static_cast<float>(n * (n + 1) / 2);
      for (int r = 0; r < n; ++r) {
        int64_t valid = validOf(numel, n, r);
        for (int64_t t = 0; t < valid; ++t)
          ASSERT_EQ(shardOf[r][t], ranksSum * static_cast<float>(r * k + t + 1))
              << where << ", rank " << r << ", element " << t;
        if (aliasing == Aliasing::Separate) {
          for (int64_t t = valid; t < k + kGuard; ++t) {
            EXPECT_EQ(shardOf[r][t], kUntouched)
                << where << ", rank " << r << ": shard written past " << valid
                << " valid elements";
          }
        }
        for (size_t i = std::max(numel, n * k); i < fulls[r].size(); ++i) {
          EXPECT_EQ(fulls[r][i], kUntouched) << where << ", rank " << r;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(, ShardPlans,
                         testing::Values(Aliasing::Separate, Aliasing::OwnBlock,
                                         Aliasing::SameBuffer),
                         [](const testing::TestParamInfo<Aliasing> &info) {
                           switch (info.param) {
                           case Aliasing::Separate:
                             return "Separate";
                           case Aliasing::OwnBlock:
                             return "OwnBlock";
                           case Aliasing::SameBuffer:
                             return "SameBuffer";
                           }
                           return "Unknown";
                         });

TEST(ShardStaging, NoneWithoutPaddingOrOverlap) {
  // The common case runs on the caller's buffers: one collective, no copy.
  std::vector<float> full(12), shard(3), scratch;
  EXPECT_EQ(
      allGatherShardsStagingBytes(shard.data(), full.data(), 12, kB, 4, 1), 0);
  Plan gather =
      planAllGatherShards(shard.data(), full.data(), nullptr, 12, kB, 4, 1);
  ASSERT_EQ(gather.size(), 1u);
  EXPECT_EQ(gather[0].kind, NcclStep::Kind::AllGather);
  EXPECT_EQ(gather[0].count, 3);
  EXPECT_EQ(
      reduceScatterShardsStagingBytes(full.data(), shard.data(), 12, kB, 4, 1),
      0);
  Plan scatter =
      planReduceScatterShards(full.data(), shard.data(), nullptr, 12, kB, 4, 1);
  ASSERT_EQ(scatter.size(), 1u);
  EXPECT_EQ(scatter[0].kind, NcclStep::Kind::ReduceScatter);
  // Padding needs the staging buffer of n k elements.
  EXPECT_EQ(
      allGatherShardsStagingBytes(shard.data(), full.data(), 10, kB, 4, 1),
      4 * 3 * kB);
}

TEST(ReduceScatterPlan, InPlaceLeavesTheBlockAtTheStart) {
  for (int n : {2, 3, 4}) {
    for (bool inPlace : {false, true}) {
      const int64_t c = 3;
      std::vector<std::vector<float>> sends(n), recvs(n);
      std::vector<Plan> plans;
      for (int r = 0; r < n; ++r) {
        sends[r].resize(n * c);
        for (int64_t i = 0; i < n * c; ++i)
          sends[r][i] = static_cast<float>((r + 1) * (i + 1));
        recvs[r].assign(c, kUntouched);
        float *recv = inPlace ? sends[r].data() : recvs[r].data();
        plans.push_back(planReduceScatter(sends[r].data(), recv, c, kB, n, r));
      }
      simulate(plans);
      if (HasFatalFailure())
        return;
      for (int r = 0; r < n; ++r) {
        const float *recv = inPlace ? sends[r].data() : recvs[r].data();
        for (int64_t t = 0; t < c; ++t)
          EXPECT_EQ(recv[t],
                    static_cast<float>(n * (n + 1) / 2 * (r * c + t + 1)))
              << "n=" << n << (inPlace ? " in place" : "") << ", rank " << r;
      }
    }
  }
}

} // namespace
