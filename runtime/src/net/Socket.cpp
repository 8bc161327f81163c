// TCP sockets with deadlines: the one socket layer of the runtime.
#include "net/Socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

namespace autoshard::rt::net {

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

Waker::Waker() : event(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

void Waker::signal() {
  uint64_t one = 1;
  // Never read: once signalled the descriptor stays readable.
  (void)!::write(event.get(), &one, sizeof one);
}

std::string errnoText(int err) {
  char buffer[256];
  // The GNU strerror_r (C++ on glibc defines _GNU_SOURCE): returns the text.
  return strerror_r(err, buffer, sizeof buffer);
}

std::string formatDuration(std::chrono::milliseconds duration) {
  char text[64];
  std::snprintf(text, sizeof text, "%.3g s", duration.count() / 1000.0);
  return text;
}

int pollTimeoutMs(Deadline deadline) {
  if (deadline == Deadline::max())
    return -1;
  auto left =
      std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(
      std::clamp<int64_t>(left.count(), 0, std::numeric_limits<int>::max()));
}

namespace {

using AddressList = std::unique_ptr<addrinfo, void (*)(addrinfo *)>;

IoResult systemError(const std::string &what, int err = errno) {
  return {Io::System, what + ": " + errnoText(err)};
}

bool isPeerGone(int err) {
  return err == EPIPE || err == ECONNRESET || err == ECONNABORTED ||
         err == ENOTCONN || err == ETIMEDOUT;
}

void setNoDelay(int fd) {
  // Control messages and ring steps are answered at once: no Nagle delay.
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/// Polls `fds` plus the wake descriptor until one is ready or the deadline
/// passes: Ok, TimedOut, Woken or System. With `idle`, at most `sliceMs`:
/// Ok with *idle set when the slice ended first (for callers that tick).
IoResult pollFor(std::vector<pollfd> &fds, const Wait &wait, int sliceMs = -1,
                 bool *idle = nullptr) {
  if (idle)
    *idle = false;
  if (wait.wakeFd >= 0)
    fds.push_back(pollfd{wait.wakeFd, POLLIN, 0});
  for (;;) {
    int timeout = pollTimeoutMs(wait.deadline);
    if (idle && (timeout < 0 || timeout > sliceMs))
      timeout = sliceMs;
    int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return systemError("poll");
    if (wait.wakeFd >= 0) {
      bool woken = fds.back().revents != 0;
      fds.pop_back();
      if (woken)
        return {Io::Woken, {}};
    }
    if (n > 0)
      return {};
    if (Clock::now() >= wait.deadline)
      return {Io::TimedOut, "timed out"};
    if (idle) {
      *idle = true;
      return {};
    }
    if (wait.wakeFd >= 0)
      fds.push_back(pollfd{wait.wakeFd, POLLIN, 0});
  }
}

/// One attempt at `address`, bounded by the wait; `tick` runs every
/// ~100 ms while the connection is pending.
IoResult connectOnce(const addrinfo &address, const Wait &wait,
                     const std::function<void()> &tick, Fd &out) {
  Fd socket(::socket(address.ai_family,
                     address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                     address.ai_protocol));
  if (!socket)
    return systemError("socket");
  if (::connect(socket.get(), address.ai_addr, address.ai_addrlen) != 0) {
    // EINTR: the connection goes on asynchronously, as for EINPROGRESS.
    if (errno != EINPROGRESS && errno != EINTR)
      return {Io::System, errnoText(errno)};
    for (;;) {
      std::vector<pollfd> fds{pollfd{socket.get(), POLLOUT, 0}};
      bool idle = false;
      IoResult r = pollFor(fds, wait, 100, &idle);
      if (r.status == Io::TimedOut)
        return {Io::TimedOut, "connection attempt timed out"};
      if (!r)
        return r;
      if (!idle)
        break;
      tick();
    }
    int err = 0;
    socklen_t length = sizeof err;
    if (::getsockopt(socket.get(), SOL_SOCKET, SO_ERROR, &err, &length) != 0)
      return systemError("getsockopt");
    if (err != 0)
      return {Io::System, errnoText(err)};
  }
  // Connecting to a local port nobody listens on can, rarely, connect the
  // socket to itself (TCP simultaneous open on the same port): nobody there.
  sockaddr_storage self{}, peer{};
  socklen_t selfLength = sizeof self, peerLength = sizeof peer;
  if (::getsockname(socket.get(), reinterpret_cast<sockaddr *>(&self),
                    &selfLength) == 0 &&
      ::getpeername(socket.get(), reinterpret_cast<sockaddr *>(&peer),
                    &peerLength) == 0 &&
      selfLength == peerLength && std::memcmp(&self, &peer, selfLength) == 0)
    return {Io::System, "connected to itself (nobody listens there)"};
  setNoDelay(socket.get());
  out = std::move(socket);
  return {};
}

std::string quoted(const std::string &text) { return "\"" + text + "\""; }

} // namespace

Expected<Listener> listenTcp(int port, const std::string &host) {
  if (port < 0 || port > 65535)
    return Error("port " + std::to_string(port) +
                 " is not a TCP port (0..65535; 0 picks a free one)");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo *found = nullptr;
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(),
                       std::to_string(port).c_str(), &hints, &found);
  if (rc != 0)
    return Error("cannot resolve " + quoted(host) +
                 " to listen on: " + gai_strerror(rc));
  AddressList owned(found, &freeaddrinfo);
  // Every interface: IPv6's wildcard first, which also takes IPv4
  // connections when dual-stack is allowed; IPv4's if IPv6 is unavailable.
  std::vector<const addrinfo *> candidates;
  for (bool ipv6First : {true, false})
    for (const addrinfo *a = found; a; a = a->ai_next)
      if (!host.empty() ? ipv6First : (a->ai_family == AF_INET6) == ipv6First)
        candidates.push_back(a);
  std::string lastError = "no address to listen on";
  for (const addrinfo *a : candidates) {
    Fd socket(::socket(a->ai_family,
                       a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                       a->ai_protocol));
    if (!socket) {
      lastError = errnoText(errno);
      continue;
    }
    int one = 1, zero = 0;
    // A job restarted at once can reuse its port.
    (void)setsockopt(socket.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (a->ai_family == AF_INET6 && host.empty())
      (void)setsockopt(socket.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero,
                       sizeof zero);
    if (::bind(socket.get(), a->ai_addr, a->ai_addrlen) != 0 ||
        ::listen(socket.get(), SOMAXCONN) != 0) {
      lastError = errnoText(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    if (getsockname(socket.get(), reinterpret_cast<sockaddr *>(&bound),
                    &length) != 0) {
      lastError = errnoText(errno);
      continue;
    }
    Listener listener;
    listener.port =
        bound.ss_family == AF_INET6
            ? ntohs(reinterpret_cast<sockaddr_in6 *>(&bound)->sin6_port)
            : ntohs(reinterpret_cast<sockaddr_in *>(&bound)->sin_port);
    listener.socket = std::move(socket);
    return listener;
  }
  return Error("cannot listen on port " + std::to_string(port) +
               (host.empty() ? "" : " of " + quoted(host)) + ": " + lastError +
               (lastError == errnoText(EADDRINUSE)
                    ? " (another process holds it)"
                    : ""));
}

IoResult connectTcp(const std::string &host, int port,
                    const ConnectOptions &options, Fd &out) {
  std::string lastError = "no attempt was made";
  auto tick = [&] {
    if (options.waiting)
      options.waiting(lastError);
  };
  // A peer that is not up yet: retry, backing off to half a second. (Not
  // core/Backoff, which polls a completion at up to 1 kHz: an attempt per
  // millisecond at a host that is still booting is wasted traffic.)
  std::chrono::milliseconds backoff(10);
  while (true) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo *found = nullptr;
    int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints,
                         &found);
    if (rc == 0) {
      AddressList owned(found, &freeaddrinfo);
      for (addrinfo *a = found; a; a = a->ai_next) {
        IoResult r = connectOnce(*a, options.wait, tick, out);
        if (r || r.status == Io::Woken)
          return r;
        lastError = r.error;
      }
    } else if (rc == EAI_AGAIN || rc == EAI_NONAME) {
      // Retried too: a cluster's name for a node (a Kubernetes service,
      // say) may only resolve once that node is up.
      lastError = "cannot resolve " + quoted(host) + ": " + gai_strerror(rc);
    } else {
      return {Io::System,
              "cannot resolve " + quoted(host) + ": " + gai_strerror(rc)};
    }
    auto left = options.wait.deadline - Clock::now();
    if (left <= Clock::duration::zero())
      return {Io::TimedOut, lastError};
    tick();
    std::vector<pollfd> none;
    auto pause = std::min<Clock::duration>(backoff, left);
    IoResult slept = pollFor(
        none, Wait(Clock::now() + pause, options.wait.wakeFd));
    if (slept.status == Io::Woken || slept.status == Io::System)
      return slept;
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
}

IoResult acceptOne(const Listener &listener, const Wait &wait, Fd &out) {
  for (;;) {
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
    std::vector<pollfd> fds{pollfd{listener.socket.get(), POLLIN, 0}};
    if (IoResult r = pollFor(fds, wait); !r)
      return r;
  }
}

IoResult sendAll(int fd, const void *data, size_t bytes, const Wait &wait) {
  return exchange(fd, data, bytes, -1, nullptr, 0, wait);
}

IoResult receiveAll(int fd, void *data, size_t bytes, const Wait &wait) {
  return exchange(-1, nullptr, 0, fd, data, bytes, wait);
}

IoResult exchange(int sendFd, const void *out, size_t outBytes, int receiveFd,
                  void *in, size_t inBytes, const Wait &wait) {
  size_t sent = 0, received = 0;
  const auto *outPtr = static_cast<const char *>(out);
  auto *inPtr = static_cast<char *>(in);
  while (sent < outBytes || received < inBytes) {
    // Try first, poll only when the socket would block.
    bool progressed = false;
    if (received < inBytes) {
      ssize_t n = ::recv(receiveFd, inPtr + received, inBytes - received, 0);
      if (n > 0) {
        received += static_cast<size_t>(n);
        progressed = true;
      } else if (n == 0) {
        return {Io::PeerGone, "the connection was closed", receiveFd};
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        IoResult r = isPeerGone(errno) ? IoResult{Io::PeerGone,
                                                  errnoText(errno)}
                                       : systemError("recv");
        r.fd = receiveFd;
        return r;
      }
    }
    if (sent < outBytes) {
      // MSG_NOSIGNAL: a peer that is gone is an error here, not SIGPIPE.
      ssize_t n =
          ::send(sendFd, outPtr + sent, outBytes - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        progressed = true;
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                 errno != EINTR) {
        IoResult r = isPeerGone(errno) ? IoResult{Io::PeerGone,
                                                  errnoText(errno)}
                                       : systemError("send");
        r.fd = sendFd;
        return r;
      }
    }
    if (progressed || (sent == outBytes && received == inBytes))
      continue;
    std::vector<pollfd> fds;
    if (received < inBytes)
      fds.push_back(pollfd{receiveFd, POLLIN, 0});
    if (sent < outBytes)
      fds.push_back(pollfd{sendFd, POLLOUT, 0});
    if (IoResult r = pollFor(fds, wait); !r) {
      // Which side was stuck, for the caller's error.
      r.fd = sent < outBytes ? sendFd : receiveFd;
      return r;
    }
  }
  return {};
}

IoResult receiveAvailable(int fd, std::string &inbox) {
  char buffer[64 * 1024];
  for (;;) {
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      inbox.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n == 0)
      return {Io::PeerGone, "the connection was closed"};
    int err = errno;
    if (err == EINTR)
      continue;
    if (err == EAGAIN || err == EWOULDBLOCK)
      return {};
    if (isPeerGone(err))
      return {Io::PeerGone, errnoText(err)};
    return systemError("recv", err);
  }
}

IoResult waitReadable(const std::vector<int> &fds, const Wait &wait,
                      std::vector<bool> &ready) {
  std::vector<pollfd> polled;
  for (int fd : fds)
    polled.push_back(pollfd{fd, POLLIN, 0});
  IoResult r = pollFor(polled, wait);
  ready.assign(fds.size(), false);
  for (size_t i = 0; i < fds.size(); ++i)
    ready[i] = polled[i].revents != 0;
  return r;
}

void putBigEndian(std::string &out, uint64_t v, int bytes) {
  for (int shift = 8 * (bytes - 1); shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

uint64_t getBigEndian(const char *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

Expected<std::string> localAddressTowards(const std::string &host,
                                          const std::string &hostName) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo *found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), "9", &hints, &found); rc != 0)
    return Error("cannot resolve " + hostName + " '" + host +
                 "': " + gai_strerror(rc));
  AddressList owned(found, &freeaddrinfo);
  std::string lastError = "no address";
  for (addrinfo *a = found; a; a = a->ai_next) {
    Fd socket(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0));
    if (!socket)
      continue;
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    if (::connect(socket.get(), a->ai_addr, a->ai_addrlen) != 0 ||
        getsockname(socket.get(), reinterpret_cast<sockaddr *>(&local),
                    &length) != 0) {
      lastError = errnoText(errno);
      continue;
    }
    char text[INET6_ADDRSTRLEN] = {0};
    const void *bytes =
        local.ss_family == AF_INET6
            ? static_cast<const void *>(
                  &reinterpret_cast<sockaddr_in6 &>(local).sin6_addr)
            : static_cast<const void *>(
                  &reinterpret_cast<sockaddr_in &>(local).sin_addr);
    if (inet_ntop(local.ss_family, bytes, text, sizeof text))
      return std::string(text);
  }
  return Error("no interface of this host routes to " + hostName + " '" +
               host + "': " + lastError);
}

} // namespace autoshard::rt::net
