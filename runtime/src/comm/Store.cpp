// A key-value store over TCP (PyTorch c10d's Store model): server, client.
#include "comm/Store.h"

#include <algorithm>
#include <map>
#include <optional>
#include <thread>

namespace autoshard::rt {

namespace {

using net::Clock;
using net::getBigEndian;
using net::putBigEndian;
using net::Deadline;
using net::Io;
using net::IoResult;

// ---- Frames ----------------------------------------------------------------
// Both ways: magic (4 bytes), op (1), request id (8), argument count (4),
// then each argument as its length (8) and bytes; integers big-endian. A
// reply carries its request's id and Reply::Ok or Reply::Failed.

constexpr uint32_t kMagic = 0x41534b31; // "ASK1"
constexpr size_t kHeaderBytes = 4 + 1 + 8 + 4;
/// Larger frames mean a peer that does not speak the protocol.
constexpr uint64_t kMaxFrameBytes = uint64_t(1) << 30;
/// How long the server gives a reply to leave, and a client its question
/// about which keys are missing after a wait timed out.
constexpr std::chrono::milliseconds kShortWait(2000);

enum class Op : uint8_t {
  Set = 1,
  Get,
  Add,
  Wait,
  Missing,
  SetAndGet, // key, value, then the keys to wait for
  Erase,
  Member, // the client's name
  Abort,  // the reason
};
enum class Reply : uint8_t { Ok = 100, Failed };

struct Frame {
  uint8_t op = 0;
  uint64_t id = 0;
  std::vector<std::string> args;
};

std::string encode(const Frame &f) {
  std::string out;
  putBigEndian(out, kMagic, 4);
  out.push_back(static_cast<char>(f.op));
  putBigEndian(out, f.id, 8);
  putBigEndian(out, f.args.size(), 4);
  for (const std::string &arg : f.args) {
    putBigEndian(out, arg.size(), 8);
    out += arg;
  }
  return out;
}

/// Takes one whole frame off `inbox`: false while incomplete, an Error when
/// the bytes are not this protocol.
Expected<bool> takeFrame(std::string &inbox, Frame &out) {
  if (inbox.size() < kHeaderBytes)
    return false;
  if (getBigEndian(inbox.data(), 4) != kMagic)
    return Error("bytes that are not autoshard's store protocol");
  Frame f;
  f.op = static_cast<uint8_t>(inbox[4]);
  f.id = getBigEndian(inbox.data() + 5, 8);
  uint64_t count = getBigEndian(inbox.data() + 13, 4);
  size_t at = kHeaderBytes;
  for (uint64_t i = 0; i < count; ++i) {
    if (inbox.size() - at < 8)
      return false;
    uint64_t length = getBigEndian(inbox.data() + at, 8);
    if (length > kMaxFrameBytes)
      return Error("an argument of " + std::to_string(length) + " bytes");
    at += 8;
    if (inbox.size() - at < length)
      return false;
    f.args.push_back(inbox.substr(at, length));
    at += length;
  }
  inbox.erase(0, at);
  out = std::move(f);
  return true;
}

/// `timeout` from now; Deadline::max() for Store::kForever (or any timeout
/// the clock cannot hold).
Deadline deadlineAfter(std::chrono::milliseconds timeout) {
  Clock::time_point now = Clock::now();
  if (timeout >= std::chrono::duration_cast<std::chrono::milliseconds>(
                     Deadline::max() - now))
    return Deadline::max();
  return now + timeout;
}

std::string keyList(const std::vector<std::string> &keys) {
  std::string text;
  for (size_t i = 0; i < keys.size(); ++i)
    text += (i ? ", \"" : "\"") + keys[i] + "\"";
  return (keys.size() == 1 ? "key " : "keys ") + text;
}

/// A signed decimal integer and nothing else.
bool parseInt64(const std::string &text, int64_t &out) {
  if (text.empty())
    return false;
  size_t used = 0;
  try {
    out = std::stoll(text, &used);
  } catch (...) {
    return false;
  }
  return used == text.size();
}

} // namespace

// ---- Server ----------------------------------------------------------------

struct StoreServer::State {
  net::Listener listener;
  net::Waker stop;
  std::thread thread;

