// The emulated NCCL: the nccl.h calls the backend's communicator makes
// (NcclComm.cpp), for ranks whose GPUs are the CUDA emulator's.
//
// Ranks are processes (or threads, one per emulated device) on one host.
// A communicator's ranks form a ring of loopback TCP connections, found
// through a key-value store (comm/Store.h, the runtime's one rendezvous
// mechanism) that ncclGetUniqueId starts in its process, where NCCL starts
// its bootstrap root; every collective runs NCCL's ring algorithms (reduce-
// scatter then all-gather for an all-reduce), n - 1 steps each sending to
// the successor while receiving from the predecessor. Each communicator
// has a thread of its own that sets it up and runs its collectives, so
// that the calls made with config.blocking = 0 return at once (init and
// split report ncclInProgress until done, through
// ncclCommGetAsyncError), and a collective is an asynchronous operation on
// its CUDA stream (Streams.cpp): started when the stream reaches it,
// finished by the communicator's thread, not ready for cudaStreamQuery
// until then. ncclCommAbort wakes every wait at once.
//
// What it checks, as NCCL does or more strictly: buffers are live device
// allocations of the bytes the call needs, overlapping only in NCCL's
// in-place forms; data types and operations are NCCL's (the fp8 types
// are not emulated); no two ranks of a communicator on one GPU
// ("duplicate GPU", ncclInvalidUsage); every rank of a communicator calls
// the same collective, with the same count, type and operation, in the
// same order (each carries a header to its successor, which compares it
// with its own: a mismatch is ncclInvalidUsage naming both calls, where
// NCCL would hang or corrupt memory); a peer that dies or aborts mid-
// collective is ncclRemoteError at its neighbours, the collective then
// staying unfinished on its stream until the communicator is aborted (as
// a NCCL kernel waits for a peer that never comes). A peer that hangs is
// not noticed: as with NCCL, the caller's timeout has to.
#include "Bootstrap.h"
#include "EmuState.h"
#include "Reduce.h"
#include "Transport.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace asrt_nccl_emu;

namespace {

// ---- The last error (process-wide, as NCCL's) ----

std::mutex lastErrorMutex;
std::string lastErrorText;

void setLastErrorV(const char *format, va_list args) {
  char text[1024];
  std::vsnprintf(text, sizeof text, format, args);
  std::lock_guard<std::mutex> lock(lastErrorMutex);
  lastErrorText = text;
}

/// Returns `result` after recording why as the last error (a failed
/// call's usual end).
__attribute__((format(printf, 2, 3))) ncclResult_t
refuse(ncclResult_t result, const char *format, ...) {
  va_list args;
  va_start(args, format);
  setLastErrorV(format, args);
  va_end(args);
  return result;
}

/// memmove that accepts empty ranges at null (an empty block's buffer).
void copyBytes(void *dst, const void *src, size_t bytes) {
  if (bytes > 0)
    std::memmove(dst, src, bytes);
}

// ---- The unique id ----

constexpr char kIdMagic[] = "asrt-nccl-emu"; // 14 bytes with its NUL

struct IdFields {
  uint64_t nonce = 0;
  uint16_t port = 0; // the bootstrap store's
};

void encodeId(const IdFields &fields, ncclUniqueId &id) {
  std::memset(id.internal, 0, sizeof id.internal);
  std::memcpy(id.internal, kIdMagic, sizeof kIdMagic);
  std::memcpy(id.internal + 16, &fields.nonce, sizeof fields.nonce);
  std::memcpy(id.internal + 24, &fields.port, sizeof fields.port);
}

bool decodeId(const ncclUniqueId &id, IdFields &fields) {
  if (std::memcmp(id.internal, kIdMagic, sizeof kIdMagic) != 0)
    return false;
  std::memcpy(&fields.nonce, id.internal + 16, sizeof fields.nonce);
  std::memcpy(&fields.port, id.internal + 24, sizeof fields.port);
  return fields.port != 0;
}

uint64_t freshNonce() {
  std::random_device device;
  uint64_t nonce = (uint64_t(device()) << 32) ^ device();
  nonce ^= uint64_t(::getpid()) << 17;
  nonce ^= uint64_t(
      std::chrono::steady_clock::now().time_since_epoch().count());
  return nonce;
}

/// A rank's ring neighbours' hello: which communicator, which rank.
struct Hello {
  uint64_t nonce = 0;
  int32_t rank = 0;
};

/// What each rank tells its successor before every operation on the ring
/// (a collective, a split, finalize's barrier), so that ranks calling
/// different ones fail instead of exchanging garbage.
struct Header {
  uint64_t sequence = 0; // operations called before it on this communicator
  int32_t kind = 0;      // Kind
  int32_t type = 0;
  int32_t op = 0;
  int32_t reserved = 0; // no uninitialised padding on the wire
  uint64_t count = 0;
  bool operator==(const Header &o) const {
    return sequence == o.sequence && kind == o.kind && type == o.type &&
           op == o.op && count == o.count;
  }
};

enum Kind : int32_t { kAllReduce, kAllGather, kReduceScatter, kSplit,
                      kFinalize };

const char *kindName(int32_t kind) {
  switch (kind) {
  case kAllReduce: return "ncclAllReduce";
  case kAllGather: return "ncclAllGather";
  case kReduceScatter: return "ncclReduceScatter";
  case kSplit: return "ncclCommSplit";
  case kFinalize: return "ncclCommFinalize";
  default: return "an unknown operation";
  }
}

std::string describe(const Header &h) {
  std::string text =
      std::string(kindName(h.kind)) + " #" + std::to_string(h.sequence);
  if (h.kind == kSplit || h.kind == kFinalize)
    return text;
  text += " (count " + std::to_string(h.count) + ", " +
          typeName(ncclDataType_t(h.type));
  if (h.kind != kAllGather)
    text += std::string(", ") + opName(ncclRedOp_t(h.op));
  return text + ")";
}

class CollectiveOp;

} // namespace

