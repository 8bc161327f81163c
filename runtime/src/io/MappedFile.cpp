// A read-only memory mapping of a whole data file.
#include "io/MappedFile.h"
#include "io/RegularFile.h"

#include <cerrno>
#include <cstring>
#include <sys/mman.h>

namespace autoshard::rt {

Expected<std::unique_ptr<MappedFile>> MappedFile::open(const std::string &path,
                                                       const char *what) {
  // Not a plain open(2): a FIFO would block it until a writer came.
  Expected<RegularFile> opened = RegularFile::open(path, what);
  if (!opened)
    return Error(opened.message());
  std::string quotedPath = "'" + path + "'";
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->filePath = path;
  file->bytes = static_cast<size_t>(opened->size());
  // mmap rejects a zero length; an empty file maps to nothing.
  if (file->bytes > 0) {
    void *mapping =
        ::mmap(nullptr, file->bytes, PROT_READ, MAP_SHARED, opened->fd(), 0);
    if (mapping == MAP_FAILED) {
      int err = errno;
      return Error(std::string("cannot map ") + what + " " + quotedPath + ": " +
                   std::strerror(err));
    }
    file->mapping = mapping;
  }
  return file;
}

MappedFile::~MappedFile() {
  if (mapping)
    ::munmap(mapping, bytes);
}

} // namespace autoshard::rt
