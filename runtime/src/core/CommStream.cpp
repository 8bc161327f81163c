// A stream thread (communication or offload): its work runs in issue order.
#include "core/CommStream.h"
#include "core/Context.h"
#include "core/Dtype.h"
#include "stats/Stats.h"
#include "stats/Trace.h"

#include <pthread.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <system_error>

namespace autoshard::rt {

namespace {

/// How long each side polls before it sleeps on a condition variable: the
/// main thread for the operation it waits for, the communication thread
/// for the next operation. A sleep and a wake-up cost a few microseconds
/// each way, which would double or triple the latency of a small blocking
/// collective; polling (with yields, so that ranks sharing cores still
/// run) for this long catches the back-to-back case and costs little CPU.
constexpr auto kPollBeforeSleeping = std::chrono::microseconds(50);

/// Polls `ready` (yielding) for up to kPollBeforeSleeping; whether it held.
template <typename Ready> bool pollFor(Ready ready) {
  auto until = std::chrono::steady_clock::now() + kPollBeforeSleeping;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= until)
      return false;
    std::this_thread::yield();
  }
  return true;
}

/// How a stream of each role names itself and what it runs, in messages
/// and in the trace.
struct RoleText {
  const char *thread;
  const char *stream;
  const char *operations;
  /// The verb for putting an operation on the stream.
  const char *issued;
  const char *threadName; // pthread_setname_np: at most 15 characters
  const char *category;
  TraceTrack track;
  /// The likely cause of a timeout, for its message.
  const char *likelyCause;
};

const RoleText &textOf(StreamRole role) {
  static const RoleText communication{
      "communication thread",
      "communication stream",
      "collectives",
      "issued",
      "asrt-comm",
      "comm",
      TraceTrack::Comm,
      "A rank of the group has probably died or hung"};
  static const RoleText offload{
      "offload thread",
      "offload stream",
      "transfers",
      "started",
      "asrt-offload",
      "offload",
      TraceTrack::Offload,
      "The disk or the copy has probably hung (a transfer is local to this "
      "rank)"};
  return role == StreamRole::Offload ? offload : communication;
}

} // namespace

int64_t steadyClockNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string describeStreamOp(const StreamOpInfo &info) {
  std::string text = info.name;
  if (info.async())
    text += " of handle " + std::to_string(info.handle);
  text += std::string(" (") + dtypeName(info.dtype);
  if (info.members > 0)
    text += ", " + std::to_string(info.members) +
            (info.members == 1 ? " member" : " members");
  text += ", sending " + std::to_string(info.bytes) +
          " bytes over grid_axes_mask " + std::to_string(info.mask) + ", a " +
          "group of " + std::to_string(info.groupSize) +
          (info.groupSize == 1 ? " rank)" : " ranks)");
  return text;
}

std::string describeTransfer(const StreamOpInfo &info) {
  std::string text = info.name;
  if (info.async())
    text += " of handle " + std::to_string(info.handle);
  text += " (";
  if (info.arg >= 0) {
    text += "argument " + std::to_string(info.arg);
    if (info.argName && info.argName[0] != '\0')
      text += std::string(" ") + info.argName;
    text += ", ";
  }
  text += std::to_string(info.bytes) + " bytes)";
  return text;
}

CommStream::CommStream(Stats &stats, StreamClock clock)
    : stats(stats), clock(clock) {}

CommStream::CommStream(Stats &stats, StreamRole role, StreamClock clock)
    : stats(stats), streamRole(role), clock(clock) {}

std::string CommStream::describe(const StreamOpInfo &info) const {
  return streamRole == StreamRole::Offload ? describeTransfer(info)
                                           : describeStreamOp(info);
}

CommStream::~CommStream() {
  if (!thread.joinable())
    return;
  // Whatever is still queued runs first (a context may be destroyed right
  // after its last blocking collective issued more work), within the
  // timeout like any wait.
  if (!isComplete(issuedSeq))
    wait(issuedSeq, "destroying the runtime context", StreamOpInfo());
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  workReady.notify_all();
  thread.join();
}

