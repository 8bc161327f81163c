// Opening an input file without blocking on a FIFO or a device.
#include "io/RegularFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace autoshard::rt {

std::string describeFileType(mode_t mode) {
  if (S_ISREG(mode))
    return "a regular file";
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISLNK(mode))
    return "a symbolic link";
  return "of an unknown file type";
}

std::string notRegularFileMessage(const std::string &path,
                                  const std::string &what, mode_t mode) {
  return (what.empty() ? "" : what + " ") + "'" + path +
         "' is not a regular file (it is " + describeFileType(mode) + ")";
}

Expected<std::FILE *> openForWriting(const std::string &path) {
  int fd = ::open(path.c_str(),
                  O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    // POSIX: a non-blocking open for writing of a FIFO with no reader.
    if (errno == ENXIO)
      return Error("cannot create '" + path +
                   "': it is a FIFO with no reader; start its reader first, "
                   "or give a regular file");
    return Error("cannot create '" + path + "': " + std::strerror(errno));
  }
  // Blocking writes from here: a reader is there, or it is not a FIFO.
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  std::FILE *file = ::fdopen(fd, "wb");
  if (!file) {
    int err = errno;
    ::close(fd);
    return Error("cannot create '" + path + "': " + std::strerror(err));
  }
  return file;
}

Expected<RegularFile> RegularFile::open(const std::string &path,
                                        const std::string &what) {
  std::string name = (what.empty() ? "" : what + " ") + "'" + path + "'";
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return Error("cannot open " + name + ": " + std::strerror(errno));
  RegularFile file(fd, 0);
  struct stat info;
  if (::fstat(fd, &info) != 0)
    return Error("cannot read " + name + ": " + std::strerror(errno));
  if (!S_ISREG(info.st_mode))
    return Error(notRegularFileMessage(path, what, info.st_mode));
  // Reads of a regular file ignore O_NONBLOCK; cleared all the same, so
  // that no reader ever sees EAGAIN.
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  file.bytes = info.st_size;
  return std::move(file);
}

Expected<std::string> RegularFile::readAll(const std::string &path) const {
  std::string contents;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(descriptor, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return Error("cannot read '" + path + "': " + std::strerror(errno));
    if (n == 0)
      return contents;
    contents.append(buffer, static_cast<size_t>(n));
  }
}

RegularFile::RegularFile(RegularFile &&other) noexcept
    : descriptor(std::exchange(other.descriptor, -1)), bytes(other.bytes) {}

RegularFile &RegularFile::operator=(RegularFile &&other) noexcept {
  if (this != &other) {
    if (descriptor >= 0)
      ::close(descriptor);
    descriptor = std::exchange(other.descriptor, -1);
    bytes = other.bytes;
  }
  return *this;
}

RegularFile::~RegularFile() {
  if (descriptor >= 0)
    ::close(descriptor);
}

} // namespace autoshard::rt
