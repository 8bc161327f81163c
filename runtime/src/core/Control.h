// The job's control plane: who this rank is, and the small collectives the
// driver and the checkpointer exchange between steps.
#pragma once

#include "core/Expected.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace autoshard::rt {

/// Where the ranks of a job post a word while they wait in a collective
/// their communicator cannot see into (NCCL does not say which member a
/// collective waits for), and read each other's: how a timeout names the
/// members that have not reached it. One word per rank, its latest. Any
/// thread may call it; every call is bounded by a few seconds.
class WaitWords {
public:
  virtual ~WaitWords() = default;
  /// Posts this rank's word ("all_reduce #4 over the world"), or takes it
  /// back (empty).
  virtual void post(const std::string &word) = 0;
  /// Every rank's latest word, by rank ("" for none); an Error when they
  /// cannot be read now.
  virtual Expected<std::vector<std::string>> read() = 0;
  /// How the words travel, for messages: "post in the job's store".
  virtual const char *how() const = 0;
};

/// How the ranks of a job find each other and agree, apart from the step's
/// collectives (the data plane, Comm): MPI under mpirun, a TCP rendezvous
/// under torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR, ...) so
/// that a GPU job needs no MPI, or a single process. Between steps only:
/// verdicts, checkpoint records, trace events, NCCL's unique id.
///
/// Every operation is collective (every rank calls it, in the same order)
/// and runs on the main thread. A peer that fails to take part (it died)
/// is fatal, naming the operation: the control plane has no error path to
/// return to. So is a peer that does not take part within the timeout (it
/// hung, or was stopped): the message names the operation, what it was for
/// (Purpose) and the rank it waited for, so that a job whose rank hangs
/// between steps, in a checkpoint say, ends instead of hanging.
class ControlPlane {
public:
  ControlPlane(int rank, int size, int localRank, int localSize);
  virtual ~ControlPlane();
  ControlPlane(const ControlPlane &) = delete;
  ControlPlane &operator=(const ControlPlane &) = delete;

  int rank() const { return worldRank; }
  int size() const { return worldSize; }
  /// This rank's index among the ranks on its node, and their number (one
  /// GPU per rank: the local rank picks the device).
  int localRank() const { return nodeRank; }
  int localSize() const { return nodeSize; }

  /// Seconds an operation may wait for its peers (--collective-timeout,
  /// the bound of the step's collectives too); 0 waits forever.
  static constexpr double kDefaultTimeoutSeconds = 300.0;
  void setTimeout(double seconds);
  double timeout() const { return timeoutSeconds; }

  /// Names what the control plane's operations are for while it lives
  /// ("saving the checkpoint of step 3: ..."), in the message of an
  /// operation that times out. Scopes nest; the innermost one names.
  class Purpose {
  public:
    Purpose(ControlPlane &control, std::string what);
    ~Purpose();
    Purpose(const Purpose &) = delete;
    Purpose &operator=(const Purpose &) = delete;
    /// Names a later stage of the same work.
    void set(std::string what);

  private:
    ControlPlane &control;
    std::string outer;
  };
  /// The innermost Purpose's text; empty outside every scope.
  const std::string &purpose() const { return currentPurpose; }

  /// "mpi", "tcp" or "single", for the banner and messages.
  virtual const char *kind() const = 0;
  /// Every rank's `mine`, in rank order, on every rank.
  virtual std::vector<std::string> allGather(const std::string &mine) = 0;
  /// On rank 0 every rank's `mine` in rank order; elsewhere nothing. The
  /// default gathers everywhere and drops it off rank 0.
  virtual std::vector<std::string> gather(const std::string &mine);
  /// Sets `bytes` to `root`'s on every rank.
  virtual void broadcast(std::string &bytes, int root) = 0;
  virtual void barrier() = 0;
  /// Ends every rank of the job now with `code`, as a launcher's kill
  /// would: no cleanup, no finalisation (test hooks that simulate a job
  /// dying).
  [[noreturn]] virtual void abortJob(int code) = 0;
  /// A board of WaitWords over this plane's transport, for a communicator
  /// that cannot say whom a collective waits for (NCCL; MpiComm's ranks
  /// exchange their words on a board of their own); null where the plane
  /// has none (a single process). Every rank asks for its boards in the
  /// same order, on the main thread; a board then serves any thread.
  virtual std::unique_ptr<WaitWords> waitWords() { return nullptr; }

protected:
  /// Lets a plane whose transport holds its own deadline follow a change.
  virtual void timeoutChanged() {}
  /// " (for PURPOSE)", or "" outside every Purpose: for messages.
  std::string forPurpose() const;

private:
  int worldRank, worldSize, nodeRank, nodeSize;
  double timeoutSeconds = kDefaultTimeoutSeconds;
  std::string currentPurpose;
};

/// Success when `mine` succeeded on every rank; otherwise the error of the
/// lowest failing rank, on every rank, so that all ranks take the same
/// path after a failure that only some of them saw (a file missing on one
/// node). Collective.
Status agreeOnStatus(const Status &mine, ControlPlane &control);

/// The smallest of every rank's `value`. Collective.
int64_t allMin(ControlPlane &control, int64_t value);

/// A job of one process (no launcher): every collective is the identity.
std::unique_ptr<ControlPlane> makeSingleProcessControl();

} // namespace autoshard::rt
