// The emulated NCCL's wires: loopback TCP over the runtime's socket layer.
#include "Transport.h"

#include <chrono>

namespace asrt_nccl_emu {

namespace net = autoshard::rt::net;

WireResult listenLoopback(Listener &out) {
  autoshard::rt::Expected<Listener> listener = net::listenTcp(0, "127.0.0.1");
  if (!listener)
    return {Wire::System, listener.message()};
  out = std::move(*listener);
  return {};
}

WireResult connectLoopback(uint16_t port, int patienceMs, const Waker &waker,
                           Fd &out) {
  net::ConnectOptions options;
  options.wait = net::Wait(
      waker, net::Clock::now() + std::chrono::milliseconds(patienceMs));
  WireResult r = net::connectTcp("127.0.0.1", port, options, out);
  if (r.status == Wire::TimedOut)
    r.error = "connect to 127.0.0.1:" + std::to_string(port) + ": " + r.error;
  return r;
}

} // namespace asrt_nccl_emu
