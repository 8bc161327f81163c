// A read-only memory mapping of a whole data file.
#pragma once

#include "core/Expected.h"

#include <cstddef>
#include <memory>
#include <string>

namespace autoshard::rt {

/// A regular file mapped read-only and shared, so that ranks on one node
/// share its pages instead of each reading a copy.
class MappedFile {
public:
  /// Maps `path`. Errors say "cannot open <what> '<path>': <reason>", or
  /// that the path is not a regular file (naming a directory as such).
  static Expected<std::unique_ptr<MappedFile>> open(const std::string &path,
                                                    const char *what);
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  const std::string &path() const { return filePath; }
  /// Null for an empty file.
  const char *data() const { return static_cast<const char *>(mapping); }
  size_t size() const { return bytes; }

private:
  MappedFile() = default;
  std::string filePath;
  void *mapping = nullptr;
  size_t bytes = 0;
};

} // namespace autoshard::rt