void CommStream::setTimeout(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds))
    fatal("collective timeout %g s is not a number of seconds >= 0 (0 waits "
          "forever)",
          seconds);
  timeoutSeconds = seconds;
}

void CommStream::setPhase(std::string text) {
  std::lock_guard<std::mutex> lock(mutex);
  phase = std::move(text);
}

void CommStream::setGroupNamer(
    std::function<std::string(int32_t mask)> namer) {
  std::lock_guard<std::mutex> lock(mutex);
  groupNamer = std::move(namer);
}

void CommStream::setTrace(Trace *t) {
  if (!isComplete(issuedSeq))
    fatal("the trace changed while %" PRIu64
          " %s were in flight; set it between steps",
          issuedSeq - completedSeq.load(), textOf(streamRole).operations);
  trace.store(t, std::memory_order_release);
}

uint64_t CommStream::issue(void (*run)(void *), void *arg,
                           const StreamOpInfo &info) {
  std::unique_lock<std::mutex> lock(mutex);
  if (!thread.joinable()) {
    try {
      thread = std::thread([this] { threadMain(); });
    } catch (const std::system_error &e) {
      fatal("cannot start the %s: %s", textOf(streamRole).thread, e.what());
    }
  }
  if (queued == ring.size()) {
    // Grow, keeping the queue's order; rare (the deepest queue so far).
    std::vector<Item> larger(ring.empty() ? 16 : 2 * ring.size());
    for (size_t i = 0; i < queued; ++i)
      larger[i] = ring[(head + i) % ring.size()];
    ring.swap(larger);
    head = 0;
  }
  Item &item = ring[(head + queued) % ring.size()];
  item.seq = ++issuedSeq;
  item.run = run;
  item.arg = arg;
  item.info = info;
  ++queued;
  uint64_t seq = item.seq;
  publishedSeq.store(seq, std::memory_order_release);
  lock.unlock();
  workReady.notify_one();
  return seq;
}

void CommStream::threadMain() {
  const RoleText &text = textOf(streamRole);
  const bool offload = streamRole == StreamRole::Offload;
  pthread_setname_np(pthread_self(), text.threadName);
  std::unique_lock<std::mutex> lock(mutex);
  while (true) {
    workReady.wait(lock, [&] { return queued > 0 || stopping; });
    if (queued == 0)
      return; // stopping, and everything issued has run
    Item item = ring[head];
    head = (head + 1) % ring.size();
    --queued;
    current = item;
    running = true;
    currentStart = std::chrono::steady_clock::now();
    lock.unlock();

    int64_t start = clock();
    item.run(item.arg);
    int64_t end = clock();
    stats.recordSideThread(streamRole, item.info.async(), end - start);
    if (Trace *t = trace.load(std::memory_order_acquire)) {
      TraceEvent e;
      e.name = item.info.name;
      e.category = text.category;
      e.track = text.track;
      e.startNs = start;
      e.endNs = end;
      e.seq = static_cast<int64_t>(item.seq);
      if (item.info.async())
        e.handle = item.info.handle;
      e.bytes = item.info.bytes;
      if (offload) {
        e.arg = item.info.arg;
      } else {
        e.mask = item.info.mask;
        e.dtype = dtypeName(item.info.dtype);
      }
      t->record(e);
    }

    lock.lock();
    running = false;
    completedSeq.store(item.seq, std::memory_order_release);
    workDone.notify_all();
    if (queued == 0) {
      lock.unlock();
      pollFor([&] {
        return publishedSeq.load(std::memory_order_acquire) > item.seq;
      });
      lock.lock();
    }
  }
}

void CommStream::setWaitReporter(std::function<std::string()> reporter) {
  std::lock_guard<std::mutex> lock(mutex);
  waitReporter = std::move(reporter);
}

