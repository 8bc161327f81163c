// The emulated NCCL's wires: loopback TCP, the bootstrap root, ring steps.
#include "Transport.h"

#include <chrono>
#include <cstring>
#include <map>
#include <thread>

namespace asrt_nccl_emu {

namespace net = autoshard::rt::net;

WireResult listenLoopback(Listener &out) {
  autoshard::rt::Expected<Listener> listener = net::listenTcp(0, "127.0.0.1");
  if (!listener)
    return {Wire::System, listener.message()};
  out = std::move(*listener);
  return {};
}

WireResult connectLoopback(uint16_t port, int patienceMs, const Waker &waker,
                           Fd &out) {
  net::ConnectOptions options;
  options.wait = net::Wait(
      waker, net::Clock::now() + std::chrono::milliseconds(patienceMs));
  WireResult r = net::connectTcp("127.0.0.1", port, options, out);
  if (r.status == Wire::TimedOut)
    r.error = "connect to 127.0.0.1:" + std::to_string(port) + ": " + r.error;
  return r;
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
  port = static_cast<uint16_t>(listener.port);
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
