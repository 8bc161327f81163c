// A key-value store over TCP (PyTorch c10d's Store model): the runtime's one
// rendezvous mechanism (the TCP rendezvous, the emulated NCCL's bootstrap).
#pragma once

#include "core/Expected.h"
#include "net/Socket.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace autoshard::rt {

/// Serves a Store: a thread that owns the keys and answers every client
/// connected to its listener. Requests that wait (get, wait, setAndGet)
/// are parked until another client sets their keys, so a client never
/// polls. A connection that does not speak the protocol is dropped, the
/// others go on. Rank 0 of a job hosts it; it stops when destroyed.
///
/// The server also ends waits that cannot succeed: once a client has
/// aborted (Store::abort) or a member's connection has ended
/// (Store::becomeMember), every parked wait and every later one whose keys
/// are not all set fails at once, saying who aborted and why, or which
/// member closed its connection. The first abort is kept; an abort is
/// reported before a closed connection, since a member that fails posts
/// why before it exits.
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

/// Why a Store call failed, for callers that word their own errors (the
/// rendezvous names ranks where the store names keys).
struct StoreFailure {
  enum Kind {
    TimedOut,     ///< the call's timeout passed; `missing` says what
    ServerGone,   ///< the server closed the connection (rank 0 exited)
    Aborted,      ///< `who` aborted the store, saying `reason`
    MemberClosed, ///< member `who`'s connection ended before the keys came
    Interrupted,  ///< the client's Waker fired (its owner is shutting down)
    Other,        ///< anything else; the error says what
  };
  Kind kind = Other;
  std::string who;
  std::string reason;
  /// TimedOut on a get or wait: the keys that were still not set, as the
  /// store answered right after; empty when it did not answer.
  std::vector<std::string> missing;
};

/// One client's connection to a StoreServer. Every call is bounded by the
/// timeout; an error names the key(s) it waited for, the store's address
/// and how long it waited. A client given a Waker (`interruptBy`) also
/// ends every call, connecting too, as soon as that fires, so that an
/// owner tearing down (an aborted NCCL communicator) never hangs in a
/// wait. One thread at a time may use a Store.
class Store {
public:
  /// A timeout that never passes: calls end when answered, when the
  /// connection ends, or when the client's Waker fires.
  static constexpr std::chrono::milliseconds kForever =
      std::chrono::milliseconds::max();

  /// Connects to the server at host:port, retrying while it is not up yet,
  /// for at most `timeout` (then also the bound of every call). `who`
  /// names this client in errors ("rank 3"). With `interrupt`, the client
  /// is interrupted by it (see interruptBy), the connecting too.
  static Expected<Store> connect(const std::string &host, int port,
                                 std::chrono::milliseconds timeout,
                                 const std::string &who,
                                 const net::Waker *interrupt = nullptr);
  /// A client over `socket`, already connected to the server at `where`
  /// (host:port) by a caller that words its own connection errors.
  static Store overSocket(net::Fd socket, const std::string &where,
                          std::chrono::milliseconds timeout,
                          const std::string &who);
  Store(Store &&) noexcept;
  Store &operator=(Store &&) noexcept;
  ~Store();

  void setTimeout(std::chrono::milliseconds timeout);
  /// Ends every call (but abort) as soon as `waker` fires, failing it as
  /// StoreFailure::Interrupted; null: none. The waker must outlive the
  /// calls. abort() ignores it: it is what an interrupted owner posts on
  /// its way out.
  void interruptBy(const net::Waker *waker);

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
  /// Sets `key` to `value` and, in the same request, waits until every one
  /// of `keys` is set; their values, in order. How a group's members meet:
  /// as setting and waiting are one request, each member's answer is on
  /// its way before any member can learn that all have arrived, so the
  /// first to leave cannot strand a slower one.
  Expected<std::vector<std::string>>
  setAndGet(const std::string &key, const std::string &value,
            const std::vector<std::string> &keys);
  /// Removes `keys` (absent ones are ignored).
  Status erase(const std::vector<std::string> &keys);

  /// Makes this client a member: when its connection ends (it exited,
  /// failed, or destroyed its Store), the server ends every wait it cannot
  /// answer at once, naming this client's `who`.
  Status becomeMember();
  /// Ends every wait of every client that cannot be answered at once, now
  /// and later, with `reason` and this client's `who`. Bounded by a few
  /// seconds whatever the timeout: it is called on the way out.
  Status abort(const std::string &reason);

  /// Why the last call failed; nullopt after a call that succeeded.
  const std::optional<StoreFailure> &lastFailure() const;

private:
  struct State;
  explicit Store(std::unique_ptr<State> state);
  std::unique_ptr<State> state;
};

} // namespace autoshard::rt
