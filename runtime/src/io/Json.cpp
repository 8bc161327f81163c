// JSON values, a strict, depth-bounded reader for the runtime's inputs and a
// writer for its outputs.
#include "io/Json.h"

#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <system_error>

namespace autoshard::rt {

const Json *Json::get(std::string_view key) const {
  for (const auto &[name, value] : members)
    if (name == key)
      return &value;
  return nullptr;
}

std::optional<double> Json::toDouble() const {
  if (type != Type::Number)
    return std::nullopt;
  // from_chars, unlike strtod, ignores the C locale's decimal separator.
  double value = 0;
  const char *end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end)
    return std::nullopt;
  return value;
}

namespace {

bool spelledAsInteger(const std::string &text) {
  return text.find_first_of(".eE") == std::string::npos;
}

template <typename T> std::optional<T> integerOf(const std::string &text) {
  T value = 0;
  const char *end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end)
    return std::nullopt;
  return value;
}

} // namespace

std::optional<int64_t> Json::toInt64() const {
  if (type != Type::Number || !spelledAsInteger(text))
    return std::nullopt;
  return integerOf<int64_t>(text);
}

std::optional<uint64_t> Json::toUint64() const {
  if (type != Type::Number || !spelledAsInteger(text))
    return std::nullopt;
  if (!text.empty() && text[0] == '-') {
    // Of the negative integers only "-0" is a uint64.
    std::optional<int64_t> negative = integerOf<int64_t>(text);
    return negative && *negative == 0 ? std::optional<uint64_t>(0)
                                      : std::nullopt;
  }
  return integerOf<uint64_t>(text);
}

namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }

int hexValue(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

void appendUtf8(std::string &out, uint32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xc0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3f));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xe0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code & 0x3f));
  }
}

/// A byte as a reader would want to see it in a message.
std::string describeByte(char c) {
  if (c >= 0x20 && c < 0x7f)
    return std::string("'") + c + "'";
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(c));
  return std::string("byte ") + hex;
}

class JsonReader {
public:
  JsonReader(std::string_view text, int maxDepth)
      : text(text), maxDepth(maxDepth) {}

  Status read(Json &value) {
    if (Status s = readValue(value, 0); !s)
      return s;
    skipSpace();
    if (pos != text.size())
      return fail("unexpected text after the JSON value, starting with " +
                  describeByte(text[pos]));
    return Status::success();
  }

private:
  Error failAt(size_t at, const std::string &what) const {
    return Error("at byte " + std::to_string(at) + ": " + what);
  }
  Error fail(const std::string &what) const { return failAt(pos, what); }
  /// "expected X", saying what was found instead.
  Error expected(const std::string &what) const {
    if (pos >= text.size())
      return fail("unexpected end, expected " + what);
    return fail("expected " + what + ", found " + describeByte(text[pos]));
  }