/// The communicator behind an ncclComm_t (opaque to NCCL's users).
struct ncclComm : std::enable_shared_from_this<ncclComm> {
  int rank = 0;
  int nranks = 1;
  uint64_t nonce = 0;
  bool blocking = true;
  int device = 0;
  std::string uuid; // the GPU's, 16 bytes

  Waker waker; // signalled by abort and destroy: every wait ends
  Fd next, prev;

  std::mutex mutex; // everything below
  std::condition_variable changed;
  ncclResult_t state = ncclInProgress;
  bool finalizeRequested = false;
  bool finalized = false;
  bool stopping = false;
  /// Work for the communicator's thread, in order: setup tasks (init,
  /// split) settle the state when they succeed; any failure leaves its
  /// error there for good.
  struct Task {
    std::function<ncclResult_t()> run;
    bool settles = false;
  };
  std::deque<Task> tasks;
  /// Collectives called and not finished (queued on a stream, running, or
  /// stuck after an error): finished by teardown.
  std::set<std::shared_ptr<CollectiveOp>> outstanding;
  uint64_t issued = 0; // operations called, for headers
  uint64_t finalizeSequence = 0;
  int splits = 0;
  std::thread worker;

  ~ncclComm();
  void startWorker();
  void run();
  /// Queues `task` for the communicator's thread; false once torn down.
  bool post(std::function<ncclResult_t()> task, bool settles);
  /// Ends the thread and every outstanding collective; closes the ring.
  void teardown();
  /// Blocks until the state leaves ncclInProgress; returns it.
  ncclResult_t awaitState();

  // On the communicator's thread.
  ncclResult_t connectRing(const std::vector<uint16_t> &ports,
                           const Listener &listener, const Waker &wake);
  ncclResult_t wireFailure(const WireResult &r, const std::string &during);
  /// Exchanges headers with the ring neighbours: ncclInvalidUsage when the
  /// predecessor called another operation.
  ncclResult_t agree(const Header &mine);
  /// A header for the next operation called on this communicator.
  Header nextHeader(Kind kind);
  /// One ring step: `outBytes` to the successor, `inBytes` from the
  /// predecessor.
  ncclResult_t step(const void *out, size_t outBytes, void *in,
                    size_t inBytes, const std::string &during);
  ncclResult_t ringAllGather(char *data, const std::vector<size_t> &offsets,
                             const std::vector<size_t> &sizes,
                             const std::string &during);
  ncclResult_t ringReduce(const char *own, const std::vector<size_t> &offsets,
                          const std::vector<size_t> &counts,
                          ncclDataType_t type, ncclRedOp_t op, char *result,
                          const std::string &during);
};