  struct Client {
    net::Fd socket;
    std::string inbox;
    /// Get, Wait and SetAndGet requests whose keys are not all set yet.
    std::vector<Frame> parked;
    /// A member's name (Op::Member); empty for other clients.
    std::string member;
    /// Closed, stuck or not this protocol: dropped once the pass over the
    /// clients is over (handle() may still hold a reference to it).
    bool gone = false;
  };
  std::vector<std::unique_ptr<Client>> clients;
  std::map<std::string, std::string> data;
  /// The first abort: who posted it and why.
  std::optional<std::pair<std::string, std::string>> aborted;
  /// Members whose connections ended, in that order.
  std::vector<std::string> closedMembers;

  /// The keys a waiting request waits for.
  static std::vector<std::string> awaited(const Frame &request) {
    if (static_cast<Op>(request.op) == Op::SetAndGet)
      return {request.args.begin() + 2, request.args.end()};
    return request.args;
  }

  bool has(const std::vector<std::string> &keys) const {
    return std::all_of(keys.begin(), keys.end(),
                       [&](const std::string &k) { return data.count(k); });
  }

  /// Why waits end now: the Failed reply's arguments, or none.
  std::vector<std::string> ended() const {
    if (aborted)
      return {"aborted", aborted->first, aborted->second};
    if (!closedMembers.empty())
      return {"closed", closedMembers.front()};
    return {};
  }

  /// Answers a waiting request whose keys are all set.
  bool answer(Client &client, const Frame &request) {
    std::vector<std::string> values;
    if (static_cast<Op>(request.op) != Op::Wait)
      for (const std::string &key : awaited(request))
        values.push_back(data[key]);
    return reply(client, request, Reply::Ok, std::move(values));
  }

  /// Drops the gone clients; a member's leaving ends the waits it may
  /// strand. True when a member left.
  bool dropGone() {
    bool memberLeft = false;
    for (auto &client : clients) {
      if (!client || !client->gone)
        continue;
      if (!client->member.empty()) {
        closedMembers.push_back(client->member);
        memberLeft = true;
      }
      client.reset();
    }
    clients.erase(std::remove(clients.begin(), clients.end(), nullptr),
                  clients.end());
    return memberLeft;
  }

  /// False when the client is gone or stuck: it is dropped.
  bool reply(Client &client, const Frame &request, Reply kind,
             std::vector<std::string> args = {}) {
    std::string bytes =
        encode(Frame{static_cast<uint8_t>(kind), request.id, std::move(args)});
    return static_cast<bool>(
        net::sendAll(client.socket.get(), bytes.data(), bytes.size(),
                     net::Wait(Clock::now() + kShortWait, stop.fd())));
  }

  /// Answers `request`, or parks it until its keys are set.
  bool handle(Client &client, Frame request) {
    switch (static_cast<Op>(request.op)) {
    case Op::Set:
      if (request.args.size() != 2)
        break;
      data[request.args[0]] = request.args[1];
      wakeParked();
      return reply(client, request, Reply::Ok);
    case Op::Add: {
      int64_t delta = 0, sum = 0;
      if (request.args.size() != 2 || !parseInt64(request.args[1], delta))
        break;
      auto it = data.find(request.args[0]);
      if (it != data.end() && !parseInt64(it->second, sum))
        return reply(client, request, Reply::Failed,
                     {"the value of key \"" + request.args[0] +
                      "\" is not an integer"});
      sum += delta;
      data[request.args[0]] = std::to_string(sum);
      wakeParked();
      return reply(client, request, Reply::Ok, {std::to_string(sum)});
    }
    case Op::SetAndGet:
      if (request.args.size() < 2)
        break;
      data[request.args[0]] = request.args[1];
      wakeParked();
      [[fallthrough]];
    case Op::Get:
      if (static_cast<Op>(request.op) == Op::Get && request.args.size() != 1)
        break;
      [[fallthrough]];
    case Op::Wait:
      if (has(awaited(request)))
        return answer(client, request);
      if (std::vector<std::string> why = ended(); !why.empty())
        return reply(client, request, Reply::Failed, std::move(why));
      client.parked.push_back(std::move(request));
      return true;
    case Op::Erase:
      for (const std::string &key : request.args)
        data.erase(key);
      return reply(client, request, Reply::Ok);
    case Op::Member:
      if (request.args.size() != 1 || request.args[0].empty())
        break;
      client.member = request.args[0];
      return reply(client, request, Reply::Ok);
    case Op::Abort:
      if (request.args.size() != 1)
        break;
      if (!aborted)
        aborted.emplace(client.member.empty() ? "a client" : client.member,
                        request.args[0]);
      wakeParked();
      return reply(client, request, Reply::Ok);
    case Op::Missing: {
      std::vector<std::string> absent;
      for (const std::string &key : request.args)
        if (!data.count(key))
          absent.push_back(key);
      return reply(client, request, Reply::Ok, std::move(absent));
    }
    }
    return false; // not this protocol
  }