  bool atChar(char c) const { return pos < text.size() && text[pos] == c; }
  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }

  Status readValue(Json &value, int depth) {
    skipSpace();
    if (pos >= text.size())
      return expected("a value");
    char c = text[pos];
    if (c == '{' || c == '[') {
      // Bounded recursion: a hostile file must not overflow the stack.
      if (depth >= maxDepth)
        return fail("nesting is too deep (more than " +
                    std::to_string(maxDepth) +
                    " levels of arrays and objects)");
      return c == '{' ? readObject(value, depth + 1)
                      : readArray(value, depth + 1);
    }
    if (c == '"') {
      value.type = Json::Type::String;
      return readString(value.text);
    }
    if (c == '-' || isDigit(c)) {
      value.type = Json::Type::Number;
      return readNumber(value.text);
    }
    for (std::string_view literal : {"true", "false", "null"}) {
      if (text.substr(pos, literal.size()) == literal) {
        pos += literal.size();
        value.type = literal == "null" ? Json::Type::Null : Json::Type::Bool;
        value.boolean = literal == "true";
        return Status::success();
      }
    }
    return expected("a value");
  }

  Status readObject(Json &value, int depth) {
    value.type = Json::Type::Object;
    ++pos; // '{'
    skipSpace();
    if (atChar('}')) {
      ++pos;
      return Status::success();
    }
    while (true) {
      skipSpace();
      std::pair<std::string, Json> member;
      if (!atChar('"'))
        return expected("a member name (a string)");
      if (Status s = readString(member.first); !s)
        return s;
      skipSpace();
      if (!atChar(':'))
        return expected("':'");
      ++pos;
      if (Status s = readValue(member.second, depth); !s)
        return s;
      value.members.push_back(std::move(member));
      skipSpace();
      if (atChar(',')) {
        ++pos;
        continue;
      }
      if (atChar('}')) {
        ++pos;
        return Status::success();
      }
      return expected("',' or '}'");
    }
  }

  Status readArray(Json &value, int depth) {
    value.type = Json::Type::Array;
    ++pos; // '['
    skipSpace();
    if (atChar(']')) {
      ++pos;
      return Status::success();
    }
    while (true) {
      value.items.emplace_back();
      if (Status s = readValue(value.items.back(), depth); !s)
        return s;
      skipSpace();
      if (atChar(',')) {
        ++pos;
        continue;
      }
      if (atChar(']')) {
        ++pos;
        return Status::success();
      }
      return expected("',' or ']'");
    }
  }

  /// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, kept as written.
  Status readNumber(std::string &out) {
    size_t start = pos;
    if (atChar('-'))
      ++pos;
    if (atChar('0')) {
      ++pos;
      if (pos < text.size() && isDigit(text[pos]))
        return fail("a number has a leading zero");
    } else if (pos < text.size() && isDigit(text[pos])) {
      while (pos < text.size() && isDigit(text[pos]))
        ++pos;
    } else {
      return expected("a digit");
    }
    if (atChar('.')) {
      ++pos;
      if (pos >= text.size() || !isDigit(text[pos]))
        return expected("a digit after the decimal point");
      while (pos < text.size() && isDigit(text[pos]))
        ++pos;
    }
    if (atChar('e') || atChar('E')) {
      ++pos;
      if (atChar('+') || atChar('-'))
        ++pos;
      if (pos >= text.size() || !isDigit(text[pos]))
        return expected("a digit in the exponent");
      while (pos < text.size() && isDigit(text[pos]))
        ++pos;
    }
    out.assign(text.substr(start, pos - start));
    return Status::success();
  }

  /// Four hex digits at `pos`, consumed.
  Status readHex4(uint32_t &code, size_t escapeStart) {
    if (pos + 4 > text.size())
      return failAt(escapeStart, "bad \\u escape: it needs four hex digits");
    code = 0;
    for (size_t i = 0; i < 4; ++i) {
      int digit = hexValue(text[pos + i]);
      if (digit < 0)
        return failAt(escapeStart, "bad \\u escape: it needs four hex digits");
      code = code * 16 + static_cast<uint32_t>(digit);
    }
    pos += 4;
    return Status::success();
  }

  Status readString(std::string &out) {
    size_t start = pos;
    ++pos; // '"'
    while (pos < text.size() && text[pos] != '"') {
      char c = text[pos];
      if (static_cast<unsigned char>(c) < 0x20)
        return fail("unescaped control character " + describeByte(c) +
                    " in a string");
      if (c != '\\') {
        out += c;
        ++pos;
        continue;
      }
      size_t escapeStart = pos;
      ++pos;
      if (pos >= text.size())
        break;
      char e = text[pos++];
      switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t code;
        if (Status s = readHex4(code, escapeStart); !s)
          return s;
        if (code >= 0xdc00 && code <= 0xdfff)
          return failAt(escapeStart, "bad \\u escape: a low surrogate with "
                                     "no high surrogate before it");
        if (code >= 0xd800 && code <= 0xdbff) {
          // Outside the Basic Multilingual Plane: a UTF-16 pair.
          if (text.substr(pos, 2) != "\\u")
            return failAt(escapeStart, "bad \\u escape: a high surrogate "
                                       "with no low surrogate after it");
          pos += 2;
          uint32_t low;
          if (Status s = readHex4(low, pos - 2); !s)
            return s;
          if (low < 0xdc00 || low > 0xdfff)
            return failAt(escapeStart, "bad \\u escape: a high surrogate "
                                       "with no low surrogate after it");
          code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
        }
        appendUtf8(out, code);
        break;
      }
      default:
        return failAt(escapeStart, e >= 0x20 && e < 0x7f
                                       ? "bad escape '\\" + std::string(1, e) +
                                             "' in a string"
                                       : "bad escape: '\\' followed by " +
                                             describeByte(e) + " in a string");
      }
    }
    if (pos >= text.size())
      return fail("unterminated string (it opens at byte " +
                  std::to_string(start) + ")");
    ++pos; // '"'
    return Status::success();
  }

  std::string_view text;
  int maxDepth;
  size_t pos = 0;
};

} // namespace

