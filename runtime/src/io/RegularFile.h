// Opening an input file without blocking on a FIFO or a device.
#pragma once

#include "core/Expected.h"

#include <cstdio>
#include <string>
#include <sys/types.h>

namespace autoshard::rt {

/// A read-only descriptor of a regular file, closed when dropped.
class RegularFile {
public:
  /// Opens `path` for reading if it is a regular file. open(2) alone blocks
  /// on a FIFO until a writer comes (forever, for a run), and a device may
  /// block or never end; so the file is opened with O_NONBLOCK, which
  /// returns at once for either, checked with fstat (no race with a file
  /// swapped in between), and anything but a regular file is refused.
  /// Errors: "cannot open <what> '<path>': <reason>" and "<what> '<path>'
  /// is not a regular file (it is a FIFO)"; an empty `what` is left out.
  static Expected<RegularFile> open(const std::string &path,
                                    const std::string &what);

  RegularFile(RegularFile &&other) noexcept;
  RegularFile &operator=(RegularFile &&other) noexcept;
  RegularFile(const RegularFile &) = delete;
  RegularFile &operator=(const RegularFile &) = delete;
  ~RegularFile();

  int fd() const { return descriptor; }
  /// The rest of the file, read to its end; `path` names it in the error
  /// ("cannot read '<path>': <reason>").
  Expected<std::string> readAll(const std::string &path) const;
  /// Its size when it was opened.
  off_t size() const { return bytes; }

private:
  RegularFile(int fd, off_t size) : descriptor(fd), bytes(size) {}
  int descriptor = -1;
  off_t bytes = 0;
};

/// Opens `path` for writing ("wb": created or truncated) without blocking:
/// fopen(3) waits on a FIFO until a reader comes, forever when none does.
/// A FIFO without a reader is refused at once ("cannot create '<path>': it
/// is a FIFO with no reader; start its reader first, or give a regular
/// file"); with one, and for regular files and devices, writes proceed as
/// usual. Other errors: "cannot create '<path>': <reason>".
Expected<std::FILE *> openForWriting(const std::string &path);

/// What a file of mode `mode` (st_mode) is, for messages: "a directory",
/// "a FIFO", "a character device", "a block device", "a socket", "a
/// symbolic link", "a regular file".
std::string describeFileType(mode_t mode);

/// The usual error for a path that is not a regular file: "<what> '<path>'
/// is not a regular file (it is a FIFO)".
std::string notRegularFileMessage(const std::string &path,
                                  const std::string &what, mode_t mode);

} // namespace autoshard::rt
