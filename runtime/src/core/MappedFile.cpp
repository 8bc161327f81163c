// A read-only memory mapping of a whole data file.
#include "core/MappedFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace autoshard::rt {

Expected<std::unique_ptr<MappedFile>> MappedFile::open(const std::string &path,
                                                       const char *what) {
  std::string quotedPath = "'" + path + "'";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Error(std::string("cannot open ") + what + " " + quotedPath + ": " +
                 std::strerror(errno));
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    int err = errno;
    ::close(fd);
    return Error(std::string("cannot read ") + what + " " + quotedPath + ": " +
                 std::strerror(err));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return Error(std::string(what) + " " + quotedPath +
                 " is not a regular file" +
                 (S_ISDIR(info.st_mode) ? " (it is a directory)" : ""));
  }
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->filePath = path;
  file->bytes = static_cast<size_t>(info.st_size);
  // mmap rejects a zero length; an empty file maps to nothing.
  if (file->bytes > 0) {
    void *mapping = ::mmap(nullptr, file->bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (mapping == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return Error(std::string("cannot map ") + what + " " + quotedPath + ": " +
                   std::strerror(err));
    }
    file->mapping = mapping;
  }
  ::close(fd);
  return file;
}

MappedFile::~MappedFile() {
  if (mapping)
    ::munmap(mapping, bytes);
}

} // namespace autoshard::rt
