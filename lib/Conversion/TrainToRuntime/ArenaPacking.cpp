//===- ArenaPacking.cpp - offsets of a step's buffers in its arena --------===//

#include "autoshard/Conversion/ArenaPacking.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cassert>
#include <map>
#include <numeric>
#include <vector>

using namespace autoshard;

namespace {

/// Blocks of program positions a lifetime is coarsened to.
constexpr unsigned kTimeBlockWords = 2, kTimeBlocks = 64 * kTimeBlockWords;

/// A set of program positions, coarsened to at most kTimeBlocks blocks of
/// equal width: two lifetimes whose masks share no bit never share a
/// position.
struct TimeMask {
  uint64_t words[kTimeBlockWords] = {};

  bool intersects(const TimeMask &other) const {
    uint64_t common = 0;
    for (unsigned i = 0; i < kTimeBlockWords; ++i)
      common |= words[i] & other.words[i];
    return common != 0;
  }
  void add(const TimeMask &other) {
    for (unsigned i = 0; i < kTimeBlockWords; ++i)
      words[i] |= other.words[i];
  }
};

/// Maps a lifetime to the blocks of positions it touches.
class TimeBlocks {
public:
  explicit TimeBlocks(int lastPosition) {
    while ((static_cast<unsigned>(lastPosition) >> shift) >= kTimeBlocks)
      ++shift;
  }
  TimeMask of(int first, int last) const {
    TimeMask mask;
    unsigned lo = static_cast<unsigned>(first) >> shift;
    unsigned hi = static_cast<unsigned>(last) >> shift;
    for (unsigned word = lo / 64; word <= hi / 64; ++word) {
      unsigned from = std::max(lo, word * 64), to = std::min(hi, word * 64 + 63);
      unsigned width = to - from + 1;
      uint64_t bits = width == 64 ? ~uint64_t(0) : (uint64_t(1) << width) - 1;
      mask.words[word] = bits << (from - word * 64);
    }
    return mask;
  }

private:
  unsigned shift = 0;
};

/// Where a packer puts a buffer among the placed ones alive with it.
enum class ArenaFit { Lowest, SmallestGap };

/// Places the buffers one by one in `order`, each where no placed buffer
/// alive with it is: at the lowest such offset (`ArenaFit::Lowest`), or in
/// the smallest gap between placed buffers alive with it that holds it,
/// else above them all (`ArenaFit::SmallestGap`, ties to the lower gap).
/// The gaps are found by a scan of the placed buffers in offset order,
/// skipping those not alive with the one being placed; the result does not
/// depend on the order of placed buffers at equal offsets.
///
/// The placed buffers are kept sorted by offset in chunks of a few dozen,
/// lifetimes inline (the scan reads memory in order), and each chunk keeps
/// a summary: the blocks of positions its buffers touch and its highest
/// end. The scan skips a chunk none of whose buffers is alive with the one
/// being placed, or that lies wholly below the offset reached, and the
/// lowest fit stops at a chunk that starts above the gap it has found. On a
/// step a buffer is alive with a fifth of the others, mostly in a few
/// regions of the arena, so most chunks are skipped on one test; a flat
/// scan of every placed buffer was a sixth of `--strategy=auto`'s time on
/// llama2-70b.
///
/// The fit is a template argument: the lowest fit is the packer every
/// step runs, and its scan stays as tight as before the other fit existed.
template <ArenaFit fit>
int64_t packInOrder(llvm::ArrayRef<ArenaBuffer> buffers,
                    llvm::ArrayRef<unsigned> order,
                    llvm::SmallVectorImpl<int64_t> &offsets) {
  int lastPosition = 0;
  for (const ArenaBuffer &buffer : buffers)
    lastPosition = std::max({lastPosition, buffer.first, buffer.last});
  TimeBlocks blocks(lastPosition);

  struct Placed {
    int64_t offset, end;
    int first, last;
  };
  struct Chunk {
    std::vector<Placed> placed; // sorted by offset, never empty
    TimeMask alive;
    int64_t highestEnd = 0;

    void summarize(const TimeBlocks &blocks) {
      alive = TimeMask();
      highestEnd = 0;
      for (const Placed &p : placed) {
        alive.add(blocks.of(p.first, p.last));
        highestEnd = std::max(highestEnd, p.end);
      }
    }
  };
  constexpr size_t kChunkSplit = 64;
  std::vector<Chunk> chunks;

  int64_t top = 0;
  for (unsigned i : order) {
    const ArenaBuffer &buffer = buffers[i];
    TimeMask lifetime = blocks.of(buffer.first, buffer.last);
    // `reached`: the highest end of the alive buffers scanned so far, so
    // the start of the gap before the next one.
    int64_t reached = 0, best = -1, bestGap = 0;
    for (const Chunk &chunk : chunks) {
      // Every buffer from here on starts at or above the gap: none moves
      // the offset, and a scan would stop at the first one alive with it.
      if constexpr (fit == ArenaFit::Lowest)
        if (reached + buffer.size <= chunk.placed.front().offset)
          break;
      if (chunk.highestEnd <= reached || !chunk.alive.intersects(lifetime))
        continue;
      for (const Placed &other : chunk.placed) {
        if (other.last < buffer.first || buffer.last < other.first)
          continue;
        int64_t gap = other.offset - reached;
        if (gap >= buffer.size) {
          if constexpr (fit == ArenaFit::Lowest) {
            best = reached;
            break;
          }
          if (best < 0 || gap < bestGap) {
            best = reached;
            bestGap = gap;
            if (gap == buffer.size)
              break;
          }
        }
        reached = std::max(reached, other.end);
      }
      if (best >= 0 && (fit == ArenaFit::Lowest || bestGap == buffer.size))
        break;
    }
    int64_t offset = best >= 0 ? best : reached;
    offsets[i] = offset;
    top = std::max(top, offset + buffer.size);

    Placed entry{offset, offset + buffer.size, buffer.first, buffer.last};
    // The last chunk that starts at or below the offset (the first if none).
    auto at = std::upper_bound(chunks.begin(), chunks.end(), offset,
                               [](int64_t offset, const Chunk &chunk) {
                                 return offset < chunk.placed.front().offset;
                               });
    if (at != chunks.begin())
      --at;
    if (at == chunks.end())
      at = chunks.emplace(at);
    Chunk &chunk = *at;
    chunk.placed.insert(
        std::upper_bound(
            chunk.placed.begin(), chunk.placed.end(), offset,
            [](int64_t offset, const Placed &p) { return offset < p.offset; }),
        entry);
    chunk.alive.add(lifetime);
    chunk.highestEnd = std::max(chunk.highestEnd, entry.end);
    if (chunk.placed.size() < kChunkSplit)
      continue;
    Chunk upper;
    upper.placed.assign(chunk.placed.begin() + kChunkSplit / 2,
                        chunk.placed.end());
    chunk.placed.resize(kChunkSplit / 2);
    chunk.summarize(blocks);
    upper.summarize(blocks);
    chunks.insert(at + 1, std::move(upper));
  }
  return top;
}

/// The bytes alive at each position, 0 to the last.
std::vector<int64_t> liveBytes(llvm::ArrayRef<ArenaBuffer> buffers) {
  int lastPosition = 0;
  for (const ArenaBuffer &buffer : buffers)
    lastPosition = std::max({lastPosition, buffer.first, buffer.last});
  std::vector<int64_t> live(lastPosition + 2, 0);
  for (const ArenaBuffer &buffer : buffers) {
    live[buffer.first] += buffer.size;
    live[buffer.last + 1] -= buffer.size;
  }
  live.pop_back();
  std::partial_sum(live.begin(), live.end(), live.begin());
  return live;
}

/// Decreasing size, ties to the longer lifetime when `longerFirst`, then to
/// the earlier buffer.
std::vector<unsigned> bySize(llvm::ArrayRef<ArenaBuffer> buffers,
                             bool longerFirst) {
  std::vector<unsigned> order(buffers.size());
  std::iota(order.begin(), order.end(), 0u);
  llvm::sort(order, [&](unsigned x, unsigned y) {
    const ArenaBuffer &a = buffers[x], &b = buffers[y];
    if (a.size != b.size)
      return a.size > b.size;
    if (longerFirst && a.last - a.first != b.last - b.first)
      return a.last - a.first > b.last - b.first;
    return x < y;
  });
  return order;
}

/// Greedy by breadth: the positions in decreasing order of the bytes alive
/// there (ties to the earlier), and at each the buffers alive there not yet
/// placed, largest first. A buffer thus comes at the busiest position of
/// its lifetime, found by a range-maximum query on a segment tree.
std::vector<unsigned> byBreadth(llvm::ArrayRef<ArenaBuffer> buffers) {
  std::vector<int64_t> live = liveBytes(buffers);
  size_t positions = live.size();
  // Leaves at [positions, 2 * positions); a node holds the busiest
  // position below it (the earlier on ties).
  std::vector<int> tree(2 * positions);
  auto busier = [&](int x, int y) {
    return live[x] != live[y] ? (live[x] > live[y] ? x : y) : std::min(x, y);
  };
  for (size_t p = 0; p < positions; ++p)
    tree[positions + p] = static_cast<int>(p);
  for (size_t node = positions - 1; node > 0; --node)
    tree[node] = busier(tree[2 * node], tree[2 * node + 1]);
  auto busiest = [&](int first, int last) {
    int result = first;
    for (size_t lo = first + positions, hi = last + positions + 1; lo < hi;
         lo /= 2, hi /= 2) {
      if (lo & 1)
        result = busier(result, tree[lo++]);
      if (hi & 1)
        result = busier(result, tree[--hi]);
    }
    return result;
  };
  std::vector<int> at(buffers.size());
  for (auto [i, buffer] : llvm::enumerate(buffers))
    at[i] = busiest(buffer.first, buffer.last);
  std::vector<unsigned> order(buffers.size());
  std::iota(order.begin(), order.end(), 0u);
  llvm::sort(order, [&](unsigned x, unsigned y) {
    if (at[x] != at[y])
      return busier(at[x], at[y]) == at[x];
    if (buffers[x].size != buffers[y].size)
      return buffers[x].size > buffers[y].size;
    return x < y;
  });
  return order;
}

/// First fit in program order, with a free list of coalesced ranges.
int64_t packFirstFit(llvm::ArrayRef<ArenaBuffer> buffers,
                     llvm::SmallVectorImpl<int64_t> &offsets) {
  struct Event {
    int position;
    bool allocated;
    unsigned buffer;
  };
  std::vector<Event> events;
  for (auto [i, buffer] : llvm::enumerate(buffers)) {
    events.push_back({buffer.first, true, static_cast<unsigned>(i)});
    events.push_back({buffer.last, false, static_cast<unsigned>(i)});
  }
  // At one position, allocations come first: an op's outputs are written
  // while its inputs are still read.
  llvm::sort(events, [](const Event &x, const Event &y) {
    if (x.position != y.position)
      return x.position < y.position;
    if (x.allocated != y.allocated)
      return x.allocated;
    return x.buffer < y.buffer;
  });
  int64_t top = 0;
  std::map<int64_t, int64_t> free; // offset -> size, coalesced
  for (const Event &event : events) {
    int64_t size = buffers[event.buffer].size;
    if (event.allocated) {
      int64_t offset = -1;
      for (auto it = free.begin(); it != free.end(); ++it)
        if (it->second >= size) {
          offset = it->first;
          if (it->second > size)
            free[offset + size] = it->second - size;
          free.erase(it);
          break;
        }
      if (offset < 0) {
        offset = top;
        if (!free.empty()) {
          auto last = std::prev(free.end());
          if (last->first + last->second == top) {
            offset = last->first;
            free.erase(last);
          }
        }
        top = offset + size;
      }
      offsets[event.buffer] = offset;
      continue;
    }
    int64_t begin = offsets[event.buffer], length = size;
    auto next = free.lower_bound(begin);
    if (next != free.end() && next->first == begin + length) {
      length += next->second;
      next = free.erase(next);
    }
    if (next != free.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == begin) {
        begin = prev->first;
        length += prev->second;
        free.erase(prev);
      }
    }
    free[begin] = length;
  }
  return top;
}

} // namespace

