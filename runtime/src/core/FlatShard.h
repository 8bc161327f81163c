// The flat-shard layout of abi.h: which block of a tensor a rank holds.
#pragma once

#include <cstdint>

namespace autoshard::rt {

/// A tensor of `numel` elements sharded over a group of `groupSize` ranks:
/// flattened, zero-padded to groupSize * chunk elements with chunk =
/// ceil(numel / groupSize), the rank with index i in the group holding
/// global elements [i * chunk, (i + 1) * chunk). The collectives, the
/// manifest checks and the driver's initialisation, loading and saving all
/// read the layout from here, so that they cannot disagree on it.
struct FlatShardLayout {
  int64_t numel = 0;
  int64_t groupSize = 1;

  /// k: elements per shard, padding included.
  int64_t chunk() const;
  /// The global index of shard i's first element, clamped to numel (a
  /// shard that holds only padding starts at the end).
  int64_t begin(int64_t i) const;
  /// Elements of shard i that lie inside the tensor: min(k, max(0, numel -
  /// i k)); the remaining k - validCount(i) are padding.
  int64_t validCount(int64_t i) const;
};

} // namespace autoshard::rt
