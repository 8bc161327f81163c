//===- LongLineDiagnostics.h - excerpts of long source lines -*- C++ -*-===//
//
// MLIR prints a training step's signature on one line: tens of kilobytes for
// a real model. A diagnostic on the step (a batch that the ranks cannot
// split, a plan that does not fit) would echo all of it under its message.
// Like clang, the tools show an excerpt of such a line around the column
// instead; lines of ordinary length print as MLIR prints them.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_TOOLS_COMMON_LONGLINEDIAGNOSTICS_H
#define AUTOSHARD_TOOLS_COMMON_LONGLINEDIAGNOSTICS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <optional>
#include <string>

namespace autoshard::tools {

/// A line longer than this many characters is shown as an excerpt.
inline constexpr size_t kLongLine = 160;

/// The part of `line` shown for a diagnostic at 1-based `column`: at most
/// `width` characters, starting up to a third of them before the column,
/// "..." where the line goes on; and the caret line under it.
struct Excerpt {
  std::string text;
  std::string caret;
};

inline Excerpt excerptLine(llvm::StringRef line, unsigned column,
                           size_t width = 100) {
  size_t at = column > 0 ? std::min<size_t>(column - 1, line.size()) : 0;
  size_t begin = at > width / 3 ? at - width / 3 : 0;
  begin = std::min(begin, line.size() > width ? line.size() - width : 0);
  size_t end = std::min(line.size(), begin + width);
  Excerpt excerpt;
  if (begin > 0)
    excerpt.text = "...";
  excerpt.text += line.slice(begin, end).str();
  if (end < line.size())
    excerpt.text += "...";
  excerpt.caret = std::string((begin > 0 ? 3 : 0) + (at - begin), ' ') + "^";
  return excerpt;
}

/// Line `number` (1-based) of `text`, or nullopt.
inline std::optional<llvm::StringRef> lineOf(llvm::StringRef text,
                                             unsigned number) {
  if (number == 0)
    return std::nullopt;
  for (unsigned i = 1; i < number; ++i) {
    size_t newline = text.find('\n');
    if (newline == llvm::StringRef::npos)
      return std::nullopt;
    text = text.drop_front(newline + 1);
  }
  return text.take_until([](char c) { return c == '\n' || c == '\r'; });
}

/// Prints diagnostics located on a long line of `text` (the buffer named
/// `name`) with an excerpt of the line; see registerLongLineDiagnostics.
class LongLineHandler {
public:
  LongLineHandler(llvm::StringRef name, llvm::StringRef text,
                  llvm::raw_ostream &os)
      : name(name.str()), text(text), os(&os) {}

  mlir::LogicalResult operator()(mlir::Diagnostic &diag) const {
    if (!longLine(diag.getLocation()))
      return mlir::failure();
    print(diag.getLocation(), diag.getSeverity(), diag.str());
    for (mlir::Diagnostic &note : diag.getNotes())
      print(note.getLocation(), note.getSeverity(), note.str());
    os->flush();
    return mlir::success();
  }

private:
  /// The line a location points into when it is in `text`, or nullopt.
  std::optional<llvm::StringRef> lineAt(mlir::FileLineColLoc file) const {
    if (!file || file.getFilename().getValue() != name)
      return std::nullopt;
    return lineOf(text, file.getLine());
  }

  std::optional<llvm::StringRef> longLine(mlir::Location loc) const {
    std::optional<llvm::StringRef> line =
        lineAt(loc->findInstanceOf<mlir::FileLineColLoc>());
    if (!line || line->size() <= kLongLine)
      return std::nullopt;
    return line;
  }

  static llvm::StringRef label(mlir::DiagnosticSeverity severity) {
    switch (severity) {
    case mlir::DiagnosticSeverity::Error:
      return "error";
    case mlir::DiagnosticSeverity::Warning:
      return "warning";
    case mlir::DiagnosticSeverity::Note:
      return "note";
    case mlir::DiagnosticSeverity::Remark:
      return "remark";
    }
    return "error";
  }

  void print(mlir::Location loc, mlir::DiagnosticSeverity severity,
             const std::string &message) const {
    auto file = loc->findInstanceOf<mlir::FileLineColLoc>();
    if (file)
      *os << file.getFilename().getValue() << ":" << file.getLine() << ":"
          << file.getColumn() << ": ";
    *os << label(severity) << ": " << message << "\n";
    std::optional<llvm::StringRef> line = lineAt(file);
    if (!line)
      return;
    // Short lines as MLIR prints them: the whole line and a caret.
    Excerpt excerpt = line->size() > kLongLine
                          ? excerptLine(*line, file.getColumn())
                          : excerptLine(*line, file.getColumn(), line->size());
    *os << excerpt.text << "\n" << excerpt.caret << "\n";
  }

  std::string name;
  llvm::StringRef text;
  llvm::raw_ostream *os;
};

/// From now on, diagnostics on `context` located on a line longer than
/// kLongLine in `text` (the buffer named `name`, which must outlive the
/// context's last diagnostic) are printed to `os` with an excerpt; every
/// other diagnostic goes to the handlers registered before. Register it
/// after the SourceMgr handler, and not under -verify-diagnostics or with
/// split input files (their handlers must see every diagnostic, or number
/// the lines of each split).
inline mlir::DiagnosticEngine::HandlerID
registerLongLineDiagnostics(mlir::MLIRContext *context, llvm::StringRef name,
                            llvm::StringRef text,
                            llvm::raw_ostream &os = llvm::errs()) {
  return context->getDiagEngine().registerHandler(
      LongLineHandler(name, text, os));
}

} // namespace autoshard::tools

#endif // AUTOSHARD_TOOLS_COMMON_LONGLINEDIAGNOSTICS_H
