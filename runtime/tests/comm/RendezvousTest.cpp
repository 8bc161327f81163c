// The launch variables and the TCP rendezvous, ranks as threads on 127.0.0.1.
#include "comm/Rendezvous.h"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

using namespace autoshard::rt;
using namespace std::chrono_literals;

namespace {

// ---- Launch variables ------------------------------------------------------

using Variables = std::map<std::string, std::string>;

Expected<std::optional<LaunchEnv>> parse(const Variables &vars) {
  return launchEnvFromVariables([&](const char *name) -> const char * {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

Variables torchrun() {
  return {{"RANK", "5"},
          {"WORLD_SIZE", "8"},
          {"LOCAL_RANK", "1"},
          {"LOCAL_WORLD_SIZE", "4"},
          {"MASTER_ADDR", "node0"},
          {"MASTER_PORT", "29500"}};
}

Variables with(Variables vars, const std::string &name,
               std::optional<std::string> value) {
  if (value)
    vars[name] = *value;
  else
    vars.erase(name);
  return vars;
}

TEST(LaunchEnv, NoVariablesMeansNoLauncher) {
  Expected<std::optional<LaunchEnv>> env = parse({{"PATH", "/bin"}});
  ASSERT_TRUE(env) << env.message();
  EXPECT_FALSE(env->has_value());
}

TEST(LaunchEnv, ReadsEveryVariable) {
  Expected<std::optional<LaunchEnv>> env = parse(torchrun());
  ASSERT_TRUE(env) << env.message();
  ASSERT_TRUE(env->has_value());
  const LaunchEnv &e = **env;
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.worldSize, 8);
  EXPECT_EQ(e.localRank, 1);
  EXPECT_EQ(e.localWorldSize, 4);
  EXPECT_EQ(e.masterAddr, "node0");
  EXPECT_EQ(e.masterPort, 29500);
}

TEST(LaunchEnv, UnderTorchrunTheRanksMeetBesideTheAgentsStore) {
  // Launched by hand: rank 0 listens on MASTER_PORT.
  Expected<std::optional<LaunchEnv>> hand = parse(torchrun());
  ASSERT_TRUE(hand) << hand.message();
  EXPECT_FALSE((*hand)->agentHoldsMasterPort);
  EXPECT_EQ((*hand)->rendezvousPort(), 29500);
  // torchrun's agent holds MASTER_PORT for its own store.
  for (const char *value : {"True", "1"}) {
    Expected<std::optional<LaunchEnv>> agent =
        parse(with(torchrun(), "TORCHELASTIC_USE_AGENT_STORE", value));
    ASSERT_TRUE(agent) << agent.message();
    EXPECT_TRUE((*agent)->agentHoldsMasterPort) << value;
    EXPECT_EQ((*agent)->masterPort, 29500);
    EXPECT_EQ((*agent)->rendezvousPort(), 29501);
  }
  Expected<std::optional<LaunchEnv>> off =
      parse(with(torchrun(), "TORCHELASTIC_USE_AGENT_STORE", "False"));
  ASSERT_TRUE(off) << off.message();
  EXPECT_EQ((*off)->rendezvousPort(), 29500);
  Expected<std::optional<LaunchEnv>> last = parse(
      with(with(torchrun(), "TORCHELASTIC_USE_AGENT_STORE", "True"),
           "MASTER_PORT", "65535"));
  ASSERT_FALSE(last);
  EXPECT_EQ(last.message(),
            "MASTER_PORT=\"65535\" leaves no port for the ranks: torchrun's "
            "agent holds MASTER_PORT for its store "
            "(TORCHELASTIC_USE_AGENT_STORE=True) and the ranks meet at "
            "MASTER_PORT + 1; give torchrun a lower --master-port; "
            "MASTER_PORT is the TCP port rank 0 listens on, 1 to 65535");
}

TEST(LaunchEnv, WithoutLocalVariablesTheJobIsOneNode) {
  Variables vars = with(with(torchrun(), "LOCAL_RANK", std::nullopt),
                        "LOCAL_WORLD_SIZE", std::nullopt);
  Expected<std::optional<LaunchEnv>> env = parse(vars);
  ASSERT_TRUE(env) << env.message();
  EXPECT_EQ((*env)->localRank, 5);
  EXPECT_EQ((*env)->localWorldSize, 8);
}

/// A launch that must fail, and what its message must say.
struct BadLaunch {
  const char *what;
  Variables vars;
  std::vector<std::string> says;
};

/// Its description, in test names and failures (not its bytes).
void PrintTo(const BadLaunch &bad, std::ostream *out) { *out << bad.what; }

class LaunchEnvErrors : public testing::TestWithParam<BadLaunch> {};

TEST_P(LaunchEnvErrors, NameTheVariableAndTheValue) {
  const BadLaunch &bad = GetParam();
  Expected<std::optional<LaunchEnv>> env = parse(bad.vars);
  ASSERT_FALSE(env) << bad.what << " was accepted";
  for (const std::string &text : bad.says)
    EXPECT_NE(env.message().find(text), std::string::npos)
        << bad.what << ": \"" << env.message() << "\" does not say \"" << text
        << "\"";
}

INSTANTIATE_TEST_SUITE_P(
    , LaunchEnvErrors,
    testing::Values(
        BadLaunch{"missing WORLD_SIZE",
                  with(torchrun(), "WORLD_SIZE", std::nullopt),
                  {"WORLD_SIZE is not set", "RANK"}},
        BadLaunch{"only RANK",
                  {{"RANK", "0"}},
                  {"WORLD_SIZE, MASTER_ADDR, MASTER_PORT are not set"}},
        BadLaunch{"missing MASTER_PORT",
                  with(torchrun(), "MASTER_PORT", std::nullopt),
                  {"MASTER_PORT is not set"}},
        BadLaunch{"letters",
                  with(torchrun(), "RANK", "abc"),
                  {"RANK=\"abc\"", "not a decimal integer", "0 to WORLD_SIZE"}},
        BadLaunch{"empty",
                  with(torchrun(), "WORLD_SIZE", ""),
                  {"WORLD_SIZE=\"\"", "not a decimal integer"}},
        BadLaunch{"trailing space",
                  with(torchrun(), "WORLD_SIZE", "8 "),
                  {"WORLD_SIZE=\"8 \"", "not a decimal integer"}},
        BadLaunch{"exponent",
                  with(torchrun(), "MASTER_PORT", "3e4"),
                  {"MASTER_PORT=\"3e4\"", "not a decimal integer"}},
        BadLaunch{"a bare sign",
                  with(torchrun(), "LOCAL_RANK", "-"),
                  {"LOCAL_RANK=\"-\"", "not a decimal integer"}},
        BadLaunch{"overflow",
                  with(torchrun(), "WORLD_SIZE", "99999999999"),
                  {"WORLD_SIZE=\"99999999999\"", "out of range"}},
        BadLaunch{"zero world",
                  with(torchrun(), "WORLD_SIZE", "0"),
                  {"WORLD_SIZE=\"0\"", "not positive"}},
        BadLaunch{"rank = world size",
                  with(torchrun(), "RANK", "8"),
                  {"RANK=\"8\"", "not below WORLD_SIZE=8"}},
        BadLaunch{
            "negative rank", with(torchrun(), "RANK", "-1"), {"RANK=\"-1\""}},
        BadLaunch{"local world larger than the world",
                  with(torchrun(), "LOCAL_WORLD_SIZE", "9"),
                  {"LOCAL_WORLD_SIZE=\"9\"", "1..8"}},
        BadLaunch{"local rank = local world size",
                  with(torchrun(), "LOCAL_RANK", "4"),
                  {"LOCAL_RANK=\"4\"", "not below LOCAL_WORLD_SIZE=4"}},
        BadLaunch{"defaulted local rank on a second node",
                  with(torchrun(), "LOCAL_RANK", std::nullopt),
                  {"LOCAL_RANK is not set", "RANK=5",
                   "not below LOCAL_WORLD_SIZE=4"}},
        BadLaunch{"port 0",
                  with(torchrun(), "MASTER_PORT", "0"),
                  {"MASTER_PORT=\"0\"", "1 to 65535"}},
        BadLaunch{"port 65536",
                  with(torchrun(), "MASTER_PORT", "65536"),
                  {"MASTER_PORT=\"65536\""}},
        BadLaunch{"empty address",
                  with(torchrun(), "MASTER_ADDR", ""),
                  {"MASTER_ADDR=\"\"", "is empty"}}),
    [](const testing::TestParamInfo<BadLaunch> &info) {
      // "missing WORLD_SIZE" -> "MissingWORLDSIZE": letters and digits.
      std::string name;
      bool upper = true;
      for (const char *c = info.param.what; *c; ++c) {
        if (std::isalnum(static_cast<unsigned char>(*c))) {
          name += upper ? static_cast<char>(std::toupper(*c)) : *c;
          upper = false;
        } else {
          upper = true;
        }
      }
      return name;
    });

// ---- TcpGroup --------------------------------------------------------------

/// Long enough never to fire on a loaded machine; a hang fails the test at
/// this bound instead of the ctest timeout.
TcpGroupOptions generous() {
  TcpGroupOptions options;
  options.connectTimeout = 30s;
  options.operationTimeout = 30s;
  return options;
}

template <typename Fn> void onEveryRank(int n, Fn fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back(fn, r);
  for (std::thread &t : threads)
    t.join();
}

/// A port nobody listens on (it was free a moment ago).
int freePort() {
  Expected<TcpListener> listener = TcpListener::open(0, "127.0.0.1");
  EXPECT_TRUE(listener) << listener.message();
  return listener ? listener->port() : 0;
}

/// Each rank's outcome of forming a group of n on 127.0.0.1, rank 0 on a
/// port the system chose. `rankOf` and `sizeOf` let a test lie about a
/// rank's identity.
std::vector<std::optional<Expected<TcpGroup>>> tryFormGroup(
    int n, const TcpGroupOptions &options,
    std::function<int(int)> rankOf = [](int r) { return r; },
    std::function<int(int)> sizeOf = nullptr) {
  std::vector<std::optional<Expected<TcpGroup>>> results(n);
  Expected<TcpListener> listener = TcpListener::open(0, "127.0.0.1");
  EXPECT_TRUE(listener) << listener.message();
  if (!listener)
    return results;
  int port = listener->port();
  EXPECT_GT(port, 0);
  onEveryRank(n, [&](int r) {
    int size = sizeOf ? sizeOf(r) : n;
    if (r == 0)
      results[r].emplace(TcpGroup::accept(std::move(*listener), size, options));
    else
      results[r].emplace(
          TcpGroup::connect("127.0.0.1", port, rankOf(r), size, options));
  });
  return results;
}

std::vector<TcpGroup> formGroup(int n, const TcpGroupOptions &options) {
  std::vector<TcpGroup> groups;
  for (auto &result : tryFormGroup(n, options)) {
    if (!result || !*result) {
      ADD_FAILURE() << "forming the group failed: "
                    << (result ? result->message() : "no result");
      return {};
    }
    groups.push_back(std::move(**result));
  }
  return groups;
}

bool says(const std::string &message, const std::string &text) {
  return message.find(text) != std::string::npos;
}

TEST(TcpGroup, FourRanksGatherBroadcastAndBarrier) {
  const int n = 4;
  std::vector<TcpGroup> groups = formGroup(n, generous());
  ASSERT_EQ(groups.size(), size_t(n));
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(groups[r].rank(), r);
    EXPECT_EQ(groups[r].size(), n);
  }
  // A blob larger than socket buffers makes sends and receives partial.
  const std::string big(3 << 20, 'x');
  auto blob = [&](int rank, int round) {
    std::string text =
        "rank " + std::to_string(rank) + " round " + std::to_string(round);
    return rank == 2 && round == 1 ? text + big : text;
  };
  std::vector<std::vector<std::string>> problems(n);
  onEveryRank(n, [&](int r) {
    TcpGroup &g = groups[r];
    auto problem = [&](const std::string &text) {
      problems[r].push_back(text);
    };
    for (int round = 0; round < 3; ++round) {
      Expected<std::vector<std::string>> all = g.allGather(blob(r, round));
      if (!all)
        return problem(all.message());
      if (all->size() != size_t(n))
        problem("allGather returned " + std::to_string(all->size()) + " blobs");
      for (int i = 0; i < n && i < int(all->size()); ++i)
        if ((*all)[i] != blob(i, round))
          problem("round " + std::to_string(round) + ": blob " +
                  std::to_string(i) + " is wrong");
      // The others' arguments must be ignored.
      Expected<std::string> id =
          g.broadcast(r == 0 ? "nccl id " + std::to_string(round) : "junk");
      if (!id)
        return problem(id.message());
      if (*id != "nccl id " + std::to_string(round))
        problem("broadcast gave \"" + *id + "\"");
      if (Status s = g.barrier(); !s)
        return problem(s.message());
    }
  });
  for (int r = 0; r < n; ++r)
    for (const std::string &p : problems[r])
      ADD_FAILURE() << "rank " << r << ": " << p;
}

TEST(TcpGroup, EmptyBlobsAndEmptyBroadcast) {
  std::vector<TcpGroup> groups = formGroup(3, generous());
  ASSERT_EQ(groups.size(), 3u);
  std::vector<std::string> problems(3);
  onEveryRank(3, [&](int r) {
    Expected<std::vector<std::string>> all = groups[r].allGather("");
    if (!all || *all != std::vector<std::string>(3))
      problems[r] = all ? "wrong blobs" : all.message();
    Expected<std::string> b = groups[r].broadcast("");
    if (!b || !b->empty())
      problems[r] += b ? " non-empty broadcast" : b.message();
  });
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(problems[r], "") << "rank " << r;
}

TEST(TcpGroup, WorldOfOneNeedsNoNetwork) {
  LaunchEnv env;
  env.masterAddr = "unresolvable.invalid";
  env.masterPort = 1;
  Expected<TcpGroup> group = TcpGroup::join(env);
  ASSERT_TRUE(group) << group.message();
  Expected<std::vector<std::string>> all = group->allGather("me");
  ASSERT_TRUE(all) << all.message();
  EXPECT_EQ(*all, std::vector<std::string>{"me"});
  EXPECT_TRUE(group->barrier().ok());
  Expected<std::string> b = group->broadcast("id");
  ASSERT_TRUE(b);
  EXPECT_EQ(*b, "id");
}

TEST(TcpGroup, JoinFromLaunchVariables) {
  int port = freePort();
  ASSERT_GT(port, 0);
  std::vector<std::optional<Expected<TcpGroup>>> groups(2);
  onEveryRank(2, [&](int r) {
    LaunchEnv env;
    env.rank = r;
    env.worldSize = 2;
    env.localRank = r;
    env.localWorldSize = 2;
    env.masterAddr = "127.0.0.1";
    env.masterPort = port;
    groups[r].emplace(TcpGroup::join(env, generous()));
    if (*groups[r])
      (void)(*groups[r])->barrier();
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(*groups[r]) << "rank " << r << ": " << groups[r]->message();
    EXPECT_EQ((*groups[r])->rank(), r);
  }
}

TEST(TcpGroup, WorldSizeMismatchIsRefusedOnBothSides) {
  auto results = tryFormGroup(
      2, generous(), [](int r) { return r; },
      [](int r) { return r == 0 ? 2 : 3; });
  ASSERT_TRUE(results[0] && results[1]);
  ASSERT_FALSE(*results[0]);
  ASSERT_FALSE(*results[1]);
  for (int r = 0; r < 2; ++r) {
    const std::string &m = results[r]->message();
    EXPECT_TRUE(says(m, "world size 3") && says(m, "world size 2") &&
                says(m, "WORLD_SIZE"))
        << "rank " << r << ": " << m;
  }
  EXPECT_TRUE(says(results[1]->message(), "rank 0 refused the group"))
      << results[1]->message();
}

TEST(TcpGroup, TwoProcessesWithOneRankAreRefused) {
  auto results = tryFormGroup(3, generous(), [](int) { return 1; });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(results[r]);
    ASSERT_FALSE(*results[r]) << "rank " << r << " formed a group";
    EXPECT_TRUE(says(results[r]->message(), "two processes joined as rank 1"))
        << "rank " << r << ": " << results[r]->message();
  }
}

TEST(TcpGroup, ConnectGivesUpWhenRankZeroNeverComes) {
  int port = freePort();
  ASSERT_GT(port, 0);
  TcpGroupOptions options = generous();
  options.connectTimeout = 300ms;
  auto start = std::chrono::steady_clock::now();
  Expected<TcpGroup> group =
      TcpGroup::connect("127.0.0.1", port, 1, 2, options);
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(group);
  EXPECT_TRUE(
      says(group.message(), "could not connect to rank 0 at 127.0.0.1:" +
                                std::to_string(port)) &&
      says(group.message(), "MASTER_PORT"))
      << group.message();
  // Generous: it retried until its deadline, and no longer.
  EXPECT_LT(elapsed, 20s);
}

TEST(TcpGroup, RankZeroGivesUpOnAMissingRank) {
  TcpGroupOptions options = generous();
  options.connectTimeout = 1500ms;
  std::optional<Expected<TcpGroup>> root, one;
  Expected<TcpListener> listener = TcpListener::open(0, "127.0.0.1");
  ASSERT_TRUE(listener) << listener.message();
  int port = listener->port();
  std::thread peer([&] {
    TcpGroupOptions patient = generous();
    one.emplace(TcpGroup::connect("127.0.0.1", port, 1, 3, patient));
  });
  root.emplace(TcpGroup::accept(std::move(*listener), 3, options));
  peer.join();
  ASSERT_FALSE(*root);
  EXPECT_TRUE(says(root->message(), "only 2 of 3 ranks joined") &&
              says(root->message(), "missing rank 2"))
      << root->message();
  ASSERT_FALSE(*one);
  EXPECT_TRUE(says(one->message(), "refused the group") &&
              says(one->message(), "missing rank 2"))
      << one->message();
}

/// The notice lines of one rank, collected from another thread.
struct Notices {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::function<void(const std::string &)> sink() {
    return [this](const std::string &line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.push_back(line);
    };
  }
};

// A missing peer: every waiting rank says early, once, who waits for whom
// and for how long in all, and the group still fails at the connect
// timeout, not sooner.
TEST(TcpGroup, WaitingRanksSayWhoIsMissingBeforeTheTimeout) {
  TcpGroupOptions options = generous();
  options.connectTimeout = 1500ms;
  options.slowJoinNotice = 200ms;
  Notices rootNotices, oneNotices;
  options.notice = rootNotices.sink();
  std::optional<Expected<TcpGroup>> root, one;
  Expected<TcpListener> listener = TcpListener::open(0, "127.0.0.1");
  ASSERT_TRUE(listener) << listener.message();
  int port = listener->port();
  std::thread peer([&] {
    TcpGroupOptions patient = generous();
    patient.slowJoinNotice = 200ms;
    patient.notice = oneNotices.sink();
    one.emplace(TcpGroup::connect("127.0.0.1", port, 1, 3, patient));
  });
  auto start = std::chrono::steady_clock::now();
  root.emplace(TcpGroup::accept(std::move(*listener), 3, options));
  auto elapsed = std::chrono::steady_clock::now() - start;
  peer.join();
  ASSERT_FALSE(*root);
  EXPECT_GE(elapsed, 1500ms);
  ASSERT_EQ(rootNotices.lines.size(), 1u);
  const std::string &line = rootNotices.lines[0];
  EXPECT_TRUE(says(line, "rendezvous: rank 0 has waited ") &&
              says(line, " on port " + std::to_string(port) +
                             " for the other ranks: 2 of 3 joined (missing "
                             "rank 2; each connects to "
                             "MASTER_ADDR:MASTER_PORT); it gives up 1.5 s "
                             "after it began (a fixed limit)"))
      << line;
  ASSERT_EQ(oneNotices.lines.size(), 1u);
  EXPECT_TRUE(says(oneNotices.lines[0],
                   "rendezvous: rank 1 of 3 reached rank 0 at 127.0.0.1:" +
                       std::to_string(port) + " and has waited ") &&
              says(oneNotices.lines[0],
                   "for the group to form (rank 0 starts it once all 3 "
                   "ranks have joined); it gives up 30 s after it began"))
      << oneNotices.lines[0];
}

TEST(TcpGroup, ARankWithoutRankZeroSaysWhereItLooks) {
  int port = freePort();
  ASSERT_GT(port, 0);
  TcpGroupOptions options = generous();
  options.connectTimeout = 800ms;
  options.slowJoinNotice = 200ms;
  Notices notices;
  options.notice = notices.sink();
  Expected<TcpGroup> group =
      TcpGroup::connect("127.0.0.1", port, 1, 2, options);
  ASSERT_FALSE(group);
  ASSERT_EQ(notices.lines.size(), 1u);
  EXPECT_TRUE(
      says(notices.lines[0], "rendezvous: rank 1 of 2 has tried for ") &&
      says(notices.lines[0],
           " to reach rank 0 at 127.0.0.1:" + std::to_string(port) +
               " (MASTER_ADDR:MASTER_PORT; last error: ") &&
      says(notices.lines[0], "it gives up 0.8 s after it began"))
      << notices.lines[0];
}

TEST(TcpGroup, AGroupThatFormsInTimeSaysNothing) {
  TcpGroupOptions options = generous();
  options.slowJoinNotice = 10s;
  Notices notices;
  options.notice = notices.sink();
  EXPECT_EQ(formGroup(3, options).size(), 3u);
  EXPECT_TRUE(notices.lines.empty());
}

TEST(TcpGroup, StrangersOnThePortAreIgnored) {
  Expected<TcpListener> listener = TcpListener::open(0, "127.0.0.1");
  ASSERT_TRUE(listener) << listener.message();
  int port = listener->port();
  auto rawConnect = [&] {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(
        ::connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof address),
        0);
    return fd;
  };
  // One says something else and leaves; one connects and stays silent.
  int talker = rawConnect();
  const char probe[] = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
  EXPECT_GT(::send(talker, probe, sizeof probe - 1, MSG_NOSIGNAL), 0);
  ::close(talker);
  int silent = rawConnect();
  std::optional<Expected<TcpGroup>> root, one;
  std::thread peer([&] {
    one.emplace(TcpGroup::connect("127.0.0.1", port, 1, 2, generous()));
  });
  root.emplace(TcpGroup::accept(std::move(*listener), 2, generous()));
  peer.join();
  ::close(silent);
  ASSERT_TRUE(*root) << root->message();
  ASSERT_TRUE(*one) << one->message();
}

TEST(TcpGroup, PeerThatClosesMidOperationFailsTheOthersAtOnce) {
  const int n = 3;
  std::vector<TcpGroup> groups = formGroup(n, generous());
  ASSERT_EQ(groups.size(), size_t(n));
  std::vector<std::string> errors(n);
  onEveryRank(n, [&](int r) {
    if (r == 2) {
      // Let the others start waiting, then go away without a word.
      std::this_thread::sleep_for(50ms);
      TcpGroup gone = std::move(groups[2]);
      return;
    }
    Expected<std::vector<std::string>> all = groups[r].allGather("x");
    errors[r] = all ? "" : all.message();
  });
  EXPECT_TRUE(says(errors[0], "rank 2 closed its connection during "
                              "allGather #1"))
      << errors[0];
  // Every rank learns it from the store, not from rank 0.
  EXPECT_TRUE(says(errors[1], "rank 2 closed its connection during "
                              "allGather #1"))
      << errors[1];
  // Noticed by the close, not by the (30 s) timeout.
  EXPECT_FALSE(says(errors[0], "timed out")) << errors[0];
  EXPECT_FALSE(says(errors[1], "timed out")) << errors[1];
  // A failed group stays failed.
  Status again = groups[0].barrier();
  ASSERT_FALSE(again);
  EXPECT_TRUE(says(again.message(), "failed earlier")) << again.message();
}

TEST(TcpGroup, RankZeroThatDiesFailsTheOthers) {
  const int n = 3;
  std::vector<TcpGroup> groups = formGroup(n, generous());
  ASSERT_EQ(groups.size(), size_t(n));
  {
    TcpGroup gone = std::move(groups[0]);
  }
  std::vector<std::string> errors(n);
  onEveryRank(n, [&](int r) {
    if (r == 0)
      return;
    Status s = groups[r].barrier();
    errors[r] = s ? "" : s.message();
  });
  for (int r = 1; r < n; ++r)
    EXPECT_TRUE(says(errors[r], "rank 0 closed its connection during "
                                "barrier #1"))
        << "rank " << r << ": " << errors[r];
}

TEST(TcpGroup, SendingToAPeerThatLeftIsAnErrorNotSigpipe) {
  std::vector<TcpGroup> groups = formGroup(2, generous());
  ASSERT_EQ(groups.size(), 2u);
  {
    TcpGroup gone = std::move(groups[1]);
  }
  // The first sends may still be buffered; once the peer's reset arrives a
  // send fails with EPIPE, which must be an error here, not a SIGPIPE that
  // ends the process.
  const std::string blob(1 << 20, 'y');
  std::string error;
  for (int i = 0; i < 100 && error.empty(); ++i) {
    Expected<std::string> sent = groups[0].broadcast(blob);
    if (!sent)
      error = sent.message();
  }
  EXPECT_TRUE(says(error, "rank 1 closed its connection during broadcast #"))
      << error;
}

TEST(TcpGroup, RankThatNeverArrivesTimesOut) {
  const int n = 3;
  TcpGroupOptions options = generous();
  options.operationTimeout = 300ms;
  std::vector<TcpGroup> groups = formGroup(n, options);
  ASSERT_EQ(groups.size(), size_t(n));
  std::vector<std::string> errors(n);
  // Rank 2 stays connected but never calls the barrier.
  onEveryRank(2, [&](int r) {
    Status s = groups[r].barrier();
    errors[r] = s ? "" : s.message();
  });
  EXPECT_TRUE(says(errors[0], "timed out") &&
              says(errors[0], "rank 2 has not reached it") &&
              says(errors[0], "barrier #1"))
      << errors[0];
  // Rank 1's deadline and rank 0's run out together. Whichever comes
  // first, rank 1 names rank 2 and not rank 0: the store shows every rank
  // which parts have come, rank 0's included.
  EXPECT_TRUE(says(errors[1], "barrier #1") &&
              says(errors[1], "rank 2 has not reached it") &&
              !says(errors[1], "rank 0 has not") && !says(errors[1], "ranks 0"))
      << errors[1];
}

TEST(TcpGroup, DifferentOperationsOnDifferentRanksAreAnError) {
  std::vector<TcpGroup> groups = formGroup(2, generous());
  ASSERT_EQ(groups.size(), 2u);
  std::vector<std::string> errors(2);
  onEveryRank(2, [&](int r) {
    if (r == 0) {
      Expected<std::vector<std::string>> all = groups[0].allGather("x");
      errors[0] = all ? "" : all.message();
    } else {
      Status s = groups[1].barrier();
      errors[1] = s ? "" : s.message();
    }
  });
  EXPECT_TRUE(says(errors[0], "rank 1 is in barrier #1 while rank 0 is in "
                              "allGather #1"))
      << errors[0];
  // Each rank sees the other's part: rank 1 names rank 0's operation, or
  // hears rank 0's verdict first.
  EXPECT_TRUE(says(errors[1], "rank 0 is in allGather #1 while rank 1 is in "
                              "barrier #1") ||
              says(errors[1], "rank 0 ended the group during barrier #1"))
      << errors[1];
}

// Ranks that call different numbers of the group's operations: the one
// that calls more times out, and since every rank left the operation
// before together, it says where the missing rank is.
TEST(TcpGroup, ARankThatCallsFewerOperationsIsNamedWithTheLastItFinished) {
  std::vector<TcpGroup> groups = formGroup(2, generous());
  ASSERT_EQ(groups.size(), 2u);
  std::vector<std::string> errors(2);
  onEveryRank(2, [&](int r) {
    Status s = groups[r].barrier();
    errors[r] = s ? "" : s.message();
  });
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  // Rank 1 stops after the barrier; rank 0 calls one operation more.
  groups[0].setOperationTimeout(300ms);
  Expected<std::vector<std::string>> all = groups[0].allGather("x");
  ASSERT_FALSE(all);
  EXPECT_TRUE(says(all.message(),
                   "rendezvous: timed out after 0.3 s during allGather #2: "
                   "rank 1 has not reached it; every rank finished barrier "
                   "#1 together, so it is stopped or slow, stuck outside the "
                   "group, or calls fewer of the group's operations than "
                   "rank 0"))
      << all.message();
}

// A late rank that waits in a collective of the data plane has posted its
// word in the same store: the timeout says where it is.
TEST(TcpGroup, ALateRanksWaitWordSaysWhereItIs) {
  std::vector<TcpGroup> groups = formGroup(2, generous());
  ASSERT_EQ(groups.size(), 2u);
  Expected<std::unique_ptr<WaitWords>> board = groups[1].waitWords();
  ASSERT_TRUE(board && *board) << (board ? "" : board.message());
  (*board)->post("all_reduce #5 over the world");
  groups[0].setOperationTimeout(300ms);
  Status s = groups[0].barrier();
  ASSERT_FALSE(s);
  EXPECT_TRUE(says(s.message(), "during barrier #1: rank 1 has not reached "
                                "it; rank 1 waits in all_reduce #5 over the "
                                "world (by its word in the job's store)"))
      << s.message();
  // The first operation has no operation before it to name.
  EXPECT_FALSE(says(s.message(), "finished")) << s.message();
}

// A rank that gives up posts why; a rank still waiting hears it at once,
// long before its own timeout.
TEST(TcpGroup, ARankThatGivesUpEndsTheOthersWaitsWithItsReason) {
  const int n = 3;
  std::vector<TcpGroup> groups = formGroup(n, generous());
  ASSERT_EQ(groups.size(), size_t(n));
  groups[2].setOperationTimeout(300ms);
  std::vector<std::string> errors(n);
  auto start = std::chrono::steady_clock::now();
  // Rank 1 never calls the barrier; rank 2 gives up on it first.
  onEveryRank(n, [&](int r) {
    if (r == 1)
      return;
    Status s = groups[r].barrier();
    errors[r] = s ? "" : s.message();
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  EXPECT_TRUE(says(errors[2], "timed out after 0.3 s during barrier #1: "
                              "rank 1 has not reached it"))
      << errors[2];
  EXPECT_TRUE(says(errors[0], "rank 2 ended the group during barrier #1: "
                              "timed out after 0.3 s") &&
              says(errors[0], "rank 1 has not reached it"))
      << errors[0];
}

// Once the group has formed, a further process claiming a rank is turned
// away instead of joining the others' operations.
TEST(TcpGroup, AProcessTooManyIsTurnedAway) {
  Expected<TcpListener> listener = TcpListener::open(0, "127.0.0.1");
  ASSERT_TRUE(listener) << listener.message();
  int port = listener->port();
  std::optional<Expected<TcpGroup>> root, one;
  std::thread peer([&] {
    one.emplace(TcpGroup::connect("127.0.0.1", port, 1, 2, generous()));
  });
  root.emplace(TcpGroup::accept(std::move(*listener), 2, generous()));
  peer.join();
  ASSERT_TRUE(*root) << root->message();
  ASSERT_TRUE(*one) << one->message();
  Expected<TcpGroup> extra =
      TcpGroup::connect("127.0.0.1", port, 1, 2, generous());
  ASSERT_FALSE(extra);
  EXPECT_TRUE(says(extra.message(), "after the group of 2 had formed without "
                                    "it: two processes have RANK=1"))
      << extra.message();
  // Its leaving does not disturb the group.
  std::vector<std::string> errors(2);
  std::vector<TcpGroup> groups;
  groups.push_back(std::move(**root));
  groups.push_back(std::move(**one));
  onEveryRank(2, [&](int r) {
    Status s = groups[r].barrier();
    errors[r] = s ? "" : s.message();
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

// The board NCCL's waiting members post on: each rank's latest word, read
// by any rank; a word taken back reads as none.
TEST(TcpGroup, WaitWordsAreEachRanksLatestWord) {
  const int n = 3;
  std::vector<TcpGroup> groups = formGroup(n, generous());
  ASSERT_EQ(groups.size(), size_t(n));
  std::vector<std::unique_ptr<WaitWords>> boards;
  for (int r = 0; r < n; ++r) {
    Expected<std::unique_ptr<WaitWords>> board = groups[r].waitWords();
    ASSERT_TRUE(board) << board.message();
    ASSERT_TRUE(*board);
    boards.push_back(std::move(*board));
  }
  Expected<std::vector<std::string>> none = boards[0]->read();
  ASSERT_TRUE(none) << none.message();
  EXPECT_EQ(*none, std::vector<std::string>(3));
  boards[1]->post("all_reduce #3 over the world");
  boards[2]->post("all_gather #1 over grid_axes_mask 2");
  boards[1]->post("all_reduce #4 over the world");
  Expected<std::vector<std::string>> heard = boards[2]->read();
  ASSERT_TRUE(heard) << heard.message();
  EXPECT_EQ(*heard,
            (std::vector<std::string>{"", "all_reduce #4 over the world",
                                      "all_gather #1 over grid_axes_mask 2"}));
  boards[2]->post("");
  heard = boards[0]->read();
  ASSERT_TRUE(heard) << heard.message();
  EXPECT_EQ(*heard,
            (std::vector<std::string>{"", "all_reduce #4 over the world", ""}));
  // The words live beside the group's keys: the group goes on.
  std::vector<std::string> errors(n);
  onEveryRank(n, [&](int r) {
    Status s = groups[r].barrier();
    errors[r] = s ? "" : s.message();
  });
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(TcpGroup, AWorldOfOneHasNoBoard) {
  LaunchEnv env;
  env.masterAddr = "unresolvable.invalid";
  env.masterPort = 1;
  Expected<TcpGroup> group = TcpGroup::join(env);
  ASSERT_TRUE(group) << group.message();
  Expected<std::unique_ptr<WaitWords>> board = group->waitWords();
  ASSERT_TRUE(board) << board.message();
  EXPECT_FALSE(*board);
}

TEST(TcpListener, RejectsAPortOutOfRange) {
  Expected<TcpListener> listener = TcpListener::open(70000);
  ASSERT_FALSE(listener);
  EXPECT_TRUE(says(listener.message(), "70000")) << listener.message();
}

TEST(TcpListener, APortInUseIsNamed) {
  Expected<TcpListener> first = TcpListener::open(0, "127.0.0.1");
  ASSERT_TRUE(first) << first.message();
  Expected<TcpListener> second = TcpListener::open(first->port(), "127.0.0.1");
  ASSERT_FALSE(second);
  EXPECT_TRUE(says(second.message(), std::to_string(first->port())) &&
              says(second.message(), "MASTER_PORT"))
      << second.message();
}

} // namespace
