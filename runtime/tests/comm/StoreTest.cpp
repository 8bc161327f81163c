// The key-value store and the socket layer under it, clients as threads.
#include "comm/Store.h"
#include "net/Socket.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <vector>

using namespace autoshard::rt;
using namespace std::chrono_literals;

namespace {

bool says(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

std::unique_ptr<StoreServer> startServer() {
  Expected<net::Listener> listener = net::listenTcp(0, "127.0.0.1");
  EXPECT_TRUE(listener) << listener.message();
  if (!listener)
    return nullptr;
  Expected<std::unique_ptr<StoreServer>> server =
      StoreServer::start(std::move(*listener));
  EXPECT_TRUE(server) << server.message();
  return server ? std::move(*server) : nullptr;
}

Store client(const StoreServer &server, const std::string &who,
             std::chrono::milliseconds timeout = 20s) {
  Expected<Store> store =
      Store::connect("127.0.0.1", server.port(), timeout, who);
  EXPECT_TRUE(store) << store.message();
  return std::move(*store);
}

// ---- Store -----------------------------------------------------------------

TEST(Store, OneClientSetsAnotherGets) {
  auto server = startServer();
  ASSERT_TRUE(server);
  Store a = client(*server, "rank 0"), b = client(*server, "rank 1");
  ASSERT_TRUE(a.set("ncclUniqueId", std::string("\0id\xff", 4)).ok());
  Expected<std::string> got = b.get("ncclUniqueId");
  ASSERT_TRUE(got) << got.message();
  EXPECT_EQ(*got, std::string("\0id\xff", 4));
  // Set replaces.
  ASSERT_TRUE(a.set("ncclUniqueId", "second").ok());
  EXPECT_EQ(*b.get("ncclUniqueId"), "second");
}

TEST(Store, GetWaitsForAKeySetLater) {
  auto server = startServer();
  ASSERT_TRUE(server);
  Store waiter = client(*server, "rank 1");
  std::thread setter([&] {
    Store s = client(*server, "rank 0");
    std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(s.set("addr/0", "10.0.0.1:1234").ok());
  });
  auto start = std::chrono::steady_clock::now();
  Expected<std::string> got = waiter.get("addr/0");
  setter.join();
  ASSERT_TRUE(got) << got.message();
  EXPECT_EQ(*got, "10.0.0.1:1234");
  EXPECT_GE(std::chrono::steady_clock::now() - start, 90ms);
}

TEST(Store, WaitReturnsOnceEveryKeyIsSet) {
  auto server = startServer();
  ASSERT_TRUE(server);
  Store waiter = client(*server, "rank 0");
  std::vector<std::thread> ranks;
  for (int r = 1; r < 4; ++r)
    ranks.emplace_back([&, r] {
      Store s = client(*server, "rank " + std::to_string(r));
      EXPECT_TRUE(s.set("joined/" + std::to_string(r), "").ok());
    });
  Status all = waiter.wait({"joined/1", "joined/2", "joined/3"});
  for (std::thread &t : ranks)
    t.join();
  EXPECT_TRUE(all.ok()) << all.message();
}

TEST(Store, AWaitThatTimesOutNamesOnlyTheMissingKeys) {
  auto server = startServer();
  ASSERT_TRUE(server);
  Store s = client(*server, "rank 0", 200ms);
  ASSERT_TRUE(s.set("joined/1", "").ok());
  Status all = s.wait({"joined/1", "joined/2", "joined/3"});
  ASSERT_FALSE(all.ok());
  EXPECT_TRUE(says(all.message(), "store: rank 0 timed out after 0.2 s") &&
              says(all.message(), "keys \"joined/2\", \"joined/3\"") &&
              !says(all.message(), "joined/1") &&
              says(all.message(),
                   "127.0.0.1:" + std::to_string(server->port())))
      << all.message();
  // The connection stays usable: the late reply of the wait is skipped.
  ASSERT_TRUE(s.set("joined/2", "").ok());
  ASSERT_TRUE(s.set("joined/3", "").ok());
  EXPECT_TRUE(s.wait({"joined/1", "joined/2", "joined/3"}).ok());
  Expected<std::vector<std::string>> absent = s.missing({"joined/1", "x"});
  ASSERT_TRUE(absent) << absent.message();
  EXPECT_EQ(*absent, std::vector<std::string>{"x"});
}

TEST(Store, AGetThatTimesOutNamesItsKey) {
  auto server = startServer();
  ASSERT_TRUE(server);
  Store s = client(*server, "rank 2", 150ms);
  Expected<std::string> got = s.get("ncclUniqueId");
  ASSERT_FALSE(got);
  EXPECT_TRUE(says(got.message(), "rank 2") &&
              says(got.message(), "key \"ncclUniqueId\""))
      << got.message();
}

TEST(Store, AddIsAnAtomicCounter) {
  auto server = startServer();
  ASSERT_TRUE(server);
  std::vector<std::thread> ranks;
  std::atomic<int> failures{0};
  for (int r = 0; r < 8; ++r)
    ranks.emplace_back([&, r] {
      Store s = client(*server, "rank " + std::to_string(r));
      for (int i = 0; i < 10; ++i)
        if (!s.add("arrived", 1))
          ++failures;
    });
  for (std::thread &t : ranks)
    t.join();
  EXPECT_EQ(failures, 0);
  Store s = client(*server, "check");
  Expected<int64_t> total = s.add("arrived", 0);
  ASSERT_TRUE(total) << total.message();
  EXPECT_EQ(*total, 80);
  ASSERT_TRUE(s.set("text", "not a number").ok());
  Expected<int64_t> bad = s.add("text", 1);
  ASSERT_FALSE(bad);
  EXPECT_TRUE(says(bad.message(), "is not an integer")) << bad.message();
}

TEST(Store, AServerThatNeverComesIsNamed) {
  int port = 0;
  {
    Expected<net::Listener> taken = net::listenTcp(0, "127.0.0.1");
    ASSERT_TRUE(taken) << taken.message();
    port = taken->port;
  } // closed: nobody listens there now
  auto start = std::chrono::steady_clock::now();
  Expected<Store> s = Store::connect("127.0.0.1", port, 300ms, "rank 3");
  ASSERT_FALSE(s);
  EXPECT_TRUE(says(s.message(), "store: rank 3 could not reach the store at "
                                "127.0.0.1:" +
                                    std::to_string(port) + " within 0.3 s"))
      << s.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST(Store, AClientWaitingOnAServerThatStopsIsTold) {
  auto server = startServer();
  ASSERT_TRUE(server);
  Store s = client(*server, "rank 1");
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    server.reset();
  });
  Expected<std::string> got = s.get("never");
  stopper.join();
  ASSERT_FALSE(got);
  EXPECT_TRUE(says(got.message(), "closed the connection")) << got.message();
}

TEST(Store, AStrangerOnThePortIsDroppedAndOthersGoOn) {
  auto server = startServer();
  ASSERT_TRUE(server);
  net::Fd stranger;
  net::ConnectOptions options;
  options.wait = net::Wait::within(5s);
  ASSERT_TRUE(net::connectTcp("127.0.0.1", server->port(), options, stranger));
  const char junk[] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_TRUE(net::sendAll(stranger.get(), junk, sizeof junk - 1,
                           net::Wait::within(5s)));
  char byte;
  net::IoResult dropped =
      net::receiveAll(stranger.get(), &byte, 1, net::Wait::within(5s));
  EXPECT_EQ(dropped.status, net::Io::PeerGone) << dropped.error;
  Store a = client(*server, "rank 0"), b = client(*server, "rank 1");
  ASSERT_TRUE(a.set("k", "v").ok());
  EXPECT_EQ(*b.get("k"), "v");
}

TEST(Store, SetAndGetMeetsEveryMemberAndReturnsTheValues) {
  auto server = startServer();
  ASSERT_TRUE(server);
  const int n = 4;
  std::vector<std::string> problems(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      Store s = client(*server, "rank " + std::to_string(r));
      std::this_thread::sleep_for(std::chrono::milliseconds(20 * r));
      Expected<std::vector<std::string>> all =
          s.setAndGet("op/1/" + std::to_string(r), "v" + std::to_string(r),
                      {"op/1/0", "op/1/1", "op/1/2", "op/1/3"});
      if (!all)
        problems[r] = all.message();
      else if (*all != std::vector<std::string>{"v0", "v1", "v2", "v3"})
        problems[r] = "wrong values";
    });
  for (std::thread &t : ranks)
    t.join();
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(problems[r], "") << "rank " << r;
}