  /// Answers the parked requests whose keys are all set now, and fails
  /// the others once an abort or a member's leaving has ended the waits.
  /// A request that changes the keys calls it before its own reply: the
  /// requester may be rank 0's main thread, which can exit (ending this
  /// thread) as soon as it has its answer, so the others' go out first.
  void wakeParked() {
    std::vector<std::string> why = ended();
    for (auto &client : clients) {
      if (!client || client->gone)
        continue;
      std::vector<Frame> still;
      for (Frame &request : client->parked) {
        if (client->gone)
          break;
        bool sent = true;
        if (has(awaited(request)))
          sent = answer(*client, request);
        else if (!why.empty())
          sent = reply(*client, request, Reply::Failed, why);
        else
          still.push_back(std::move(request));
        client->gone = !sent;
      }
      client->parked = std::move(still);
    }
  }

  /// After a pass over the clients: wakes the parked requests, and again
  /// while members leave (their leaving ends waits too).
  void settle() {
    do
      wakeParked();
    while (dropGone());
  }

  void serve() {
    while (true) {
      std::vector<int> fds{listener.socket.get()};
      for (const auto &client : clients)
        fds.push_back(client->socket.get());
      std::vector<bool> ready;
      IoResult r = net::waitReadable(fds, net::Wait(stop), ready);
      if (r.status == Io::Woken || r.status == Io::System)
        return;
      for (size_t i = 0; i < clients.size(); ++i) {
        if (!ready[i + 1] || clients[i]->gone)
          continue;
        Client &client = *clients[i];
        IoResult got = net::receiveAvailable(client.socket.get(), client.inbox);
        bool keep = got.status == Io::Ok;
        Frame request;
        while (keep) {
          Expected<bool> whole = takeFrame(client.inbox, request);
          if (!whole || !*whole) {
            keep = static_cast<bool>(whole);
            break;
          }
          keep = handle(client, std::move(request));
        }
        if (!keep)
          client.gone = true;
      }
      settle();
      if (ready[0]) {
        net::Fd socket;
        while (net::acceptOne(listener, net::Wait(Clock::now()), socket)) {
          clients.push_back(std::make_unique<Client>());
          clients.back()->socket = std::move(socket);
        }
      }
    }
  }
};

StoreServer::StoreServer(std::unique_ptr<State> state)
    : state(std::move(state)) {}

Expected<std::unique_ptr<StoreServer>>
StoreServer::start(net::Listener listener) {
  auto state = std::make_unique<State>();
  state->listener = std::move(listener);
  State *raw = state.get();
  try {
    state->thread = std::thread([raw] { raw->serve(); });
  } catch (const std::exception &e) {
    return Error(std::string("store: cannot start its thread: ") + e.what());
  }
  return std::unique_ptr<StoreServer>(new StoreServer(std::move(state)));
}

StoreServer::~StoreServer() {
  state->stop.signal();
  state->thread.join();
}

int StoreServer::port() const { return state->listener.port; }

// ---- Client ----------------------------------------------------------------

struct Store::State {
  net::Fd socket;
  std::string where; // host:port
  std::string who;
  std::chrono::milliseconds timeout{0};
  /// The interrupting Waker's descriptor; -1: none.
  int wakeFd = -1;
  uint64_t lastId = 0;
  std::string inbox;
  std::optional<StoreFailure> lastFailure;

  Error failure(const std::string &what) const {
    return Error("store: " + who + " " + what);
  }

  /// Records why a call failed and returns its error.
  Error failed(StoreFailure why, Error error) {
    lastFailure = std::move(why);
    return error;
  }
  Error failed(StoreFailure::Kind kind, Error error) {
    StoreFailure why;
    why.kind = kind;
    return failed(std::move(why), std::move(error));
  }

