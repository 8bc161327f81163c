// The flat-shard layout of abi.h: which block of a tensor a rank holds.
#include "core/FlatShard.h"

#include <algorithm>

namespace autoshard::rt {

int64_t FlatShardLayout::chunk() const {
  return groupSize > 0 ? (numel + groupSize - 1) / groupSize : 0;
}

int64_t FlatShardLayout::begin(int64_t i) const {
  return std::min(i * chunk(), numel);
}

int64_t FlatShardLayout::validCount(int64_t i) const {
  return std::min(chunk(), std::max<int64_t>(0, numel - i * chunk()));
}

} // namespace autoshard::rt