TEST(Store, EraseRemovesKeys) {
  auto server = startServer();
  ASSERT_TRUE(server);
  Store s = client(*server, "rank 0");
  ASSERT_TRUE(s.set("a", "1").ok());
  ASSERT_TRUE(s.set("b", "2").ok());
  ASSERT_TRUE(s.erase({"a", "never set"}).ok());
  Expected<std::vector<std::string>> absent = s.missing({"a", "b"});
  ASSERT_TRUE(absent) << absent.message();
  EXPECT_EQ(*absent, std::vector<std::string>{"a"});
}

// An abort ends the waits parked now and those that come later, naming
// who aborted and why; a wait whose keys are set still succeeds.
TEST(Store, AnAbortEndsEveryWaitWithItsReason) {
  auto server = startServer();
  ASSERT_TRUE(server);
  Store waiter = client(*server, "rank 1");
  ASSERT_TRUE(waiter.set("here", "x").ok());
  std::thread aborter([&] {
    Store s = client(*server, "rank 2");
    ASSERT_TRUE(s.becomeMember().ok());
    std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(s.abort("its GPU failed").ok());
    EXPECT_TRUE(s.abort("a second reason is not kept").ok());
  });
  auto start = std::chrono::steady_clock::now();
  Expected<std::string> got = waiter.get("never");
  aborter.join();
  ASSERT_FALSE(got);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_TRUE(says(got.message(), "store: rank 1 stopped waiting for key "
                                  "\"never\": rank 2 aborted: its GPU failed"))
      << got.message();
  ASSERT_TRUE(waiter.lastFailure());
  EXPECT_EQ(waiter.lastFailure()->kind, StoreFailure::Aborted);
  EXPECT_EQ(waiter.lastFailure()->who, "rank 2");
  EXPECT_EQ(waiter.lastFailure()->reason, "its GPU failed");
  // Later waits fail at once too, with the first reason...
  Status later = waiter.wait({"here", "also never"});
  ASSERT_FALSE(later);
  EXPECT_TRUE(says(later.message(), "its GPU failed")) << later.message();
  // ...but what is set is still there.
  Expected<std::string> here = waiter.get("here");
  ASSERT_TRUE(here) << here.message();
  EXPECT_EQ(*here, "x");
  EXPECT_FALSE(waiter.lastFailure());
}

