// Reading line-record text (the step manifest, a checkpoint's MANIFEST):
// numbered lines, fields split at single spaces, KEY=VALUE fields, numbers
// and shapes, and errors that name the line.
#pragma once

#include "core/Expected.h"

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace autoshard::rt {

/// The lines of a text, numbered from 1. Each line comes without its '\n';
/// a text that ends in '\n' has no empty line after it.
class TextLines {
public:
  explicit TextLines(std::string_view text) : text(text) {}

  /// Moves to the next line; false when there is none.
  bool next();
  std::string_view line() const { return current; }
  /// The current line's number; after the last, the last line's.
  int number() const { return lineNumber; }

private:
  std::string_view text;
  size_t pos = 0;
  std::string_view current;
  int lineNumber = 0;
};

/// "<what> line <line>: <message>", or "<what>: <message>" for line 0 (the
/// text as a whole): `what` says which text, e.g. "manifest" or
/// "checkpoint manifest 'ckpt/MANIFEST'".
Error lineError(std::string_view what, int line, const std::string &message);

/// The fields of a line split at each single space: "a  b" has an empty
/// field between a and b, which the caller may refuse.
std::vector<std::string_view> splitFields(std::string_view line);

/// "KEY=VALUE" split at its first '=': both sides non-empty, else nullopt.
std::optional<std::pair<std::string_view, std::string_view>>
splitKeyValue(std::string_view field);

/// Whether `field` is "KEY=VALUE" with the key `key`; if so, `value` is its
/// VALUE (possibly empty), so that checks chain in one condition.
bool keyValue(std::string_view field, std::string_view key,
              std::string_view &value);

/// `text` as an integer in `base`, all of it (no sign for unsigned types,
/// no spaces, no '+'); false on anything else or when it does not fit.
template <typename Int>
bool parseInteger(std::string_view text, Int &value, int base = 10) {
  if (text.empty())
    return false;
  const char *end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value, base);
  return ec == std::errc() && ptr == end;
}

/// `text` as a finite double, all of it, whatever the C locale.
bool parseFiniteDouble(std::string_view text, double &value);

/// Dims joined by 'x' ("8x16"), or "scalar" for no dims. Every dim at least
/// `minDim`, and at most 2^56 elements in all, so that byte counts (up to 8
/// bytes an element) and index arithmetic stay within int64_t.
bool parseShape(std::string_view text, std::vector<int64_t> &shape,
                int64_t minDim);
constexpr int64_t kMaxShapeElements = int64_t(1) << 56;

/// `text` in single quotes, as messages show what a file holds.
std::string quoted(std::string_view text);

} // namespace autoshard::rt
