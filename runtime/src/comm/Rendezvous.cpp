// torchrun-style launch variables, and a TCP control plane between ranks.
#include "comm/Rendezvous.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace autoshard::rt {

// ---- Launch variables ------------------------------------------------------

namespace {

/// What each variable means, for the errors.
struct LaunchVariable {
  const char *name;
  const char *meaning;
  bool required;
};

constexpr LaunchVariable kRankVar{
    "RANK", "this process's rank, 0 to WORLD_SIZE - 1", true};
constexpr LaunchVariable kWorldSizeVar{
    "WORLD_SIZE", "the number of processes in the job, at least 1", true};
constexpr LaunchVariable kLocalRankVar{
    "LOCAL_RANK",
    "this process's rank on its node, which picks its GPU: 0 to "
    "LOCAL_WORLD_SIZE - 1",
    false};
constexpr LaunchVariable kLocalWorldSizeVar{
    "LOCAL_WORLD_SIZE", "the number of processes on this node, 1 to WORLD_SIZE",
    false};
constexpr LaunchVariable kMasterAddrVar{
    "MASTER_ADDR", "the host name or address of rank 0's node", true};
constexpr LaunchVariable kMasterPortVar{
    "MASTER_PORT", "the TCP port rank 0 listens on, 1 to 65535", true};

constexpr const LaunchVariable *kLaunchVariables[] = {
    &kRankVar,           &kWorldSizeVar,  &kLocalRankVar,
    &kLocalWorldSizeVar, &kMasterAddrVar, &kMasterPortVar};

std::string quoted(const std::string &value) { return "\"" + value + "\""; }

Error badValue(const LaunchVariable &var, const std::string &value,
               const std::string &problem) {
  return Error(std::string(var.name) + "=" + quoted(value) + " " + problem +
               "; " + var.name + " is " + var.meaning);
}

/// A decimal integer and nothing else: no spaces, no trailing text, no
/// exponent. strtoll alone would accept " 4" and "4x" up to the digits.
Expected<int> parseInteger(const LaunchVariable &var, const char *value) {
  std::string text(value);
  bool digitsOnly = !text.empty();
  size_t first = (text[0] == '-' || text[0] == '+') ? 1 : 0;
  if (first == text.size())
    digitsOnly = false;
  for (size_t i = first; i < text.size() && digitsOnly; ++i)
    digitsOnly = text[i] >= '0' && text[i] <= '9';
  if (!digitsOnly)
    return badValue(var, text, "is not a decimal integer");
  errno = 0;
  long long parsed = std::strtoll(value, nullptr, 10);
  if (errno == ERANGE || parsed < INT_MIN || parsed > INT_MAX)
    return badValue(var, text, "is out of range");
  return static_cast<int>(parsed);
}

Error outOfRange(const LaunchVariable &var, int value,
                 const std::string &problem) {
  return badValue(var, std::to_string(value), problem);
}

} // namespace