void CommStream::wait(uint64_t seq, const char *caller,
                      const StreamOpInfo &waited) {
  if (seq == 0 || seq > issuedSeq)
    fatal("%s: operation %" PRIu64 " was never issued to the %s (it issued "
          "%" PRIu64 ")",
          caller, seq, textOf(streamRole).stream, issuedSeq);
  int64_t start = clock();
  if (!isComplete(seq) && !pollFor([&] { return isComplete(seq); })) {
    std::unique_lock<std::mutex> lock(mutex);
    blockedCount.fetch_add(1, std::memory_order_acq_rel);
    auto done = [&] { return isComplete(seq); };
    if (timeoutSeconds == 0) {
      workDone.wait(lock, done);
    } else {
      auto begin = std::chrono::steady_clock::now();
      // Beyond ~30 years the deadline would overflow the clock; that is
      // forever too.
      auto limit = std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::duration<double>(std::min(timeoutSeconds, 1e9)));
      if (!workDone.wait_until(lock, begin + limit, done))
        timedOut(lock, seq, caller, waited,
                 std::chrono::duration<double>(
                     std::chrono::steady_clock::now() - begin)
                     .count());
    }
    blockedCount.fetch_sub(1, std::memory_order_acq_rel);
  }
  int64_t end = clock();
  // The destructor's wait is not part of any step.
  if (waited.name[0] == '\0')
    return;
  stats.recordSideWait(streamRole, waited.async(), end - start);
}

void CommStream::drain(const char *caller, const StreamOpInfo &info) {
  if (!isComplete(issuedSeq))
    wait(issuedSeq, caller, info);
}

void CommStream::timedOut(std::unique_lock<std::mutex> &lock, uint64_t seq,
                          const char *caller, const StreamOpInfo &waited,
                          double waitedSeconds) {
  const RoleText &text = textOf(streamRole);
  std::string what = waited.name[0] != '\0'
                         ? describe(waited)
                         : std::string("the ") + text.operations + " in flight";
  std::string where;
  if (running) {
    double runningFor = std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - currentStart)
                            .count();
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f s", runningFor);
    if (current.seq == seq)
      where = std::string("it has been running on the ") + text.thread +
              " for " + seconds;
    else
      where = std::string("the ") + text.thread + " is still running " +
              describe(current.info) + ", " + text.issued +
              " before it, after " + seconds;
  } else {
    where = std::string("the ") + text.thread + " has not started it";
  }
  std::string during = phase.empty() ? "" : " in " + phase;
  // Which of the group it may be: a collective does not tell a member
  // which other member has not joined, but the candidates are known.
  std::string members;
  if (groupNamer && streamRole == StreamRole::Communication &&
      waited.name[0] != '\0' && waited.groupSize > 1)
    members = std::string(waited.groupSize == 2 ? " (its other member: "
                                                : " (its other members: ") +
              groupNamer(waited.mask);
  bool stuckInWaited = running && current.seq == seq;
  bool stuckInOther = running && current.seq != seq;
  lock.unlock();
  // Which of them, where the communicator can tell: asked outside the
  // stream's lock, since it takes the communicator's own.
  if (waitReporter && streamRole == StreamRole::Communication &&
      (stuckInWaited || stuckInOther)) {
    std::string report = waitReporter();
    if (!report.empty()) {
      std::string prefix = stuckInOther ? "in the one the communication "
                                          "thread is stuck in, "
                                        : "";
      members = members.empty() ? " (" + prefix + report
                                : members + "; " + prefix + report;
    }
  }
  if (!members.empty())
    members += ")";
  fatal("%s: %s did not complete within the collective timeout of %g s "
        "(waited %.1f s)%s; %s. %s%s; --collective-timeout sets the limit (0 "
        "waits forever)",
        caller, what.c_str(), timeoutSeconds, waitedSeconds, during.c_str(),
        where.c_str(), text.likelyCause, members.c_str());
}

} // namespace autoshard::rt
