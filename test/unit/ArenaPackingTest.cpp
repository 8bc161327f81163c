//===- ArenaPackingTest.cpp - packing a step's buffers into its arena -----===//

#include "autoshard/Conversion/ArenaPacking.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <map>
#include <random>
#include <vector>

using namespace autoshard;

namespace {

bool aliveTogether(const ArenaBuffer &x, const ArenaBuffer &y) {
  return x.first <= y.last && y.first <= x.last;
}

/// Every two buffers alive at one position are apart in memory, and the
/// arena holds every buffer.
void expectValid(llvm::ArrayRef<ArenaBuffer> buffers,
                 llvm::ArrayRef<int64_t> offsets, int64_t arena) {
  ASSERT_EQ(offsets.size(), buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    EXPECT_GE(offsets[i], 0);
    EXPECT_LE(offsets[i] + buffers[i].size, arena);
    for (size_t j = i + 1; j < buffers.size(); ++j)
      if (aliveTogether(buffers[i], buffers[j]))
        EXPECT_TRUE(offsets[i] + buffers[i].size <= offsets[j] ||
                    offsets[j] + buffers[j].size <= offsets[i])
            << "buffers " << i << " and " << j << " overlap";
  }
}

/// Greedy by size as the lowering first wrote it: every placed buffer in
/// offset order, those not alive with the new one skipped. The packer must
/// give the same offsets (the plans, and the generated code, stay the
/// same), only faster.
int64_t referenceBySize(llvm::ArrayRef<ArenaBuffer> buffers,
                        std::vector<int64_t> &offsets) {
  offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return buffers[x].size != buffers[y].size
               ? buffers[x].size > buffers[y].size
               : x < y;
  });
  std::multimap<int64_t, size_t> placed;
  int64_t top = 0;
  for (size_t i : order) {
    int64_t offset = 0;
    for (auto &[at, j] : placed) {
      if (!aliveTogether(buffers[i], buffers[j]))
        continue;
      if (offset + buffers[i].size <= at)
        break;
      offset = std::max(offset, at + buffers[j].size);
    }
    offsets[i] = offset;
    placed.emplace(offset, i);
    top = std::max(top, offset + buffers[i].size);
  }
  return top;
}

/// In `order`, by a scan of every placed buffer in offset order: of the
/// gaps between the placed buffers alive with the new one, the smallest
/// that holds it (the lower on ties) when `smallestGap`, else the lowest;
/// above them all if none holds it.
int64_t referenceInOrder(llvm::ArrayRef<ArenaBuffer> buffers,
                         llvm::ArrayRef<size_t> order, bool smallestGap,
                         std::vector<int64_t> &offsets) {
  offsets.assign(buffers.size(), 0);
  std::multimap<int64_t, size_t> placed;
  int64_t top = 0;
  for (size_t i : order) {
    int64_t reached = 0, best = -1, bestGap = 0;
    for (auto &[at, j] : placed) {
      if (!aliveTogether(buffers[i], buffers[j]))
        continue;
      int64_t gap = at - reached;
      if (gap >= buffers[i].size && (best < 0 || gap < bestGap)) {
        best = reached;
        bestGap = gap;
        if (!smallestGap)
          break;
      }
      reached = std::max(reached, at + buffers[j].size);
    }
    offsets[i] = best >= 0 ? best : reached;
    placed.emplace(offsets[i], i);
    top = std::max(top, offsets[i] + buffers[i].size);
  }
  return top;
}

/// The orders of the packers besides greedy by size, computed the plain
/// way.
std::vector<size_t> bySizeLongerFirst(llvm::ArrayRef<ArenaBuffer> buffers) {
  std::vector<size_t> order(buffers.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const ArenaBuffer &a = buffers[x], &b = buffers[y];
    if (a.size != b.size)
      return a.size > b.size;
    if (a.last - a.first != b.last - b.first)
      return a.last - a.first > b.last - b.first;
    return x < y;
  });
  return order;
}

