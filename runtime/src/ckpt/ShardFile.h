// One rank's file of a sharded checkpoint: a safetensors file of its blocks.
#pragma once

#include "autoshard/rt/abi.h"
#include "ckpt/CheckpointManifest.h"
#include "core/Expected.h"

#include <cstdint>
#include <string>
#include <vector>

namespace autoshard::rt {

/// "rank-00003.safetensors": the file world rank `rank` writes.
std::string shardFileName(int rank);

/// A block to write: `count` elements of `dtype` at `data`, the global
/// elements [begin, begin + count) of tensor `name`.
struct ShardBlock {
  std::string name;
  asrt_dtype dtype = ASRT_DTYPE_F32;
  int64_t begin = 0;
  int64_t count = 0;
  const void *data = nullptr;
};

/// What writeShardFile wrote: the file's record and one block record per
/// input block (same order), for the checkpoint's MANIFEST.
struct WrittenShardFile {
  CheckpointFile file;
  std::vector<CheckpointBlock> blocks;
};

/// Writes `blocks` as `dir`/`name` with an AtomicFileWriter (temporary
/// file, fsync, rename, fsync of `dir`). The file is a safetensors file
/// any safetensors reader opens: each block a 1-D tensor named after its
/// tensor (a rank holds one block per tensor), and "__metadata__" holding
/// the format, the step, the rank and each block's global begin
/// ("NAME.begin"). Readers of checkpoints use the MANIFEST's offsets and
/// never parse this header.
Expected<WrittenShardFile>
writeShardFile(const std::string &dir, const std::string &name, int rank,
               int64_t step, const std::vector<ShardBlock> &blocks);

} // namespace autoshard::rt
