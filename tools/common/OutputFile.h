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

} // namespace autoshard::tools

#endif // AUTOSHARD_TOOLS_COMMON_OUTPUTFILE_H
