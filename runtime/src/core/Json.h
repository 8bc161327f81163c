// JSON values and a strict, depth-bounded reader for the runtime's inputs.
#pragma once

#include "core/Expected.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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

} // namespace autoshard::rt