namespace {

// ---- Live communicators ----

std::mutex registryMutex;
std::map<ncclComm *, std::shared_ptr<ncclComm>> &registry() {
  static auto *live = new std::map<ncclComm *, std::shared_ptr<ncclComm>>;
  return *live;
}

std::shared_ptr<ncclComm> lookup(ncclComm_t handle) {
  std::lock_guard<std::mutex> lock(registryMutex);
  auto it = registry().find(handle);
  return it == registry().end() ? nullptr : it->second;
}

void enroll(const std::shared_ptr<ncclComm> &comm) {
  std::lock_guard<std::mutex> lock(registryMutex);
  registry()[comm.get()] = comm;
}

std::shared_ptr<ncclComm> withdraw(ncclComm_t handle) {
  std::lock_guard<std::mutex> lock(registryMutex);
  auto it = registry().find(handle);
  if (it == registry().end())
    return nullptr;
  std::shared_ptr<ncclComm> comm = it->second;
  registry().erase(it);
  return comm;
}

// ---- Collectives as stream work ----

/// One collective call: what it moves, and whether it has finished.
class CollectiveOp : public asrt_emu::AsyncOp,
                     public std::enable_shared_from_this<CollectiveOp> {
public:
  CollectiveOp(std::shared_ptr<ncclComm> comm, Header header,
               const void *send, void *recv)
      : comm(std::move(comm)), header(header), send(send), recv(recv) {}

  void start() override;
  bool done() override {
    std::lock_guard<std::mutex> lock(mutex);
    return finished;
  }
  void wait() override {
    std::unique_lock<std::mutex> lock(mutex);
    finishedChanged.wait(lock, [&] { return finished; });
  }
  void finish() {
    std::lock_guard<std::mutex> lock(mutex);
    finished = true;
    finishedChanged.notify_all();
  }
  /// On the communicator's thread.
  ncclResult_t runOnRing();

private:
  std::shared_ptr<ncclComm> comm;
  const Header header;
  const void *send;
  void *recv;
  std::mutex mutex;
  std::condition_variable finishedChanged;
  bool finished = false;
};

void CollectiveOp::start() {
  std::shared_ptr<CollectiveOp> self = shared_from_this();
  bool posted = comm->post([self] {
    ncclResult_t result = self->runOnRing();
    if (result == ncclSuccess) {
      self->finish();
      std::lock_guard<std::mutex> lock(self->comm->mutex);
      self->comm->outstanding.erase(self);
      self->comm->changed.notify_all();
    }
    // Failed: it stays unfinished until the communicator is torn down.
    return result;
  }, /*settles=*/false);
  if (!posted)
    finish(); // its communicator is gone: nothing will run it
}

ncclResult_t CollectiveOp::runOnRing() {
  const int n = comm->nranks, me = comm->rank;
  const std::string during = describe(header);
  if (ncclResult_t r = comm->agree(header); r != ncclSuccess)
    return r;
  const auto type = ncclDataType_t(header.type);
  const auto op = ncclRedOp_t(header.op);
  const size_t esize = elementSize(type);
  const size_t count = header.count;
  std::vector<size_t> offsets(n), sizes(n);
  switch (header.kind) {
  case kAllGather: {
    const size_t bytes = count * esize;
    for (int i = 0; i < n; ++i) {
      offsets[i] = i * bytes;
      sizes[i] = bytes;
    }
    char *out = static_cast<char *>(recv);
    if (send != out + offsets[me])
      copyBytes(out + offsets[me], send, bytes);
    return comm->ringAllGather(out, offsets, sizes, during);
  }
  case kReduceScatter: {
    for (int i = 0; i < n; ++i) {
      offsets[i] = i * count;
      sizes[i] = count;
    }
    return comm->ringReduce(static_cast<const char *>(send), offsets, sizes,
                            type, op, static_cast<char *>(recv), during);
  }
  default: { // kAllReduce: n blocks of about count / n elements
    for (int i = 0; i < n; ++i) {
      offsets[i] = count * i / n;
      sizes[i] = count * (i + 1) / n - offsets[i];
    }
    std::vector<char> mine(sizes[me] * esize);
    if (ncclResult_t r =
            comm->ringReduce(static_cast<const char *>(send), offsets, sizes,
                             type, op, mine.data(), during);
        r != ncclSuccess)
      return r;
    // Only now: send may be recv (in place), and the reduction has read
    // all of it.
    char *out = static_cast<char *>(recv);
    copyBytes(out + offsets[me] * esize, mine.data(), mine.size());
    for (int i = 0; i < n; ++i) {
      offsets[i] *= esize;
      sizes[i] *= esize;
    }
    return comm->ringAllGather(out, offsets, sizes, during);
  }
  }
}

} // namespace

// ---- The communicator ----

ncclComm::~ncclComm() { teardown(); }

void ncclComm::startWorker() {
  worker = std::thread([this] { run(); });
}

bool ncclComm::post(std::function<ncclResult_t()> task, bool settles) {
  std::lock_guard<std::mutex> lock(mutex);
  if (stopping)
    return false;
  tasks.push_back({std::move(task), settles});
  changed.notify_all();
  return true;
}

ncclResult_t ncclComm::awaitState() {
  std::unique_lock<std::mutex> lock(mutex);
  changed.wait(lock, [&] { return state != ncclInProgress || stopping; });
  return state;
}

