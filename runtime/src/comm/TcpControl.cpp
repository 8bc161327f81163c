// The control plane of a torchrun-style launch: the TCP rendezvous.
#include "comm/Rendezvous.h"
#include "core/Context.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace autoshard::rt {

namespace {

/// The control plane over a TCP rendezvous (TcpGroup). A failed operation
/// means a peer died or hung: fatal, with the group's message naming the
/// rank.
class TcpControl final : public ControlPlane {
public:
  TcpControl(TcpGroup group, const LaunchEnv &env)
      : ControlPlane(env.rank, env.worldSize, env.localRank,
                     env.localWorldSize),
        group(std::move(group)) {}

  const char *kind() const override { return "tcp"; }
  std::vector<std::string> allGather(const std::string &mine) override {
    return check(group.allGather(mine), "allGather");
  }
  void broadcast(std::string &bytes, int root) override {
    if (root == 0) {
      bytes = check(group.broadcast(bytes), "broadcast");
      return;
    }
    bytes = check(group.allGather(rank() == root ? bytes : std::string()),
                  "broadcast")[static_cast<size_t>(root)];
  }
  void barrier() override {
    if (Status s = group.barrier(); !s)
      fatal("control plane (tcp): barrier%s: %s", forPurpose().c_str(),
            s.message().c_str());
  }
  std::unique_ptr<WaitWords> waitWords() override {
    Expected<std::unique_ptr<WaitWords>> board = group.waitWords();
    if (!board) {
      // Only a timeout message would use it: say so, and go on without.
      std::fprintf(stderr,
                   "autoshard: control plane (tcp): no board for the words "
                   "of waiting ranks (a collective timeout will not name "
                   "the missing member): %s\n",
                   board.message().c_str());
      return nullptr;
    }
    return std::move(*board);
  }
  [[noreturn]] void abortJob(int code) override {
    // The peers see the connection close at their next operation.
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(code);
  }

private:
  void timeoutChanged() override {
    // Beyond ~30 years the deadline would overflow the clock: forever.
    group.setOperationTimeout(
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::duration<double>(
                timeout() > 0 ? std::min(timeout(), 1e9) : 1e9)));
  }

  template <typename T> T check(Expected<T> result, const char *op) {
    if (!result)
      fatal("control plane (tcp): %s%s: %s", op, forPurpose().c_str(),
            result.message().c_str());
    return std::move(*result);
  }

  TcpGroup group;
};

} // namespace

std::unique_ptr<ControlPlane> createTcpControl(TcpGroup group,
                                               const LaunchEnv &env) {
  return std::make_unique<TcpControl>(std::move(group), env);
}

} // namespace autoshard::rt