Expected<std::optional<LaunchEnv>> launchEnvFromVariables(
    const std::function<const char *(const char *)> &getenv) {
  std::vector<std::string> set, missing;
  for (const LaunchVariable *var : kLaunchVariables) {
    if (getenv(var->name))
      set.push_back(var->name);
    else if (var->required)
      missing.push_back(var->name);
  }
  if (set.empty())
    return std::optional<LaunchEnv>();
  if (!missing.empty()) {
    auto list = [](const std::vector<std::string> &names) {
      std::string text;
      for (size_t i = 0; i < names.size(); ++i)
        text += (i ? ", " : "") + names[i];
      return text;
    };
    return Error(list(missing) + (missing.size() == 1 ? " is" : " are") +
                 " not set, but " + list(set) +
                 (set.size() == 1 ? " is" : " are") +
                 ": a torchrun-style launch sets RANK, WORLD_SIZE, "
                 "MASTER_ADDR and MASTER_PORT (and LOCAL_RANK, "
                 "LOCAL_WORLD_SIZE); set them all, or none to run without "
                 "a launcher");
  }

  LaunchEnv env;
  struct IntField {
    const LaunchVariable &var;
    int &field;
  };
  for (IntField f :
       {IntField{kRankVar, env.rank}, IntField{kWorldSizeVar, env.worldSize},
        IntField{kMasterPortVar, env.masterPort}}) {
    Expected<int> value = parseInteger(f.var, getenv(f.var.name));
    if (!value)
      return Error(value.message());
    f.field = *value;
  }
  // One node unless told otherwise (see the header).
  env.localRank = env.rank;
  env.localWorldSize = env.worldSize;
  for (IntField f : {IntField{kLocalRankVar, env.localRank},
                     IntField{kLocalWorldSizeVar, env.localWorldSize}}) {
    if (const char *text = getenv(f.var.name)) {
      Expected<int> value = parseInteger(f.var, text);
      if (!value)
        return Error(value.message());
      f.field = *value;
    }
  }
  env.masterAddr = getenv(kMasterAddrVar.name);

  if (env.worldSize < 1)
    return outOfRange(kWorldSizeVar, env.worldSize, "is not positive");
  if (env.rank < 0 || env.rank >= env.worldSize)
    return outOfRange(kRankVar, env.rank,
                      "is not below WORLD_SIZE=" +
                          std::to_string(env.worldSize) + " or is negative");
  bool localSizeGiven = getenv(kLocalWorldSizeVar.name) != nullptr;
  if (env.localWorldSize < 1 || env.localWorldSize > env.worldSize)
    return outOfRange(kLocalWorldSizeVar, env.localWorldSize,
                      "is not in 1.." + std::to_string(env.worldSize) +
                          " (WORLD_SIZE)");
  if (env.localRank < 0 || env.localRank >= env.localWorldSize) {
    std::string bound =
        "is not below LOCAL_WORLD_SIZE=" + std::to_string(env.localWorldSize) +
        (localSizeGiven ? "" : " (defaulted to WORLD_SIZE)");
    if (!getenv(kLocalRankVar.name))
      return Error("LOCAL_RANK is not set, so it defaults to RANK=" +
                   std::to_string(env.rank) + ", which " + bound +
                   ": set LOCAL_RANK, " + kLocalRankVar.meaning);
    return outOfRange(kLocalRankVar, env.localRank, bound + " or is negative");
  }
  if (env.masterPort < 1 || env.masterPort > 65535)
    return outOfRange(kMasterPortVar, env.masterPort, "is not a TCP port");
  if (env.masterAddr.empty())
    return badValue(kMasterAddrVar, env.masterAddr, "is empty");
  // torchrun's agent listens on MASTER_PORT itself, for the store its
  // workers would use through PyTorch; the ranks meet beside it.
  if (const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE")) {
    std::string value(agent);
    env.agentHoldsMasterPort =
        value == "True" || value == "true" || value == "1";
  }
  if (env.agentHoldsMasterPort && env.masterPort == 65535)
    return outOfRange(kMasterPortVar, env.masterPort,
                      "leaves no port for the ranks: torchrun's agent holds "
                      "MASTER_PORT for its store "
                      "(TORCHELASTIC_USE_AGENT_STORE=True) and the ranks "
                      "meet at MASTER_PORT + 1; give torchrun a lower "
                      "--master-port");
  return std::optional<LaunchEnv>(env);
}

// ---- Waiting for peers -----------------------------------------------------

namespace {

using net::Clock;
using net::Deadline;
using net::formatDuration;
using net::Io;
using net::IoResult;

/// The one line a rank prints while forming the group takes long
/// (TcpGroupOptions::slowJoinNotice). Waits bounded by a deadline wake at
/// wake(deadline) and call due(); the phase of the join sets what the line
/// says.
class JoinNotice {
public:
  explicit JoinNotice(const TcpGroupOptions &options)
      : options(options), start(Clock::now()),
        at(options.slowJoinNotice.count() > 0 ? start + options.slowJoinNotice
                                              : Deadline::max()) {}