int64_t autoshard::packArenaWith(ArenaPacker packer,
                                 llvm::ArrayRef<ArenaBuffer> buffers,
                                 llvm::SmallVectorImpl<int64_t> &offsets) {
  offsets.assign(buffers.size(), 0);
  if (buffers.empty())
    return 0;
  switch (packer) {
  case ArenaPacker::BySize:
    return packInOrder<ArenaFit::Lowest>(
        buffers, bySize(buffers, /*longerFirst=*/false), offsets);
  case ArenaPacker::BySizeSmallestGap:
    return packInOrder<ArenaFit::SmallestGap>(
        buffers, bySize(buffers, /*longerFirst=*/true), offsets);
  case ArenaPacker::ByBreadth:
    return packInOrder<ArenaFit::Lowest>(buffers, byBreadth(buffers), offsets);
  case ArenaPacker::ByBreadthSmallestGap:
    return packInOrder<ArenaFit::SmallestGap>(buffers, byBreadth(buffers),
                                              offsets);
  case ArenaPacker::FirstFit:
    return packFirstFit(buffers, offsets);
  }
  llvm_unreachable("unknown arena packer");
}

int64_t autoshard::livePeak(llvm::ArrayRef<ArenaBuffer> buffers) {
  if (buffers.empty())
    return 0;
  std::vector<int64_t> live = liveBytes(buffers);
  return *std::max_element(live.begin(), live.end());
}

