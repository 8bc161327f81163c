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

/// Greedy by size. Each buffer goes at the lowest offset that no placed
/// buffer alive with it covers: a scan of the placed buffers in offset
/// order, skipping those not alive with it, up to the first gap that holds
/// it. The placed buffers are one flat array sorted by offset, each with
/// its lifetime inline, so that the scan reads memory in order (a
/// std::multimap of pointers made the same scan chase a pointer and miss
/// the cache at every step: a sixth of `--strategy=auto`'s time on
/// llama2-70b).
int64_t packBySize(llvm::ArrayRef<ArenaBuffer> buffers,
                   llvm::SmallVectorImpl<int64_t> &offsets) {
  std::vector<unsigned> bySize(buffers.size());
  std::iota(bySize.begin(), bySize.end(), 0u);
  llvm::sort(bySize, [&](unsigned x, unsigned y) {
    return buffers[x].size != buffers[y].size ? buffers[x].size > buffers[y].size
                                              : x < y;
  });
  struct Placed {
    int64_t offset, end;
    int first, last;
  };
  std::vector<Placed> placed;
  placed.reserve(buffers.size());
  int64_t top = 0;
  for (unsigned i : bySize) {
    const ArenaBuffer &buffer = buffers[i];
    int64_t offset = 0;
    for (const Placed &other : placed) {
      if (other.last < buffer.first || buffer.last < other.first)
        continue;
      if (offset + buffer.size <= other.offset)
        break;
      offset = std::max(offset, other.end);
    }
    offsets[i] = offset;
    top = std::max(top, offset + buffer.size);
    auto at = std::upper_bound(
        placed.begin(), placed.end(), offset,
        [](int64_t offset, const Placed &p) { return offset < p.offset; });
    placed.insert(at, {offset, offset + buffer.size, buffer.first, buffer.last});
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
