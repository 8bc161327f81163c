// One rank's file of a sharded checkpoint: a safetensors file of its blocks.
#include "ckpt/ShardFile.h"
#include "ckpt/AtomicFile.h"
#include "ckpt/Checksum.h"
#include "io/Safetensors.h"

#include <cstdio>
#include <map>

namespace autoshard::rt {

std::string shardFileName(int rank) {
  char name[64];
  std::snprintf(name, sizeof name, "rank-%05d.safetensors", rank);
  return name;
}

Expected<WrittenShardFile>
writeShardFile(const std::string &dir, const std::string &name, int rank,
               int64_t step, const std::vector<ShardBlock> &blocks) {
  std::string path = dir + "/" + name;
  std::map<std::string, std::string> metadata = {
      {"format", "autoshard-checkpoint-shard"},
      {"step", std::to_string(step)},
      {"rank", std::to_string(rank)}};
  std::vector<TensorView> tensors;
  for (const ShardBlock &b : blocks) {
    tensors.push_back({b.name, b.dtype, {b.count}, b.data});
    metadata[b.name + ".begin"] = std::to_string(b.begin);
  }
  Expected<SafetensorsHead> head = safetensorsHead(tensors, metadata);
  if (!head)
    return Error("cannot write " + path + ": " + head.message());
  const std::vector<uint64_t> &bytes = head->tensorBytes;

  Expected<std::unique_ptr<AtomicFileWriter>> writer =
      AtomicFileWriter::create(path);
  if (!writer)
    return Error(writer.message());
  if (Status s = (*writer)->write(head->bytes); !s)
    return Error(s.message());

  WrittenShardFile written;
  uint64_t at = head->bytes.size();
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (Status s = (*writer)->write(blocks[i].data, bytes[i]); !s)
      return Error(s.message());
    written.blocks.push_back({blocks[i].begin, blocks[i].count, name, at,
                              crc32Of(blocks[i].data, bytes[i])});
    at += bytes[i];
  }
  written.file = {name, (*writer)->bytesWritten(), (*writer)->crc()};
  if (Status s = (*writer)->commit(); !s)
    return Error(s.message());
  return written;
}

} // namespace autoshard::rt