Expected<Json> parseJson(std::string_view text, int maxDepth) {
  Json value;
  if (Status s = JsonReader(text, maxDepth).read(value); !s)
    return Error(s.message());
  return value;
}

std::string jsonString(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
        out += escaped;
      } else {
        out += ch;
      }
    }
  }
  out += "\"";
  return out;
}

JsonWriter &JsonWriter::open(char bracket, Layout l, bool object) {
  beforeValue();
  int enclosing = frames.empty() ? 0 : frames.back().indent;
  frames.push_back(
      {l, object, l == Layout::Lines ? enclosing + indentWidth : enclosing});
  out += bracket;
  return *this;
}

JsonWriter &JsonWriter::end() {
  assert(!frames.empty() && !frames.back().afterKey && "end() out of order");
  Frame frame = frames.back();
  frames.pop_back();
  if (frame.layout == Layout::Lines && !frame.empty) {
    out += '\n';
    out.append(static_cast<size_t>(frame.indent - indentWidth), ' ');
  }
  out += frame.object ? '}' : ']';
  return *this;
}

void JsonWriter::separate() {
  Frame &frame = frames.back();
  if (!frame.empty)
    out += frame.layout == Layout::Spaced ? ", " : ",";
  if (frame.layout == Layout::Lines) {
    out += '\n';
    out.append(static_cast<size_t>(frame.indent), ' ');
  }
  frame.empty = false;
}

JsonWriter &JsonWriter::key(std::string_view name) {
  assert(!frames.empty() && frames.back().object && !frames.back().afterKey &&
         "key() outside an object or twice in a row");
  separate();
  out += jsonString(name);
  out += frames.back().layout == Layout::Compact ? ":" : ": ";
  frames.back().afterKey = true;
  return *this;
}

void JsonWriter::beforeValue() {
  if (frames.empty()) {
    assert(out.empty() && "a second value outside any container");
    return;
  }
  Frame &frame = frames.back();
  if (frame.object) {
    assert(frame.afterKey && "a member's value without its key");
    frame.afterKey = false;
    return;
  }
  separate();
}

JsonWriter &JsonWriter::string(std::string_view text) {
  beforeValue();
  out += jsonString(text);
  return *this;
}

JsonWriter &JsonWriter::number(double value, const char *format) {
  if (!std::isfinite(value))
    return null();
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return raw(text);
}

JsonWriter &JsonWriter::raw(std::string_view json) {
  beforeValue();
  out += json;
  return *this;
}

std::string JsonWriter::take() {
  assert(frames.empty() && "take() with a container still open");
  std::string text = std::move(out);
  out.clear();
  return text;
}

} // namespace autoshard::rt
