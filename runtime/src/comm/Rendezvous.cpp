// torchrun-style launch variables, and a TCP control plane between ranks.
#include "comm/Rendezvous.h"
#include "comm/Store.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <mutex>
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
// ---- Keys ------------------------------------------------------------------
// The group lives in a key-value store (comm/Store.h) that rank 0 serves on
// the rendezvous port. Joining: a rank counts itself in ("rendezvous/
// arrivals"), posts "RANK WORLD_SIZE" under its arrival number and waits
// for "rendezvous/start", which rank 0 sets once every rank has arrived
// and agrees. Operation #S: every rank posts its kind and blob under
// "op/S/RANK" and waits for every rank's, in one request.

const std::string kArrivals = "rendezvous/arrivals";
const std::string kStart = "rendezvous/start";

std::string arrivalKey(int64_t number) {
  return "rendezvous/arrival/" + std::to_string(number);
}

std::string opKey(uint64_t seq, int rank) {
  return "op/" + std::to_string(seq) + "/" + std::to_string(rank);
}

/// Rank `rank`'s word on the board of waiting ranks (TcpGroup::waitWords):
/// what it waits in outside the group, when it has waited long.
std::string waitWordKey(int rank) {
  return "wait-word/" + std::to_string(rank);
}

/// How long reading a late rank's word may take, after a timeout.
constexpr std::chrono::milliseconds kWordReadTimeout(2000);

/// The rank whose key `key` (op/S/RANK) is; -1 when it is not one.
int rankOfKey(const std::string &key) {
  size_t slash = key.rfind('/');
  if (slash == std::string::npos)
    return -1;
  try {
    return std::stoi(key.substr(slash + 1));
  } catch (...) {
    return -1;
  }
}

enum class Kind : char {
  AllGather = 'g',
  Barrier = 'b',
  Broadcast = 'c',
};

const char *kindName(char kind) {
  switch (static_cast<Kind>(kind)) {
  case Kind::AllGather:
    return "allGather";
  case Kind::Barrier:
    return "barrier";
  case Kind::Broadcast:
    return "broadcast";
  }
  return "an unknown operation";
}

/// A peer's error text as part of this rank's, without a second prefix.
std::string nested(const std::string &message) {
  const std::string prefix = "rendezvous: ";
  return message.compare(0, prefix.size(), prefix) == 0
             ? message.substr(prefix.size())
             : message;
}

std::string rankList(const std::vector<int> &ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i)
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

std::string closedText(const std::string &who, const std::string &during) {
  return "rendezvous: " + who + " closed its connection during " + during +
         " (it exited, failed, or gave up)";
}

/// Sets the store's bound to what is left until `deadline` (at least 1 ms).
void boundBy(Store &store, Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - Clock::now());
  store.setTimeout(std::max(left, std::chrono::milliseconds(1)));
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
  return TcpListener(std::move(*listener), host);
}

// ---- TcpGroup --------------------------------------------------------------

struct TcpGroup::State {
  int rank = 0;
  int size = 1;
  TcpGroupOptions options;
  /// Rank 0: the store every rank meets in. Declared before `store` so
  /// that rank 0's own client leaves before the server stops.
  std::unique_ptr<StoreServer> server;
  /// This rank's client of the store (none in a world of one).
  std::optional<Store> store;
  /// Operations started so far; the current one's number.
  uint64_t seq = 0;
  /// The kind of the last operation every rank finished (seq - 1 while
  /// one runs): where a rank that has not reached the current one is.
  std::optional<Kind> finished;
  /// This rank's key of the last operation, erased during the next: by
  /// then every rank has read it (see gather()).
  std::string lastKey;
  /// The first failure; set, the group is unusable.
  std::optional<std::string> failure;
  /// Where the store is, for further connections (waitWords).
  std::string storeHost;
  int storePort = 0;

  /// Records `message` as the group's failure, posts it for the others
  /// (the store's abort ends their waits at once) and returns the error.
  Error fail(const std::string &message) {
    failure = message;
    if (store)
      (void)store->abort(message);
    return Error(message);
  }

