// A stream thread (communication or offload): its work runs in issue order.
#pragma once

#include "autoshard/rt/abi.h"
#include "stats/Stats.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace autoshard::rt {

class Trace;

/// What an operation on a stream is, for timeout messages, the trace and
/// the statistics: a collective on the communication stream, a transfer on
/// the offload stream. `name` is a string literal (the op's name, or the
/// transfer kind's).
struct StreamOpInfo {
  const char *name = "";
  asrt_dtype dtype = ASRT_DTYPE_F32;
  int32_t mask = 0;
  int64_t groupSize = 1;
  /// Ring bytes counted for it (docs/RuntimeABI.md); a transfer's bytes.
  int64_t bytes = 0;
  /// Bucket members; 0 for a single-tensor collective.
  int64_t members = 0;
  /// asrt_bucket_start's or asrt_transfer_start's handle; 0 for a blocking
  /// collective or a synchronous transfer.
  int64_t handle = 0;
  /// A transfer's NVMe argument and its name (the NVMe store's, which
  /// outlives the transfer); -1 and null for a host/device copy.
  int32_t arg = -1;
  const char *argName = nullptr;

  bool async() const { return handle > 0; }
};

/// "bucket_all_reduce of handle 3 (f32, 2 members, 4096 bytes, over
/// grid_axes_mask 1: a group of 2 ranks)".
std::string describeStreamOp(const StreamOpInfo &info);
/// "nvme_read of handle 2 (argument 3 b.momentum, 16 bytes)", "to_device
/// (4096 bytes)": a transfer on the offload stream.
std::string describeTransfer(const StreamOpInfo &info);

/// What a stream runs, which decides what it records (docs/RuntimeABI.md,
/// "Communication time", "Offload"): collectives on the communication
/// thread (Stats::Snapshot::comm, "comm" events on the communication track)
/// or offload transfers on the offload thread (Stats::Snapshot::offload,
/// "offload" events on the offload track), and how its messages name them:
/// the side thread whose time Stats splits.
using StreamRole = SideThread;

/// Monotonic nanoseconds; a test may give the stream a fake clock.
using StreamClock = int64_t (*)();
int64_t steadyClockNs();

/// A context's communication stream, as a CUDA or NCCL stream: a dedicated
/// thread runs the operations issued to it one at a time, in issue order,
/// while the issuing (main) thread goes on. Every rank issues the same
/// collectives in the same order (SPMD), so running them in issue order
/// keeps MPI's collectives matched across ranks; and since OpenMPI advances
/// non-blocking collectives only inside MPI calls, a thread that sits in
/// the blocking call is what makes the overlap with compute real.
///
/// One thread issues and waits (the context's caller); the stream's own
/// thread starts at the first issue and is joined by the destructor, after
/// it has run everything issued (a context therefore outlives its Comm's
/// use: destroy it before the Comm and MPI_Finalize).
///
/// Waits are bounded by the collective timeout: a wait that does not
/// complete in time is fatal, naming the collective waited for and the one
/// the stream is stuck in, so that a dead or hung peer ends the job instead
/// of hanging it. The stream records the communication thread's time and
/// the main thread's blocked time in Stats (Snapshot::comm) and, while a
/// trace is set, one "comm" event per operation.
///
/// The same class, in the Offload role, is the context's offload stream (a
/// copy engine / I/O queue): a second thread that runs host/device copies
/// and NVMe reads and writes in issue order, bounded by the same timeout,
/// recording Snapshot::offload and "offload" events instead.
class CommStream {
public:
  static constexpr double kDefaultTimeoutSeconds = 300.0;

  explicit CommStream(Stats &stats, StreamClock clock = &steadyClockNs);
  CommStream(Stats &stats, StreamRole role, StreamClock clock = &steadyClockNs);
  ~CommStream();
  CommStream(const CommStream &) = delete;
  CommStream &operator=(const CommStream &) = delete;

  /// Seconds a wait may block; 0 waits forever.
  void setTimeout(double seconds);
  double timeout() const { return timeoutSeconds; }

  /// What the rank is doing ("step 3", "the evaluation after step 2"),
  /// which a timeout's message names; empty: nothing (the default, and
  /// between steps). Set by the thread that waits.
  void setPhase(std::string phase);

