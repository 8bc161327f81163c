// The emulated NCCL's wires: TCP sockets on the loopback interface between
// the ranks' processes (or threads), over the runtime's socket layer
// (net/Socket.h), and the bootstrap root that tells every rank of a new
// communicator where the others listen. Waits watch a Waker, so that
// ncclCommAbort ends any of them at once.
#pragma once

#include "net/Socket.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace asrt_nccl_emu {

using autoshard::rt::net::acceptOne;
using autoshard::rt::net::exchange;
using autoshard::rt::net::Fd;
using autoshard::rt::net::receiveAll;
using autoshard::rt::net::sendAll;
using autoshard::rt::net::Waker;
/// Why a wire operation stopped: Ok, the Waker fired (the communicator is
/// being aborted), the peer closed or reset the connection (it died or
/// aborted), or anything else (`error` says what).
using Wire = autoshard::rt::net::Io;
using WireResult = autoshard::rt::net::IoResult;
using Listener = autoshard::rt::net::Listener;

/// A listening socket on 127.0.0.1 and an ephemeral port.
WireResult listenLoopback(Listener &out);

/// Connects to 127.0.0.1:`port`, retrying for at most `patienceMs` while
/// the peer is not listening yet.
WireResult connectLoopback(uint16_t port, int patienceMs, const Waker &waker,
                           Fd &out);

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