// A member whose connection ends strands the waits on it: they fail at
// once, naming it. Clients that are not members come and go freely.
TEST(Store, AMemberThatClosesEndsTheWaitsNamingIt) {
  auto server = startServer();
  ASSERT_TRUE(server);
  Store waiter = client(*server, "rank 0");
  {
    Store visitor = client(*server, "a visitor");
    ASSERT_TRUE(visitor.set("visited", "").ok());
  }
  std::thread leaver([&] {
    Store s = client(*server, "rank 2");
    ASSERT_TRUE(s.becomeMember().ok());
    std::this_thread::sleep_for(100ms);
  });
  auto start = std::chrono::steady_clock::now();
  Expected<std::vector<std::string>> all =
      waiter.setAndGet("op/1/0", "", {"op/1/0", "op/1/2"});
  leaver.join();
  ASSERT_FALSE(all);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_TRUE(says(all.message(), "rank 2 closed its connection to the store"))
      << all.message();
  ASSERT_TRUE(waiter.lastFailure());
  EXPECT_EQ(waiter.lastFailure()->kind, StoreFailure::MemberClosed);
  EXPECT_EQ(waiter.lastFailure()->who, "rank 2");
  // The visitor that left earlier ended nothing: the key it set is there
  // and a wait on it succeeds.
  EXPECT_TRUE(waiter.wait({"visited"}).ok());
}

TEST(Store, ATimedOutWaitSaysWhichKeysAreMissing) {
  auto server = startServer();
  ASSERT_TRUE(server);
  Store s = client(*server, "rank 0", 150ms);
  Expected<std::vector<std::string>> all =
      s.setAndGet("op/1/0", "", {"op/1/0", "op/1/1", "op/1/2"});
  ASSERT_FALSE(all);
  ASSERT_TRUE(s.lastFailure());
  EXPECT_EQ(s.lastFailure()->kind, StoreFailure::TimedOut);
  EXPECT_EQ(s.lastFailure()->missing,
            (std::vector<std::string>{"op/1/1", "op/1/2"}));
}

