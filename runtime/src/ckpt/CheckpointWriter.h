// Assembling a checkpoint: each rank's blocks and the MANIFEST that lists them.
#pragma once

#include "ckpt/CheckpointManifest.h"
#include "ckpt/Layout.h"
#include "ckpt/ShardFile.h"
#include "io/Manifest.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace autoshard::rt {

/// The blocks world rank `rank` writes (the assignments whose writer it is,
/// in order), their bytes found by `data(arg, begin)`: a pointer to global
/// element `begin` of argument `arg` in whatever holds it (a rank's buffer,
/// or a full tensor in a tool).
std::vector<ShardBlock> shardBlocksOfRank(
    const Manifest &manifest, const std::vector<BlockAssignment> &assignments,
    int rank,
    const std::function<const void *(const TensorSpec &, int64_t)> &data);

/// The run-level records of a checkpoint's MANIFEST.
struct CheckpointHeader {
  int64_t step = 0;
  uint64_t seed = 0;
  std::string data = "synthetic";
  /// FNV-1a-64 of the step's manifest text.
  uint64_t planHash = 0;
};

/// The MANIFEST of a checkpoint of `manifest`'s step whose ranks wrote
/// `files` (indexed by world rank; empty for a rank without blocks), from
/// `assignments` in order. Formatted with formatCheckpointManifest; the
/// result parses (the callers check that before committing it).
CheckpointManifest
describeCheckpoint(const Manifest &manifest,
                   const std::vector<BlockAssignment> &assignments,
                   const std::vector<std::optional<WrittenShardFile>> &files,
                   const CheckpointHeader &header);

} // namespace autoshard::rt
