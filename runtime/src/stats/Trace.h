// A Chrome/Perfetto trace of one rank: its ops, collectives and waits.
#pragma once

#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

namespace autoshard::rt {

struct OpSite;

/// The tracks (Chrome "tid"s) of a rank's trace.
enum class TraceTrack : int {
  /// The thread that calls the ABI: steps, compute ops, the main thread's
  /// side of collectives (blocking calls, asrt_bucket_start, asrt_wait).
  Main = 1,
  /// The communication thread: each collective from start to end.
  Comm = 2,
  /// The offload thread: each transfer (host copies, NVMe reads and
  /// writes) from start to end. A synchronous one lies inside its ABI
  /// call's "transfer" event; an asynchronous one between its
  /// asrt_transfer_start and asrt_transfer_wait, overlapping the compute.
  Offload = 3,
};

/// One complete ("X") event. Names and categories are string literals (op
/// names), so that recording one copies no string.
struct TraceEvent {
  const char *name = "";
  /// "step", "compute", "collective" (a blocking call), "issue"
  /// (asrt_bucket_start, asrt_transfer_start), "wait" (asrt_wait,
  /// asrt_transfer_wait), "transfer" (a synchronous offload ABI call),
  /// "comm" (the communication thread) or "offload" (the offload thread).
  const char *category = "";
  TraceTrack track = TraceTrack::Main;
  int64_t startNs = 0;
  int64_t endNs = 0;
  /// Arguments shown in the viewer; each only when set (>= 0 or non-null).
  /// seq: the collective's place in the stream's issue order, which ties a
  /// main-thread event to its "comm" event; handle: asrt_bucket_start's.
  int64_t step = -1;
  int64_t seq = -1;
  int64_t handle = -1;
  int64_t bytes = -1;
  int32_t mask = -1;
  const char *dtype = nullptr;
  /// The argument an NVMe read or write moved.
  int32_t arg = -1;
  /// The source op whose lowering made the call (asrt_op_site): its name,
  /// layer, location and shapes become the event's args. Points into the
  /// step's manifest, which outlives the trace.
  const OpSite *site = nullptr;
};

/// The events of one rank, recorded while tracing is on. Thread-safe: the
/// main and communication threads record into it concurrently. Costs
/// nothing when off: the context then holds no Trace and the recorders
/// test one pointer.
class Trace {
public:
  /// Timestamps are written relative to `originNs` (the clock of the
  /// events), so that ranks that took their origin together line up.
  explicit Trace(int64_t originNs);

  void record(const TraceEvent &event);
  size_t size() const;
  /// A copy of the events recorded so far, in recording order.
  std::vector<TraceEvent> events() const;

  /// This rank's events as JSON objects separated by ",\n", without the
  /// enclosing array: the metadata naming process `rank` ("rank R") and
  /// its two tracks (three when it has offload events), then every event
  /// with pid = rank, ts and dur in microseconds with three decimals
  /// (nanosecond precision).
  std::string jsonEvents(int rank) const;

private:
  int64_t origin;
  mutable std::mutex mutex;
  std::vector<TraceEvent> recorded;
};

/// A whole trace file, {"displayTimeUnit": "ms", "traceEvents": [...]},
/// from the ranks' jsonEvents() (empty ones are skipped).
void writeTraceFile(std::ostream &os, const std::vector<std::string> &ranks);

} // namespace autoshard::rt