  Status usable() const {
    if (failure)
      return Error("rendezvous: the group failed earlier and cannot be used "
                   "again: " +
                   *failure);
    return Status::success();
  }

  std::string describe(Kind kind) const {
    return std::string(kindName(static_cast<char>(kind))) + " #" +
           std::to_string(seq);
  }

  /// The words the ranks in `late` posted on the board of waiting ranks,
  /// by rank ("" for none). Best effort, and bounded: it only adds to a
  /// timeout, and a store that does not answer costs one short wait.
  std::vector<std::string> wordsOf(const std::vector<int> &late) {
    std::vector<std::string> words(late.size());
    std::vector<std::string> keys;
    for (int r : late)
      keys.push_back(waitWordKey(r));
    store->setTimeout(kWordReadTimeout);
    Expected<std::vector<std::string>> absent = store->missing(keys);
    if (!absent)
      return words;
    for (size_t i = 0; i < late.size(); ++i) {
      if (std::find(absent->begin(), absent->end(), keys[i]) != absent->end())
        continue;
      Expected<std::string> word = store->get(keys[i]);
      if (!word)
        break;
      words[i] = std::move(*word);
    }
    return words;
  }

  /// Why the ranks in `late` have not reached operation #seq, as far as
  /// the store can tell: every rank left the operation before together
  /// (none is in another of the group's), so each late rank is slow,
  /// stuck outside the group (its word, if it posted one, says where) or
  /// calls fewer of the group's operations than this one.
  std::string whereLate(const std::vector<int> &late) {
    std::string text;
    std::vector<std::string> words = wordsOf(late);
    for (size_t i = 0; i < late.size(); ++i)
      if (!words[i].empty())
        text += "; rank " + std::to_string(late[i]) + " waits in " + words[i] +
                " (by its word in the job's store)";
    if (finished)
      text += "; every rank finished " +
              std::string(kindName(static_cast<char>(*finished))) + " #" +
              std::to_string(seq - 1) + " together, so " +
              (late.size() == 1 ? "it is stopped or slow, stuck outside the "
                                  "group, or calls"
                                : "they are stopped or slow, stuck outside "
                                  "the group, or call") +
              " fewer of the group's operations than rank " +
              std::to_string(rank);
    return text;
  }

  /// The error of a failed wait for operation `during`'s keys, in ranks.
  std::string explain(const Error &error, const std::string &during) {
    const std::optional<StoreFailure> &why = store->lastFailure();
    if (!why)
      return "rendezvous: " + error.message();
    switch (why->kind) {
    case StoreFailure::Aborted:
      return "rendezvous: " + why->who + " ended the group during " + during +
             ": " + nested(why->reason);
    case StoreFailure::MemberClosed:
      return closedText(why->who, during);
    case StoreFailure::ServerGone:
      return closedText("rank 0", during);
    case StoreFailure::TimedOut: {
      std::vector<int> late;
      for (const std::string &key : why->missing)
        late.push_back(rankOfKey(key));
      if (late.empty())
        break;
      return "rendezvous: timed out after " +
             formatDuration(options.operationTimeout) + " during " + during +
             ": rank" + (late.size() == 1 ? " " : "s ") + rankList(late) +
             (late.size() == 1 ? " has" : " have") + " not reached it" +
             whereLate(late);
    }
    case StoreFailure::Interrupted: // the group's store has no Waker
    case StoreFailure::Other:
      break;
    }
    return "rendezvous: " + during + ": " + error.message();
  }