void ncclComm::run() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] {
        return stopping || !tasks.empty() ||
               (finalizeRequested && !finalized && outstanding.empty());
      });
      if (stopping)
        return;
      if (!tasks.empty()) {
        task = std::move(tasks.front());
        tasks.pop_front();
        if (state != ncclSuccess && state != ncclInProgress)
          continue; // failed: later work is not run (it stays unfinished)
      } else {
        // Finalize: every collective has finished; a barrier (each rank's
        // mark gathered round the ring) tells that every rank has got
        // here, so that none is left waiting for data.
        finalized = true;
        task.settles = true;
        Header header;
        header.kind = kFinalize;
        header.sequence = finalizeSequence;
        task.run = [this, header] {
          if (ncclResult_t r = agree(header); r != ncclSuccess)
            return r;
          std::vector<char> marks(nranks);
          std::vector<size_t> offsets(nranks), sizes(nranks, 1);
          for (int i = 0; i < nranks; ++i)
            offsets[i] = i;
          marks[rank] = 1;
          return ringAllGather(marks.data(), offsets, sizes,
                               "ncclCommFinalize's barrier");
        };
      }
    }
    ncclResult_t result = task.run();
    std::lock_guard<std::mutex> lock(mutex);
    if (stopping)
      return;
    if (result != ncclSuccess || task.settles) {
      state = result;
      changed.notify_all();
    }
  }
}

void ncclComm::teardown() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
    changed.notify_all();
  }
  waker.signal();
  // ncclCommDestroy and ncclCommAbort tear down on the caller's thread,
  // which the worker never is; the destructor finds it joined.
  if (worker.joinable())
    worker.join();
  std::set<std::shared_ptr<CollectiveOp>> unfinished;
  {
    std::lock_guard<std::mutex> lock(mutex);
    unfinished.swap(outstanding);
    tasks.clear();
  }
  // A collective on a stream ends when its communicator does, done or not
  // (an aborted NCCL kernel returns; what it wrote is undefined).
  for (const auto &op : unfinished)
    op->finish();
  next.reset();
  prev.reset();
}

ncclResult_t ncclComm::wireFailure(const WireResult &r,
                                   const std::string &during) {
  if (r.status == Wire::Woken)
    return ncclInternalError; // torn down: nobody reads the result
  if (r.status == Wire::PeerGone) {
    // A ring neighbour: known by its descriptor in a ring step, not yet
    // while the ring is being connected.
    const bool ring = r.fd >= 0 && (r.fd == next.get() || r.fd == prev.get());
    std::string peer = "a ring neighbour";
    if (ring)
      peer = r.fd == next.get()
                 ? "its ring successor, rank " +
                       std::to_string((rank + 1) % nranks)
                 : "its ring predecessor, rank " +
                       std::to_string((rank + nranks - 1) % nranks);
    return refuse(ncclRemoteError,
                  "emulated NCCL: rank %d lost its connection to %s, during "
                  "%s (%s): that process exited or aborted its communicator",
                  rank, peer.c_str(), during.c_str(), r.error.c_str());
  }
  return refuse(ncclSystemError, "emulated NCCL: rank %d, during %s: %s",
                rank, during.c_str(), r.error.c_str());
}

ncclResult_t ncclComm::agree(const Header &mine) {
  if (nranks == 1)
    return ncclSuccess;
  const std::string during = describe(mine);
  Header theirs;
  if (ncclResult_t r = step(&mine, sizeof mine, &theirs, sizeof theirs,
                            during);
      r != ncclSuccess)
    return r;
  if (theirs == mine)
    return ncclSuccess;
  return refuse(ncclInvalidUsage,
                "emulated NCCL: rank %d called %s, but its ring predecessor "
                "rank %d called %s: every rank of a communicator must make "
                "the same calls (collectives with the same count, type and "
                "operation; splits; finalize) in the same order",
                rank, during.c_str(), (rank + nranks - 1) % nranks,
                describe(theirs).c_str());
}

Header ncclComm::nextHeader(Kind kind) {
  std::lock_guard<std::mutex> lock(mutex);
  Header header;
  header.kind = kind;
  header.sequence = issued++;
  return header;
}

ncclResult_t ncclComm::step(const void *out, size_t outBytes, void *in,
                            size_t inBytes, const std::string &during) {
  WireResult r =
      exchange(next.get(), out, outBytes, prev.get(), in, inBytes, waker);
  return r ? ncclSuccess : wireFailure(r, during);
}

ncclResult_t ncclComm::ringAllGather(char *data,
                                     const std::vector<size_t> &offsets,
                                     const std::vector<size_t> &sizes,
                                     const std::string &during) {
  const int n = nranks;
  // Step s: pass on the block received at step s - 1 (at step 0 one's
  // own); after n - 1 steps every block has gone round.
  for (int s = 0; s + 1 < n; ++s) {
    int out = (rank - s + n) % n, in = (rank - s - 1 + n) % n;
    if (ncclResult_t r = step(data + offsets[out], sizes[out],
                              data + offsets[in], sizes[in], during);
        r != ncclSuccess)
      return r;
  }
  return ncclSuccess;
}

