// torchrun-style launch variables, and a TCP control plane between ranks.
#pragma once

#include "core/Control.h"
#include "core/Expected.h"
#include "net/Socket.h"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace autoshard::rt {

/// Where this process sits in a job started by torchrun (or any launcher
/// that sets the same variables), and where rank 0 waits for the others.
/// It is how a GPU machine without MPI finds its peers: every rank reads
/// it, connects a TcpGroup, and rank 0 broadcasts NCCL's unique id over it.
struct LaunchEnv {
  int rank = 0;           // RANK: 0 .. worldSize - 1
  int worldSize = 1;      // WORLD_SIZE: processes in the job
  int localRank = 0;      // LOCAL_RANK: rank on this node; picks the GPU
  int localWorldSize = 1; // LOCAL_WORLD_SIZE: processes on this node
  std::string masterAddr; // MASTER_ADDR: rank 0's host
  int masterPort = 0;     // MASTER_PORT
  /// Under torchrun its agent holds MASTER_PORT for its own key-value
  /// store (it says so with TORCHELASTIC_USE_AGENT_STORE=True).
  bool agentHoldsMasterPort = false;
  /// The port rank 0 listens on: MASTER_PORT, or beside the agent's.
  int rendezvousPort() const {
    return agentHoldsMasterPort ? masterPort + 1 : masterPort;
  }
};

/// Reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (required) and
/// LOCAL_RANK, LOCAL_WORLD_SIZE (optional) through `getenv` (std::getenv,
/// or a table in tests). Nullopt when none of the six is set: the process
/// was not started by such a launcher. An Error, naming the variable, its
/// value and what it should be, when a required one is missing, one is
/// not a decimal integer, or a value is out of range (rank not below the
/// world size, a port outside 1..65535, an empty MASTER_ADDR, ...).
///
/// TORCHELASTIC_USE_AGENT_STORE ("True" or "1", as torchrun sets it) moves
/// the rendezvous to MASTER_PORT + 1 (an Error when that is past 65535).
///
/// Without LOCAL_RANK and LOCAL_WORLD_SIZE the job is taken to run on one
/// node: LOCAL_RANK defaults to RANK and LOCAL_WORLD_SIZE to WORLD_SIZE.
/// torchrun always sets both; the defaults serve hand-written single-node
/// launches, and a multi-node launch that forgets LOCAL_RANK but sets
/// LOCAL_WORLD_SIZE fails the range check instead of picking a GPU the
/// node does not have.
Expected<std::optional<LaunchEnv>>
launchEnvFromVariables(const std::function<const char *(const char *)> &getenv);

/// How long a TcpGroup waits. Both bound every blocking step; nothing in a
/// TcpGroup waits without a deadline.
struct TcpGroupOptions {
  /// From the start of accept() or connect() until every rank has joined:
  /// ranks start at different times, and rank 0 may start last (the
  /// others retry their connection until then).
  std::chrono::milliseconds connectTimeout = std::chrono::seconds(300);
  /// Per operation (allGather, barrier, broadcast), from its start.
  std::chrono::milliseconds operationTimeout = std::chrono::seconds(300);
  /// When the group has not formed this long after accept() or connect()
  /// began, one line says which rank waits for whom, where, and how long
  /// it waits in all: a missing peer would otherwise show nothing until
  /// connectTimeout. Zero: no line. It changes no deadline.
  std::chrono::milliseconds slowJoinNotice = std::chrono::seconds(10);
  /// Where that line goes (tests); empty: stderr, as "autoshard: LINE".
  std::function<void(const std::string &)> notice;
};

/// Rank 0's listening socket, opened before the group forms so that a
/// caller (a test) can listen on port 0 and learn the port the system
/// chose. SO_REUSEADDR, so that a job restarted at once can reuse its port.
class TcpListener {
public:
  /// Listens on `port` (0: any free port) of `host`'s address, or of every
  /// interface when `host` is empty (IPv6 and IPv4 where the system allows
  /// both). Listening everywhere is what a launch wants: MASTER_ADDR is how
  /// the others reach rank 0, and the name of rank 0's own host may resolve
  /// locally to a loopback address (Debian's 127.0.1.1) the others cannot
  /// reach.
  static Expected<TcpListener> open(int port, const std::string &host = "");

  /// The port it listens on (the chosen one when opened with port 0).
  int port() const { return listener.port; }

private:
  TcpListener(net::Listener listener, std::string host)
      : listener(std::move(listener)), host(std::move(host)) {}
  friend class TcpGroup;

  net::Listener listener;
  /// The host it was opened on; empty: every interface.
  std::string host;
};

