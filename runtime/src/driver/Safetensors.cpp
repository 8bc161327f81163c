// Parameters as safetensors files on disk (--save-params, --load-params,
// shard-ckpt); the format itself is io/Safetensors.h.
#include "driver/Safetensors.h"
#include "io/RegularFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>

namespace autoshard::rt {

Status writeSafetensors(const std::string &path,
                        const std::vector<TensorView> &tensors,
                        const std::map<std::string, std::string> &metadata) {
  Expected<SafetensorsHead> head = safetensorsHead(tensors, metadata);
  if (!head)
    return Error("cannot write '" + path + "': " + head.message());
  Expected<std::FILE *> opened = openForWriting(path);
  if (!opened)
    return Error(opened.message());
  std::FILE *out = *opened;
  const std::string &start = head->bytes;
  bool ok = std::fwrite(start.data(), 1, start.size(), out) == start.size();
  for (size_t i = 0; i < tensors.size(); ++i) {
    uint64_t size = head->tensorBytes[i];
    ok =
        ok && (size == 0 || std::fwrite(tensors[i].data, 1, size, out) == size);
  }
  int err = errno;
  if (std::fclose(out) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok)
    return Error("cannot write '" + path + "': " + std::strerror(err));
  return Status::success();
}

Expected<SafetensorsFile> readSafetensors(const std::string &path) {
  // Opened without blocking: a FIFO (or a device) is refused, not waited on.
  Expected<RegularFile> in = RegularFile::open(path, "");
  if (!in) {
    struct stat info;
    if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode))
      return Error("'" + path + "' is " + describeFileType(info.st_mode) +
                   "; expected a safetensors file");
    return Error(in.message());
  }
  Expected<std::string> bytes = in->readAll(path);
  if (!bytes)
    return Error(bytes.message());
  return parseSafetensors(*bytes, path);
}

} // namespace autoshard::rt
