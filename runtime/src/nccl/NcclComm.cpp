// Comm over NCCL: one communicator per grid axis mask, split from the world.
#include "nccl/NcclComm.h"

#include "core/Context.h"
#include "memory/Device.h"
#include "core/Dtype.h"
#include "io/Manifest.h"
#include "nccl/NcclCheck.h"
#include "nccl/NcclPlan.h"

#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace autoshard::rt {

namespace {

using Clock = std::chrono::steady_clock;

/// How long abortNcclComms waits for a communication thread that is inside
/// a NCCL call (on nonblocking communicators they return at once).
constexpr std::chrono::seconds kAbortLockWait(5);

/// The group of a world-wide operation (barrier, setup) in messages.
constexpr int32_t kWorld = -1;

/// Between polls of a collective: yield for the first 100 us, which a
/// short collective finishes within, then sleep 50 us a poll. Completion
/// is noticed within about 0.1 ms (timer slack included) and a long
/// collective costs the communication thread next to no CPU.
class PollPause {
public:
  void operator()() {
    if (Clock::now() - start < std::chrono::microseconds(100))
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

private:
  Clock::time_point start = Clock::now();
};

ncclDataType_t reductionType(asrt_dtype dtype, const char *op) {
  switch (dtype) {
  case ASRT_DTYPE_F32:
    return ncclFloat32;
  case ASRT_DTYPE_BF16:
    return ncclBfloat16;
  case ASRT_DTYPE_F16:
    return ncclFloat16;
  case ASRT_DTYPE_I32:
    return ncclInt32;
  case ASRT_DTYPE_I64:
    return ncclInt64;
  case ASRT_DTYPE_U16:
    break;
  }
  fatal("nccl %s: dtype %d (%s) cannot be reduced; u16 is only gathered", op,
        static_cast<int>(dtype), dtypeName(dtype));
}

ncclRedOp_t reductionOp(asrt_reduce_op op, const char *name) {
  switch (op) {
  case ASRT_REDUCE_SUM:
    return ncclSum;
  case ASRT_REDUCE_AVG:
    // NCCL divides by the group size itself (for floats it scales the
    // inputs first): as MpiComm's sum-then-divide up to rounding.
    return ncclAvg;
  case ASRT_REDUCE_MAX:
    return ncclMax;
  case ASRT_REDUCE_MIN:
    return ncclMin;
  }
  fatal("nccl %s: reduce_op %d is not an asrt_reduce_op", name,
        static_cast<int>(op));
}

int64_t elementBytes(asrt_dtype dtype, const char *op) {
  int64_t bytes = dtypeSize(dtype);
  if (bytes == 0)
    fatal("nccl %s: dtype %d is not an asrt_dtype", op,
          static_cast<int>(dtype));
  return bytes;
}

class NcclComm;

/// Every live NcclComm, for abortNcclComms. Never destroyed: fatal() may
/// reach it while the process exits.
struct Registry {
  std::mutex mutex;
  std::vector<NcclComm *> comms;
};
Registry &registry() {
  static Registry *instance = new Registry();
  return *instance;
}

class NcclComm final : public Comm {
public:
  NcclComm(int rank, int size, std::vector<int64_t> grid, cudaStream_t stream,
           Device &device, double setupTimeoutSeconds,
           std::unique_ptr<WaitWords> words, double collectiveTimeoutSeconds)
      : Comm(rank, size, std::move(grid)), stream(stream), device(device),
        setupTimeoutSeconds(setupTimeoutSeconds), words(std::move(words)),
        sayAfter(collectiveTimeoutSeconds > 0 ? collectiveTimeoutSeconds / 4
                                              : 0) {}

  /// Joins the world communicator; collective over every rank.
  void init(const ncclUniqueId &id);
  ~NcclComm() override;

  void allReduce(const void *send, void *recv, int64_t count, asrt_dtype dtype,
                 asrt_reduce_op op, int32_t mask) override {
    const Op what{"all_reduce", mask};
    makeCurrent();
    ncclComm_t comm = groupComm(mask);
    ncclDataType_t type = reductionType(dtype, what.name);
    ncclRedOp_t redOp = reductionOp(op, what.name);
    // NCCL's in place is the ABI's: send == recv.
    issue(comm, what, [&] {
      return ncclAllReduce(send, recv, static_cast<size_t>(count), type, redOp,
                           comm, stream);
    });
    awaitStream(comm, what);
  }