std::vector<size_t> byBreadth(llvm::ArrayRef<ArenaBuffer> buffers) {
  int positions = 0;
  for (const ArenaBuffer &b : buffers)
    positions = std::max(positions, b.last + 1);
  std::vector<int64_t> live(positions, 0);
  for (const ArenaBuffer &b : buffers)
    for (int p = b.first; p <= b.last; ++p)
      live[p] += b.size;
  std::vector<int> busiest(positions);
  for (int p = 0; p < positions; ++p)
    busiest[p] = p;
  std::sort(busiest.begin(), busiest.end(), [&](int x, int y) {
    return live[x] != live[y] ? live[x] > live[y] : x < y;
  });
  std::vector<size_t> order;
  std::vector<bool> taken(buffers.size(), false);
  for (int p : busiest) {
    std::vector<size_t> here;
    for (size_t i = 0; i < buffers.size(); ++i)
      if (!taken[i] && buffers[i].first <= p && p <= buffers[i].last)
        here.push_back(i);
    std::sort(here.begin(), here.end(), [&](size_t x, size_t y) {
      return buffers[x].size != buffers[y].size
                 ? buffers[x].size > buffers[y].size
                 : x < y;
    });
    for (size_t i : here) {
      taken[i] = true;
      order.push_back(i);
    }
  }
  return order;
}

/// A step-like mix: many short-lived temporaries, some long-lived ones (a
/// forward activation read in the backward pass), sizes with ties.
std::vector<ArenaBuffer> randomBuffers(std::mt19937 &rng, int count,
                                       int positions) {
  std::uniform_int_distribution<int> at(0, positions - 1);
  std::uniform_int_distribution<int> shortLife(0, 4);
  std::uniform_int_distribution<int> kind(0, 9);
  std::uniform_int_distribution<int64_t> units(1, 32);
  std::vector<ArenaBuffer> buffers;
  for (int i = 0; i < count; ++i) {
    ArenaBuffer b;
    b.size = 64 * units(rng);
    b.first = at(rng);
    b.last = kind(rng) == 0 ? std::max(b.first, at(rng))
                            : std::min(positions - 1, b.first + shortLife(rng));
    buffers.push_back(b);
  }
  return buffers;
}

TEST(ArenaPacking, Empty) {
  llvm::SmallVector<int64_t> offsets;
  EXPECT_EQ(packArena({}, offsets), 0);
  EXPECT_TRUE(offsets.empty());
}

TEST(ArenaPacking, LargestFirstReusesWhatDied) {
  // A 4 KiB buffer at positions 0-1, then two of 1 KiB at 2-3 and one of
  // 2 KiB at 3: the later ones take the first one's place.
  std::vector<ArenaBuffer> buffers = {
      {4096, 0, 1}, {1024, 2, 3}, {1024, 2, 3}, {2048, 3, 3}};
  llvm::SmallVector<int64_t> offsets;
  int64_t arena = packArena(buffers, offsets);
  EXPECT_EQ(arena, 4096);
  EXPECT_EQ(offsets[0], 0);
  EXPECT_EQ(offsets[3], 0);
  EXPECT_EQ(offsets[1], 2048);
  EXPECT_EQ(offsets[2], 3072);
  expectValid(buffers, offsets, arena);
}

TEST(ArenaPacking, SameOffsetsAsTheScanOfEveryPlacedBuffer) {
  std::mt19937 rng(24);
  for (int round = 0; round < 40; ++round) {
    std::vector<ArenaBuffer> buffers =
        randomBuffers(rng, 50 + 30 * round, 10 + 7 * round);
    llvm::SmallVector<int64_t> offsets;
    std::vector<int64_t> expected;
    int64_t arena = packArenaWith(ArenaPacker::BySize, buffers, offsets);
    EXPECT_EQ(arena, referenceBySize(buffers, expected)) << "round " << round;
    EXPECT_EQ(std::vector<int64_t>(offsets.begin(), offsets.end()), expected)
        << "round " << round;
    EXPECT_GE(arena, livePeak(buffers));
    if (round % 8 == 0)
      expectValid(buffers, offsets, arena);
  }
}

TEST(ArenaPacking, OtherPackersSameOffsetsAsTheScanOfEveryPlacedBuffer) {
  std::mt19937 rng(25);
  for (int round = 0; round < 30; ++round) {
    std::vector<ArenaBuffer> buffers =
        randomBuffers(rng, 50 + 30 * round, 10 + 7 * round);
    for (ArenaPacker packer :
         {ArenaPacker::BySizeSmallestGap, ArenaPacker::ByBreadth,
          ArenaPacker::ByBreadthSmallestGap}) {
      llvm::SmallVector<int64_t> offsets;
      std::vector<int64_t> expected;
      int64_t arena = packArenaWith(packer, buffers, offsets);
      int64_t reference = referenceInOrder(
          buffers,
          packer == ArenaPacker::BySizeSmallestGap ? bySizeLongerFirst(buffers)
                                                   : byBreadth(buffers),
          /*smallestGap=*/packer != ArenaPacker::ByBreadth, expected);
      EXPECT_EQ(arena, reference) << "round " << round;
      EXPECT_EQ(std::vector<int64_t>(offsets.begin(), offsets.end()),
                expected)
          << "round " << round;
      EXPECT_GE(arena, livePeak(buffers));
      if (round % 8 == 0)
        expectValid(buffers, offsets, arena);
    }
  }
}

