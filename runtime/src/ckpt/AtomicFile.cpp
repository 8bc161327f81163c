// Crash-safe file writes: temporary file, fsync, rename, fsync the directory.
#include "ckpt/AtomicFile.h"
#include "ckpt/Checksum.h"
#include "io/RegularFile.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace autoshard::rt {

namespace {

std::string quoted(const std::string &text) { return "'" + text + "'"; }

std::string systemError(int err) { return std::strerror(err); }

} // namespace

Expected<std::unique_ptr<AtomicFileWriter>>
AtomicFileWriter::create(const std::string &path) {
  std::unique_ptr<AtomicFileWriter> writer(new AtomicFileWriter());
  writer->finalPath = path;
  writer->tempPath = path + ".tmp";
  writer->fd = ::open(writer->tempPath.c_str(),
                      O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (writer->fd < 0)
    return Error("cannot create " + quoted(writer->tempPath) + ": " +
                 systemError(errno));
  return writer;
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd >= 0)
    ::close(fd);
  if (!committed)
    ::unlink(tempPath.c_str());
}

Status AtomicFileWriter::write(const void *data, size_t bytes) {
  if (fd < 0)
    return Error("cannot write " + quoted(tempPath) + ": it is closed");
  const char *p = static_cast<const char *>(data);
  crcSoFar = crc32Update(crcSoFar, data, bytes);
  size_t left = bytes;
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return Error("cannot write " + quoted(tempPath) + ": " +
                   systemError(n < 0 ? errno : EIO));
    p += n;
    left -= static_cast<size_t>(n);
  }
  written += bytes;
  return Status::success();
}

Status AtomicFileWriter::commit() {
  if (fd < 0)
    return Error("cannot commit " + quoted(finalPath) + ": it is closed");
  if (::fsync(fd) != 0) {
    int err = errno;
    return Error("cannot sync " + quoted(tempPath) + ": " + systemError(err));
  }
  int result = ::close(fd);
  fd = -1;
  if (result != 0)
    return Error("cannot close " + quoted(tempPath) + ": " +
                 systemError(errno));
  if (::rename(tempPath.c_str(), finalPath.c_str()) != 0)
    return Error("cannot rename " + quoted(tempPath) + " to " +
                 quoted(finalPath) + ": " + systemError(errno));
  committed = true;
  return syncDirectory(parentDirectory(finalPath));
}

Status writeFileAtomically(const std::string &path, std::string_view contents) {
  Expected<std::unique_ptr<AtomicFileWriter>> writer =
      AtomicFileWriter::create(path);
  if (!writer)
    return writer.status();
  if (Status s = (*writer)->write(contents); !s)
    return s;
  return (*writer)->commit();
}

Status
writeOutputFile(const std::string &path,
                const std::function<Status(const std::string &)> &write) {
  std::string target = path;
  struct stat info;
  if (::stat(path.c_str(), &info) == 0) {
    if (!S_ISREG(info.st_mode))
      return write(path);
    if (char *real = ::realpath(path.c_str(), nullptr)) {
      target = real;
      std::free(real);
    }
  }
  std::string temp = target + ".tmp";
  Status written = write(temp);
  if (written)
    written = syncAndRename(temp, target);
  if (written)
    return written;
  ::unlink(temp.c_str());
  return Error(written.message() + " (the temporary file was removed; " +
               quoted(path) + " is as it was before)");
}

Status syncAndRename(const std::string &temp, const std::string &path) {
  int fd = ::open(temp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Error("cannot open " + quoted(temp) + ": " + systemError(errno));
  int result = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (result != 0)
    return Error("cannot sync " + quoted(temp) + ": " + systemError(err));
  if (::rename(temp.c_str(), path.c_str()) != 0)
    return Error("cannot rename " + quoted(temp) + " to " + quoted(path) +
                 ": " + systemError(errno));
  return syncDirectory(parentDirectory(path));
}

Status syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return Error("cannot open directory " + quoted(dir) +
                 " to sync it: " + systemError(errno));
  int result = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some file systems cannot fsync a directory (EINVAL); their renames are
  // as durable as they can make them.
  if (result != 0 && err != EINVAL)
    return Error("cannot sync directory " + quoted(dir) + ": " +
                 systemError(err));
  return Status::success();
}

std::string parentDirectory(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

Expected<std::string> readWholeFile(const std::string &path) {
  // A FIFO would block a plain open(2) until a writer came.
  Expected<RegularFile> in = RegularFile::open(path, "");
  if (!in)
    return Error(in.message());
  return in->readAll(path);
}

Status makeDirectories(const std::string &dir) {
  if (dir.empty())
    return Error("cannot create a directory with an empty name");
  for (size_t pos = 1;; ++pos) {
    pos = dir.find('/', pos);
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      return Error("cannot create directory " + quoted(prefix) + ": " +
                   systemError(errno));
    if (pos == std::string::npos)
      break;
  }
  struct stat info;
  if (::stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    return Error(quoted(dir) + " exists and is not a directory");
  return Status::success();
}

} // namespace autoshard::rt