  /// Every operation: each rank posts (kind, blob) and waits for every
  /// rank's in one request, so every rank's answer is on its way before
  /// any rank can go on (and, being rank 0, stop serving the store). The
  /// kinds must agree.
  Expected<std::vector<std::string>> gather(Kind kind,
                                            const std::string &mine) {
    if (Status s = usable(); !s)
      return Error(s.message());
    ++seq;
    if (size == 1)
      return std::vector<std::string>{mine};
    std::string during = describe(kind);
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r)
      keys.push_back(opKey(seq, r));
    store->setTimeout(options.operationTimeout);
    // Every rank has posted this operation's key, so every rank has had
    // its answer to the last one: this rank's key of it is no longer read.
    // A failure here shows again in the wait below.
    if (!lastKey.empty())
      (void)store->erase({lastKey});
    Expected<std::vector<std::string>> values = store->setAndGet(
        keys[static_cast<size_t>(rank)], static_cast<char>(kind) + mine, keys);
    if (!values)
      return fail(explain(Error(values.message()), during));
    lastKey = keys[static_cast<size_t>(rank)];
    std::vector<std::string> blobs;
    for (int r = 0; r < size; ++r) {
      std::string &value = (*values)[static_cast<size_t>(r)];
      if (value.empty() || value[0] != static_cast<char>(kind))
        return fail("rendezvous: rank " + std::to_string(r) + " is in " +
                    kindName(value.empty() ? 0 : value[0]) + " #" +
                    std::to_string(seq) + " while rank " +
                    std::to_string(rank) + " is in " + during +
                    ": every rank must call the group's operations in the "
                    "same order");
      blobs.push_back(value.substr(1));
    }
    finished = kind;
    return blobs;
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

  const int port = listener.port();
  const std::string during =
      "the rendezvous (rank 0 on port " + std::to_string(port) + ")";
  Deadline deadline = Clock::now() + options.connectTimeout;
  Expected<std::unique_ptr<StoreServer>> server =
      StoreServer::start(std::move(listener.listener));
  if (!server)
    return Error("rendezvous: rank 0 cannot serve the rendezvous: " +
                 server.message());
  state->server = std::move(*server);
  // Rank 0 meets the others in its own store, as a client like them.
  const std::string self = listener.host.empty() ? "127.0.0.1" : listener.host;
  net::ConnectOptions connectOptions;
  connectOptions.wait = net::Wait(deadline);
  net::Fd socket;
  if (IoResult r = net::connectTcp(self, port, connectOptions, socket); !r)
    return Error("rendezvous: rank 0 cannot reach its own store at " + self +
                 ":" + std::to_string(port) + ": " + r.error);
  state->store.emplace(Store::overSocket(std::move(socket),
                                         self + ":" + std::to_string(port),
                                         options.connectTimeout, "rank 0"));
  Store &store = *state->store;
  if (Status s = store.becomeMember(); !s)
    return Error("rendezvous: " + s.message());
  state->storeHost = self;
  state->storePort = port;

  std::vector<bool> joined(static_cast<size_t>(worldSize), false);
  int joinedCount = 0;
  auto missingRanks = [&] {
    std::vector<int> missing;
    for (int r = 1; r < worldSize; ++r)
      if (!joined[static_cast<size_t>(r)])
        missing.push_back(r);
    return missing;
  };
  JoinNotice notice(options);
  notice.describe([&] {
    std::vector<int> missing = missingRanks();
    return "rank 0 has waited " + notice.waited() + " on port " +
           std::to_string(port) + " for the other ranks: " +
           std::to_string(worldSize - static_cast<int>(missing.size())) +
           " of " + std::to_string(worldSize) + " joined (missing rank" +
           (missing.size() == 1 ? " " : "s ") + rankList(missing) +
           "; each connects to MASTER_ADDR:MASTER_PORT)";
  });
  // Refusing the group: every waiting rank learns why through the store.
  auto refuse = [&](const std::string &message) -> Error {
    return state->fail(message);
  };