  void allGather(const void *send, void *recv, int64_t sendCount,
                 asrt_dtype dtype, int32_t mask) override {
    const Op what{"all_gather", mask};
    makeCurrent();
    ncclComm_t comm = groupComm(mask);
    // Gathers only move bytes: every dtype, u16 included, goes as bytes.
    // NCCL's in place (send at this rank's block of recv) is the ABI's.
    size_t bytes =
        static_cast<size_t>(sendCount * elementBytes(dtype, what.name));
    issue(comm, what, [&] {
      return ncclAllGather(send, recv, bytes, ncclUint8, comm, stream);
    });
    awaitStream(comm, what);
  }

  void reduceScatter(const void *send, void *recv, int64_t recvCount,
                     asrt_dtype dtype, asrt_reduce_op op,
                     int32_t mask) override {
    const Op what{"reduce_scatter", mask};
    makeCurrent();
    ncclComm_t comm = groupComm(mask);
    run(planReduceScatter(send, recv, recvCount, elementBytes(dtype, what.name),
                          groupSize(mask), groupIndex(mask)),
        comm, dtype, op, what);
  }

  void allGatherShards(const void *shard, void *full, int64_t numel,
                       asrt_dtype dtype, int32_t mask) override {
    runShards({"all_gather_shards", mask}, shard, full, numel, dtype,
              ASRT_REDUCE_SUM, allGatherShardsStagingBytes,
              planAllGatherShards);
  }

  void reduceScatterShards(const void *full, void *shard, int64_t numel,
                           asrt_dtype dtype, asrt_reduce_op op,
                           int32_t mask) override {
    runShards({"reduce_scatter_shards", mask}, full, shard, numel, dtype, op,
              reduceScatterShardsStagingBytes, planReduceScatterShards);
  }

  void barrier() override {
    const Op what{"barrier", kWorld};
    makeCurrent();
    if (!barrierWord) {
      barrierWord = device.allocate(sizeof(int32_t));
      if (!barrierWord)
        fatal("nccl barrier: no device memory for its 4-byte buffer");
      device.zero(Lane::Comm, barrierWord, sizeof(int32_t));
    }
    // The maximum of zeros stays zero: the word never overflows, however
    // many barriers run.
    issue(world, what, [&] {
      return ncclAllReduce(barrierWord, barrierWord, 1, ncclInt32, ncclMax,
                           world, stream);
    });
    awaitStream(world, what);
  }

  /// NCCL's API has no query for the peer a collective waits for (its
  /// RAS tool sees it from outside the job). With a board of WaitWords
  /// (the job's store under a torchrun-style launch, MPI messages under
  /// mpirun) the members say it
  /// themselves, as MpiComm's do: one that has waited a quarter of the
  /// collective timeout posts which collective it waits in, and takes the
  /// word back when the wait ends. At a timeout the others' words tell
  /// which members have not reached this collective (no word), wait in it
  /// too (the same word) or wait in another (theirs).
  std::string describeWait() const override {
    const std::string cannot = "NCCL does not say which member a collective "
                               "waits for, nor whether it reached it";
    Waiting now;
    {
      std::lock_guard<std::mutex> lock(waitingMutex);
      now = waiting;
    }
    if (!words || !now.active)
      return cannot;
    // The store may be gone by now (rank 0 ended first, at its own
    // timeout): then the words this rank read last while it waited serve.
    Expected<std::vector<std::string>> heard = words->read();
    if (!heard) {
      std::lock_guard<std::mutex> lock(waitingMutex);
      if (lastHeard.empty())
        return cannot +
               " (and the words of waiting members could not be "
               "read: " +
               heard.message() + ")";
      heard = lastHeard;
    }
    if (heard->size() != static_cast<size_t>(size()))
      return cannot + " (the board of words is malformed)";
    std::vector<int> members;
    if (now.mask == kWorld || gridGroupSize(grid(), now.mask) == size()) {
      for (int r = 0; r < size(); ++r)
        members.push_back(r);
    } else {
      members = gridGroup(rank(), grid(), now.mask);
    }
    std::vector<PeerWord> others;
    for (int r : members) {
      if (r == rank())
        continue;
      PeerWord word;
      word.rank = r;
      const std::string &theirs = (*heard)[static_cast<size_t>(r)];
      if (!theirs.empty()) {
        word.state = theirs == now.word ? PeerWord::Here : PeerWord::Elsewhere;
        if (word.state == PeerWord::Elsewhere)
          word.where = theirs;
      }
      others.push_back(std::move(word));
    }
    return describePeerWords(others) +
           " (by the word that members waiting longer than a quarter of the "
           "timeout " +
           words->how() +
           ": NCCL does not say which member a collective waits for)";
  }

