// One rank's file of a sharded checkpoint: a safetensors file of its blocks.
#include "ckpt/ShardFile.h"
#include "ckpt/AtomicFile.h"
#include "ckpt/Checksum.h"
#include "core/Dtype.h"
#include "core/Json.h"

#include <cstdio>
#include <map>
#include <set>

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
  // The safetensors header: a JSON object of the blocks and the metadata,
  // padded with spaces to a multiple of 8 bytes.
  std::map<std::string, std::string> metadata = {
      {"format", "autoshard-checkpoint-shard"},
      {"step", std::to_string(step)},
      {"rank", std::to_string(rank)}};
  std::string entries;
  std::set<std::string> names;
  uint64_t offset = 0;
  std::vector<uint64_t> bytes;
  for (const ShardBlock &b : blocks) {
    if (!names.insert(b.name).second)
      return Error("cannot write " + path + ": two blocks of tensor '" +
                   b.name + "'");
    bytes.push_back(static_cast<uint64_t>(b.count) *
                    static_cast<uint64_t>(dtypeSize(b.dtype)));
    entries += "," + jsonString(b.name) + ":{\"dtype\":\"" +
               dtypeSafetensorsName(b.dtype) + "\",\"shape\":[" +
               std::to_string(b.count) + "],\"data_offsets\":[" +
               std::to_string(offset) + "," +
               std::to_string(offset + bytes.back()) + "]}";
    offset += bytes.back();
    metadata[b.name + ".begin"] = std::to_string(b.begin);
  }
  std::string header = "{\"__metadata__\":{";
  bool first = true;
  for (const auto &[key, value] : metadata) {
    header += (first ? "" : ",") + jsonString(key) + ":" + jsonString(value);
    first = false;
  }
  header += "}" + entries + "}";
  header.append((8 - header.size() % 8) % 8, ' ');

  Expected<std::unique_ptr<AtomicFileWriter>> writer =
      AtomicFileWriter::create(path);
  if (!writer)
    return Error(writer.message());
  unsigned char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<unsigned char>(
        static_cast<uint64_t>(header.size()) >> (8 * i));
  if (Status s = (*writer)->write(length, sizeof length); !s)
    return Error(s.message());
  if (Status s = (*writer)->write(header); !s)
    return Error(s.message());

  WrittenShardFile written;
  uint64_t dataStart = 8 + header.size();
  uint64_t at = dataStart;
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