// A server that answers and closes at once (rank 0 exiting right after
// its last answer): the answer that came before the close is the call's,
// even when the client reads both at once.
TEST(Store, AReplyThatCameJustBeforeTheCloseIsRead) {
  Expected<net::Listener> listener = net::listenTcp(0, "127.0.0.1");
  ASSERT_TRUE(listener) << listener.message();
  std::promise<void> replied;
  std::thread server([&] {
    net::Fd peer;
    ASSERT_TRUE(net::acceptOne(*listener, net::Wait::within(5s), peer));
    // Ok (100) for request 1 with no arguments, sent ahead of the request,
    // then the end of the stream: the client finds both together.
    std::string reply;
    net::putBigEndian(reply, 0x41534b31, 4);
    reply.push_back(static_cast<char>(100));
    net::putBigEndian(reply, 1, 8);
    net::putBigEndian(reply, 0, 4);
    EXPECT_TRUE(net::sendAll(peer.get(), reply.data(), reply.size(),
                             net::Wait::within(5s)));
    ::shutdown(peer.get(), SHUT_WR);
    replied.set_value();
    // Stay until the client has gone, so that its request meets no reset.
    char byte;
    while (net::receiveAll(peer.get(), &byte, 1, net::Wait::within(5s)))
      ;
  });
  Expected<Store> s = Store::connect("127.0.0.1", listener->port, 5s, "rank 1");
  ASSERT_TRUE(s) << s.message();
  replied.get_future().wait();
  std::this_thread::sleep_for(50ms);
  Status set = s->set("k", "v");
  EXPECT_TRUE(set.ok()) << set.message();
  // The next call finds the server gone.
  Status again = s->set("k", "w");
  EXPECT_FALSE(again);
  ASSERT_TRUE(s->lastFailure());
  EXPECT_EQ(s->lastFailure()->kind, StoreFailure::ServerGone);
  *s = Store::overSocket(net::Fd(), "nowhere", 1s, "nobody");
  server.join();
}

// An owner tearing down (an aborted NCCL communicator) fires its Waker: a
// wait of its client ends at once, long before the timeout, and the abort
// it posts on its way out still reaches the others.
TEST(Store, AWakerEndsAWaitAtOnceAndTheAbortStillGoesOut) {
  auto server = startServer();
  ASSERT_TRUE(server);
  Store other = client(*server, "rank 0");
  net::Waker waker;
  Store s = client(*server, "rank 1", 30s);
  s.interruptBy(&waker);
  std::thread firer([&] {
    std::this_thread::sleep_for(100ms);
    waker.signal();
  });
  auto start = std::chrono::steady_clock::now();
  Expected<std::string> got = s.get("never");
  firer.join();
  ASSERT_FALSE(got);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  ASSERT_TRUE(s.lastFailure());
  EXPECT_EQ(s.lastFailure()->kind, StoreFailure::Interrupted);
  EXPECT_TRUE(says(got.message(), "store: rank 1 was interrupted during a "
                                  "wait for key \"never\""))
      << got.message();
  // Every later call is interrupted too (the waker stays fired)...
  EXPECT_FALSE(s.set("k", "v"));
  EXPECT_EQ(s.lastFailure()->kind, StoreFailure::Interrupted);
  // ...but the abort is not.
  Status aborted = s.abort("its communicator was aborted");
  ASSERT_TRUE(aborted.ok()) << aborted.message();
  Expected<std::string> theirs = other.get("never");
  ASSERT_FALSE(theirs);
  EXPECT_TRUE(says(theirs.message(), "its communicator was aborted"))
      << theirs.message();
}

TEST(Store, AFiredWakerEndsConnectingAtOnce) {
  int port = 0;
  {
    Expected<net::Listener> taken = net::listenTcp(0, "127.0.0.1");
    ASSERT_TRUE(taken) << taken.message();
    port = taken->port;
  } // closed: nobody listens there now
  net::Waker waker;
  waker.signal();
  auto start = std::chrono::steady_clock::now();
  Expected<Store> s = Store::connect("127.0.0.1", port, 30s, "rank 2", &waker);
  ASSERT_FALSE(s);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_TRUE(says(s.message(), "store: rank 2 was interrupted while "
                                "connecting to the store at 127.0.0.1:" +
                                    std::to_string(port)))
      << s.message();
}

