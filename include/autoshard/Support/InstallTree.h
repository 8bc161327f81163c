//===- InstallTree.h - paths relative to the running tool -------*- C++ -*-===//
//
// An installed tree (cmake --install) keeps what its tools read beside
// bin/: the device catalogue in share/autoshard/devices, the runtime's
// libraries in lib/autoshard. A tool finds them relative to its own file,
// so that the tree works wherever it is moved or copied.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <optional>
#include <string>

namespace autoshard {

/// `relative` under the prefix of the tree the running executable belongs
/// to (the directory above its bin/), links resolved: a bin/ reached through
/// a symbolic link still names its own tree. Nullopt when the executable's
/// path cannot be read. /proc/self/exe is read directly because
/// getMainExecutable's fallback needs an argv[0].
inline std::optional<std::string> pathInInstallTree(llvm::StringRef relative) {
  llvm::SmallString<256> exe;
  if (llvm::sys::fs::real_path("/proc/self/exe", exe))
    return std::nullopt;
  llvm::SmallString<256> path = llvm::sys::path::parent_path(exe);
  llvm::sys::path::append(path, "..", relative);
  llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
  return std::string(path);
}

} // namespace autoshard