int64_t autoshard::packArena(llvm::ArrayRef<ArenaBuffer> buffers,
                             llvm::SmallVectorImpl<int64_t> &offsets,
                             size_t greedyBySizeLimit) {
  if (buffers.size() > greedyBySizeLimit)
    return packArenaWith(ArenaPacker::FirstFit, buffers, offsets);
  int64_t top = packArenaWith(ArenaPacker::BySize, buffers, offsets);
  // Holes of a percent or less are left: another packing costs about as
  // much as the first. No one packer is best on every step: the smallest
  // gap, the longer lifetime first, fits megatron-1t's DDP step with the
  // optimizer offloaded to its live peak where greedy by size leaves 6%
  // of holes, greedy by breadth at the lowest offset a small Llama's FSDP
  // step (4% by size).
  int64_t bound = livePeak(buffers);
  llvm::SmallVector<int64_t> other;
  for (ArenaPacker packer :
       {ArenaPacker::BySizeSmallestGap, ArenaPacker::ByBreadth,
        ArenaPacker::ByBreadthSmallestGap}) {
    if ((top - bound) * 100 <= top)
      break;
    int64_t otherTop = packArenaWith(packer, buffers, other);
    if (otherTop < top) {
      top = otherTop;
      offsets.swap(other);
    }
  }
  return top;
}
