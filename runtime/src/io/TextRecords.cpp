// Reading line-record text (the step manifest, a checkpoint's MANIFEST):
// numbered lines, fields split at single spaces, KEY=VALUE fields, numbers
// and shapes, and errors that name the line.
#include "io/TextRecords.h"

#include <cmath>

namespace autoshard::rt {

bool TextLines::next() {
  if (pos >= text.size())
    return false;
  size_t newline = text.find('\n', pos);
  size_t end = newline == std::string_view::npos ? text.size() : newline;
  current = text.substr(pos, end - pos);
  pos = end + 1;
  ++lineNumber;
  return true;
}

Error lineError(std::string_view what, int line, const std::string &message) {
  return Error(std::string(what) +
               (line > 0 ? " line " + std::to_string(line) : "") + ": " +
               message);
}

std::vector<std::string_view> splitFields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    size_t space = line.find(' ', start);
    if (space == std::string_view::npos) {
      fields.push_back(line.substr(start));
      return fields;
    }
    fields.push_back(line.substr(start, space - start));
    start = space + 1;
  }
}

std::optional<std::pair<std::string_view, std::string_view>>
splitKeyValue(std::string_view field) {
  size_t eq = field.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == field.size())
    return std::nullopt;
  return std::pair(field.substr(0, eq), field.substr(eq + 1));
}

bool keyValue(std::string_view field, std::string_view key,
              std::string_view &value) {
  if (field.size() <= key.size() || field.substr(0, key.size()) != key ||
      field[key.size()] != '=')
    return false;
  value = field.substr(key.size() + 1);
  return true;
}

bool parseFiniteDouble(std::string_view text, double &value) {
  if (text.empty())
    return false;
  const char *end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end && std::isfinite(value);
}

bool parseShape(std::string_view text, std::vector<int64_t> &shape,
                int64_t minDim) {
  shape.clear();
  if (text == "scalar")
    return true;
  int64_t elements = 1;
  size_t start = 0;
  while (true) {
    size_t x = text.find('x', start);
    std::string_view dim =
        text.substr(start, x == std::string_view::npos ? std::string_view::npos
                                                       : x - start);
    int64_t value;
    if (!parseInteger(dim, value) || value < minDim ||
        (elements > 0 && value > kMaxShapeElements / elements))
      return false;
    elements *= value;
    shape.push_back(value);
    if (x == std::string_view::npos)
      return true;
    start = x + 1;
  }
}

std::string quoted(std::string_view text) {
  return "'" + std::string(text) + "'";
}

} // namespace autoshard::rt