  /// abortNcclComms' part for this Comm; any thread.
  void abortAll();

private:
  /// What is running, for messages: the collective and its group's mask
  /// (kWorld for world-wide operations).
  struct Op {
    const char *name;
    int32_t mask;
  };

  std::string describe(const Op &op) const;
  /// Makes this rank's GPU current: the communication thread is started by
  /// the runtime core, which knows nothing of CUDA.
  void makeCurrent() const { CHECK_CUDA(cudaSetDevice(ordinal)); }
  Clock::time_point setupDeadline() const;

  ncclComm_t groupComm(int32_t mask);
  void *staging(int64_t bytes, const Op &op);
  void run(const std::vector<NcclStep> &steps, ncclComm_t comm,
           asrt_dtype dtype, asrt_reduce_op op, const Op &what);
  /// A flat-shard collective of `numel` elements from `in` to `out`: the
  /// steps `plan` makes for this rank's place in `what`'s group, through a
  /// staging buffer of the size `stagingBytes` gives (NcclPlan.h).
  using ShardStagingBytes = int64_t (*)(const void *, const void *, int64_t,
                                        int64_t, int64_t, int64_t);
  using ShardPlan = std::vector<NcclStep> (*)(const void *, void *, void *,
                                              int64_t, int64_t, int64_t,
                                              int64_t);
  void runShards(const Op &what, const void *in, void *out, int64_t numel,
                 asrt_dtype dtype, asrt_reduce_op op,
                 ShardStagingBytes stagingBytes, ShardPlan plan);

  /// Makes the NCCL call `call` on `comm` under the call mutex (unless the
  /// communicators were aborted), then waits until NCCL has carried it out.
  template <typename Call> void issue(ncclComm_t comm, const Op &op, Call call);
  /// `comm`'s state under the call mutex: ncclInProgress while NCCL carries
  /// out a nonblocking call, ncclSuccess when idle and well, otherwise the
  /// error; nullopt once aborted.
  std::optional<ncclResult_t> pollState(ncclComm_t comm);
  /// Polls until `comm` leaves ncclInProgress; fatal on an error, an
  /// abort, or at `deadline`.
  void awaitSettled(ncclComm_t comm, const Op &op,
                    Clock::time_point deadline = Clock::time_point::max());
  /// Polls until the stream has run everything queued, watching `comm`'s
  /// asynchronous errors (a peer that died, the network) meanwhile.
  void awaitStream(ncclComm_t comm, const Op &op);

  [[noreturn]] void failNccl(ncclComm_t comm, ncclResult_t result,
                             const Op &op);
  [[noreturn]] void failCuda(cudaError_t status, const Op &op);
  [[noreturn]] void failAborted(const Op &op);
  [[noreturn]] void failTimeout(const Op &op);

  cudaStream_t stream;
  Device &device;
  const double setupTimeoutSeconds;
  int ordinal = 0;

  /// The board waiting members post their words on (null: none), and how
  /// long a collective waits before this rank posts (0: never).
  std::unique_ptr<WaitWords> words;
  const double sayAfter;
  /// Collectives awaited so far, by mask: the same count on every member,
  /// as every rank issues the same collectives in the same order.
  std::map<int32_t, int64_t> sequence;
  /// The collective awaited now, and its word: set by the communication
  /// thread, read by describeWait on the main thread.
  struct Waiting {
    bool active = false;
    int32_t mask = 0;
    std::string word;
  };
  mutable std::mutex waitingMutex;
  Waiting waiting;
  /// The words as this rank last read them while it waited (under
  /// waitingMutex; empty: none read).
  std::vector<std::string> lastHeard;