ncclResult_t ncclComm::ringReduce(const char *own,
                                  const std::vector<size_t> &offsets,
                                  const std::vector<size_t> &counts,
                                  ncclDataType_t type, ncclRedOp_t op,
                                  char *result, const std::string &during) {
  const int n = nranks;
  const size_t esize = elementSize(type);
  const bool premultiply = op == ncclAvg && isFloating(type);
  size_t most = *std::max_element(counts.begin(), counts.end());
  std::vector<char> partial(most * esize), incoming(most * esize);
  // This rank's contribution to block b, scaled for a floating average.
  auto load = [&](int b, char *into) {
    copyBytes(into, own + offsets[b] * esize, counts[b] * esize);
    if (premultiply)
      scale(into, counts[b], type, 1.0 / n);
  };
  // Step s sends the partial reduction of block rank - s - 1 and receives
  // the predecessor's of block rank - s - 2, adding this rank's part: after
  // n - 1 steps the block received last, block `rank`, holds every rank's.
  load((rank + n - 1) % n, partial.data());
  for (int s = 0; s + 1 < n; ++s) {
    int out = (rank - s - 1 + 2 * n) % n, in = (rank - s - 2 + 2 * n) % n;
    if (ncclResult_t r = step(partial.data(), counts[out] * esize,
                              incoming.data(), counts[in] * esize, during);
        r != ncclSuccess)
      return r;
    load(in, partial.data());
    combine(partial.data(), incoming.data(), counts[in], type, op);
  }
  if (op == ncclAvg && !isFloating(type))
    divide(partial.data(), counts[rank], type, n);
  copyBytes(result, partial.data(), counts[rank] * esize);
  return ncclSuccess;
}

ncclResult_t ncclComm::connectRing(const std::vector<uint16_t> &ports,
                                   const Listener &listener,
                                   const Waker &wake) {
  const int n = nranks;
  if (n == 1)
    return ncclSuccess;
  const std::string during = "connecting the ring";
  // Connect to the successor (its listener's backlog takes it before it
  // accepts), greet it, then accept the predecessor: no rank waits for
  // another one's accept.
  WireResult r =
      connectLoopback(ports[(rank + 1) % n], 10000, wake, next);
  Hello mine{nonce, rank};
  if (r)
    r = sendAll(next.get(), &mine, sizeof mine, wake);
  if (r)
    r = acceptOne(listener, wake, prev);
  Hello theirs;
  if (r)
    r = receiveAll(prev.get(), &theirs, sizeof theirs, wake);
  if (!r)
    return wireFailure(r, during);
  int expected = (rank + n - 1) % n;
  if (theirs.nonce != nonce || theirs.rank != expected)
    return refuse(ncclInternalError,
                  "emulated NCCL: rank %d expected its ring predecessor, "
                  "rank %d, but was greeted by rank %d of %s communicator",
                  rank, expected, theirs.rank,
                  theirs.nonce == nonce ? "its" : "another");
  return ncclSuccess;
}

// ---- nccl.h ----

namespace {

/// The current device and its UUID, for a new communicator.
ncclResult_t currentGpu(int &device, std::string &uuid) {
  cudaDeviceProp properties{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&properties, device) != cudaSuccess)
    return refuse(ncclUnhandledCudaError,
                  "emulated NCCL: no current CUDA device (cudaGetDevice)");
  uuid.assign(properties.uuid.bytes, sizeof properties.uuid.bytes);
  return ncclSuccess;
}

bool blockingOf(const ncclConfig_t *config, bool inherited) {
  if (!config || config->blocking == NCCL_CONFIG_UNDEF_INT)
    return inherited;
  return config->blocking != 0;
}

/// The state a call on `comm` must find: set up, not finalizing, well.
ncclResult_t usable(const std::shared_ptr<ncclComm> &comm, ncclComm_t handle,
                    const char *call) {
  if (!comm)
    return refuse(ncclInvalidArgument,
                  "emulated NCCL: %s: communicator %p is not a live one "
                  "(never created, destroyed or aborted)",
                  call, static_cast<void *>(handle));
  std::lock_guard<std::mutex> lock(comm->mutex);
  if (comm->finalizeRequested)
    return refuse(ncclInvalidUsage,
                  "emulated NCCL: %s on a communicator being finalized",
                  call);
  if (comm->state == ncclInProgress)
    return refuse(ncclInvalidUsage,
                  "emulated NCCL: %s on a communicator still being set up: "
                  "wait until ncclCommGetAsyncError says ncclSuccess",
                  call);
  if (comm->state != ncclSuccess)
    return refuse(comm->state,
                  "emulated NCCL: %s on a communicator that failed: %s", call,
                  ncclGetErrorString(comm->state));
  return ncclSuccess;
}

/// Whether [p, p + bytes) and [q, q + bytes2) overlap.
bool overlap(const void *p, size_t bytes, const void *q, size_t bytes2) {
  auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(q);
  return bytes && bytes2 && a < b + bytes2 && b < a + bytes;
}

