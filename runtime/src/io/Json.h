// JSON values, a strict, depth-bounded reader for the runtime's inputs and a
// writer for its outputs.
#pragma once

#include "core/Expected.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace autoshard::rt {

/// One JSON value. A number keeps its spelling, not a double, so that a
/// caller can read 64-bit offsets and sizes exactly; toDouble / toInt64 /
/// toUint64 convert it on demand. An object keeps its members in file order,
/// duplicates included: whether a repeated key is an error is the caller's
/// rule.
struct Json {
  enum class Type { Null, Bool, Number, String, Array, Object };

  Type type = Type::Null;
  bool boolean = false; // a Bool's value
  std::string text;     // a String's value (unescaped), or a Number's spelling
  std::vector<Json> items;                           // an Array's elements
  std::vector<std::pair<std::string, Json>> members; // an Object's members

  bool isNull() const { return type == Type::Null; }
  bool isBool() const { return type == Type::Bool; }
  bool isNumber() const { return type == Type::Number; }
  bool isString() const { return type == Type::String; }
  bool isArray() const { return type == Type::Array; }
  bool isObject() const { return type == Type::Object; }

  /// The first member named `key` of an object; null when there is none or
  /// this is not an object.
  const Json *get(std::string_view key) const;

  /// A number as the nearest double; nullopt for anything else or for a
  /// magnitude beyond a double's range.
  std::optional<double> toDouble() const;
  /// A number spelled as an integer (no fraction, no exponent), exactly;
  /// nullopt for anything else or when it does not fit.
  std::optional<int64_t> toInt64() const;
  std::optional<uint64_t> toUint64() const;
};

/// How deeply arrays and objects may nest: a hostile file must not
/// overflow the stack, and no input the runtime reads comes close.
constexpr int kJsonMaxDepth = 32;

/// Parses `text` as exactly one JSON value (RFC 8259; surrounding white
/// space allowed). Errors begin with "at byte N: ", N counted from the start
/// of `text`, so that a caller prefixes what the text is, e.g. "bad JSON
/// header " + message.
Expected<Json> parseJson(std::string_view text, int maxDepth = kJsonMaxDepth);

/// `text` as a JSON string, quotes included: '"', '\\', newline and tab get
/// their short escapes, other control bytes \u00XX, every other byte (UTF-8
/// included) stands as it is.
std::string jsonString(std::string_view text);

/// Writes one JSON value, a container at a time. Each array and object has a
/// layout, so that the files people read and tools compare (statistics,
/// traces, step logs, safetensors headers) keep the shape they have:
///
///   Compact  {"a":1,"b":[2,3]}
///   Spaced   {"a": 1, "b": [2, 3]}
///   Lines    {
///              "a": 1,
///              "b": [2, 3]
///            }
///
/// Lines puts each member or element on a line of its own, indented by
/// `indentWidth` more than the enclosing Lines container. A container takes
/// its parent's layout unless told otherwise (the outermost takes the
/// writer's). Calls out of order (a value where a key belongs, end() with
/// nothing open) are programming errors and assert.
class JsonWriter {
public:
  enum class Layout { Compact, Spaced, Lines };

  explicit JsonWriter(Layout layout = Layout::Spaced, int indentWidth = 2)
      : layout(layout), indentWidth(indentWidth) {}

  JsonWriter &beginObject() { return open('{', innerLayout(), true); }
  JsonWriter &beginObject(Layout l) { return open('{', l, true); }
  JsonWriter &beginArray() { return open('[', innerLayout(), false); }
  JsonWriter &beginArray(Layout l) { return open('[', l, false); }
  /// Closes the innermost open array or object.
  JsonWriter &end();

  /// The next member's name; its value follows.
  JsonWriter &key(std::string_view name);

  JsonWriter &string(std::string_view text);
  template <typename Int,
            typename = std::enable_if_t<std::is_integral_v<Int> &&
                                        !std::is_same_v<Int, bool>>>
  JsonWriter &integer(Int value) {
    return raw(std::to_string(value));
  }
  /// `value` spelled by printf's `format`; null where JSON has no number
  /// (infinities and NaN, e.g. a diverged step's loss).
  JsonWriter &number(double value, const char *format = "%.9g");
  JsonWriter &boolean(bool value) { return raw(value ? "true" : "false"); }
  JsonWriter &null() { return raw("null"); }
  /// JSON written elsewhere, in place of one value: a number the caller
  /// spells (exact fixed-point microseconds), or, inside an array, elements
  /// that another writer wrote and joined with this array's separator (a
  /// rank's trace events gathered to rank 0).
  JsonWriter &raw(std::string_view json);

  /// What was written; complete once every container is closed.
  const std::string &text() const { return out; }
  /// Hands over the text and starts afresh.
  std::string take();

private:
  struct Frame {
    Layout layout;
    bool object;
    int indent; // of this container's members or elements
    bool empty = true;
    bool afterKey = false;
  };

  Layout innerLayout() const {
    return frames.empty() ? layout : frames.back().layout;
  }
  JsonWriter &open(char bracket, Layout l, bool object);
  /// The separator and line break before a member or an element.
  void separate();
  void beforeValue();

  Layout layout;
  int indentWidth;
  std::string out;
  std::vector<Frame> frames;
};

} // namespace autoshard::rt