  // Every NCCL call on the communicators below is made holding callMutex,
  // and abortAll aborts them holding it, so that no call ever reaches an
  // aborted (freed) communicator. Held only for the calls themselves,
  // which return at once on nonblocking communicators, never while
  // sleeping between polls nor when calling fatal().
  std::timed_mutex callMutex;
  bool aborted = false;
  ncclComm_t world = nullptr;
  std::map<int32_t, ncclComm_t> groups; // split ones, by mask
  /// The communicator of the latest call, aborted first.
  ncclComm_t active = nullptr;

  // Used by the communication thread only.
  /// The padded flat-shard layout's staging buffer; released with the Comm.
  DeviceScratch stagingScratch;
  void *barrierWord = nullptr;
};

std::string NcclComm::describe(const Op &op) const {
  std::string text = std::string(op.name) + " over ";
  if (op.mask == kWorld || gridGroupSize(grid(), op.mask) == size())
    return text + "the world (" + std::to_string(size()) + " ranks, grid " +
           formatShape(grid()) + ")";
  std::vector<int> ranks = gridGroup(rank(), grid(), op.mask);
  std::string list;
  for (size_t i = 0; i < ranks.size(); ++i)
    list += (i ? ", " : "") + std::to_string(ranks[i]);
  return text + "grid_axes_mask " + std::to_string(op.mask) + " (ranks " +
         list + " of grid " + formatShape(grid()) + ")";
}

Clock::time_point NcclComm::setupDeadline() const {
  if (setupTimeoutSeconds <= 0)
    return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(setupTimeoutSeconds));
}

void NcclComm::init(const ncclUniqueId &id) {
  CHECK_CUDA(cudaGetDevice(&ordinal));
  {
    // Registered before the world forms, so that a hung setup can be
    // aborted too.
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.comms.push_back(this);
  }
  const Op what{"ncclCommInitRankConfig (joining the world communicator)",
                kWorld};
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  // Nonblocking: no NCCL call blocks this thread, so a hang can always be
  // watched and aborted (the split communicators inherit it).
  config.blocking = 0;
  std::optional<ncclResult_t> result;
  {
    std::lock_guard<std::timed_mutex> lock(callMutex);
    if (!aborted) {
      result = ncclCommInitRankConfig(&world, size(), id, rank(), &config);
      active = world;
    }
  }
  if (!result)
    failAborted(what);
  if (*result != ncclSuccess && *result != ncclInProgress)
    failNccl(world, *result, what);
  awaitSettled(world, what, setupDeadline());
}

NcclComm::~NcclComm() {
  {
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.comms.erase(std::remove(r.comms.begin(), r.comms.end(), this),
                  r.comms.end());
  }
  (void)cudaSetDevice(ordinal);
  std::vector<ncclComm_t> comms;
  for (auto &[mask, comm] : groups)
    comms.push_back(comm);
  if (world)
    comms.push_back(world);
  bool wasAborted;
  {
    std::lock_guard<std::timed_mutex> lock(callMutex);
    wasAborted = aborted;
  }
  if (!wasAborted && !comms.empty()) {
    // Finalize flushes what is still queued and waits until the peers are
    // done with each communicator (every rank finalizes the same ones, in
    // the same order); destroying is then local. A peer that never gets
    // there costs the setup timeout, and an abort instead.
    const Op what{"ncclCommFinalize (destroying the communicators)", kWorld};
    bool finalized = true;
    std::string problem;
    {
      std::lock_guard<std::timed_mutex> lock(callMutex);
      for (ncclComm_t comm : comms) {
        ncclResult_t result = ncclCommFinalize(comm);
        if (result != ncclSuccess && result != ncclInProgress) {
          finalized = false;
          problem = ncclGetErrorString(result);
          break;
        }
      }
    }
    Clock::time_point deadline = setupDeadline();
    for (ncclComm_t comm : comms) {
      if (!finalized)
        break;
      for (PollPause pause;; pause()) {
        std::optional<ncclResult_t> state = pollState(comm);
        if (state && *state == ncclInProgress && Clock::now() < deadline)
          continue;
        if (!state || *state != ncclSuccess) {
          finalized = false;
          problem = !state ? "aborted"
                    : *state == ncclInProgress
                        ? "not every rank finished within the timeout"
                        : ncclGetErrorString(*state);
        }
        break;
      }
    }
    if (finalized) {
      std::lock_guard<std::timed_mutex> lock(callMutex);
      for (ncclComm_t comm : comms)
        (void)ncclCommDestroy(comm);
      aborted = true; // nothing left to abort
    } else {
      std::fprintf(stderr,
                   "autoshard runtime (rank %d): nccl %s failed: %s; "
                   "aborting the communicators instead\n",
                   rank(), describe(what).c_str(), problem.c_str());
      abortAll();
    }
  }
  device.release(barrierWord);
}

void NcclComm::abortAll() {
  std::unique_lock<std::timed_mutex> lock(callMutex, std::defer_lock);
  if (!lock.try_lock_for(kAbortLockWait)) {
    std::fprintf(stderr,
                 "autoshard runtime (rank %d): the NCCL communicators were "
                 "not aborted: the communication thread has been inside a "
                 "NCCL call for %lld s\n",
                 rank(), static_cast<long long>(kAbortLockWait.count()));
    return;
  }
  if (aborted)
    return;
  aborted = true;
  // The calling thread may be any; NCCL frees device memory on this GPU.
  (void)cudaSetDevice(ordinal);
  // The communicator whose work is in flight first: freeing another one's
  // device memory could wait for that work, which only its abort ends.
  std::vector<ncclComm_t> order;
  if (active)
    order.push_back(active);
  for (auto &[mask, comm] : groups)
    if (comm != active)
      order.push_back(comm);
  if (world && world != active)
    order.push_back(world);
  for (ncclComm_t comm : order)
    (void)ncclCommAbort(comm);
}

ncclComm_t NcclComm::groupComm(int32_t mask) {
  if (groupSize(mask) == size()) // groupSize checks the mask
    return world;
  {
    std::lock_guard<std::timed_mutex> lock(callMutex);
    auto it = groups.find(mask);
    if (it != groups.end())
      return it->second;
  }
  // Collective over the world: every rank reaches a mask's first use at
  // the same collective, so every rank splits here, in the same order.
  const Op what{"ncclCommSplit (creating the group's communicator)", mask};
  NcclSplit split = ncclSplitFor(rank(), grid(), mask);
  ncclComm_t child = nullptr;
  std::optional<ncclResult_t> result;
  {
    std::lock_guard<std::timed_mutex> lock(callMutex);
    if (!aborted) {
      active = world;
      result = ncclCommSplit(world, split.color, split.key, &child, nullptr);
    }
  }
  if (!result)
    failAborted(what);
  if (*result != ncclSuccess && *result != ncclInProgress)
    failNccl(world, *result, what);
  // A nonblocking split runs as a job of the parent, which reports its
  // progress; NCCL stores the new communicator into `child` when it is
  // done (aborting the parent meanwhile aborts the split too).
  awaitSettled(world, what);
  if (!child)
    fatal("nccl %s: NCCL made no communicator (color %d, key %d)",
          describe(what).c_str(), split.color, split.key);
  awaitSettled(child, what);
  std::lock_guard<std::timed_mutex> lock(callMutex);
  groups.emplace(mask, child);
  return child;
}

void *NcclComm::staging(int64_t bytes, const Op &op) {
  if (bytes == 0)
    return nullptr;
  // Grow-only. Every collective has completed when its call returns, so
  // nothing on the stream still uses the old buffer.
  std::string what =
      "nccl " + describe(op) + " (staging of the padded flat-shard layout)";
  return stagingScratch.reserve(device, bytes, what.c_str());
}

void NcclComm::run(const std::vector<NcclStep> &steps, ncclComm_t comm,
                   asrt_dtype dtype, asrt_reduce_op op, const Op &what) {
  const int64_t b = elementBytes(dtype, what.name);
  // Resolved before any call: a fatal() must not happen under callMutex.
  bool reduces = std::any_of(steps.begin(), steps.end(), [](const NcclStep &s) {
    return s.kind == NcclStep::Kind::ReduceScatter;
  });
  ncclDataType_t type = reduces ? reductionType(dtype, what.name) : ncclUint8;
  ncclRedOp_t redOp = reduces ? reductionOp(op, what.name) : ncclSum;
  for (const NcclStep &step : steps) {
    switch (step.kind) {
    case NcclStep::Kind::Copy:
      if (step.count > 0 && step.dst != step.src)
        device.copy(Lane::Comm, step.dst, step.src, step.count * b);
      break;
    case NcclStep::Kind::Zero:
      if (step.count > 0)
        device.zero(Lane::Comm, step.dst, step.count * b);
      break;
    case NcclStep::Kind::AllGather:
      issue(comm, what, [&] {
        return ncclAllGather(step.src, step.dst,
                             static_cast<size_t>(step.count * b), ncclUint8,
                             comm, stream);
      });
      break;
    case NcclStep::Kind::ReduceScatter:
      issue(comm, what, [&] {
        return ncclReduceScatter(step.src, step.dst,
                                 static_cast<size_t>(step.count), type, redOp,
                                 comm, stream);
      });
      break;
    }
  }
  awaitStream(comm, what);
}

void NcclComm::runShards(const Op &what, const void *in, void *out,
                         int64_t numel, asrt_dtype dtype, asrt_reduce_op op,
                         ShardStagingBytes stagingBytes, ShardPlan plan) {
  makeCurrent();
  ncclComm_t comm = groupComm(what.mask);
  int64_t b = elementBytes(dtype, what.name);
  int64_t n = groupSize(what.mask), me = groupIndex(what.mask);
  void *scratch = staging(stagingBytes(in, out, numel, b, n, me), what);
  run(plan(in, out, scratch, numel, b, n, me), comm, dtype, op, what);
}

template <typename Call>
void NcclComm::issue(ncclComm_t comm, const Op &op, Call call) {
  std::optional<ncclResult_t> result;
  {
    std::lock_guard<std::timed_mutex> lock(callMutex);
    if (!aborted) {
      active = comm;
      result = call();
    }
  }
  if (!result)
    failAborted(op);
  if (*result != ncclSuccess && *result != ncclInProgress)
    failNccl(comm, *result, op);
  // Until NCCL has carried a nonblocking call out (on a communicator's
  // first collective it still connects to the peers), the collective is
  // not on the stream yet: nothing may be queued behind it, nor issued on
  // the communicator.
  awaitSettled(comm, op);
}

std::optional<ncclResult_t> NcclComm::pollState(ncclComm_t comm) {
  std::lock_guard<std::timed_mutex> lock(callMutex);
  if (aborted)
    return std::nullopt;
  ncclResult_t state = ncclSuccess;
  ncclResult_t result = ncclCommGetAsyncError(comm, &state);
  return result != ncclSuccess ? result : state;
}

void NcclComm::awaitSettled(ncclComm_t comm, const Op &op,
                            Clock::time_point deadline) {
  for (PollPause pause;; pause()) {
    std::optional<ncclResult_t> state = pollState(comm);
    if (!state)
      failAborted(op);
    if (*state == ncclSuccess)
      return;
    if (*state != ncclInProgress)
      failNccl(comm, *state, op);
    if (Clock::now() >= deadline)
      failTimeout(op);
  }
}

void NcclComm::awaitStream(ncclComm_t comm, const Op &op) {
  int64_t seq = sequence[op.mask]++;
  std::string word =
      std::string(op.name) + " #" + std::to_string(seq) + " over " +
      (op.mask == kWorld ? std::string("the world")
                         : "grid_axes_mask " + std::to_string(op.mask));
  {
    std::lock_guard<std::mutex> lock(waitingMutex);
    waiting = Waiting{true, op.mask, word};
  }
  const Clock::time_point start = Clock::now();
  bool said = false;
  struct Done {
    NcclComm &self;
    const bool &said;
    ~Done() {
      {
        std::lock_guard<std::mutex> lock(self.waitingMutex);
        self.waiting.active = false;
        self.lastHeard.clear();
      }
      if (said)
        self.words->post("");
    }
  } done{*this, said};
  Clock::time_point lastRead;
  for (PollPause pause;; pause()) {
    if (words && sayAfter > 0 &&
        Clock::now() - start >= std::chrono::duration<double>(sayAfter)) {
      if (!said) {
        words->post(word);
        said = true;
      }
      // Read the others' words now and then while waiting, as MpiComm
      // listens, for a timeout message whose own read finds the store gone.
      if (Clock::now() - lastRead >= std::chrono::milliseconds(100)) {
        lastRead = Clock::now();
        if (Expected<std::vector<std::string>> heard = words->read()) {
          std::lock_guard<std::mutex> lock(waitingMutex);
          lastHeard = std::move(*heard);
        }
      }
    }
    std::optional<ncclResult_t> state = pollState(comm);
    if (!state)
      failAborted(op);
    if (*state != ncclSuccess && *state != ncclInProgress)
      failNccl(comm, *state, op);
    if (*state != ncclSuccess)
      continue;
    cudaError_t status = cudaStreamQuery(stream);
    if (status == cudaSuccess)
      return;
    if (status != cudaErrorNotReady)
      failCuda(status, op);
  }
}

void NcclComm::failNccl(ncclComm_t comm, ncclResult_t result, const Op &op) {
  (void)comm; // NCCL's last error is process-wide
  const char *last = ncclGetLastError(nullptr);
  std::string detail = last && *last ? std::string(" (") + last + ")" : "";
  abortAll();
  fatal("nccl %s failed: %s%s; this rank's NCCL communicators are aborted",
        describe(op).c_str(), ncclGetErrorString(result), detail.c_str());
}

void NcclComm::failCuda(cudaError_t status, const Op &op) {
  abortAll();
  fatal("nccl %s: the communication stream failed: %s (%s); this rank's "
        "NCCL communicators are aborted",
        describe(op).c_str(), cudaGetErrorName(status),
        cudaGetErrorString(status));
}

void NcclComm::failAborted(const Op &op) {
  fatal("nccl %s: the NCCL communicators were aborted (abortNcclComms: the "
        "collective timeout, or a failure on this rank)",
        describe(op).c_str());
}

void NcclComm::failTimeout(const Op &op) {
  abortAll();
  fatal("nccl %s did not complete within %g s: not every rank reached it "
        "(one died, hangs, or was started with other arguments)",
        describe(op).c_str(), setupTimeoutSeconds);
}

} // namespace