  /// What the line says, computed when it is printed.
  void describe(std::function<std::string()> line) { text = std::move(line); }
  /// The earlier of `deadline` and the time to print the line.
  Deadline wake(Deadline deadline) const { return std::min(deadline, at); }
  /// Prints the line once, if its time has come.
  void due() {
    if (Clock::now() < at || !text)
      return;
    at = Deadline::max();
    std::string line = "rendezvous: " + text() + "; it gives up " +
                       formatDuration(options.connectTimeout) +
                       " after it began (a fixed limit)";
    if (options.notice) {
      options.notice(line);
    } else {
      std::fprintf(stderr, "autoshard: %s\n", line.c_str());
      std::fflush(stderr);
    }
  }
  /// How long this rank has waited, for the line.
  std::string waited() const {
    return formatDuration(std::chrono::duration_cast<std::chrono::milliseconds>(
        Clock::now() - start));
  }

private:
  const TcpGroupOptions &options;
  Deadline start;
  Deadline at;
  std::function<std::string()> text;
};

// ---- Messages --------------------------------------------------------------
// Every message: magic (4 bytes, the protocol and its version), kind (1),
// sequence number (8), payload length (8), all big-endian, then the payload.

constexpr uint32_t kMagic = 0x41535231; // "ASR1"
constexpr size_t kHeaderBytes = 4 + 1 + 8 + 8;
/// Larger lengths mean a peer that does not speak the protocol.
constexpr uint64_t kMaxPayloadBytes = uint64_t(1) << 30;
/// How long a failing rank spends telling the others why.
constexpr std::chrono::milliseconds kAbortNoticeTime(1000);

enum class Kind : uint8_t {
  Hello = 1,   // rank -> 0: rank and world size
  Welcome = 2, // 0 -> rank: the group has formed
  AllGather = 3,
  Barrier = 4,
  Broadcast = 5,
  Abort = 6, // either way: the group failed; the payload says why
};

const char *kindName(Kind kind) {
  switch (kind) {
  case Kind::Hello:
    return "hello";
  case Kind::Welcome:
    return "welcome";
  case Kind::AllGather:
    return "allGather";
  case Kind::Barrier:
    return "barrier";
  case Kind::Broadcast:
    return "broadcast";
  case Kind::Abort:
    return "abort";
  }
  return "an unknown message";
}

struct Message {
  Kind kind = Kind::Abort;
  uint64_t seq = 0;
  std::string payload;
};

void putU32(std::string &out, uint32_t v) { net::putBigEndian(out, v, 4); }
void putU64(std::string &out, uint64_t v) { net::putBigEndian(out, v, 8); }
using net::getBigEndian;

std::string encode(const Message &m) {
  std::string out;
  out.reserve(kHeaderBytes + m.payload.size());
  putU32(out, kMagic);
  out.push_back(static_cast<char>(m.kind));
  putU64(out, m.seq);
  putU64(out, m.payload.size());
  out += m.payload;
  return out;
}

/// allGather's reply: every rank's blob, each length-prefixed.
std::string encodeBlobs(const std::vector<std::string> &blobs) {
  std::string out;
  for (const std::string &blob : blobs) {
    putU64(out, blob.size());
    out += blob;
  }
  return out;
}

std::optional<std::vector<std::string>> decodeBlobs(const std::string &text,
                                                    int count) {
  std::vector<std::string> blobs;
  size_t at = 0;
  for (int i = 0; i < count; ++i) {
    if (text.size() - at < 8)
      return std::nullopt;
    uint64_t length = getBigEndian(text.data() + at, 8);
    at += 8;
    if (text.size() - at < length)
      return std::nullopt;
    blobs.push_back(text.substr(at, length));
    at += length;
  }
  if (at != text.size())
    return std::nullopt;
  return blobs;
}

/// One end of a connection: the socket, the peer's rank (-1 before its
/// hello), and received bytes not yet parsed.
struct Link {
  int peer = -1;
  net::Fd socket;
  std::string inbox;
  /// The peer closed (or reset) the connection; what the inbox holds may
  /// still be complete messages.
  bool closed = false;
};

/// A peer's error text as part of this rank's, without a second prefix.
std::string nested(const std::string &message) {
  const std::string prefix = "rendezvous: ";
  return message.compare(0, prefix.size(), prefix) == 0
             ? message.substr(prefix.size())
             : message;
}

std::string peerName(const Link &link) {
  return link.peer >= 0 ? "rank " + std::to_string(link.peer)
                        : "an unidentified peer";
}

/// Appends what the socket has to the inbox without blocking; marks the
/// link closed at end of stream.
Status readAvailable(Link &link, const std::string &during) {
  IoResult r = net::receiveAvailable(link.socket.get(), link.inbox);
  if (r.status == Io::PeerGone)
    link.closed = true;
  else if (!r)
    return Error("rendezvous: reading from " + peerName(link) + " during " +
                 during + " failed: " + r.error);
  return Status::success();
}

/// Takes one whole message off the inbox: false while incomplete, an Error
/// when the bytes are not this protocol.
Expected<bool> takeMessage(Link &link, Message &out) {
  if (link.inbox.size() < kHeaderBytes)
    return false;
  const char *p = link.inbox.data();
  uint64_t magic = getBigEndian(p, 4);
  uint64_t length = getBigEndian(p + 13, 8);
  if (magic != kMagic || length > kMaxPayloadBytes)
    return Error("rendezvous: " + peerName(link) +
                 " sent bytes that are not autoshard's rendezvous protocol "
                 "(another program on this port, or another version)");
  if (link.inbox.size() - kHeaderBytes < length)
    return false;
  out.kind = static_cast<Kind>(p[4]);
  out.seq = getBigEndian(p + 5, 8);
  out.payload = link.inbox.substr(kHeaderBytes, length);
  link.inbox.erase(0, kHeaderBytes + length);
  return true;
}

Error closedError(const Link &link, const std::string &during) {
  return Error("rendezvous: " + peerName(link) +
               " closed its connection during " + during +
               " (it exited, failed, or gave up)");
}

Status sendMessage(Link &link, const Message &m, Deadline deadline,
                   const std::string &during) {
  std::string bytes = encode(m);
  IoResult r = net::sendAll(link.socket.get(), bytes.data(), bytes.size(),
                            net::Wait(deadline));
  if (r.status == Io::TimedOut)
    return Error("rendezvous: timed out sending to " + peerName(link) +
                 " during " + during + " (it stopped reading)");
  if (r.status == Io::PeerGone) {
    link.closed = true;
    return closedError(link, during);
  }
  if (!r)
    return Error("rendezvous: sending to " + peerName(link) + " during " +
                 during + " failed: " + r.error);
  return Status::success();
}

Expected<Message> receiveMessage(Link &link, Deadline deadline,
                                 const std::string &during,
                                 std::chrono::milliseconds timeout,
                                 JoinNotice *notice = nullptr) {
  while (true) {
    Message m;
    Expected<bool> got = takeMessage(link, m);
    if (!got)
      return Error(got.message());
    if (*got)
      return m;
    if (link.closed)
      return closedError(link, during);
    std::vector<bool> ready;
    IoResult r = net::waitReadable(
        {link.socket.get()},
        net::Wait(notice ? notice->wake(deadline) : deadline), ready);
    if (r.status == Io::System)
      return Error("rendezvous: " + r.error);
    if (!r && Clock::now() >= deadline)
      return Error("rendezvous: timed out after " + formatDuration(timeout) +
                   " waiting for " + peerName(link) + " during " + during);
    if (notice)
      notice->due();
    if (r && ready[0])
      if (Status s = readAvailable(link, during); !s)
        return Error(s.message());
  }
}

std::string rankList(const std::vector<int> &ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i)
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

/// Rank 0's half of a gather: one message from every link, read as they
/// come, so that a peer that closes is noticed at once whoever is slow.
Expected<std::vector<Message>>
receiveFromEach(std::vector<Link> &links, Deadline deadline,
                const std::string &during, std::chrono::milliseconds timeout) {
  std::vector<std::optional<Message>> got(links.size());
  while (true) {
    std::vector<int> fds;
    std::vector<size_t> waiting;
    for (size_t i = 0; i < links.size(); ++i) {
      if (got[i])
        continue;
      Message m;
      Expected<bool> complete = takeMessage(links[i], m);
      if (!complete)
        return Error(complete.message());
      if (*complete) {
        got[i] = std::move(m);
        continue;
      }
      if (links[i].closed)
        return closedError(links[i], during);
      fds.push_back(links[i].socket.get());
      waiting.push_back(i);
    }
    if (waiting.empty())
      break;
    std::vector<bool> ready;
    IoResult r = net::waitReadable(fds, net::Wait(deadline), ready);
    if (r.status == Io::System)
      return Error("rendezvous: " + r.error);
    if (r.status == Io::TimedOut) {
      std::vector<int> late;
      for (size_t i : waiting)
        late.push_back(links[i].peer);
      return Error("rendezvous: timed out after " + formatDuration(timeout) +
                   " during " + during + ": rank" +
                   (late.size() == 1 ? " " : "s ") + rankList(late) +
                   (late.size() == 1 ? " has" : " have") + " not reached it");
    }
    for (size_t j = 0; j < fds.size(); ++j)
      if (ready[j])
        if (Status s = readAvailable(links[waiting[j]], during); !s)
          return Error(s.message());
  }
  std::vector<Message> messages;
  for (std::optional<Message> &m : got)
    messages.push_back(std::move(*m));
  return messages;
}

/// Tells every open link why the group failed, best effort and briefly.
void noticeAll(std::vector<Link> &links, const Message &abort) {
  Deadline deadline = Clock::now() + kAbortNoticeTime;
  for (Link &link : links)
    if (!link.closed && link.socket.get() >= 0)
      (void)sendMessage(link, abort, deadline, "abort");
}

Expected<net::Fd> connectWithRetry(const std::string &host, int port,
                                   int rank, int worldSize, Deadline deadline,
                                   std::chrono::milliseconds timeout,
                                   JoinNotice &notice) {
  std::string lastError = "no attempt was made";
  notice.describe([&, rank, worldSize, port] {
    return "rank " + std::to_string(rank) + " of " + std::to_string(worldSize) +
           " has tried for " + notice.waited() + " to reach rank 0 at " + host +
           ":" + std::to_string(port) +
           " (MASTER_ADDR:MASTER_PORT; last error: " + lastError +
           "), which is not there yet";
  });
  net::ConnectOptions options;
  options.wait = net::Wait(deadline);
  options.waiting = [&](const std::string &error) {
    lastError = error;
    notice.due();
  };
  net::Fd socket;
  IoResult r = net::connectTcp(host, port, options, socket);
  if (r)
    return socket;
  if (r.status == Io::System)
    return Error("rendezvous: rank " + std::to_string(rank) +
                 " cannot reach rank 0's host (MASTER_ADDR): " + r.error);
  return Error("rendezvous: rank " + std::to_string(rank) +
               " could not connect to rank 0 at " + host + ":" +
               std::to_string(port) + " within " + formatDuration(timeout) +
               " (last error: " + r.error +
               "); check that rank 0 is running and that MASTER_ADDR and "
               "MASTER_PORT are the same on every rank");
}

} // namespace

