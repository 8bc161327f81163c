// Path names: resolving them, comparing them, and the identity of a file.
#include "io/Paths.h"

#include <filesystem>
#include <sys/stat.h>

namespace autoshard::rt {

namespace fs = std::filesystem;

std::string resolvedPath(const std::string &path) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  if (ec)
    return path;
  fs::path resolved = fs::weakly_canonical(absolute, ec);
  if (ec)
    return absolute.lexically_normal().string();
  std::string text = resolved.lexically_normal().string();
  // "dir/" and "dir" are one directory.
  while (text.size() > 1 && text.back() == '/')
    text.pop_back();
  return text;
}

bool isWithinDirectory(const std::string &path, const std::string &dir) {
  std::string p = resolvedPath(path), d = resolvedPath(dir);
  if (d == "/")
    return true;
  return p == d || (p.size() > d.size() && p.compare(0, d.size(), d) == 0 &&
                    p[d.size()] == '/');
}

FileIdentity identifyFile(const std::string &path) {
  FileIdentity id;
  struct stat info;
  if (::stat(path.c_str(), &info) == 0) {
    id.exists = true;
    id.device = info.st_dev;
    id.inode = info.st_ino;
  }
  id.path = resolvedPath(path);
  return id;
}

bool sameFile(const FileIdentity &a, const FileIdentity &b) {
  if (a.exists && b.exists)
    return a.device == b.device && a.inode == b.inode;
  return a.path == b.path;
}

} // namespace autoshard::rt
