// Status and Expected<T>: error-or-value results at the runtime's boundaries.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace autoshard::rt {

/// A failure meant for a person: what was wrong, where, and what would be
/// right. Boundaries (file parsers, command lines, setup) return these; the
/// driver decides how to report them and with which exit code.
class Error {
public:
  explicit Error(std::string message) : text(std::move(message)) {}
  const std::string &message() const { return text; }

private:
  std::string text;
};

/// Success, or an Error. Converts to true on success.
class [[nodiscard]] Status {
public:
  Status() = default;
  Status(Error error) : failure(std::move(error)) {}
  static Status success() { return Status(); }

  explicit operator bool() const { return !failure.has_value(); }
  bool ok() const { return !failure.has_value(); }
  /// Only valid on failure.
  const std::string &message() const {
    assert(failure && "message() of a successful Status");
    return failure->message();
  }

private:
  std::optional<Error> failure;
};

/// A value of type T, or an Error. Converts to true when it holds a value.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : storage(std::in_place_index<0>, std::move(value)) {}
  Expected(Error error) : storage(std::in_place_index<1>, std::move(error)) {}

  explicit operator bool() const { return storage.index() == 0; }
  bool ok() const { return storage.index() == 0; }

  T &operator*() {
    assert(ok());
    return std::get<0>(storage);
  }
  const T &operator*() const {
    assert(ok());
    return std::get<0>(storage);
  }
  T *operator->() { return &**this; }
  const T *operator->() const { return &**this; }

  /// Only valid on failure.
  const std::string &message() const {
    assert(!ok());
    return std::get<1>(storage).message();
  }
  /// The error as a Status, for propagating it.
  Status status() const {
    if (ok())
      return Status::success();
    return Error(message());
  }

private:
  std::variant<T, Error> storage;
};

} // namespace autoshard::rt