TEST(ArenaPacking, KeepsTheSmallestArena) {
  // By size, the 4 KiB buffer alive at 2-3 goes to the bottom, the one at
  // 0-2 above it, and the 2 KiB one at 0 finds no gap below 8 KiB. The
  // smallest gap, the longer lifetime first, packs the live peak (9 KiB at
  // position 0), as does greedy by breadth.
  std::vector<ArenaBuffer> buffers = {
      {4096, 2, 3}, {4096, 0, 2}, {2048, 0, 0}, {4096, 3, 4}, {3072, 0, 0}};
  llvm::SmallVector<int64_t> offsets;
  EXPECT_EQ(livePeak(buffers), 9216);
  EXPECT_EQ(packArenaWith(ArenaPacker::BySize, buffers, offsets), 10240);
  EXPECT_EQ(packArenaWith(ArenaPacker::BySizeSmallestGap, buffers, offsets),
            9216);
  expectValid(buffers, offsets, 9216);
  EXPECT_EQ(packArenaWith(ArenaPacker::ByBreadthSmallestGap, buffers, offsets),
            9216);
  expectValid(buffers, offsets, 9216);
  int64_t arena = packArena(buffers, offsets);
  EXPECT_EQ(arena, 9216);
  expectValid(buffers, offsets, arena);

  // Never larger than greedy by size, which it keeps within 1% of the
  // live peak.
  std::mt19937 rng(26);
  for (int round = 0; round < 30; ++round) {
    std::vector<ArenaBuffer> random =
        randomBuffers(rng, 50 + 30 * round, 10 + 7 * round);
    int64_t bySize = packArenaWith(ArenaPacker::BySize, random, offsets);
    llvm::SmallVector<int64_t> kept;
    int64_t best = packArena(random, kept);
    EXPECT_LE(best, bySize) << "round " << round;
    if ((bySize - livePeak(random)) * 100 <= bySize) {
      EXPECT_EQ(best, bySize) << "round " << round;
      EXPECT_EQ(kept, offsets) << "round " << round;
    }
    if (round % 8 == 0)
      expectValid(random, kept, best);
  }
}

TEST(ArenaPacking, FirstFitBeyondTheLimit) {
  std::mt19937 rng(7);
  std::vector<ArenaBuffer> buffers = randomBuffers(rng, 400, 120);
  llvm::SmallVector<int64_t> offsets;
  int64_t arena = packArena(buffers, offsets, /*greedyBySizeLimit=*/100);
  expectValid(buffers, offsets, arena);
  EXPECT_GE(arena, livePeak(buffers));
  // Program order: the first buffer allocated goes to the bottom.
  std::vector<ArenaBuffer> two = {{128, 0, 0}, {4096, 0, 1}};
  llvm::SmallVector<int64_t> twoOffsets;
  EXPECT_EQ(packArena(two, twoOffsets, /*greedyBySizeLimit=*/1), 4224);
  EXPECT_EQ(twoOffsets[0], 0);
  EXPECT_EQ(twoOffsets[1], 128);
  // By size, the larger goes to the bottom.
  EXPECT_EQ(packArena(two, twoOffsets), 4224);
  EXPECT_EQ(twoOffsets[1], 0);
}

TEST(ArenaPacking, ABufferDeadBeforeAnotherIsAllocatedSharesItsBytes) {
  // In program order, first fit gives the freed range back.
  std::vector<ArenaBuffer> buffers = {{1024, 0, 1}, {1024, 2, 3}, {512, 1, 2}};
  llvm::SmallVector<int64_t> offsets;
  EXPECT_EQ(packArena(buffers, offsets, /*greedyBySizeLimit=*/0), 1536);
  EXPECT_EQ(offsets[0], offsets[1]);
  EXPECT_EQ(packArena(buffers, offsets), 1536);
  EXPECT_EQ(offsets[0], offsets[1]);
}

} // namespace
