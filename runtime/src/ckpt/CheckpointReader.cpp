// Reading a sharded checkpoint: its MANIFEST, file checks, any element range.
#include "ckpt/CheckpointReader.h"
#include "ckpt/AtomicFile.h"
#include "ckpt/Checksum.h"
#include "ckpt/Layout.h"
#include "core/Dtype.h"
#include "io/RegularFile.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace autoshard::rt {

namespace {

std::string quoted(const std::string &text) { return "'" + text + "'"; }

/// Reads `bytes` bytes at `offset` of the open file `fd` (named `path`).
Status readAt(int fd, const std::string &path, uint64_t offset, size_t bytes,
              char *out) {
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = ::pread(fd, out + done, bytes - done,
                        static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return Error("cannot read " + quoted(path) + ": " + std::strerror(errno));
    if (n == 0)
      return Error("checkpoint file " + quoted(path) +
                   " is truncated: it ends "
                   "before byte " +
                   std::to_string(offset + bytes));
    done += static_cast<size_t>(n);
  }
  return Status::success();
}

} // namespace

Expected<CheckpointReader> CheckpointReader::open(const std::string &dir) {
  std::string path = dir + "/" + kCheckpointManifestName;
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 && errno == ENOENT)
    return Error("checkpoint " + quoted(dir) + " is incomplete: it has no " +
                 kCheckpointManifestName +
                 " (a save that was interrupted before its last write)");
  Expected<std::string> text = readWholeFile(path);
  if (!text)
    return Error(text.message());
  return fromText(dir, *text);
}

Expected<CheckpointReader>
CheckpointReader::fromText(const std::string &dir,
                           const std::string &manifestText) {
  Expected<CheckpointManifest> parsed = parseCheckpointManifest(
      manifestText, dir + "/" + kCheckpointManifestName);
  if (!parsed)
    return Error(parsed.message());
  CheckpointReader reader;
  reader.dir = dir;
  reader.contents = std::move(*parsed);
  return reader;
}

Status CheckpointReader::checkFiles() const {
  for (const CheckpointFile &file : contents.files) {
    std::string path = dir + "/" + file.name;
    struct stat info;
    if (::stat(path.c_str(), &info) != 0)
      return Error("checkpoint file " + quoted(path) + " is missing (" +
                   std::strerror(errno) + "); the MANIFEST lists it with " +
                   std::to_string(file.bytes) + " bytes");
    if (!S_ISREG(info.st_mode))
      return Error(
          notRegularFileMessage(path, "checkpoint file", info.st_mode));
    auto size = static_cast<uint64_t>(info.st_size);
    if (size != file.bytes)
      return Error("checkpoint file " + quoted(path) + " has " +
                   std::to_string(size) + " bytes but the MANIFEST records " +
                   std::to_string(file.bytes) +
                   (size < file.bytes ? "; it is truncated" : ""));
  }
  return Status::success();
}

Status CheckpointReader::verifyFile(const std::string &name) const {
  const CheckpointFile *file = contents.findFile(name);
  if (!file)
    return Error("checkpoint " + quoted(dir) + " lists no file " +
                 quoted(name));
  std::string path = dir + "/" + name;
  Expected<RegularFile> in = RegularFile::open(path, "checkpoint file");
  if (!in)
    return Error(in.message());
  std::vector<char> buffer(1 << 20);
  uint32_t crc = 0;
  uint64_t done = 0;
  while (done < file->bytes) {
    size_t piece = static_cast<size_t>(
        std::min<uint64_t>(buffer.size(), file->bytes - done));
    if (Status s = readAt(in->fd(), path, done, piece, buffer.data()); !s)
      return s;
    crc = crc32Update(crc, buffer.data(), piece);
    done += piece;
  }
  char extra;
  if (::pread(in->fd(), &extra, 1, static_cast<off_t>(file->bytes)) == 1)
    return Error("checkpoint file " + quoted(path) + " is longer than the " +
                 std::to_string(file->bytes) + " bytes the MANIFEST records");
  if (crc != file->crc)
    return Error("checkpoint file " + quoted(path) +
                 " is corrupt: its CRC-32 "
                 "is " +
                 formatCrc32(crc) + " but the MANIFEST records " +
                 formatCrc32(file->crc));
  return Status::success();
}

Status CheckpointReader::readRange(const std::string &name, int64_t begin,
                                   int64_t count, void *out) const {
  const CheckpointTensor *tensor = contents.findTensor(name);
  if (!tensor)
    return Error("checkpoint " + quoted(dir) + " holds no tensor " +
                 quoted(name));
  std::vector<ElementRange> ranges;
  for (const CheckpointBlock &b : tensor->blocks)
    ranges.push_back({b.begin, b.count});
  Expected<std::vector<RangePiece>> pieces = mapRange(ranges, {begin, count});
  if (!pieces)
    return Error("checkpoint " + quoted(dir) + ", tensor " + quoted(name) +
                 ": " + pieces.message());
  const int64_t size = dtypeSize(tensor->dtype);
  std::vector<char> block;
  for (const RangePiece &piece : *pieces) {
    const CheckpointBlock &b = tensor->blocks[piece.block];
    std::string path = dir + "/" + b.file;
    Expected<RegularFile> in = RegularFile::open(path, "checkpoint file");
    if (!in)
      return Error(in.message());
    // The whole block, so that its checksum covers what is used.
    block.resize(static_cast<size_t>(b.count * size));
    if (Status s = readAt(in->fd(), path, b.offset, block.size(), block.data());
        !s)
      return s;
    uint32_t crc = crc32Of(block.data(), block.size());
    if (crc != b.crc)
      return Error("checkpoint file " + quoted(path) +
                   " is corrupt: the "
                   "block of " +
                   quoted(name) + " at byte " + std::to_string(b.offset) +
                   " (elements [" + std::to_string(b.begin) + ", " +
                   std::to_string(b.begin + b.count) + ")) has CRC-32 " +
                   formatCrc32(crc) + " but the MANIFEST records " +
                   formatCrc32(b.crc));
    std::memcpy(static_cast<char *>(out) + piece.outOffset * size,
                block.data() + piece.blockOffset * size,
                static_cast<size_t>(piece.count * size));
  }
  return Status::success();
}

} // namespace autoshard::rt
