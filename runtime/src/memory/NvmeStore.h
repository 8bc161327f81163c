// The NVMe store: one file per memory=nvme argument, removed when it ends.
#pragma once

#include "core/Expected.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace autoshard::rt {

/// Where one rank keeps its memory=nvme arguments (ZeRO-Infinity): a
/// directory of its own under the --offload-dir the user gave,
/// `PARENT/autoshard-offload-<pid>-rank<R>-XXXXXX` (mkdtemp, so that two
/// runs never share one), with one file per argument, `arg<I>-<name>.bin`,
/// holding the argument's local tensor. Reads and writes move whole tensors
/// with pread/pwrite through the page cache (no O_DIRECT yet).
///
/// The store owns its files: its destructor closes and removes them and the
/// directory, so every way the driver returns cleans up; fatal() does it
/// too (addFatalCleanupHook) on the rank that fails. A process killed by a
/// signal leaves its directory behind, recognisable by its name.
///
/// Not thread-safe for adding; reads and writes of different arguments may
/// run concurrently (each file has its own descriptor).
class NvmeStore {
public:
  /// Checks that `parent` is an existing, writable directory and makes the
  /// store's directory in it. Errors name the path and the system's reason.
  static Expected<std::unique_ptr<NvmeStore>> create(const std::string &parent,
                                                     int rank);
  ~NvmeStore();
  NvmeStore(const NvmeStore &) = delete;
  NvmeStore &operator=(const NvmeStore &) = delete;

  /// Creates the file of argument `index` (named after `name`) holding the
  /// `bytes` bytes at `init`.
  Status add(int index, std::string_view name, const void *init, int64_t bytes);

  /// Whether argument `index` has a file here.
  bool holds(int index) const { return files.count(index) != 0; }
  /// The size of argument `index`'s file; -1 when it has none.
  int64_t bytesOf(int index) const;
  /// The name `add` was given for argument `index` ("" when none).
  const std::string &nameOf(int index) const;
  /// The arguments with files, in increasing order.
  std::vector<int> indices() const;
  /// The bytes of every file together: what this rank keeps on disk.
  int64_t totalBytes() const;

  /// Reads the whole tensor of argument `index` into `dst` / writes it from
  /// `src`. `bytes` must be its size. Errors (no such argument, another
  /// size, an I/O error, a short read or write) name the file and the
  /// reason; a failed write may leave the file half written.
  Status read(int index, void *dst, int64_t bytes) const;
  Status write(int index, const void *src, int64_t bytes);
  /// The checks read and write make before any I/O (argument `index` has
  /// a file of `bytes` bytes), with the same errors: for a caller that
  /// reports misuse before it hands the I/O to another thread.
  Status check(int index, int64_t bytes) const;

  /// The store's own directory, and the path of argument `index`'s file.
  const std::string &directory() const { return dir; }
  std::string pathOf(int index) const;

  /// The file name of an argument: `arg<I>-<name>.bin`, with every
  /// character outside [A-Za-z0-9_.-] of the name replaced by '_'.
  static std::string fileName(int index, std::string_view name);

  /// Closes and removes every file and the directory; later calls do
  /// nothing. The destructor calls it. Returns the first failure to remove
  /// something (its path and reason); success otherwise.
  Status remove();

private:
  explicit NvmeStore(std::string dir) : dir(std::move(dir)) {}

  struct File {
    std::string name;
    std::string path;
    int fd = -1;
    int64_t bytes = 0;
  };
  Status checkAccess(int index, int64_t bytes, const File *&file) const;

  std::string dir;
  std::map<int, File> files;
  bool removed = false;
};

/// Whether `path` is an existing directory this process may create files
/// in: the check NvmeStore::create makes first. The error names the path
/// and says what is wrong ("does not exist", "is not a directory", "is not
/// writable") with the system's reason.
Status checkWritableDirectory(const std::string &path);

} // namespace autoshard::rt
