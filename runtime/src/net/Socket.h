// TCP sockets with deadlines: the one socket layer of the runtime.
#pragma once

#include "core/Expected.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

// Plain POSIX and the C++ library only (no MPI, Gloo, CUDA or LLVM): the
// rendezvous, the key-value store, the Gloo setup and the emulated NCCL all
// stand on it, and a GPU machine with only a compiler must build it.
namespace autoshard::rt::net {

using Clock = std::chrono::steady_clock;
/// When a wait gives up; Deadline::max(): never.
using Deadline = Clock::time_point;

/// A file descriptor, closed with its owner.
class Fd {
public:
  Fd() = default;
  explicit Fd(int fd) : fd(fd) {}
  Fd(Fd &&other) noexcept : fd(other.release()) {}
  Fd &operator=(Fd &&other) noexcept;
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  ~Fd() { reset(); }

  int get() const { return fd; }
  explicit operator bool() const { return fd >= 0; }
  /// Gives up ownership: the caller closes the descriptor.
  int release() {
    int out = fd;
    fd = -1;
    return out;
  }
  void reset();

private:
  int fd = -1;
};

/// An eventfd that, once signalled, ends every wait given it (for good):
/// how a thread tears down another one's blocking socket operation.
class Waker {
public:
  Waker();
  void signal();
  int fd() const { return event.get(); }

private:
  Fd event;
};

/// What bounds a blocking operation: a deadline, and a descriptor whose
/// readiness ends it early (a Waker's; -1: none).
struct Wait {
  Deadline deadline = Deadline::max();
  int wakeFd = -1;

  Wait() = default;
  explicit Wait(Deadline deadline, int wakeFd = -1)
      : deadline(deadline), wakeFd(wakeFd) {}
  /// Until `waker` fires (implicit: the emulated NCCL's waits are these).
  Wait(const Waker &waker, Deadline deadline = Deadline::max())
      : deadline(deadline), wakeFd(waker.fd()) {}
  static Wait within(std::chrono::milliseconds timeout, int wakeFd = -1) {
    return Wait(Clock::now() + timeout, wakeFd);
  }
};

/// How a socket operation ended: done, out of time, woken, the peer closed
/// or reset the connection (it exited or gave up), or the system refused
/// (`error` says what). Callers name the peer and the operation in their
/// own errors: this layer does not know who is at the other end.
enum class Io { Ok, TimedOut, Woken, PeerGone, System };

struct IoResult {
  Io status = Io::Ok;
  std::string error; // what happened, for all but Ok and Woken
  int fd = -1;       // exchange(): the descriptor that failed, if one did
  explicit operator bool() const { return status == Io::Ok; }
};

/// The C library's text for an errno value.
std::string errnoText(int err);
/// "1.5 s": a duration as errors print it.
std::string formatDuration(std::chrono::milliseconds duration);
/// poll()'s timeout until `deadline` in ms, rounded up (never early); -1
/// for Deadline::max().
int pollTimeoutMs(Deadline deadline);

/// A listening TCP socket (nonblocking, SO_REUSEADDR) and its port.
struct Listener {
  Fd socket;
  int port = 0;
};

/// Listens on `port` (0: any free port, reported in Listener::port) of
/// `host`'s address, or of every interface when `host` is empty (IPv6's
/// wildcard, dual-stack where allowed, else IPv4's). The error says why,
/// naming the port and the host, and that another process holds the port
/// when it does.
Expected<Listener> listenTcp(int port, const std::string &host = "");

/// How connectTcp retries.
struct ConnectOptions {
  Wait wait;
  /// Called between attempts and every ~100 ms while one is pending, with
  /// the last attempt's error: how a caller prints "still waiting for X".
  std::function<void(const std::string &lastError)> waiting;
};

/// Connects to host:port, retrying every failure that a peer not up yet
/// causes (refused, unreachable, a name that does not resolve yet, a
/// connection to itself) with doubling sleeps of 10 ms to 0.5 s until the
/// deadline. TimedOut carries the last attempt's error; System a name that
/// can never resolve. The socket is nonblocking, TCP_NODELAY.
IoResult connectTcp(const std::string &host, int port,
                    const ConnectOptions &options, Fd &out);

/// Accepts one connection (nonblocking, TCP_NODELAY) on `listener`.
IoResult acceptOne(const Listener &listener, const Wait &wait, Fd &out);

/// Sends all `bytes` (never SIGPIPE: a peer that left is PeerGone).
IoResult sendAll(int fd, const void *data, size_t bytes, const Wait &wait);
/// Receives exactly `bytes`.
IoResult receiveAll(int fd, void *data, size_t bytes, const Wait &wait);
/// Sends `outBytes` on `sendFd` while receiving `inBytes` on `receiveFd`,
/// both at once (a ring step: every rank sends to its successor and
/// receives from its predecessor; one that sent everything first would
/// deadlock once the socket buffers fill). Either side may be empty.
IoResult exchange(int sendFd, const void *out, size_t outBytes, int receiveFd,
                  void *in, size_t inBytes, const Wait &wait);

/// Appends what `fd` holds to `inbox` without blocking: Ok (perhaps with
/// nothing new), PeerGone at end of stream or a reset (what `inbox` got
/// before may still be whole messages), or System.
IoResult receiveAvailable(int fd, std::string &inbox);

/// Waits until one of `fds` is readable (or hung up), the deadline or the
/// wake descriptor: Ok with `ready[i]` set for each readable one, TimedOut,
/// Woken or System.
IoResult waitReadable(const std::vector<int> &fds, const Wait &wait,
                      std::vector<bool> &ready);

/// Wire integers: the low `bytes` bytes of `v`, most significant first
/// (the rendezvous's and the store's frames).
void putBigEndian(std::string &out, uint64_t v, int bytes);
/// The `bytes`-byte big-endian integer at `p`.
uint64_t getBigEndian(const char *p, int bytes);

/// The numeric address of this host's interface that routes to `host` (a
/// UDP socket connected there, which sends nothing, shows the source
/// address the kernel would use): what to tell peers to reach this host.
/// Errors call `host` by `hostName` ("MASTER_ADDR", say).
Expected<std::string> localAddressTowards(const std::string &host,
                                          const std::string &hostName);

} // namespace autoshard::rt::net