// ---- TcpListener -----------------------------------------------------------

Expected<TcpListener> TcpListener::open(int port, const std::string &host) {
  if (port < 0 || port > 65535)
    return Error("rendezvous: port " + std::to_string(port) +
                 " is not a TCP port (0..65535; 0 picks a free one)");
  Expected<net::Listener> listener = net::listenTcp(port, host);
  if (!listener)
    return Error("rendezvous: rank 0 " + listener.message() +
                 (port > 0 ? "; choose another MASTER_PORT" : ""));
  return TcpListener(std::move(*listener));
}

// ---- TcpGroup --------------------------------------------------------------

struct TcpGroup::State {
  int rank = 0;
  int size = 1;
  TcpGroupOptions options;
  /// Rank 0: one link per other rank, in rank order; the others: rank 0's.
  std::vector<Link> links;
  /// Operations started so far; the current one's number.
  uint64_t seq = 0;
  /// The first failure; set, the group is unusable.
  std::optional<std::string> failure;

  /// Records `message` as the group's failure, tells the peers, closes the
  /// connections and returns the error.
  Error fail(const std::string &message) {
    failure = message;
    noticeAll(links, Message{Kind::Abort, seq, message});
    links.clear();
    return Error(message);
  }

  Status usable() const {
    if (failure)
      return Error("rendezvous: the group failed earlier and cannot be used "
                   "again: " +
                   *failure);
    return Status::success();
  }

