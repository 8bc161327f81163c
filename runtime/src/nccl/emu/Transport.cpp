// The emulated NCCL's wires: loopback TCP, the bootstrap root, ring steps.
#include "Transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

namespace asrt_nccl_emu {

Fd &Fd::operator=(Fd &&other) noexcept {
  if (this != &other) {
    reset();
    fd = other.release();
  }
  return *this;
}

void Fd::reset() {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

namespace {

WireResult systemError(const char *what) {
  return {Wire::System, std::string(what) + ": " + std::strerror(errno)};
}

WireResult peerGone(const char *how) { return {Wire::PeerGone, how}; }

/// Waits until `fd` is ready for `events` or the waker fires; a timeout
/// (`timeoutMs` >= 0) is Ok with `timedOut` set.
WireResult await(int fd, short events, const Waker &waker, int timeoutMs = -1,
                 bool *timedOut = nullptr) {
  pollfd fds[2] = {{fd, events, 0}, {waker.fd(), POLLIN, 0}};
  for (;;) {
    int n = ::poll(fds, 2, timeoutMs);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return systemError("poll");
    if (fds[1].revents)
      return {Wire::Woken, {}};
    if (timedOut)
      *timedOut = n == 0;
    return {};
  }
}

void setNoDelay(int fd) {
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

sockaddr_in loopback(uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

bool isPeerGone(int error) {
  return error == EPIPE || error == ECONNRESET || error == ECONNABORTED ||
         error == ENOTCONN;
}

/// One step of a send: Ok with `done` advanced, or why not.
WireResult sendSome(int fd, const char *data, size_t bytes, size_t &done) {
  ssize_t n = ::send(fd, data + done, bytes - done, MSG_NOSIGNAL);
  if (n >= 0) {
    done += static_cast<size_t>(n);
    return {};
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
    return {};
  if (isPeerGone(errno))
    return peerGone(std::strerror(errno));
  return systemError("send");
}

WireResult receiveSome(int fd, char *data, size_t bytes, size_t &done) {
  ssize_t n = ::recv(fd, data + done, bytes - done, 0);
  if (n > 0) {
    done += static_cast<size_t>(n);
    return {};
  }
  if (n == 0)
    return peerGone("the connection was closed");
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
    return {};
  if (isPeerGone(errno))
    return peerGone(std::strerror(errno));
  return systemError("recv");
}

} // namespace

Waker::Waker() : event(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

void Waker::signal() {
  uint64_t one = 1;
  // Never read: once signalled the descriptor stays readable.
  (void)!::write(event.get(), &one, sizeof one);
}

WireResult listenLoopback(Listener &out) {
  Fd socket(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!socket)
    return systemError("socket");
  sockaddr_in address = loopback(0);
  if (::bind(socket.get(), reinterpret_cast<sockaddr *>(&address),
             sizeof address) != 0)
    return systemError("bind");
  if (::listen(socket.get(), 64) != 0)
    return systemError("listen");
  socklen_t length = sizeof address;
  if (::getsockname(socket.get(), reinterpret_cast<sockaddr *>(&address),
                    &length) != 0)
    return systemError("getsockname");
  out.port = ntohs(address.sin_port);
  out.socket = std::move(socket);
  return {};
}

WireResult connectLoopback(uint16_t port, int patienceMs, const Waker &waker,
                           Fd &out) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(patienceMs);
  for (;;) {
    Fd socket(
        ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!socket)
      return systemError("socket");
    sockaddr_in address = loopback(port);
    int error = 0;
    if (::connect(socket.get(), reinterpret_cast<sockaddr *>(&address),
                  sizeof address) != 0) {
      error = errno;
      if (error == EINPROGRESS) {
        if (WireResult r = await(socket.get(), POLLOUT, waker); !r)
          return r;
        socklen_t length = sizeof error;
        if (::getsockopt(socket.get(), SOL_SOCKET, SO_ERROR, &error,
                         &length) != 0)
          return systemError("getsockopt");
      }
    }
    if (error == 0) {
      setNoDelay(socket.get());
      out = std::move(socket);
      return {};
    }
    if (error != ECONNREFUSED ||
        std::chrono::steady_clock::now() >= deadline) {
      errno = error;
      return systemError(("connect to 127.0.0.1:" + std::to_string(port))
                             .c_str());
    }
    bool timedOut = false;
    if (WireResult r = await(waker.fd(), 0, waker, 20, &timedOut); !r)
      return r;
  }
}

WireResult acceptOne(const Listener &listener, const Waker &waker, Fd &out) {
  for (;;) {
    if (WireResult r = await(listener.socket.get(), POLLIN, waker); !r)
      return r;
    int fd = ::accept4(listener.socket.get(), nullptr, nullptr,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      setNoDelay(fd);
      out = Fd(fd);
      return {};
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
        errno != ECONNABORTED)
      return systemError("accept");
  }
}

WireResult sendAll(int fd, const void *data, size_t bytes,
                   const Waker &waker) {
  return exchange(fd, data, bytes, -1, nullptr, 0, waker);
}

WireResult receiveAll(int fd, void *data, size_t bytes, const Waker &waker) {
  return exchange(-1, nullptr, 0, fd, data, bytes, waker);
}

WireResult exchange(int sendFd, const void *out, size_t outBytes,
                    int receiveFd, void *in, size_t inBytes,
                    const Waker &waker) {
  size_t sent = 0, received = 0;
  const auto *outBytesPtr = static_cast<const char *>(out);
  auto *inBytesPtr = static_cast<char *>(in);
  while (sent < outBytes || received < inBytes) {
    pollfd fds[3];
    nfds_t n = 0;
    int sendSlot = -1, receiveSlot = -1;
    if (sent < outBytes) {
      sendSlot = static_cast<int>(n);
      fds[n++] = {sendFd, POLLOUT, 0};
    }
    if (received < inBytes) {
      receiveSlot = static_cast<int>(n);
      fds[n++] = {receiveFd, POLLIN, 0};
    }
    fds[n++] = {waker.fd(), POLLIN, 0};
    int ready = ::poll(fds, n, -1);
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready < 0)
      return systemError("poll");
    if (fds[n - 1].revents)
      return {Wire::Woken, {}};
    if (receiveSlot >= 0 && fds[receiveSlot].revents)
      if (WireResult r = receiveSome(receiveFd, inBytesPtr, inBytes, received);
          !r) {
        r.fd = receiveFd;
        return r;
      }
    if (sendSlot >= 0 && fds[sendSlot].revents)
      if (WireResult r = sendSome(sendFd, outBytesPtr, outBytes, sent); !r) {
        r.fd = sendFd;
        return r;
      }
  }
  return {};
}

// ---- Bootstrap ----

namespace {

constexpr uint32_t kJoinMagic = 0x6a6f696e; // "join"

/// The reply's wire form: int32 length of the error text, the text; then,
/// when empty, nranks x (uint16 port, 16-byte uuid).
std::string encodeReply(const std::string &error,
                        const std::map<int, JoinRequest> &joined) {
  std::string bytes;
  int32_t length = static_cast<int32_t>(error.size());
  bytes.append(reinterpret_cast<const char *>(&length), sizeof length);
  bytes += error;
  if (error.empty())
    for (const auto &[rank, request] : joined) {
      bytes.append(reinterpret_cast<const char *>(&request.port),
                   sizeof request.port);
      bytes.append(request.uuid, sizeof request.uuid);
    }
  return bytes;
}

void serveRoot(Listener listener, uint64_t nonce) {
  Waker never; // the root is not aborted: it ends when every rank has joined
  std::map<int, JoinRequest> joined;
  std::map<int, Fd> connections;
  std::vector<Fd> refused;
  std::string error;
  int expected = 0;
  auto reason = [&](const JoinRequest &r) -> std::string {
    if (r.nonce != nonce)
      return "a rank joined with another unique id (its nonce differs): "
             "every rank must use rank 0's ncclGetUniqueId";
    if (expected && r.nranks != expected)
      return "ranks disagree on the communicator's size: " +
             std::to_string(expected) + " and " + std::to_string(r.nranks);
    if (r.nranks < 1 || r.rank < 0 || r.rank >= r.nranks)
      return "rank " + std::to_string(r.rank) + " is not in 0.." +
             std::to_string(r.nranks - 1);
    if (joined.count(r.rank))
      return "two ranks joined as rank " + std::to_string(r.rank);
    return {};
  };
  // Until everyone has joined, or until an error has been told to the
  // ranks so far and a minute has passed for latecomers to hear it too.
  auto errorSince = std::chrono::steady_clock::time_point::max();
  while (expected == 0 || static_cast<int>(joined.size()) < expected) {
    if (!error.empty() && std::chrono::steady_clock::now() - errorSince >
                              std::chrono::seconds(60))
      return;
    Fd connection;
    if (!acceptOne(listener, never, connection))
      return;
    uint32_t magic = 0;
    JoinRequest request;
    if (!receiveAll(connection.get(), &magic, sizeof magic, never) ||
        magic != kJoinMagic ||
        !receiveAll(connection.get(), &request, sizeof request, never))
      continue; // not one of ours, or gone: ignore it
    std::string why = error.empty() ? reason(request) : error;
    if (!why.empty()) {
      if (error.empty()) {
        error = why;
        errorSince = std::chrono::steady_clock::now();
        std::string reply = encodeReply(error, {});
        for (auto &[rank, fd] : connections)
          (void)sendAll(fd.get(), reply.data(), reply.size(), never);
        connections.clear();
      }
      std::string reply = encodeReply(error, {});
      (void)sendAll(connection.get(), reply.data(), reply.size(), never);
      refused.push_back(std::move(connection));
      continue;
    }
    expected = request.nranks;
    joined[request.rank] = request;
    connections[request.rank] = std::move(connection);
  }
  std::string reply = encodeReply({}, joined);
  for (auto &[rank, fd] : connections)
    (void)sendAll(fd.get(), reply.data(), reply.size(), never);
}

} // namespace

WireResult startBootstrapRoot(uint64_t nonce, uint16_t &port) {
  Listener listener;
  if (WireResult r = listenLoopback(listener); !r)
    return r;
  port = listener.port;
  try {
    std::thread(serveRoot, std::move(listener), nonce).detach();
  } catch (const std::exception &e) {
    return {Wire::System, std::string("starting the bootstrap root: ") +
                              e.what()};
  }
  return {};
}

WireResult joinThroughRoot(uint16_t rootPort, const JoinRequest &request,
                           const Waker &waker, JoinReply &reply) {
  Fd root;
  if (WireResult r = connectLoopback(rootPort, 10000, waker, root); !r)
    return r;
  const uint32_t magic = kJoinMagic;
  if (WireResult r = sendAll(root.get(), &magic, sizeof magic, waker); !r)
    return r;
  if (WireResult r = sendAll(root.get(), &request, sizeof request, waker); !r)
    return r;
  int32_t length = 0;
  if (WireResult r = receiveAll(root.get(), &length, sizeof length, waker); !r)
    return r;
  if (length < 0 || length > (1 << 16))
    return {Wire::System, "the bootstrap root sent a malformed reply"};
  reply.error.assign(static_cast<size_t>(length), '\0');
  if (WireResult r = receiveAll(root.get(), reply.error.data(),
                                reply.error.size(), waker);
      !r)
    return r;
  if (!reply.error.empty())
    return {};
  reply.ports.resize(static_cast<size_t>(request.nranks));
  reply.uuids.resize(static_cast<size_t>(request.nranks));
  for (int i = 0; i < request.nranks; ++i) {
    char uuid[16];
    if (WireResult r = receiveAll(root.get(), &reply.ports[i],
                                  sizeof reply.ports[i], waker);
        !r)
      return r;
    if (WireResult r = receiveAll(root.get(), uuid, sizeof uuid, waker); !r)
      return r;
    reply.uuids[i].assign(uuid, sizeof uuid);
  }
  return {};
}

} // namespace asrt_nccl_emu
