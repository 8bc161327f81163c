// Path names: resolving them, comparing them, and the identity of a file.
#pragma once

#include <string>
#include <sys/types.h>

namespace autoshard::rt {

/// `path` absolute and normal, with symbolic links resolved as far as it
/// exists (std::filesystem::weakly_canonical): two spellings of one
/// existing directory ("out/../ck", a link to "ck") give one string, and a
/// file that does not exist yet is named through its real directory.
/// `path` itself, made absolute, if even that fails.
std::string resolvedPath(const std::string &path);

/// Whether the resolved `path` is `dir` or lies below it (both resolved
/// with resolvedPath).
bool isWithinDirectory(const std::string &path, const std::string &dir);

/// Which file a path names: the device and inode when it exists (so that
/// hard links and symbolic links to one file compare equal), else its
/// resolved path (two names of a file still to be created).
struct FileIdentity {
  bool exists = false;
  dev_t device = 0;
  ino_t inode = 0;
  std::string path;
};
FileIdentity identifyFile(const std::string &path);
bool sameFile(const FileIdentity &a, const FileIdentity &b);

} // namespace autoshard::rt
