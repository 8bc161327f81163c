// The CUDA emulator's streams and events: work queued on a stream runs
// later, in the stream's order, when something needs it done.
//
// A non-null stream keeps a queue of operations (kernel launches, copies,
// sets, GEMMs, frees, event records). Nothing runs when it is queued: a
// stream runs its queue when the host synchronizes with it
// (cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize,
// cudaFree, a synchronous copy for blocking streams) or when another
// stream's queue reaches a cudaStreamWaitEvent on one of its events, and
// then only up to that event. So a consumer that does not wait for its
// producer's event reads what was there before: a missing fence between
// the backend's compute and communication streams gives wrong results
// here instead of passing by luck. The null (legacy) stream runs its work
// at once, after everything queued on blocking streams, as CUDA's legacy
// stream waits for them. Whoever flushes runs the work, on its own host
// thread; a stream's operations never run concurrently.
//
// An asynchronous operation (enqueueAsync: an emulated NCCL collective)
// is started when the stream reaches it and finishes elsewhere, on its
// communicator's thread; the stream waits for it there, as a GPU stream
// waits for a collective kernel that waits for its peers. cudaStreamQuery
// runs what it can without waiting and says "not ready" at an unfinished
// asynchronous operation, so that a host thread polling it is never stuck
// in a collective a dead peer never completes.
#include "EmuState.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

namespace asrt_emu {
namespace {

/// A queued operation: a function run by whoever flushes the stream, or an
/// asynchronous operation started then and waited for.
struct Op {
  std::function<void()> run;
  std::shared_ptr<AsyncOp> async;
  bool started = false; // async: start() has been called
};

struct Stream {
  bool blocking = true;
  std::mutex queueMutex; // ops, queued, completed
  std::deque<Op> ops;
  uint64_t queued = 0;    // operations ever queued
  uint64_t completed = 0; // operations run
  std::mutex runMutex;    // held by the thread running the queue
};

struct Event {
  bool timing = true;
  // The latest record: its stream and position there, and (set by whoever
  // runs it, then `done`) when it ran.
  Stream *stream = nullptr;
  uint64_t position = 0;
  std::atomic<uint64_t> generation{0}; // records so far
  std::atomic<bool> done{false};
  std::chrono::steady_clock::time_point when;
};

struct Registry {
  std::mutex mutex;
  std::set<Stream *> streams;
  std::set<Event *> events;
};

Registry &registry() {
  static Registry *r = new Registry; // used until exit
  return *r;
}

/// Adds a stream or event to the live ones, or removes it (its memory
/// stays: a queued record or wait may still name it; a few bytes per
/// handle, as long as the process lives).
template <typename T> void add(std::set<T *> Registry::*live, T *object) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  (r.*live).insert(object);
}
template <typename T> void forget(std::set<T *> Registry::*live, T *object) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  (r.*live).erase(object);
}

Stream *liveStream(cudaStream_t handle) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto *s = reinterpret_cast<Stream *>(handle);
  return r.streams.count(s) ? s : nullptr;
}

Event *liveEvent(cudaEvent_t handle) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto *e = reinterpret_cast<Event *>(handle);
  return r.events.count(e) ? e : nullptr;
}

/// Runs `s`'s queue up to and including its `position`-th operation (all of
/// it when position is 0).
void runUpTo(Stream &s, uint64_t position) {
  {
    std::lock_guard<std::mutex> lock(s.queueMutex);
    if (position != 0 && s.completed >= position)
      return;
  }
  std::lock_guard<std::mutex> running(s.runMutex);
  for (;;) {
    Op op;
    {
      std::lock_guard<std::mutex> lock(s.queueMutex);
      if (s.ops.empty() || (position != 0 && s.completed >= position))
        return;
      op = std::move(s.ops.front());
      s.ops.pop_front();
    }
    if (op.async) {
      if (!op.started)
        op.async->start();
      op.async->wait();
    } else {
      op.run();
    }
    std::lock_guard<std::mutex> lock(s.queueMutex);
    ++s.completed;
  }
}

/// Runs `s`'s queue while nothing in it has to be waited for: true when it
/// is empty, false at an asynchronous operation that has not finished
/// (started now if it had not been) or when another thread is running the
/// queue.
bool runWhileReady(Stream &s) {
  std::unique_lock<std::mutex> running(s.runMutex, std::try_to_lock);
  if (!running.owns_lock())
    return false;
  for (;;) {
    std::unique_lock<std::mutex> lock(s.queueMutex);
    if (s.ops.empty())
      return true;
    Op &front = s.ops.front();
    if (front.async) {
      if (!front.started) {
        front.started = true;
        std::shared_ptr<AsyncOp> async = front.async;
        lock.unlock();
        async->start();
        lock.lock();
      }
      if (!s.ops.front().async->done())
        return false;
    }
    Op op = std::move(s.ops.front());
    s.ops.pop_front();
    lock.unlock();
    if (!op.async)
      op.run();
    lock.lock();
    ++s.completed;
  }
}

