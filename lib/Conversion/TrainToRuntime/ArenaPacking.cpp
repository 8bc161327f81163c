//===- ArenaPacking.cpp - offsets of a step's buffers in its arena --------===//

#include "autoshard/Conversion/ArenaPacking.h"

#include "llvm/ADT/STLExtras.h"
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

/// Greedy by size. Each buffer goes at the lowest offset that no placed
/// buffer alive with it covers: a scan of the placed buffers in offset
/// order, skipping those not alive with it, up to the first gap that holds
/// it. The result is the lowest free offset whatever the order of placed
/// buffers at equal offsets.
///
/// The placed buffers are kept sorted by offset in chunks of a few dozen,
/// lifetimes inline (the scan reads memory in order), and each chunk keeps
/// a summary: the blocks of positions its buffers touch and its highest
/// end. The scan skips a chunk none of whose buffers is alive with the one
/// being placed, or that lies wholly below the offset reached, and stops at
/// a chunk that starts above the gap it has found. On a step a buffer is
/// alive with a fifth of the others, mostly in a few regions of the arena,
/// so most chunks are skipped on one test; a flat scan of every placed
/// buffer was a sixth of `--strategy=auto`'s time on llama2-70b.
int64_t packBySize(llvm::ArrayRef<ArenaBuffer> buffers,
                   llvm::SmallVectorImpl<int64_t> &offsets) {
  std::vector<unsigned> bySize(buffers.size());
  std::iota(bySize.begin(), bySize.end(), 0u);
  llvm::sort(bySize, [&](unsigned x, unsigned y) {
    return buffers[x].size != buffers[y].size ? buffers[x].size > buffers[y].size
                                              : x < y;
  });
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
  for (unsigned i : bySize) {
    const ArenaBuffer &buffer = buffers[i];
    TimeMask lifetime = blocks.of(buffer.first, buffer.last);
    int64_t offset = 0;
    for (const Chunk &chunk : chunks) {
      // Every buffer from here on starts at or above the gap: none moves
      // the offset, and a scan would stop at the first one alive with it.
      if (offset + buffer.size <= chunk.placed.front().offset)
        break;
      if (chunk.highestEnd <= offset || !chunk.alive.intersects(lifetime))
        continue;
      bool found = false;
      for (const Placed &other : chunk.placed) {
        if (other.last < buffer.first || buffer.last < other.first)
          continue;
        if (offset + buffer.size <= other.offset) {
          found = true;
          break;
        }
        offset = std::max(offset, other.end);
      }
      if (found)
        break;
    }
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

int64_t autoshard::packArena(llvm::ArrayRef<ArenaBuffer> buffers,
                             llvm::SmallVectorImpl<int64_t> &offsets,
                             size_t greedyBySizeLimit) {
  offsets.assign(buffers.size(), 0);
  if (buffers.empty())
    return 0;
  return buffers.size() <= greedyBySizeLimit ? packBySize(buffers, offsets)
                                             : packFirstFit(buffers, offsets);
}