  /// Names the other members of this rank's group for a grid-axes mask
  /// ("rank 1", "ranks 0, 2, 3"), which a collective's timeout message
  /// adds to its likely cause; set by the owner of the communicator (the
  /// driver). Unset, the message gives the group's size alone. Called only
  /// on a timeout, so a steady stream of collectives builds no strings.
  void setGroupNamer(std::function<std::string(int32_t mask)> namer);

  /// Says which member(s) the collective the communication thread runs
  /// waits for, as far as its communicator knows (Comm::describeWait);
  /// a collective's timeout message adds it after the group's members.
  /// Called on the waiting thread, only on a timeout, while the
  /// collective runs.
  void setWaitReporter(std::function<std::string()> reporter);

  StreamRole role() const { return streamRole; }

  /// Records a "comm" (or "offload") event per operation into `trace` from
  /// now on (null: stop). Only while nothing is in flight, so that the
  /// communication thread never sees the change mid-operation.
  void setTrace(Trace *trace);

  /// Queues run(arg) behind everything issued before and returns its
  /// sequence number: 1 for the first, then 2, 3, ... `arg` must stay
  /// valid until the operation completes.
  uint64_t issue(void (*run)(void *), void *arg, const StreamOpInfo &info);

  /// Blocks until operation `seq` (and so every one issued before it) has
  /// run. The blocked time counts as exposed communication (offload): under
  /// asrt_wait's (asrt_transfer_wait's) counters for an asynchronous
  /// `waited`, else under the blocking (synchronous) ones. Fatal after the
  /// timeout; `caller` and `waited` name what was waited for in the
  /// message.
  void wait(uint64_t seq, const char *caller, const StreamOpInfo &waited);

  /// Runs fn() on the stream after everything issued before, and waits for
  /// it: a blocking collective. fn may refer to the caller's stack.
  /// Returns its sequence number.
  template <typename Fn>
  uint64_t runBlocking(const char *caller, const StreamOpInfo &info, Fn &&fn) {
    using F = std::remove_reference_t<Fn>;
    uint64_t seq = issue([](void *f) { (*static_cast<F *>(f))(); },
                         static_cast<void *>(&fn), info);
    wait(seq, caller, info);
    return seq;
  }

  /// Waits until nothing is in flight (a no-op when idle), as a blocking
  /// collective that runs on the caller's thread must: it is ordered after
  /// the asynchronous ones issued before it.
  void drain(const char *caller, const StreamOpInfo &info);

  bool isComplete(uint64_t seq) const {
    return completedSeq.load(std::memory_order_acquire) >= seq;
  }
  uint64_t lastIssued() const { return issuedSeq; }
  /// Threads blocked in wait() right now. Lets a test hold an operation
  /// until the main thread is blocked on it, to check the accounting.
  int blockedWaiters() const {
    return blockedCount.load(std::memory_order_acquire);
  }

private:
  struct Item {
    uint64_t seq = 0;
    void (*run)(void *) = nullptr;
    void *arg = nullptr;
    StreamOpInfo info;
  };

  void threadMain();
  std::string describe(const StreamOpInfo &info) const;
  [[noreturn]] void timedOut(std::unique_lock<std::mutex> &lock, uint64_t seq,
                             const char *caller, const StreamOpInfo &waited,
                             double waitedSeconds);

  Stats &stats;
  StreamRole streamRole = StreamRole::Communication;
  StreamClock clock;
  double timeoutSeconds = kDefaultTimeoutSeconds;
  std::string phase;
  std::function<std::string(int32_t mask)> groupNamer;
  std::function<std::string()> waitReporter;
  std::atomic<Trace *> trace{nullptr};

  mutable std::mutex mutex;
  std::condition_variable workReady;
  std::condition_variable workDone;
  /// Queued, not yet started: a ring over `ring` (grow-only, so that a
  /// steady stream of steps allocates nothing).
  std::vector<Item> ring;
  size_t head = 0;
  size_t queued = 0;
  /// The operation the thread is running, while `running`, and when it
  /// started (steady clock, for the timeout message).
  bool running = false;
  Item current;
  std::chrono::steady_clock::time_point currentStart;
  bool stopping = false;

  uint64_t issuedSeq = 0; // the issuing thread's only
  /// issuedSeq for the communication thread's lock-free look for work.
  std::atomic<uint64_t> publishedSeq{0};
  std::atomic<uint64_t> completedSeq{0};
  std::atomic<int> blockedCount{0};
  std::thread thread;
};

} // namespace autoshard::rt