  /// Sends a request and waits for its reply until `deadline`, skipping
  /// the late replies of requests that timed out before. TimedOut is the
  /// caller's to word: it knows what it waited for.
  IoResult ask(Op op, std::vector<std::string> args, Deadline deadline,
               Frame &reply, bool interruptible = true) {
    const net::Wait wait(deadline, interruptible ? wakeFd : -1);
    Frame request{static_cast<uint8_t>(op), ++lastId, std::move(args)};
    std::string bytes = encode(request);
    IoResult r = net::sendAll(socket.get(), bytes.data(), bytes.size(), wait);
    if (!r)
      return r;
    while (true) {
      Expected<bool> whole = takeFrame(inbox, reply);
      if (!whole)
        return {Io::System, "the store at " + where + " sent " +
                                whole.message() +
                                " (another program on its port?)"};
      if (*whole) {
        if (reply.id == request.id)
          return {};
        continue;
      }
      // The reply may have come just before the server closed: what was
      // read is looked at before the close is.
      if (!r)
        return r;
      std::vector<bool> ready;
      r = net::waitReadable({socket.get()}, wait, ready);
      if (r)
        r = net::receiveAvailable(socket.get(), inbox);
    }
  }

  /// The error of a request that did not get its reply.
  Error lost(const IoResult &r, const std::string &during) {
    if (r.status == Io::PeerGone)
      return failed(StoreFailure::ServerGone,
                    failure("lost the store at " + where + " during " + during +
                            ": it closed the connection (rank 0 exited or "
                            "failed)"));
    if (r.status == Io::TimedOut)
      return failed(StoreFailure::TimedOut,
                    failure("timed out after " + net::formatDuration(timeout) +
                            " during " + during + ": the store at " + where +
                            " did not answer (rank 0 is stopped or hung)"));
    if (r.status == Io::Woken)
      return failed(StoreFailure::Interrupted,
                    failure("was interrupted during " + during +
                            " (its owner is shutting down)"));
    return failed(StoreFailure::Other,
                  failure("failed during " + during + ": " + r.error));
  }

  /// A Get or Wait that timed out: the error names the keys still missing.
  Error timedOut(const std::vector<std::string> &keys) {
    Frame reply;
    StoreFailure why;
    why.kind = StoreFailure::TimedOut;
    IoResult r = ask(Op::Missing, keys, deadlineAfter(kShortWait), reply);
    bool answered = r && static_cast<Reply>(reply.op) == Reply::Ok;
    if (answered)
      why.missing = reply.args;
    // Unanswered, every key may be missing: the error names them all, the
    // failure none (the caller cannot tell which).
    std::string absent = keyList(answered ? why.missing : keys);
    size_t count = answered ? why.missing.size() : keys.size();
    return failed(std::move(why),
                  failure("timed out after " + net::formatDuration(timeout) +
                          " waiting for " + absent + " in the store at " +
                          where +
                          (r ? " (whoever sets " +
                                   std::string(count == 1 ? "it" : "them") +
                                   " has not come, or failed first)"
                             : " (which does not answer either)")));
  }

  /// A wait the server ended: a client aborted, or a member left.
  Error endedBy(const std::vector<std::string> &args,
                const std::vector<std::string> &keys) {
    StoreFailure why;
    if (args.size() == 3 && args[0] == "aborted") {
      why.kind = StoreFailure::Aborted;
      why.who = args[1];
      why.reason = args[2];
      return failed(why, failure("stopped waiting for " + keyList(keys) + ": " +
                                 why.who + " aborted: " + why.reason));
    }
    if (args.size() == 2 && args[0] == "closed") {
      why.kind = StoreFailure::MemberClosed;
      why.who = args[1];
      return failed(why,
                    failure("stopped waiting for " + keyList(keys) + ": " +
                            why.who + " closed its connection to the store"));
    }
    return failed(
        StoreFailure::Other,
        failure("got a malformed reply while waiting for " + keyList(keys)));
  }

  Expected<std::vector<std::string>> call(Op op, std::vector<std::string> args,
                                          const std::string &during,
                                          std::chrono::milliseconds bound,
                                          bool interruptible = true) {
    lastFailure.reset();
    Frame reply;
    IoResult r =
        ask(op, std::move(args), deadlineAfter(bound), reply, interruptible);
    if (!r)
      return lost(r, during);
    if (static_cast<Reply>(reply.op) != Reply::Ok)
      return failed(StoreFailure::Other,
                    failure(during + " failed: " +
                            (reply.args.empty() ? "" : reply.args[0])));
    return std::move(reply.args);
  }
  Expected<std::vector<std::string>> call(Op op, std::vector<std::string> args,
                                          const std::string &during) {
    return call(op, std::move(args), during, timeout);
  }