std::string ncclUniqueIdBytes() {
  ncclUniqueId id;
  CHECK_NCCL(ncclGetUniqueId(&id));
  return std::string(id.internal, sizeof id.internal);
}

std::unique_ptr<Comm> createNcclComm(int rank, int size,
                                     std::vector<int64_t> grid,
                                     const std::string &uniqueIdBytes,
                                     cudaStream_t stream, Device &device,
                                     double setupTimeoutSeconds,
                                     std::unique_ptr<WaitWords> words,
                                     double collectiveTimeoutSeconds) {
  if (rank < 0 || rank >= size)
    fatal("createNcclComm: rank %d is not in 0..%d (the world size minus 1)",
          rank, size - 1);
  ncclUniqueId id;
  if (uniqueIdBytes.size() != sizeof id.internal)
    fatal("createNcclComm: the NCCL unique id has %zu bytes, but "
          "ncclUniqueIdBytes() makes %zu: rank 0's id must reach every rank "
          "unchanged",
          uniqueIdBytes.size(), sizeof id.internal);
  std::memcpy(id.internal, uniqueIdBytes.data(), sizeof id.internal);
  auto comm = std::make_unique<NcclComm>(
      rank, size, std::move(grid), stream, device, setupTimeoutSeconds,
      std::move(words), collectiveTimeoutSeconds);
  comm->init(id);
  return comm;
}

void abortNcclComms() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (NcclComm *comm : r.comms)
    comm->abortAll();
}

} // namespace autoshard::rt