  // Arrivals are read in the order the ranks counted themselves in.
  while (joinedCount < worldSize - 1) {
    boundBy(store, notice.wake(deadline));
    Expected<std::string> arrival = store.get(arrivalKey(joinedCount + 1));
    if (!arrival) {
      const std::optional<StoreFailure> &why = store.lastFailure();
      if (!why || why->kind != StoreFailure::TimedOut) {
        if (why && why->kind == StoreFailure::MemberClosed)
          return refuse(closedText(why->who, during));
        return refuse("rendezvous: " + during + ": " + arrival.message());
      }
      if (Clock::now() >= deadline) {
        std::vector<int> missing = missingRanks();
        return refuse("rendezvous: only " + std::to_string(joinedCount + 1) +
                      " of " + std::to_string(worldSize) +
                      " ranks joined rank 0 on port " + std::to_string(port) +
                      " within " + formatDuration(options.connectTimeout) +
                      "; missing rank" + (missing.size() == 1 ? " " : "s ") +
                      rankList(missing));
      }
      notice.due();
      continue;
    }
    int rank = -1, theirSize = -1;
    if (std::sscanf(arrival->c_str(), "%d %d", &rank, &theirSize) != 2)
      return refuse("rendezvous: arrival " + std::to_string(joinedCount + 1) +
                    " is malformed: \"" + *arrival + "\"");
    if (theirSize != worldSize)
      return refuse("rendezvous: rank " + std::to_string(rank) +
                    " joined with world size " + std::to_string(theirSize) +
                    " but rank 0 has world size " + std::to_string(worldSize) +
                    ": WORLD_SIZE must be the same on every rank");
    if (rank < 1 || rank >= worldSize)
      return refuse("rendezvous: a process joined as rank " +
                    std::to_string(rank) + ", but only ranks 1.." +
                    std::to_string(worldSize - 1) +
                    " connect to rank 0 (RANK must be below WORLD_SIZE, "
                    "and only one process is rank 0)");
    if (joined[static_cast<size_t>(rank)])
      return refuse("rendezvous: two processes joined as rank " +
                    std::to_string(rank) +
                    ": every process needs its own RANK");
    joined[static_cast<size_t>(rank)] = true;
    ++joinedCount;
  }
  // Everyone is here: every rank starts at once.
  boundBy(store, deadline);
  if (Status s = store.set(kStart, std::to_string(worldSize)); !s)
    return refuse("rendezvous: " + during + ": " + s.message());
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
  const std::string where = host + ":" + std::to_string(port);
  const std::string me = "rank " + std::to_string(rank);
  state->store.emplace(
      Store::overSocket(std::move(*socket), where, options.connectTimeout, me));
  Store &store = *state->store;
  state->storeHost = host;
  state->storePort = port;

  // Why the group did not form, from the store's last failure.
  auto notFormed = [&](const std::string &message) -> Error {
    const std::optional<StoreFailure> &why = store.lastFailure();
    StoreFailure::Kind kind = why ? why->kind : StoreFailure::Other;
    if (kind == StoreFailure::Aborted)
      return Error("rendezvous: " + why->who +
                   " refused the group: " + nested(why->reason));
    if (kind == StoreFailure::ServerGone)
      return Error("rendezvous: rank 0 at " + where +
                   " closed the connection before the group formed (it "
                   "failed or exited, or another program holds the port)");
    if (kind == StoreFailure::MemberClosed)
      return Error("rendezvous: " + why->who +
                   " closed its connection before the group formed (it "
                   "exited, failed, or gave up)");
    if (kind == StoreFailure::TimedOut)
      return Error("rendezvous: " + me + " reached rank 0 at " + where +
                   " but the group did not form within " +
                   formatDuration(options.connectTimeout) +
                   " (rank 0 starts it once all " + std::to_string(worldSize) +
                   " ranks have joined): " + message);
    return Error("rendezvous: " + me + " at " + where + ": " + message);
  };