// kForever bounds nothing (no overflow of the clock into the past): the
// wait lasts until the key comes.
TEST(Store, AWaitWithoutTimeoutLastsUntilTheKeyComes) {
  auto server = startServer();
  ASSERT_TRUE(server);
  Store waiter = client(*server, "rank 0");
  waiter.setTimeout(Store::kForever);
  std::thread setter([&] {
    std::this_thread::sleep_for(300ms);
    Store s = client(*server, "rank 1");
    EXPECT_TRUE(s.set("late", "here").ok());
  });
  Expected<std::string> got = waiter.get("late");
  setter.join();
  ASSERT_TRUE(got) << got.message();
  EXPECT_EQ(*got, "here");
}

// ---- Sockets ---------------------------------------------------------------

/// A connected pair on 127.0.0.1.
void connectedPair(net::Fd &a, net::Fd &b) {
  Expected<net::Listener> listener = net::listenTcp(0, "127.0.0.1");
  ASSERT_TRUE(listener) << listener.message();
  net::ConnectOptions options;
  options.wait = net::Wait::within(5s);
  ASSERT_TRUE(net::connectTcp("127.0.0.1", listener->port, options, a));
  ASSERT_TRUE(net::acceptOne(*listener, net::Wait::within(5s), b));
}

TEST(Socket, ExchangeMovesMoreThanTheSocketBuffersBothWays) {
  net::Fd a, b;
  connectedPair(a, b);
  // Larger than the kernel's buffers: sending all first would deadlock.
  std::vector<char> outA(32 << 20, 'a'), outB(32 << 20, 'b');
  std::vector<char> inA(outB.size()), inB(outA.size());
  std::thread other([&] {
    EXPECT_TRUE(net::exchange(b.get(), outB.data(), outB.size(), b.get(),
                              inB.data(), inB.size(), net::Wait::within(30s)));
  });
  EXPECT_TRUE(net::exchange(a.get(), outA.data(), outA.size(), a.get(),
                            inA.data(), inA.size(), net::Wait::within(30s)));
  other.join();
  EXPECT_EQ(inA, outB);
  EXPECT_EQ(inB, outA);
}

TEST(Socket, SendingToAClosedPeerIsPeerGoneNotSigpipe) {
  net::Fd a, b;
  connectedPair(a, b);
  b.reset();
  std::vector<char> bytes(1 << 20);
  net::IoResult r = net::IoResult{};
  for (int i = 0; i < 10 && r; ++i)
    r = net::sendAll(a.get(), bytes.data(), bytes.size(),
                     net::Wait::within(5s));
  EXPECT_EQ(r.status, net::Io::PeerGone) << r.error;
}

TEST(Socket, AcceptAndReceiveEndAtTheirDeadline) {
  Expected<net::Listener> listener = net::listenTcp(0, "127.0.0.1");
  ASSERT_TRUE(listener) << listener.message();
  net::Fd nobody;
  auto start = std::chrono::steady_clock::now();
  net::IoResult r =
      net::acceptOne(*listener, net::Wait::within(100ms), nobody);
  EXPECT_EQ(r.status, net::Io::TimedOut);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
  net::Fd a, b;
  connectedPair(a, b);
  char byte;
  EXPECT_EQ(net::receiveAll(a.get(), &byte, 1, net::Wait::within(50ms)).status,
            net::Io::TimedOut);
}

TEST(Socket, AWakerEndsAWaitAtOnce) {
  net::Fd a, b;
  connectedPair(a, b);
  net::Waker waker;
  std::thread aborter([&] {
    std::this_thread::sleep_for(50ms);
    waker.signal();
  });
  char byte;
  auto start = std::chrono::steady_clock::now();
  net::IoResult r = net::receiveAll(a.get(), &byte, 1, net::Wait(waker));
  aborter.join();
  EXPECT_EQ(r.status, net::Io::Woken);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(Socket, APortInUseIsNamed) {
  Expected<net::Listener> first = net::listenTcp(0, "127.0.0.1");
  ASSERT_TRUE(first) << first.message();
  Expected<net::Listener> second = net::listenTcp(first->port, "127.0.0.1");
  ASSERT_FALSE(second);
  EXPECT_TRUE(says(second.message(), std::to_string(first->port)) &&
              says(second.message(), "another process holds it"))
      << second.message();
}

} // namespace
