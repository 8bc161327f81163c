// A key-value store over TCP (PyTorch c10d's Store model): rank 0 hosts it.
#pragma once

#include "core/Expected.h"
#include "net/Socket.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace autoshard::rt {

/// Serves a Store: a thread that owns the keys and answers every client
/// connected to its listener. Requests that wait (get, wait) are parked
/// until another client sets their keys, so a client never polls. A
/// connection that does not speak the protocol is dropped, the others go
/// on. Rank 0 of a job hosts it; it stops when destroyed.
class StoreServer {
public:
  /// Serves on `listener` (net::listenTcp; port 0 picks a free one).
  static Expected<std::unique_ptr<StoreServer>> start(net::Listener listener);
  ~StoreServer();
  StoreServer(const StoreServer &) = delete;
  StoreServer &operator=(const StoreServer &) = delete;

  int port() const;

private:
  struct State;
  explicit StoreServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state;
};

/// One client's connection to a StoreServer. Every call is bounded by the
/// timeout; an error names the key(s) it waited for, the store's address
/// and how long it waited. One thread at a time may use a Store.
class Store {
public:
  /// Connects to the server at host:port, retrying while it is not up yet,
  /// for at most `timeout` (then also the bound of every call). `who`
  /// names this client in errors ("rank 3").
  static Expected<Store> connect(const std::string &host, int port,
                                 std::chrono::milliseconds timeout,
                                 const std::string &who);
  Store(Store &&) noexcept;
  Store &operator=(Store &&) noexcept;
  ~Store();

  void setTimeout(std::chrono::milliseconds timeout);

  /// Sets `key` (replacing any value) and wakes the clients waiting on it.
  Status set(const std::string &key, const std::string &value);
  /// The value of `key`, waiting until some client sets it.
  Expected<std::string> get(const std::string &key);
  /// Adds `delta` to the integer at `key` (absent: 0) and returns the sum:
  /// a counter every client can bump once, atomically.
  Expected<int64_t> add(const std::string &key, int64_t delta);
  /// Returns once every key is set; the error names those still missing.
  Status wait(const std::vector<std::string> &keys);
  /// Which of `keys` are not set yet, at once.
  Expected<std::vector<std::string>> missing(const std::vector<std::string> &keys);

private:
  struct State;
  explicit Store(std::unique_ptr<State> state);
  std::unique_ptr<State> state;
};

} // namespace autoshard::rt