/// Checks a collective's arguments and queues it on `stream`.
/// `sendBytes`/`recvBytes` are what it reads and writes; `inPlace` the
/// send address at which send and recv may overlap.
ncclResult_t enqueue(const char *call, ncclComm_t handle, Kind kind,
                     const void *send, void *recv, size_t count,
                     ncclDataType_t type, ncclRedOp_t op,
                     cudaStream_t stream) {
  std::shared_ptr<ncclComm> comm = lookup(handle);
  if (ncclResult_t r = usable(comm, handle, call); r != ncclSuccess)
    return r;
  const size_t esize = elementSize(type);
  if (esize == 0)
    return refuse(ncclInvalidArgument,
                  "emulated NCCL: %s: data type %d (%s) is not supported",
                  call, static_cast<int>(type), typeName(type));
  if (kind != kAllGather && (static_cast<int>(op) < 0 || op >= ncclNumOps))
    return refuse(ncclInvalidArgument,
                  "emulated NCCL: %s: reduction %d is not a built-in "
                  "ncclRedOp_t",
                  call, static_cast<int>(op));
  const size_t n = static_cast<size_t>(comm->nranks);
  if (count > (SIZE_MAX / 2) / esize / n)
    return refuse(ncclInvalidArgument, "emulated NCCL: %s: count %zu is too large",
                  call, count);
  size_t bytes = count * esize;
  size_t sendBytes = kind == kReduceScatter ? n * bytes : bytes;
  size_t recvBytes = kind == kAllGather ? n * bytes : bytes;
  const void *inPlace =
      kind == kAllReduce ? recv
      : kind == kAllGather
          ? static_cast<const char *>(recv) + comm->rank * bytes
          : static_cast<const char *>(send) + comm->rank * bytes;
  bool sameAsInPlace = kind == kReduceScatter ? recv == inPlace
                                              : send == inPlace;
  if (count > 0) {
    if (!asrt_emu::isDeviceRange(send, sendBytes))
      return refuse(ncclInvalidArgument,
                    "emulated NCCL: %s: sendbuff %p is not device memory of "
                    "%zu bytes (cudaMalloc)",
                    call, send, sendBytes);
    if (!asrt_emu::isDeviceRange(recv, recvBytes))
      return refuse(ncclInvalidArgument,
                    "emulated NCCL: %s: recvbuff %p is not device memory of "
                    "%zu bytes (cudaMalloc)",
                    call, static_cast<void *>(recv), recvBytes);
    if (!sameAsInPlace && overlap(send, sendBytes, recv, recvBytes))
      return refuse(ncclInvalidArgument,
                    "emulated NCCL: %s: sendbuff %p and recvbuff %p overlap "
                    "other than in place (NCCL's results would be undefined)",
                    call, send, static_cast<void *>(recv));
  }
  if (!asrt_emu::validStream(stream))
    return refuse(ncclInvalidArgument,
                  "emulated NCCL: %s: stream %p is not a live CUDA stream",
                  call, static_cast<void *>(stream));
  Header header;
  header.kind = kind;
  header.type = type;
  header.op = kind == kAllGather ? 0 : op;
  header.count = count;
  std::shared_ptr<CollectiveOp> collective;
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    header.sequence = comm->issued++;
    collective = std::make_shared<CollectiveOp>(comm, header, send, recv);
    comm->outstanding.insert(collective);
  }
  if (!asrt_emu::enqueueAsync(stream, collective)) {
    std::lock_guard<std::mutex> lock(comm->mutex);
    comm->outstanding.erase(collective);
    return refuse(ncclInvalidArgument,
                  "emulated NCCL: %s: stream %p is not a live CUDA stream",
                  call, static_cast<void *>(stream));
  }
  return ncclSuccess;
}

/// ncclCommDestroy and ncclCommAbort.
ncclResult_t endComm(ncclComm_t handle, const char *call) {
  std::shared_ptr<ncclComm> comm = withdraw(handle);
  if (!comm)
    return refuse(ncclInvalidArgument,
                  "emulated NCCL: %s: %p is not a live communicator", call,
                  static_cast<void *>(handle));
  comm->teardown();
  return ncclSuccess;
}

/// A setup call's return: the state at once for a nonblocking
/// communicator (ncclInProgress), the settled state for a blocking one.
ncclResult_t answer(const std::shared_ptr<ncclComm> &comm) {
  if (!comm->blocking)
    return ncclInProgress;
  return comm->awaitState();
}

} // namespace

extern "C" {

ncclResult_t ncclGetVersion(int *version) {
  if (!version)
    return refuse(ncclInvalidArgument, "emulated NCCL: ncclGetVersion: null");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess: return "no error";
  case ncclUnhandledCudaError: return "unhandled cuda error";
  case ncclSystemError: return "unhandled system error";
  case ncclInternalError: return "internal error";
  case ncclInvalidArgument: return "invalid argument";
  case ncclInvalidUsage: return "invalid usage";
  case ncclRemoteError: return "remote process exited or there was a network error";
  case ncclInProgress: return "NCCL operation in progress";
  default: return "unknown result code";
  }
}