/// A small control plane between the ranks of a job, over TCP, for the
/// few messages a launch needs before NCCL takes over (NCCL's unique id,
/// host names, a barrier) and the agreements between steps. Not for bulk
/// data: every blob passes through rank 0's store.
///
/// The group lives in a key-value store (comm/Store.h, c10d's Store
/// model) that rank 0 serves on its listening port; every rank, rank 0
/// too, is a client of it. Forming the group: each rank counts itself in
/// and posts its rank and world size under its arrival number; rank 0
/// reads the arrivals in order and refuses the group (posting why, which
/// ends every rank's wait) when the sizes differ, a rank is out of range
/// or joins twice, or not every rank has arrived in time; otherwise it
/// sets the start key, and every rank starts at once. A process that
/// arrives after the group formed is turned away. A connection that does
/// not speak the store's protocol is dropped without failing the group.
///
/// Operations are collective: every rank calls the same ones in the same
/// order. Operation #S: each rank posts its kind and blob under
/// "op/S/RANK" and waits for every rank's key in the same request, so
/// every rank reads every other's part and sees itself who has not
/// reached the operation, whose kind differs, or who closed its
/// connection. As every rank leaves an operation together, a rank that has
/// not reached one is in none of the group's: a timeout names the
/// operation every rank finished last (ranks calling different numbers of
/// operations show so) and the late rank's word on the board of waiting
/// ranks (waitWords), when it posted one, saying where it waits instead.
/// Every blocking step is bounded by the options' timeouts.
/// A failure (a peer that closed or died, a timeout, a mismatch) returns
/// an Error naming the peer's rank and the operation; the failing rank
/// posts it as the store's abort, which ends the others' waits at once
/// with the cause rather than at their own timeouts. A failed group stays
/// failed: later operations return the first error. Writes never raise
/// SIGPIPE.
///
/// One thread at a time may use a group.
class TcpGroup {
public:
  /// Rank 0: serves the group's store on `listener` (for the group's
  /// life) and starts the group once worldSize - 1 ranks have arrived.
  static Expected<TcpGroup> accept(TcpListener listener, int worldSize,
                                   const TcpGroupOptions &options = {});
  /// Rank `rank` (1 .. worldSize - 1): connects to rank 0 at host:port,
  /// retrying refused connections until the connect timeout, and waits
  /// for rank 0 to start the group.
  static Expected<TcpGroup> connect(const std::string &host, int port, int rank,
                                    int worldSize,
                                    const TcpGroupOptions &options = {});
  /// Either of the above as `env` says: rank 0 listens on every interface
  /// at env.rendezvousPort(), the others connect to MASTER_ADDR there. A
  /// world of one needs no network.
  static Expected<TcpGroup> join(const LaunchEnv &env,
                                 const TcpGroupOptions &options = {});

  TcpGroup(TcpGroup &&other) noexcept;
  TcpGroup &operator=(TcpGroup &&other) noexcept;
  TcpGroup(const TcpGroup &) = delete;
  TcpGroup &operator=(const TcpGroup &) = delete;
  /// Closes the connection (rank 0: and stops the store); peers waiting
  /// in an operation, or entering one, fail at once, naming this rank.
  ~TcpGroup();

  int rank() const;
  int size() const;

  /// Replaces the options' operationTimeout for the operations from now on
  /// (the job's --collective-timeout, known only after the group formed).
  void setOperationTimeout(std::chrono::milliseconds timeout);

  /// Every rank's `mine`, in rank order, on every rank.
  Expected<std::vector<std::string>> allGather(const std::string &mine);
  /// Returns once every rank has called it.
  Status barrier();
  /// Rank 0's `fromRank0` on every rank (the others' argument is ignored).
  /// Like the others it returns once every rank has called it.
  Expected<std::string> broadcast(const std::string &fromRank0);

  /// A board of WaitWords (core/Control.h) in the group's store, under
  /// keys of its own and over a connection of its own, so that the
  /// communication thread can post while the main thread reads. Null in a
  /// world of one; an Error when the store cannot be reached.
  Expected<std::unique_ptr<WaitWords>> waitWords() const;

private:
  struct State;
  explicit TcpGroup(std::unique_ptr<State> state);

  std::unique_ptr<State> state;
};

/// The job's control plane over `group` (core/Control.h), placed as `env`
/// says: what a torchrun-style launch joins with. A failed operation (a
/// peer that died or hung) is fatal, naming the operation and the peer.
std::unique_ptr<ControlPlane> createTcpControl(TcpGroup group,
                                               const LaunchEnv &env);

} // namespace autoshard::rt