  /// A message from `link` that should be (kind, seq): the error when it
  /// is another, or an abort.
  Status expect(const Link &link, const Message &m, Kind kind,
                const std::string &during) const {
    if (m.kind == Kind::Abort)
      return Error("rendezvous: " + peerName(link) +
                   " ended the group during " + during + ": " +
                   nested(m.payload));
    if (m.kind != kind || m.seq != seq)
      return Error("rendezvous: " + peerName(link) + " is in " +
                   kindName(m.kind) + " #" + std::to_string(m.seq) +
                   " while rank " + std::to_string(rank) + " is in " + during +
                   ": every rank must call the group's operations in the same "
                   "order");
    return Status::success();
  }

  std::string describe(Kind kind) const {
    return std::string(kindName(kind)) + " #" + std::to_string(seq);
  }

  /// allGather and barrier: every rank sends to rank 0, which answers each
  /// with the gathered blobs (nothing for a barrier).
  Expected<std::vector<std::string>> gather(Kind kind,
                                            const std::string &mine) {
    if (Status s = usable(); !s)
      return Error(s.message());
    ++seq;
    if (size == 1)
      return std::vector<std::string>{mine};
    std::string during = describe(kind);
    Deadline deadline = Clock::now() + options.operationTimeout;
    if (rank == 0) {
      Expected<std::vector<Message>> messages =
          receiveFromEach(links, deadline, during, options.operationTimeout);
      if (!messages)
        return fail(messages.message());
      std::vector<std::string> blobs{mine};
      for (size_t i = 0; i < links.size(); ++i) {
        Message &m = (*messages)[i];
        if (Status s = expect(links[i], m, kind, during); !s)
          return fail(s.message());
        blobs.push_back(std::move(m.payload));
      }
      Message reply{kind, seq,
                    kind == Kind::Barrier ? std::string() : encodeBlobs(blobs)};
      for (Link &link : links)
        if (Status s = sendMessage(link, reply, deadline, during); !s)
          return fail(s.message());
      return blobs;
    }
    Link &root = links.front();
    if (Status s =
            sendMessage(root, Message{kind, seq, mine}, deadline, during);
        !s)
      return fail(s.message());
    Expected<Message> reply =
        receiveMessage(root, deadline, during, options.operationTimeout);
    if (!reply && !root.closed && Clock::now() >= deadline)
      // A TCP send does not say whether rank 0 read this rank's part, so
      // the wait cannot tell a missing rank 0 from one that waits itself.
      return fail(reply.message() +
                  ": rank 0 replies once every rank's part has come, so it "
                  "has either not reached it or waits itself for another "
                  "rank, which its own message names");
    if (!reply)
      return fail(reply.message());
    if (Status s = expect(root, *reply, kind, during); !s)
      return fail(s.message());
    if (kind == Kind::Barrier)
      return std::vector<std::string>();
    std::optional<std::vector<std::string>> blobs =
        decodeBlobs(reply->payload, size);
    if (!blobs)
      return fail("rendezvous: rank 0's reply to " + during + " is malformed");
    return std::move(*blobs);
  }
};

