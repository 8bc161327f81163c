// The emulated NCCL's wires: TCP sockets on the loopback interface between
// the ranks' processes (or threads), the bootstrap root that tells every
// rank of a new communicator where the others listen, and the ring
// exchange every collective is made of. Waits watch a wake-up descriptor,
// so that ncclCommAbort ends any of them at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace asrt_nccl_emu {

/// A file descriptor closed with its owner.
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
  int release() {
    int out = fd;
    fd = -1;
    return out;
  }
  void reset();

private:
  int fd = -1;
};

/// Why a wire operation stopped: Ok, the wake-up descriptor fired (the
/// communicator is being aborted), the peer closed or reset the connection
/// (it died or aborted), or the system refused (`error` says what).
enum class Wire { Ok, Woken, PeerGone, System };

struct WireResult {
  Wire status = Wire::Ok;
  std::string error; // for PeerGone and System: what happened
  int fd = -1;       // exchange: the descriptor that failed, if one did
  explicit operator bool() const { return status == Wire::Ok; }
};

/// An eventfd that wakes every wait given it once signalled (for good).
class Waker {
public:
  Waker();
  void signal();
  int fd() const { return event.get(); }

private:
  Fd event;
};

/// A listening TCP socket on 127.0.0.1 and an ephemeral port.
struct Listener {
  Fd socket;
  uint16_t port = 0;
};
WireResult listenLoopback(Listener &out);

/// Connects to 127.0.0.1:`port` (retrying while refused, for at most
/// `patienceMs`), nonblocking afterwards.
WireResult connectLoopback(uint16_t port, int patienceMs, const Waker &waker,
                           Fd &out);
/// Accepts one connection (nonblocking afterwards).
WireResult acceptOne(const Listener &listener, const Waker &waker, Fd &out);

/// Sends `bytes` bytes on `fd`, all of them.
WireResult sendAll(int fd, const void *data, size_t bytes, const Waker &waker);
/// Receives exactly `bytes` bytes from `fd`.
WireResult receiveAll(int fd, void *data, size_t bytes, const Waker &waker);
/// Sends `outBytes` from `out` on `sendFd` while receiving `inBytes` into
/// `in` from `receiveFd`, both at once (a ring step: every rank sends to
/// its successor and receives from its predecessor, so one that sent
/// first and received later would deadlock once the socket buffers fill).
WireResult exchange(int sendFd, const void *out, size_t outBytes,
                    int receiveFd, void *in, size_t inBytes,
                    const Waker &waker);

/// What a rank tells the bootstrap root when it joins a communicator.
struct JoinRequest {
  uint64_t nonce = 0; // the unique id's
  int32_t nranks = 0;
  int32_t rank = 0;
  uint16_t port = 0;  // where the rank listens for its ring predecessor
  char uuid[16] = {}; // its GPU's
};

/// The root's answer: every rank's port and GPU, by rank, or why not.
struct JoinReply {
  std::string error; // empty: joined
  std::vector<uint16_t> ports;
  std::vector<std::string> uuids;
};

/// Starts the bootstrap root of a new unique id: a detached thread that
/// listens on 127.0.0.1, collects one JoinRequest per rank and sends each
/// the table (or, when the requests disagree, the reason to every rank).
/// Returns its port.
WireResult startBootstrapRoot(uint64_t nonce, uint16_t &port);

/// Joins through the root at `rootPort`.
WireResult joinThroughRoot(uint16_t rootPort, const JoinRequest &request,
                           const Waker &waker, JoinReply &reply);

} // namespace asrt_nccl_emu