  /// A waiting request (Get, Wait, SetAndGet) for `keys`.
  Expected<std::vector<std::string>>
  waitFor(Op op, std::vector<std::string> args,
          const std::vector<std::string> &keys) {
    lastFailure.reset();
    Frame reply;
    IoResult r = ask(op, std::move(args), deadlineAfter(timeout), reply);
    if (r.status == Io::TimedOut)
      return timedOut(keys);
    if (!r)
      return lost(r, "a wait for " + keyList(keys));
    if (static_cast<Reply>(reply.op) != Reply::Ok)
      return endedBy(reply.args, keys);
    size_t expected = op == Op::Wait ? 0 : keys.size();
    if (reply.args.size() != expected)
      return failed(
          StoreFailure::Other,
          failure("got a malformed reply while waiting for " + keyList(keys)));
    return std::move(reply.args);
  }
};

Store::Store(std::unique_ptr<State> state) : state(std::move(state)) {}
Store::Store(Store &&) noexcept = default;
Store &Store::operator=(Store &&) noexcept = default;
Store::~Store() = default;

Expected<Store> Store::connect(const std::string &host, int port,
                               std::chrono::milliseconds timeout,
                               const std::string &who,
                               const net::Waker *interrupt) {
  std::string where = host + ":" + std::to_string(port);
  net::ConnectOptions options;
  options.wait =
      net::Wait(deadlineAfter(timeout), interrupt ? interrupt->fd() : -1);
  net::Fd socket;
  IoResult r = net::connectTcp(host, port, options, socket);
  auto failure = [&](const std::string &what) {
    return Error("store: " + who + " " + what);
  };
  if (r.status == Io::TimedOut)
    return failure("could not reach the store at " + where + " within " +
                   net::formatDuration(timeout) + " (last error: " + r.error +
                   ")");
  if (r.status == Io::Woken)
    return failure("was interrupted while connecting to the store at " + where +
                   " (its owner is shutting down)");
  if (!r)
    return failure("cannot reach the store at " + where + ": " + r.error);
  Store store = overSocket(std::move(socket), where, timeout, who);
  store.interruptBy(interrupt);
  return store;
}

Store Store::overSocket(net::Fd socket, const std::string &where,
                        std::chrono::milliseconds timeout,
                        const std::string &who) {
  auto state = std::make_unique<State>();
  state->socket = std::move(socket);
  state->where = where;
  state->who = who;
  state->timeout = timeout;
  return Store(std::move(state));
}

void Store::setTimeout(std::chrono::milliseconds timeout) {
  state->timeout = timeout;
}

void Store::interruptBy(const net::Waker *waker) {
  state->wakeFd = waker ? waker->fd() : -1;
}

Status Store::set(const std::string &key, const std::string &value) {
  return state->call(Op::Set, {key, value}, "set of key \"" + key + "\"")
      .status();
}

Expected<std::string> Store::get(const std::string &key) {
  Expected<std::vector<std::string>> value =
      state->waitFor(Op::Get, {key}, {key});
  if (!value)
    return Error(value.message());
  return std::move(value->front());
}

Expected<int64_t> Store::add(const std::string &key, int64_t delta) {
  Expected<std::vector<std::string>> sum = state->call(
      Op::Add, {key, std::to_string(delta)}, "add to key \"" + key + "\"");
  if (!sum)
    return Error(sum.message());
  int64_t value = 0;
  if (sum->size() != 1 || !parseInt64(sum->front(), value))
    return state->failed(
        StoreFailure::Other,
        state->failure("got a malformed sum for key \"" + key + "\""));
  return value;
}

Status Store::wait(const std::vector<std::string> &keys) {
  return state->waitFor(Op::Wait, keys, keys).status();
}

Expected<std::vector<std::string>>
Store::missing(const std::vector<std::string> &keys) {
  return state->call(Op::Missing, keys, "a check of " + keyList(keys));
}

Expected<std::vector<std::string>>
Store::setAndGet(const std::string &key, const std::string &value,
                 const std::vector<std::string> &keys) {
  std::vector<std::string> args{key, value};
  args.insert(args.end(), keys.begin(), keys.end());
  return state->waitFor(Op::SetAndGet, std::move(args), keys);
}

Status Store::erase(const std::vector<std::string> &keys) {
  return state->call(Op::Erase, keys, "erasing " + keyList(keys)).status();
}

Status Store::becomeMember() {
  return state->call(Op::Member, {state->who}, "joining as a member").status();
}

Status Store::abort(const std::string &reason) {
  return state
      ->call(Op::Abort, {reason}, "an abort",
             std::min(state->timeout, kShortWait), /*interruptible=*/false)
      .status();
}

const std::optional<StoreFailure> &Store::lastFailure() const {
  return state->lastFailure;
}

} // namespace autoshard::rt