TcpGroup::TcpGroup(std::unique_ptr<State> state) : state(std::move(state)) {}
TcpGroup::TcpGroup(TcpGroup &&other) noexcept = default;
TcpGroup &TcpGroup::operator=(TcpGroup &&other) noexcept = default;
TcpGroup::~TcpGroup() = default;

int TcpGroup::rank() const { return state->rank; }
int TcpGroup::size() const { return state->size; }

void TcpGroup::setOperationTimeout(std::chrono::milliseconds timeout) {
  state->options.operationTimeout = timeout;
}

Expected<TcpGroup> TcpGroup::accept(TcpListener listener, int worldSize,
                                    const TcpGroupOptions &options) {
  if (worldSize < 1)
    return Error("rendezvous: world size " + std::to_string(worldSize) +
                 " is not positive");
  auto state = std::make_unique<State>();
  state->rank = 0;
  state->size = worldSize;
  state->options = options;
  if (worldSize == 1)
    return TcpGroup(std::move(state));
  if (!listener.listener.socket)
    return Error("rendezvous: rank 0 has no listening socket");

  const std::string during =
      "the rendezvous (rank 0 on port " + std::to_string(listener.port()) + ")";
  Deadline deadline = Clock::now() + options.connectTimeout;
  std::vector<std::optional<Link>> joined(worldSize - 1);
  int joinedCount = 0;
  auto missingRanks = [&] {
    std::vector<int> missing;
    for (int r = 1; r < worldSize; ++r)
      if (!joined[r - 1])
        missing.push_back(r);
    return missing;
  };
  JoinNotice notice(options);
  notice.describe([&] {
    std::vector<int> missing = missingRanks();
    return "rank 0 has waited " + notice.waited() + " on port " +
           std::to_string(listener.port()) + " for the other ranks: " +
           std::to_string(worldSize - static_cast<int>(missing.size())) +
           " of " + std::to_string(worldSize) + " joined (missing rank" +
           (missing.size() == 1 ? " " : "s ") + rankList(missing) +
           "; each connects to MASTER_ADDR:MASTER_PORT)";
  });
  std::vector<Link> pending; // accepted; hello not yet complete
  // Refusing the group: every connected rank learns why before it closes.
  auto refuse = [&](const std::string &message) -> Error {
    std::vector<Link> everyone = std::move(pending);
    for (std::optional<Link> &link : joined)
      if (link)
        everyone.push_back(std::move(*link));
    noticeAll(everyone, Message{Kind::Abort, 0, message});
    return Error(message);
  };

  while (true) {
    for (size_t i = 0; i < pending.size();) {
      Message m;
      Expected<bool> complete = takeMessage(pending[i], m);
      bool hello = complete && *complete && m.kind == Kind::Hello &&
                   m.payload.size() == 8;
      if (complete && !*complete && !pending[i].closed) {
        ++i;
        continue;
      }
      if (!hello) {
        // Not a rank of this protocol (or gone before saying hello): drop
        // it and keep waiting for the real ones.
        pending.erase(pending.begin() + static_cast<ptrdiff_t>(i));
        continue;
      }
      int rank = static_cast<int>(
          static_cast<int32_t>(getBigEndian(m.payload.data(), 4)));
      int theirSize = static_cast<int>(
          static_cast<int32_t>(getBigEndian(m.payload.data() + 4, 4)));
      if (theirSize != worldSize)
        return refuse("rendezvous: rank " + std::to_string(rank) +
                      " joined with world size " + std::to_string(theirSize) +
                      " but rank 0 has world size " +
                      std::to_string(worldSize) +
                      ": WORLD_SIZE must be the same on every rank");
      if (rank < 1 || rank >= worldSize)
        return refuse("rendezvous: a process joined as rank " +
                      std::to_string(rank) + ", but only ranks 1.." +
                      std::to_string(worldSize - 1) +
                      " connect to rank 0 (RANK must be below WORLD_SIZE, "
                      "and only one process is rank 0)");
      if (joined[rank - 1])
        return refuse("rendezvous: two processes joined as rank " +
                      std::to_string(rank) +
                      ": every process needs its own RANK");
      pending[i].peer = rank;
      joined[rank - 1] = std::move(pending[i]);
      pending.erase(pending.begin() + static_cast<ptrdiff_t>(i));
      ++joinedCount;
    }
    if (joinedCount == worldSize - 1)
      break;

    std::vector<int> fds{listener.listener.socket.get()};
    for (const Link &link : pending)
      fds.push_back(link.socket.get());
    std::vector<bool> ready;
    IoResult waited =
        net::waitReadable(fds, net::Wait(notice.wake(deadline)), ready);
    if (waited.status == Io::System)
      return refuse("rendezvous: " + waited.error);
    if (!waited && Clock::now() >= deadline) {
      std::vector<int> missing = missingRanks();
      return refuse("rendezvous: only " + std::to_string(joinedCount + 1) +
                    " of " + std::to_string(worldSize) +
                    " ranks joined rank 0 on port " +
                    std::to_string(listener.port()) + " within " +
                    formatDuration(options.connectTimeout) + "; missing rank" +
                    (missing.size() == 1 ? " " : "s ") + rankList(missing));
    }
    notice.due();
    if (!waited)
      continue;
    for (size_t j = 1; j < fds.size(); ++j)
      if (ready[j] && !readAvailable(pending[j - 1], during).ok())
        pending[j - 1].closed = true; // dropped at the next pass
    if (ready[0]) {
      // Every connection waiting now; a failed accept is retried on the
      // next wake.
      Link link;
      while (net::acceptOne(listener.listener, net::Wait(Clock::now()),
                            link.socket)) {
        pending.push_back(std::move(link));
        link = Link();
      }
    }
  }

  // Everyone is here: no one else may join, and every rank starts at once.
  {
    TcpListener done = std::move(listener);
  }
  for (std::optional<Link> &link : joined)
    state->links.push_back(std::move(*link));
  for (Link &link : state->links)
    if (Status s =
            sendMessage(link, Message{Kind::Welcome, 0, ""}, deadline, during);
        !s)
      return state->fail(s.message());
  return TcpGroup(std::move(state));
}

