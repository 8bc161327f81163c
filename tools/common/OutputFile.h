//===- OutputFile.h - the tools' -o file, with errors that name it -*- C++ -*-===//
//
// LLVM's ToolOutputFile ends the process with "LLVM ERROR: IO failure on
// output stream" when a write failed (a full disk, /dev/full) and nobody
// looked. The tools look: they flush before keeping the file and name the
// path and the reason.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_TOOLS_COMMON_OUTPUTFILE_H
#define AUTOSHARD_TOOLS_COMMON_OUTPUTFILE_H

#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <memory>
#include <optional>
#include <string>

namespace autoshard::tools {

/// Opens `path` ("-" is stdout) for writing, or sets `error`; an empty path
/// is refused by name rather than opened as something else.
inline std::unique_ptr<llvm::ToolOutputFile> openOutput(llvm::StringRef path,
                                                        std::string &error) {
  if (path.empty()) {
    error = "-o needs a file name ('-' for stdout)";
    return nullptr;
  }
  return mlir::openOutputFile(path, &error);
}

/// Flushes `output` and keeps it, or returns why the file could not be
/// written (the partial file is removed).
inline std::optional<std::string> keepOutput(llvm::ToolOutputFile &output,
                                             llvm::StringRef path) {
  output.os().flush();
  if (std::error_code ec = output.os().error()) {
    output.os().clear_error();
    return "cannot write '" + path.str() + "': " + ec.message();
  }
  output.keep();
  return std::nullopt;
}

/// `path` made absolute, with its directory's symbolic links and dots
/// resolved when the directory exists: how a file that does not exist yet
/// is compared.
inline std::string resolvedPath(llvm::StringRef path) {
  llvm::SmallString<256> absolute(path);
  llvm::sys::fs::make_absolute(absolute);
  llvm::sys::path::remove_dots(absolute, /*remove_dot_dot=*/true);
  llvm::SmallString<256> directory;
  if (!llvm::sys::fs::real_path(llvm::sys::path::parent_path(absolute),
                                directory)) {
    llvm::sys::path::append(directory, llvm::sys::path::filename(absolute));
    return directory.str().str();
  }
  return absolute.str().str();
}

/// Whether paths `a` and `b` name one file: for files that exist, the same
/// device and inode (another spelling of the path, a hard or a symbolic
/// link all count); otherwise the same resolved path. "-" (a standard
/// stream) is no file.
inline bool isSameFile(llvm::StringRef a, llvm::StringRef b) {
  if (a.empty() || b.empty() || a == "-" || b == "-")
    return false;
  bool same = false;
  if (!llvm::sys::fs::equivalent(a, b, same))
    return same;
  return resolvedPath(a) == resolvedPath(b);
}

} // namespace autoshard::tools

#endif // AUTOSHARD_TOOLS_COMMON_OUTPUTFILE_H