const char *ncclGetLastError(ncclComm_t) {
  thread_local std::string copy;
  std::lock_guard<std::mutex> lock(lastErrorMutex);
  copy = lastErrorText;
  return copy.c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  if (!id)
    return refuse(ncclInvalidArgument,
                  "emulated NCCL: ncclGetUniqueId: null id");
  IdFields fields;
  fields.nonce = freshNonce();
  WireResult r = hostBootstrapStore(fields.nonce, fields.port);
  if (!r)
    return refuse(ncclSystemError,
                  "emulated NCCL: starting the bootstrap store: %s",
                  r.error.c_str());
  encodeId(fields, *id);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks,
                                    ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
  if (!out)
    return refuse(ncclInvalidArgument,
                  "emulated NCCL: ncclCommInitRankConfig: null comm");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return refuse(ncclInvalidArgument,
                  "emulated NCCL: ncclCommInitRankConfig: rank %d of %d "
                  "ranks is not in 0..nranks-1",
                  rank, nranks);
  IdFields fields;
  if (!decodeId(id, fields))
    return refuse(ncclInvalidArgument,
                  "emulated NCCL: ncclCommInitRankConfig: the unique id is "
                  "not one ncclGetUniqueId made (its bytes must reach every "
                  "rank unchanged)");
  auto comm = std::make_shared<ncclComm>();
  comm->rank = rank;
  comm->nranks = nranks;
  comm->nonce = fields.nonce;
  comm->blocking = blockingOf(config, true);
  if (ncclResult_t r = currentGpu(comm->device, comm->uuid); r != ncclSuccess)
    return r;
  ncclComm *raw = comm.get();
  (void)comm->post([raw, port = fields.port] {
    Listener listener;
    if (WireResult w = listenLoopback(listener); !w)
      return raw->wireFailure(w, "listening for its ring predecessor");
    JoinRequest request;
    request.nranks = raw->nranks;
    request.rank = raw->rank;
    request.port = static_cast<uint16_t>(listener.port);
    std::memcpy(request.uuid, raw->uuid.data(), sizeof request.uuid);
    JoinReply reply;
    WireResult w =
        joinThroughStore(port, raw->nonce, request, raw->waker, reply);
    if (w.status == Wire::Woken)
      return ncclInternalError; // torn down: nobody reads the result
    if (w.status == Wire::PeerGone)
      return refuse(ncclRemoteError,
                    "emulated NCCL: rank %d could not join: %s", raw->rank,
                    w.error.c_str());
    if (!w)
      return refuse(ncclSystemError,
                    "emulated NCCL: rank %d could not join: %s", raw->rank,
                    w.error.c_str());
    if (!reply.refused.empty())
      return refuse(ncclInvalidUsage,
                    "emulated NCCL: rank %d could not join: %s", raw->rank,
                    reply.refused.c_str());
    for (int i = 0; i < raw->nranks; ++i)
      for (int j = i + 1; j < raw->nranks; ++j)
        if (reply.uuids[i] == reply.uuids[j])
          return refuse(ncclInvalidUsage,
                        "emulated NCCL: duplicate GPU detected: ranks %d and "
                        "%d are both on the GPU with UUID %.16s (one GPU per "
                        "rank)",
                        i, j, reply.uuids[i].c_str());
    return raw->connectRing(reply.ports, listener, raw->waker);
  }, /*settles=*/true);
  enroll(comm);
  *out = raw;
  comm->startWorker();
  return answer(comm);
}