Expected<TcpGroup> TcpGroup::connect(const std::string &host, int port,
                                     int rank, int worldSize,
                                     const TcpGroupOptions &options) {
  if (worldSize < 2 || rank < 1 || rank >= worldSize)
    return Error("rendezvous: rank " + std::to_string(rank) +
                 " of a world of " + std::to_string(worldSize) +
                 " cannot connect to rank 0: only ranks 1..WORLD_SIZE - 1 do");
  if (port < 1 || port > 65535)
    return Error("rendezvous: port " + std::to_string(port) +
                 " is not a TCP port (1..65535)");
  Deadline deadline = Clock::now() + options.connectTimeout;
  JoinNotice notice(options);
  Expected<net::Fd> socket = connectWithRetry(
      host, port, rank, worldSize, deadline, options.connectTimeout, notice);
  if (!socket)
    return Error(socket.message());

  auto state = std::make_unique<State>();
  state->rank = rank;
  state->size = worldSize;
  state->options = options;
  Link root;
  root.peer = 0;
  root.socket = std::move(*socket);
  state->links.push_back(std::move(root));
  Link &link = state->links.front();

  const std::string where = host + ":" + std::to_string(port);
  const std::string during = "the rendezvous at " + where;
  std::string hello;
  putU32(hello, static_cast<uint32_t>(rank));
  putU32(hello, static_cast<uint32_t>(worldSize));
  if (Status s =
          sendMessage(link, Message{Kind::Hello, 0, hello}, deadline, during);
      !s)
    return Error(s.message());
  notice.describe([&] {
    return "rank " + std::to_string(rank) + " of " + std::to_string(worldSize) +
           " reached rank 0 at " + where + " and has waited " +
           notice.waited() +
           " for the group to form (rank 0 starts it once all " +
           std::to_string(worldSize) + " ranks have joined)";
  });
  Expected<Message> reply =
      receiveMessage(link, deadline, during, options.connectTimeout, &notice);
  if (!reply) {
    if (link.closed)
      return Error("rendezvous: rank 0 at " + where +
                   " closed the connection before the group formed (it "
                   "failed or exited, or another program holds the port)");
    return Error("rendezvous: rank " + std::to_string(rank) +
                 " reached rank 0 at " + where +
                 " but the group did not form within " +
                 formatDuration(options.connectTimeout) +
                 " (rank 0 starts it once all " + std::to_string(worldSize) +
                 " ranks have joined): " + reply.message());
  }
  if (reply->kind == Kind::Abort)
    return Error("rendezvous: rank 0 refused the group: " +
                 nested(reply->payload));
  if (reply->kind != Kind::Welcome)
    return Error("rendezvous: rank 0 at " + where + " answered hello with " +
                 kindName(reply->kind));
  return TcpGroup(std::move(state));
}

