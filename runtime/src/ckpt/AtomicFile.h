// Crash-safe file writes: temporary file, fsync, rename, fsync the directory.
#pragma once

#include "core/Expected.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace autoshard::rt {

/// Writes a file so that, whatever happens to the process or the machine,
/// `path` either does not change or holds the whole new contents: the bytes
/// go to `path` + ".tmp", which commit() fsyncs, closes and renames over
/// `path`, and then fsyncs the directory so that the rename itself is
/// durable. Destroying an uncommitted writer removes the temporary file.
/// The writer keeps the CRC-32 and the size of what was written.
class AtomicFileWriter {
public:
  /// Creates (truncates) `path`.tmp; the error names it and the reason.
  static Expected<std::unique_ptr<AtomicFileWriter>>
  create(const std::string &path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter &) = delete;
  AtomicFileWriter &operator=(const AtomicFileWriter &) = delete;

  /// Appends `bytes` bytes (short writes and EINTR are retried).
  Status write(const void *data, size_t bytes);
  Status write(std::string_view text) {
    return write(text.data(), text.size());
  }
  /// fsync, close, rename to the final path, fsync its directory.
  Status commit();

  const std::string &path() const { return finalPath; }
  uint64_t bytesWritten() const { return written; }
  uint32_t crc() const { return crcSoFar; }

private:
  AtomicFileWriter() = default;
  std::string finalPath;
  std::string tempPath;
  int fd = -1;
  uint64_t written = 0;
  uint32_t crcSoFar = 0;
  bool committed = false;
};

/// Writes `contents` to `path` with an AtomicFileWriter.
Status writeFileAtomically(const std::string &path, std::string_view contents);

/// Writes a file a run produces at its end (--save-params, --stats-json,
/// --trace, ...) so that a write that fails (a full disk) never leaves a
/// truncated file under `path`: `write` gets the path to write, a
/// temporary `path`.tmp beside the file, which is synced and renamed over
/// `path` when `write` succeeds (syncAndRename) and removed when it fails,
/// leaving an older `path` as it was. A symbolic link is followed: its
/// target is replaced, as a plain write would have changed it. An existing
/// `path` that is not a regular file (a FIFO whose reader waits, a device
/// such as /dev/stdout) is written directly, since renaming over it would
/// take it away from its reader.
Status writeOutputFile(const std::string &path,
                       const std::function<Status(const std::string &)> &write);

/// Makes the finished file `temp` durable (fsync) and renames it to
/// `path`, then fsyncs the directory: the end of an AtomicFileWriter, for a
/// file another writer wrote.
Status syncAndRename(const std::string &temp, const std::string &path);

/// fsyncs the directory `dir`, making renames and creations in it durable.
Status syncDirectory(const std::string &dir);

/// The directory part of `path` ("." when it has none).
std::string parentDirectory(const std::string &path);

/// Reads a whole file into a string; errors name the file and the reason.
Expected<std::string> readWholeFile(const std::string &path);

/// Creates `dir` and any missing parents (mkdir -p).
Status makeDirectories(const std::string &dir);

} // namespace autoshard::rt
