// The emulated NCCL's bootstrap: ranks meet in the unique id's Store.
#include "Bootstrap.h"

#include "comm/Store.h"

#include <chrono>
#include <memory>
#include <thread>

namespace asrt_nccl_emu {

namespace rt = autoshard::rt;
namespace net = autoshard::rt::net;
using rt::Error;
using rt::Expected;
using rt::Store;
using rt::StoreFailure;

namespace {

// ---- Keys ----
// "nonce": the unique id's, set by the host before the id is handed out.
// "claim/R": how many ranks have claimed rank R (one, or they disagree).
// "rank/R": rank R's JoinRequest (encodeRank); every member waits for
//   all of them in one request (Store::setAndGet).
// "left/R": rank R has its table; once all are set the host stops.

const std::string kNonce = "nonce";

std::string rankKey(int rank) { return "rank/" + std::to_string(rank); }
std::string claimKey(int rank) { return "claim/" + std::to_string(rank); }
std::string leftKey(int rank) { return "left/" + std::to_string(rank); }

/// How long a rank retries reaching the store (the host is up before the
/// id exists, so only a dead host takes this long).
constexpr std::chrono::milliseconds kConnectPatience(10000);
/// How long a member waits for the answer to its "left/R".
constexpr std::chrono::milliseconds kLeaveTimeout(2000);
/// How long a refused communicator's store stays up for latecomers.
constexpr std::chrono::seconds kRefusalGrace(60);
/// The start of the abort reason of a rank that gave up while joining
/// (its communicator aborted): the others' join is then a remote error,
/// not a refusal.
const std::string kGaveUp = "gave up joining: ";

constexpr size_t kRankBytes = 4 + 2 + 16;

std::string encodeRank(const JoinRequest &r) {
  std::string bytes;
  net::putBigEndian(bytes, static_cast<uint32_t>(r.nranks), 4);
  net::putBigEndian(bytes, r.port, 2);
  bytes.append(r.uuid, sizeof r.uuid);
  return bytes;
}

bool decodeRank(const std::string &bytes, int32_t &nranks, uint16_t &port,
                std::string &uuid) {
  if (bytes.size() != kRankBytes)
    return false;
  nranks = static_cast<int32_t>(net::getBigEndian(bytes.data(), 4));
  port = static_cast<uint16_t>(net::getBigEndian(bytes.data() + 4, 2));
  uuid = bytes.substr(6);
  return nranks >= 1;
}

/// Whether `waker` has fired (the communicator is being torn down).
bool fired(const Waker &waker) {
  std::vector<bool> ready;
  return static_cast<bool>(
      net::waitReadable({waker.fd()}, net::Wait(net::Clock::now()), ready));
}

std::string encodeNonce(uint64_t nonce) {
  std::string bytes;
  net::putBigEndian(bytes, nonce, 8);
  return bytes;
}

/// Keeps the store up until every member has its table: they each set
/// "left/R" once they have, and rank 0 (every communicator has one) says
/// how many members there are.
void keepHosting(std::unique_ptr<rt::StoreServer> server, Store client) {
  // Named in the order they go: the client before the server it uses.
  std::unique_ptr<rt::StoreServer> serving = std::move(server);
  Store host = std::move(client);
  host.setTimeout(Store::kForever);
  Expected<std::string> first = host.get(rankKey(0));
  int32_t nranks = 0;
  uint16_t port = 0;
  std::string uuid;
  bool joined = false;
  if (first && decodeRank(*first, nranks, port, uuid)) {
    std::vector<std::string> left;
    for (int r = 0; r < nranks; ++r)
      left.push_back(leftKey(r));
    joined = host.wait(left).ok();
  }
  if (!joined && host.lastFailure() &&
      host.lastFailure()->kind == StoreFailure::Aborted)
    std::this_thread::sleep_for(kRefusalGrace);
}

} // namespace

WireResult hostBootstrapStore(uint64_t nonce, uint16_t &port) {
  Listener listener;
  if (WireResult r = listenLoopback(listener); !r)
    return r;
  port = static_cast<uint16_t>(listener.port);
  Expected<std::unique_ptr<rt::StoreServer>> server =
      rt::StoreServer::start(std::move(listener));
  if (!server)
    return {Wire::System, server.message()};
  Expected<Store> host = Store::connect("127.0.0.1", port, kConnectPatience,
                                        "the bootstrap store's host");
  if (!host)
    return {Wire::System, host.message()};
  if (rt::Status s = host->set(kNonce, encodeNonce(nonce)); !s)
    return {Wire::System, s.message()};
  try {
    std::thread(keepHosting, std::move(*server), std::move(*host)).detach();
  } catch (const std::exception &e) {
    return {Wire::System,
            std::string("starting the bootstrap store's thread: ") + e.what()};
  }
  return {};
}

WireResult joinThroughStore(uint16_t port, uint64_t nonce,
                            const JoinRequest &request, const Waker &waker,
                            JoinReply &reply) {
  const std::string me = "rank " + std::to_string(request.rank);
  Expected<Store> connected =
      Store::connect("127.0.0.1", port, kConnectPatience, me, &waker);
  if (!connected)
    return {fired(waker) ? Wire::Woken : Wire::System, connected.message()};
  Store &store = *connected;
  store.setTimeout(Store::kForever);

  // A failed store call: what the caller is to make of it.
  auto lost = [&](const rt::Error &error) -> WireResult {
    const std::optional<StoreFailure> &why = store.lastFailure();
    StoreFailure::Kind kind = why ? why->kind : StoreFailure::Other;
    if (kind == StoreFailure::Interrupted) {
      (void)store.abort(kGaveUp + me +
                        "'s communicator was aborted while it joined "
                        "(ncclCommAbort)");
      return {Wire::Woken, {}};
    }
    if (kind == StoreFailure::Aborted &&
        why->reason.compare(0, kGaveUp.size(), kGaveUp) == 0)
      return {Wire::PeerGone, why->reason.substr(kGaveUp.size())};
    if (kind == StoreFailure::Aborted) {
      reply.refused = why->reason;
      return {};
    }
    if (kind == StoreFailure::ServerGone)
      return {Wire::PeerGone,
              "the bootstrap store's process (the one that called "
              "ncclGetUniqueId) closed it: that process exited"};
    return {Wire::System, error.message()};
  };
  // Refuses the communicator: every member hears `why` through the store.
  auto refuseAll = [&](const std::string &why) -> WireResult {
    reply.refused = why;
    (void)store.abort(why);
    return {};
  };

  Expected<std::string> theirs = store.get(kNonce);
  if (!theirs)
    return lost(Error(theirs.message()));
  if (*theirs != encodeNonce(nonce)) {
    // Another communicator's store on the id's port (the id's own host
    // has stopped): not this rank's to refuse.
    reply.refused = "the store at the unique id's port is another "
                    "communicator's (its nonce differs): the id is stale, "
                    "or not the one rank 0's ncclGetUniqueId made";
    return {};
  }
  Expected<int64_t> claims = store.add(claimKey(request.rank), 1);
  if (!claims)
    return lost(Error(claims.message()));
  if (*claims > 1)
    return refuseAll("two ranks joined as rank " +
                     std::to_string(request.rank));

  std::vector<std::string> keys;
  for (int r = 0; r < request.nranks; ++r)
    keys.push_back(rankKey(r));
  Expected<std::vector<std::string>> all =
      store.setAndGet(rankKey(request.rank), encodeRank(request), keys);
  if (!all)
    return lost(Error(all.message()));
  reply.ports.resize(static_cast<size_t>(request.nranks));
  reply.uuids.resize(static_cast<size_t>(request.nranks));
  for (int r = 0; r < request.nranks; ++r) {
    int32_t nranks = 0;
    if (!decodeRank((*all)[static_cast<size_t>(r)], nranks, reply.ports[r],
                    reply.uuids[r]))
      return refuseAll("rank " + std::to_string(r) +
                       " posted a malformed entry in the bootstrap store");
    if (nranks != request.nranks)
      return refuseAll("ranks disagree on the communicator's size: rank " +
                       std::to_string(request.rank) + " says " +
                       std::to_string(request.nranks) + ", rank " +
                       std::to_string(r) + " says " + std::to_string(nranks));
  }
  // Best effort, and briefly: the host may stop serving as soon as the
  // last member's key is in, before it answers that member.
  store.setTimeout(kLeaveTimeout);
  (void)store.set(leftKey(request.rank), {});
  return {};
}

} // namespace asrt_nccl_emu