Expected<TcpGroup> TcpGroup::join(const LaunchEnv &env,
                                  const TcpGroupOptions &options) {
  if (env.worldSize == 1)
    return accept(TcpListener(net::Listener()), 1, options);
  if (env.rank == 0) {
    Expected<TcpListener> listener = TcpListener::open(env.rendezvousPort());
    if (!listener)
      return Error(listener.message() +
                   (env.agentHoldsMasterPort
                        ? " (under torchrun the ranks meet at MASTER_PORT + "
                          "1: its agent holds MASTER_PORT)"
                        : ""));
    return accept(std::move(*listener), env.worldSize, options);
  }
  return connect(env.masterAddr, env.rendezvousPort(), env.rank, env.worldSize,
                 options);
}

Expected<std::vector<std::string>>
TcpGroup::allGather(const std::string &mine) {
  return state->gather(Kind::AllGather, mine);
}

Status TcpGroup::barrier() {
  return state->gather(Kind::Barrier, std::string()).status();
}

Expected<std::string> TcpGroup::broadcast(const std::string &fromRank0) {
  State &s = *state;
  if (Status usable = s.usable(); !usable)
    return Error(usable.message());
  ++s.seq;
  if (s.size == 1)
    return fromRank0;
  std::string during = s.describe(Kind::Broadcast);
  Deadline deadline = Clock::now() + s.options.operationTimeout;
  if (s.rank == 0) {
    for (Link &link : s.links)
      if (Status sent =
              sendMessage(link, Message{Kind::Broadcast, s.seq, fromRank0},
                          deadline, during);
          !sent)
        return s.fail(sent.message());
    return fromRank0;
  }
  Link &root = s.links.front();
  Expected<Message> m =
      receiveMessage(root, deadline, during, s.options.operationTimeout);
  if (!m)
    return s.fail(m.message());
  if (Status ok = s.expect(root, *m, Kind::Broadcast, during); !ok)
    return s.fail(ok.message());
  return std::move(m->payload);
}

} // namespace autoshard::rt
