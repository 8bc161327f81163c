//===- NestingDepth.h - refuse MLIR nested deeper than the parser can -*- C++
//-*-===//
//
// MLIR's parser recurses once per nested region, attribute, type or
// parenthesis, with no depth limit of its own: `module {` five thousand
// times overflows the main thread's stack (a SIGSEGV, not a diagnostic).
// The tools therefore measure the nesting of the input's brackets before
// they parse it and refuse input deeper than kMaxMlirNesting, naming the
// place. Reliability.md ("Hostile input to the compiler") says why this
// and not a bigger stack.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_TOOLS_COMMON_NESTINGDEPTH_H
#define AUTOSHARD_TOOLS_COMMON_NESTINGDEPTH_H

#include "LongLineDiagnostics.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <optional>
#include <string>

namespace autoshard::tools {

/// The deepest bracket nesting the tools parse. A training step nests a
/// handful of levels (module, function, a region or two, an attribute's
/// list of lists); the parser overflows the default 8 MiB stack at a few
/// thousand, and under the fuzzer's AddressSanitizer at well under that.
inline constexpr unsigned kMaxMlirNesting = 256;

/// The offset of the first opening bracket of `text` that lies more than
/// `limit` levels deep, or nullopt. `{ [ ( <` open and the matching `} ] )
/// >` close; brackets inside strings and `//` comments do not count, nor
/// does the `>` of `->`. A closer that does not match the innermost open
/// bracket is ignored (the parser stops there with its own error), so the
/// measure never falls below the depth the parser reaches.
inline std::optional<size_t> findTooDeepNesting(llvm::StringRef text,
                                                unsigned limit) {
  llvm::SmallString<64> open;
  for (size_t i = 0, e = text.size(); i < e; ++i) {
    char c = text[i];
    if (c == '"') {
      for (++i; i < e && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
      continue;
    }
    if (c == '/' && i + 1 < e && text[i + 1] == '/') {
      i = text.find('\n', i);
      if (i == llvm::StringRef::npos)
        break;
      continue;
    }
    if (c == '-' && i + 1 < e && text[i + 1] == '>') {
      ++i;
      continue;
    }
    char closer = c == '{'   ? '}'
                  : c == '[' ? ']'
                  : c == '(' ? ')'
                  : c == '<' ? '>'
                             : 0;
    if (closer) {
      if (open.size() == limit)
        return i;
      open.push_back(closer);
    } else if (!open.empty() && c == open.back()) {
      open.pop_back();
    }
  }
  return std::nullopt;
}

/// The error for a `buffer` nested more than kMaxMlirNesting levels deep,
/// located at its first too deep bracket as the parser locates its errors
/// (with an excerpt of the line: such input is often one long line); or
/// nullopt when the nesting is within the limit.
inline std::optional<std::string>
describeTooDeepNesting(const llvm::MemoryBuffer &buffer) {
  llvm::StringRef text = buffer.getBuffer();
  std::optional<size_t> at = findTooDeepNesting(text, kMaxMlirNesting);
  if (!at)
    return std::nullopt;
  size_t lineStart = text.rfind('\n', *at);
  lineStart = lineStart == llvm::StringRef::npos ? 0 : lineStart + 1;
  auto line = static_cast<unsigned>(text.take_front(*at).count('\n') + 1);
  auto column = static_cast<unsigned>(*at - lineStart + 1);
  llvm::StringRef lineText = text.drop_front(lineStart).take_until(
      [](char c) { return c == '\n' || c == '\r'; });
  Excerpt excerpt =
      excerptLine(lineText, column, std::min(lineText.size(), kLongLine));
  return (buffer.getBufferIdentifier() + ":" + llvm::Twine(line) + ":" +
          llvm::Twine(column) + ": error: brackets nest more than " +
          llvm::Twine(kMaxMlirNesting) +
          " levels deep here (each of { [ ( < opens a level); the parser "
          "recurses once per level and would overflow its stack, so the "
          "input is refused. A training step nests a handful of levels\n" +
          excerpt.text + "\n" + excerpt.caret + "\n")
      .str();
}

} // namespace autoshard::tools

#endif // AUTOSHARD_TOOLS_COMMON_NESTINGDEPTH_H