ncclResult_t ncclCommSplit(ncclComm_t handle, int color, int key,
                           ncclComm_t *newcomm, ncclConfig_t *config) {
  std::shared_ptr<ncclComm> parent = lookup(handle);
  if (ncclResult_t r = usable(parent, handle, "ncclCommSplit");
      r != ncclSuccess)
    return r;
  if (!newcomm)
    return refuse(ncclInvalidArgument, "emulated NCCL: ncclCommSplit: null "
                                       "newcomm");
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return refuse(ncclInvalidArgument,
                  "emulated NCCL: ncclCommSplit: color %d is negative (and "
                  "not NCCL_SPLIT_NOCOLOR)",
                  color);
  const bool childBlocking = blockingOf(config, parent->blocking);
  {
    std::lock_guard<std::mutex> lock(parent->mutex);
    parent->state = ncclInProgress;
  }
  ncclComm *raw = parent.get();
  Header header = parent->nextHeader(kSplit);
  (void)parent->post([raw, header, color, key, newcomm, childBlocking] {
    if (ncclResult_t r = raw->agree(header); r != ncclSuccess)
      return r;
    // Every rank's color, key and listening port, over the parent's ring.
    struct Entry {
      int32_t color, key;
      uint16_t port;
    };
    Listener listener;
    if (WireResult w = listenLoopback(listener); !w)
      return raw->wireFailure(w, "ncclCommSplit");
    const int n = raw->nranks;
    std::vector<Entry> table(n);
    table[raw->rank] = {color, key, static_cast<uint16_t>(listener.port)};
    std::vector<size_t> offsets(n), sizes(n, sizeof(Entry));
    for (int i = 0; i < n; ++i)
      offsets[i] = i * sizeof(Entry);
    if (ncclResult_t r =
            raw->ringAllGather(reinterpret_cast<char *>(table.data()),
                               offsets, sizes, "ncclCommSplit");
        r != ncclSuccess)
      return r;
    int split;
    {
      std::lock_guard<std::mutex> lock(raw->mutex);
      split = ++raw->splits;
    }
    if (color == NCCL_SPLIT_NOCOLOR) {
      std::lock_guard<std::mutex> lock(raw->mutex);
      *newcomm = nullptr;
      return ncclSuccess;
    }
    // The group: the ranks of this color, by key, then by parent rank.
    std::vector<int> members;
    for (int i = 0; i < n; ++i)
      if (table[i].color == color)
        members.push_back(i);
    std::sort(members.begin(), members.end(), [&](int a, int b) {
      return table[a].key != table[b].key ? table[a].key < table[b].key
                                          : a < b;
    });
    auto child = std::make_shared<ncclComm>();
    child->nranks = static_cast<int>(members.size());
    child->rank = static_cast<int>(
        std::find(members.begin(), members.end(), raw->rank) -
        members.begin());
    child->nonce = raw->nonce ^ (uint64_t(split) << 40) ^
                   (uint64_t(uint32_t(color)) * 0x9e3779b97f4a7c15ull);
    child->blocking = childBlocking;
    child->device = raw->device;
    child->uuid = raw->uuid;
    std::vector<uint16_t> ports;
    for (int m : members)
      ports.push_back(table[m].port);
    // The parent's waker: aborting the parent ends its split.
    if (ncclResult_t r = child->connectRing(ports, listener, raw->waker);
        r != ncclSuccess)
      return r;
    child->state = ncclSuccess;
    enroll(child);
    child->startWorker();
    std::lock_guard<std::mutex> lock(raw->mutex);
    *newcomm = child.get();
    return ncclSuccess;
  }, /*settles=*/true);
  return answer(parent);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t handle, ncclResult_t *result) {
  std::shared_ptr<ncclComm> comm = lookup(handle);
  if (!comm || !result)
    return refuse(ncclInvalidArgument,
                  "emulated NCCL: ncclCommGetAsyncError: %s",
                  !comm ? "not a live communicator" : "null result");
  std::lock_guard<std::mutex> lock(comm->mutex);
  *result = comm->state;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t handle, int *count) {
  std::shared_ptr<ncclComm> comm = lookup(handle);
  if (!comm || !count)
    return refuse(ncclInvalidArgument, "emulated NCCL: ncclCommCount: %s",
                  !comm ? "not a live communicator" : "null count");
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t handle, int *rank) {
  std::shared_ptr<ncclComm> comm = lookup(handle);
  if (!comm || !rank)
    return refuse(ncclInvalidArgument, "emulated NCCL: ncclCommUserRank: %s",
                  !comm ? "not a live communicator" : "null rank");
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t handle) {
  std::shared_ptr<ncclComm> comm = lookup(handle);
  if (ncclResult_t r = usable(comm, handle, "ncclCommFinalize");
      r != ncclSuccess)
    return r;
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    comm->finalizeRequested = true;
    comm->finalizeSequence = comm->issued++;
    comm->state = ncclInProgress;
    comm->changed.notify_all();
  }
  return answer(comm);
}

// Destroy (after finalize) and abort end a communicator alike here: its
// thread, its connections, its unfinished collectives. (NCCL's destroy
// frees what finalize left; its abort also stops work in flight, which
// teardown does for both.)
ncclResult_t ncclCommDestroy(ncclComm_t handle) {
  return endComm(handle, "ncclCommDestroy");
}

ncclResult_t ncclCommAbort(ncclComm_t handle) {
  return endComm(handle, "ncclCommAbort");
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueue("ncclAllReduce", comm, kAllReduce, sendbuff, recvbuff, count,
                 datatype, op, stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff,
                           size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueue("ncclAllGather", comm, kAllGather, sendbuff, recvbuff,
                 sendcount, datatype, ncclSum, stream);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff,
                               size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return enqueue("ncclReduceScatter", comm, kReduceScatter, sendbuff,
                 recvbuff, recvcount, datatype, op, stream);
}

} // extern "C"
