// The CPU ranks' communicator without MPI: Gloo over TCP.
#pragma once

#include "comm/Comm.h"
#include "core/Control.h"
#include "core/Expected.h"

#include <memory>
#include <string>
#include <vector>

namespace autoshard::rt {

/// A Comm over Gloo's TCP transport for the ranks of `control`'s job
/// arranged as `grid` (its product the world size): what host-memory ranks
/// of a torchrun-style launch, which have no MPI, run their collectives
/// on. One Gloo transport context per distinct group of the grid's axis
/// masks, its pairs connected at once: every rank publishes the address of
/// each of its pairs through `control` (the TCP rendezvous the job already
/// joined, so no second store is needed), then connects them. Collective
/// over the world; call it on the thread that owns `control`.
///
/// Each rank listens on the address of its interface that routes to
/// `peerHost` (MASTER_ADDR): the one the others reach this node by when
/// rank 0 sits elsewhere, and loopback when every rank is on rank 0's node.
///
/// Every wait (connecting, and each step of a collective) is bounded by
/// control.timeout() (--collective-timeout; 0 waits forever). A collective
/// whose peer died, closed its connection or did not send in time is
/// fatal, naming the collective, its group and the peer's world rank.
/// An Error when the transport cannot be set up (no address, a peer
/// that cannot be reached).
Expected<std::unique_ptr<Comm>> createGlooComm(ControlPlane &control,
                                               const std::vector<int64_t> &grid,
                                               const std::string &peerHost);

} // namespace autoshard::rt
