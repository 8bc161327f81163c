// The emulated NCCL's bootstrap: a new communicator's ranks meet in a
// key-value store (comm/Store.h, the runtime's one rendezvous mechanism)
// hosted by the process that made the unique id, as NCCL's root is.
#pragma once

#include "Transport.h"

#include <cstdint>
#include <string>
#include <vector>

namespace asrt_nccl_emu {

/// What a rank posts when it joins a communicator.
struct JoinRequest {
  int32_t nranks = 0;
  int32_t rank = 0;
  uint16_t port = 0;  // where the rank listens for its ring predecessor
  char uuid[16] = {}; // its GPU's
};

/// How a join that reached the store ended.
struct JoinReply {
  /// Why the ranks cannot form the communicator (they disagree on its
  /// size, two claim one rank, the id is another communicator's): the
  /// same reason on every member that waited. Empty: joined.
  std::string refused;
  /// Joined: every rank's port and GPU, by rank.
  std::vector<uint16_t> ports;
  std::vector<std::string> uuids;
};

/// Hosts the bootstrap store of a new unique id: a StoreServer on
/// 127.0.0.1 holding the id's `nonce`, kept by a detached thread until
/// every member of the communicator has its table (after a refusal, a
/// minute longer, so that latecomers hear why too). Its port.
WireResult hostBootstrapStore(uint64_t nonce, uint16_t &port);

/// Joins the communicator of unique id `nonce` through its store at
/// 127.0.0.1:`port`, waiting without a deadline for the others (as NCCL
/// does: the caller's timeout aborts the communicator). Ok with `reply`
/// set when the store answered; Woken when `waker` fired (the others are
/// told, through the store, that this rank gave up); PeerGone when the
/// store's process went away or another rank gave up while joining
/// (`error` says which); System or TimedOut (the store never came) else.
WireResult joinThroughStore(uint16_t port, uint64_t nonce,
                            const JoinRequest &request, const Waker &waker,
                            JoinReply &reply);

} // namespace asrt_nccl_emu