  boundBy(store, deadline);
  Expected<int64_t> arrival = store.add(kArrivals, 1);
  if (!arrival)
    return notFormed(arrival.message());
  notice.describe([&] {
    return me + " of " + std::to_string(worldSize) + " reached rank 0 at " +
           where + " and has waited " + notice.waited() +
           " for the group to form (rank 0 starts it once all " +
           std::to_string(worldSize) + " ranks have joined)";
  });
  // Posting the arrival and waiting for the start are one request, so
  // that this rank waits before rank 0 can read the arrival (and refuse).
  boundBy(store, notice.wake(deadline));
  Expected<std::vector<std::string>> start = store.setAndGet(
      arrivalKey(*arrival),
      std::to_string(rank) + " " + std::to_string(worldSize), {kStart});
  while (!start) {
    const std::optional<StoreFailure> &why = store.lastFailure();
    if (!why || why->kind != StoreFailure::TimedOut || Clock::now() >= deadline)
      return notFormed(start.message());
    notice.due();
    boundBy(store, notice.wake(deadline));
    start = store.setAndGet(
        arrivalKey(*arrival),
        std::to_string(rank) + " " + std::to_string(worldSize), {kStart});
  }
  // Rank 0 starts the group with the first worldSize - 1 arrivals: a later
  // one is a process too many.
  if (*arrival > worldSize - 1)
    return Error("rendezvous: " + me + " arrived at rank 0 at " + where +
                 " after the group of " + std::to_string(worldSize) +
                 " had formed without it: two processes have RANK=" +
                 std::to_string(rank) + ", or WORLD_SIZE is wrong");
  // A member from now on, not before: a process turned away must not end
  // the group's waits when it leaves.
  if (Status s = store.becomeMember(); !s)
    return notFormed(s.message());
  store.setTimeout(options.operationTimeout);
  return TcpGroup(std::move(state));
}

Expected<TcpGroup> TcpGroup::join(const LaunchEnv &env,
                                  const TcpGroupOptions &options) {
  if (env.worldSize == 1)
    return accept(TcpListener(net::Listener(), ""), 1, options);
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
  // Every rank posts (the others an empty blob) and takes rank 0's: the
  // same meeting as the other operations, so rank 0 cannot return (and
  // exit) before the others have its blob.
  Expected<std::vector<std::string>> all = state->gather(
      Kind::Broadcast, state->rank == 0 ? fromRank0 : std::string());
  if (!all)
    return Error(all.message());
  return std::move(all->front());
}

namespace {

/// WaitWords as keys "wait-word/RANK" of the group's store.
class StoreWaitWords final : public WaitWords {
public:
  StoreWaitWords(Store store, int rank, int size)
      : store(std::move(store)), rank(rank), size(size) {}

  void post(const std::string &word) override {
    std::lock_guard<std::mutex> lock(mutex);
    // Best effort: a word that does not arrive only makes a later timeout
    // message less precise, and says so.
    (void)store.set(key(rank), word);
  }

  const char *how() const override { return "post in the job's store"; }

  Expected<std::vector<std::string>> read() override {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r)
      keys.push_back(key(r));
    Expected<std::vector<std::string>> absent = store.missing(keys);
    if (!absent)
      return Error(absent.message());
    std::vector<std::string> words(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) {
      if (std::find(absent->begin(), absent->end(), keys[r]) != absent->end())
        continue;
      Expected<std::string> word = store.get(keys[r]);
      if (!word)
        return Error(word.message());
      words[static_cast<size_t>(r)] = std::move(*word);
    }
    return words;
  }

private:
  static std::string key(int r) { return waitWordKey(r); }

  std::mutex mutex;
  Store store;
  int rank;
  int size;
};

/// How long a board's calls may take: it serves timeout messages.
constexpr std::chrono::milliseconds kWaitWordsTimeout(2000);

} // namespace

Expected<std::unique_ptr<WaitWords>> TcpGroup::waitWords() const {
  if (state->size == 1)
    return std::unique_ptr<WaitWords>();
  Expected<Store> store =
      Store::connect(state->storeHost, state->storePort, kWaitWordsTimeout,
                     "rank " + std::to_string(state->rank) + "'s wait words");
  if (!store)
    return Error("rendezvous: " + store.message());
  return std::unique_ptr<WaitWords>(
      new StoreWaitWords(std::move(*store), state->rank, state->size));
}

} // namespace autoshard::rt
