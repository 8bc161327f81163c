// The emulated NCCL's wires: TCP sockets on the loopback interface between
// the ranks' processes (or threads), over the runtime's one socket layer
// (net/Socket.h). Waits watch a Waker, so that ncclCommAbort ends any of
// them at once.
#pragma once

#include "net/Socket.h"

#include <cstdint>

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

} // namespace asrt_nccl_emu