std::vector<Stream *> allStreams(bool blockingOnly) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<Stream *> out;
  for (Stream *s : r.streams)
    if (!blockingOnly || s->blocking)
      out.push_back(s);
  return out;
}

} // namespace

bool validStream(cudaStream_t stream) {
  return !stream || liveStream(stream);
}

cudaStream_t createStream(bool blocking) {
  auto *s = new Stream;
  s->blocking = blocking;
  add(&Registry::streams, s);
  return reinterpret_cast<cudaStream_t>(s);
}

bool destroyStream(cudaStream_t handle) {
  Stream *s = liveStream(handle);
  if (!s)
    return false;
  runUpTo(*s, 0); // CUDA finishes a destroyed stream's work
  forget(&Registry::streams, s);
  return true;
}

namespace {

bool enqueueOp(cudaStream_t handle, Op op) {
  if (!handle) {
    for (Stream *s : allStreams(/*blockingOnly=*/true))
      runUpTo(*s, 0);
    if (op.async) {
      op.async->start();
      op.async->wait();
    } else {
      op.run();
    }
    return true;
  }
  Stream *s = liveStream(handle);
  if (!s)
    return false;
  std::lock_guard<std::mutex> lock(s->queueMutex);
  s->ops.push_back(std::move(op));
  ++s->queued;
  return true;
}

} // namespace

bool enqueue(cudaStream_t handle, std::function<void()> op) {
  Op queued;
  queued.run = std::move(op);
  return enqueueOp(handle, std::move(queued));
}

bool enqueueAsync(cudaStream_t handle, std::shared_ptr<AsyncOp> op) {
  Op queued;
  queued.async = std::move(op);
  return enqueueOp(handle, std::move(queued));
}

cudaError_t queryStream(cudaStream_t handle) {
  if (!handle) {
    bool ready = true;
    for (Stream *s : allStreams(/*blockingOnly=*/true))
      ready = runWhileReady(*s) && ready;
    return ready ? cudaSuccess : cudaErrorNotReady;
  }
  Stream *s = liveStream(handle);
  if (!s)
    return cudaErrorInvalidResourceHandle;
  return runWhileReady(*s) ? cudaSuccess : cudaErrorNotReady;
}

bool synchronizeStream(cudaStream_t handle) {
  if (!handle) {
    for (Stream *s : allStreams(/*blockingOnly=*/true))
      runUpTo(*s, 0);
    return true;
  }
  Stream *s = liveStream(handle);
  if (!s)
    return false;
  runUpTo(*s, 0);
  return true;
}

void synchronizeDevice() {
  for (Stream *s : allStreams(/*blockingOnly=*/false))
    runUpTo(*s, 0);
}

cudaEvent_t createEvent(bool timing) {
  auto *e = new Event;
  e->timing = timing;
  add(&Registry::events, e);
  return reinterpret_cast<cudaEvent_t>(e);
}

bool destroyEvent(cudaEvent_t handle) {
  Event *e = liveEvent(handle);
  if (!e)
    return false;
  forget(&Registry::events, e);
  return true;
}

cudaError_t recordEvent(cudaEvent_t handle, cudaStream_t stream) {
  Event *e = liveEvent(handle);
  if (!e || !validStream(stream))
    return cudaErrorInvalidResourceHandle;
  const uint64_t generation = ++e->generation;
  e->done = false;
  Stream *s = stream ? liveStream(stream) : nullptr;
  e->stream = s;
  if (s) {
    std::lock_guard<std::mutex> lock(s->queueMutex);
    e->position = s->queued + 1; // the record's own position
  } else {
    e->position = 0;
  }
  enqueue(stream, [e, generation] {
    if (e->generation.load() == generation) {
      e->when = std::chrono::steady_clock::now();
      e->done.store(true);
    }
  });
  return cudaSuccess;
}

cudaError_t waitEvent(cudaStream_t stream, cudaEvent_t handle) {
  Event *e = liveEvent(handle);
  if (!e || !validStream(stream))
    return cudaErrorInvalidResourceHandle;
  if (!e->stream)
    return cudaSuccess; // never recorded, or on the null stream: done
  Stream *producer = e->stream;
  const uint64_t position = e->position;
  enqueue(stream, [producer, position] { runUpTo(*producer, position); });
  return cudaSuccess;
}

cudaError_t synchronizeEvent(cudaEvent_t handle) {
  Event *e = liveEvent(handle);
  if (!e)
    return cudaErrorInvalidResourceHandle;
  if (e->stream)
    runUpTo(*e->stream, e->position);
  return cudaSuccess;
}

cudaError_t eventMilliseconds(cudaEvent_t start, cudaEvent_t end, float *ms) {
  Event *a = liveEvent(start), *b = liveEvent(end);
  if (!a || !b || !a->timing || !b->timing || !a->generation.load() ||
      !b->generation.load())
    return cudaErrorInvalidResourceHandle;
  if (!a->done || !b->done)
    return cudaErrorNotReady; // recorded, not yet run
  *ms = std::chrono::duration<float, std::milli>(b->when - a->when).count();
  return cudaSuccess;
}

} // namespace asrt_emu
