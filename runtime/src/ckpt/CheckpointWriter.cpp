// Assembling a checkpoint: each rank's blocks and the MANIFEST that lists them.
#include "ckpt/CheckpointWriter.h"

#include <map>

namespace autoshard::rt {

std::vector<ShardBlock> shardBlocksOfRank(
    const Manifest &manifest, const std::vector<BlockAssignment> &assignments,
    int rank,
    const std::function<const void *(const TensorSpec &, int64_t)> &data) {
  std::vector<ShardBlock> blocks;
  for (const BlockAssignment &a : assignments) {
    if (a.writer != rank)
      continue;
    const TensorSpec &arg = manifest.args[a.arg];
    blocks.push_back(
        {arg.name, arg.dtype, a.begin, a.count, data(arg, a.begin)});
  }
  return blocks;
}

CheckpointManifest
describeCheckpoint(const Manifest &manifest,
                   const std::vector<BlockAssignment> &assignments,
                   const std::vector<std::optional<WrittenShardFile>> &files,
                   const CheckpointHeader &header) {
  CheckpointManifest m;
  m.step = header.step;
  m.seed = header.seed;
  m.data = header.data;
  m.strategy = manifest.strategy;
  m.grid = manifest.gridString();
  m.world = manifest.worldSize();
  m.planHash = header.planHash;
  m.tensors = modelSignature(manifest);
  m.modelHash = modelSignatureHash(m.tensors);
  std::map<std::string, CheckpointTensor *> byName;
  for (CheckpointTensor &t : m.tensors)
    byName[t.name] = &t;
  for (const std::optional<WrittenShardFile> &file : files)
    if (file)
      m.files.push_back(file->file);
  // Each rank's blocks are in assignment order, as shardBlocksOfRank made
  // them.
  std::vector<size_t> next(files.size());
  for (const BlockAssignment &a : assignments) {
    const std::optional<WrittenShardFile> &file =
        files[static_cast<size_t>(a.writer)];
    const CheckpointBlock &written =
        file->blocks[next[static_cast<size_t>(a.writer)]++];
    byName.at(manifest.args[a.arg].name)->blocks.push_back(written);
  }
  return m;
}

} // namespace autoshard::rt
