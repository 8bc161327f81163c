// The runtime context behind the ABI's opaque asrt_context.
#pragma once

#include "autoshard/rt/abi.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace autoshard::rt {

class Comm;
struct Stats;
struct AllocationTable;
class OpenBucket;

/// Prints "autoshard runtime error (rank R): <message>" to stderr and ends
/// the process (and, under MPI, every rank) with a non-zero exit status.
/// The runtime's only way to fail from inside an ABI call.
[[noreturn]] void fatal(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/// How fatal() ends the job once it has printed. The MPI layer installs one
/// that calls MPI_Abort, so that one failing rank does not leave the others
/// blocked in a collective; without a hook fatal() exits the process.
using FatalAbortHook = void (*)(int exitCode);
void setFatalAbortHook(FatalAbortHook hook);
/// The rank fatal() names in its message (0 until set).
void setFatalRank(int rank);

/// Times one ABI call and adds it to the context's per-op statistics.
class OpTimer {
public:
  OpTimer(asrt_context *ctx, const char *op);
  ~OpTimer();
  OpTimer(const OpTimer &) = delete;
  OpTimer &operator=(const OpTimer &) = delete;

private:
  asrt_context *ctx;
  const char *op;
  std::chrono::steady_clock::time_point start;
};

} // namespace autoshard::rt

/// Owned by the driver (or a test); the generated code only passes it on.
struct asrt_context {
  asrt_context();
  ~asrt_context();
  asrt_context(const asrt_context &) = delete;
  asrt_context &operator=(const asrt_context &) = delete;

  /// Null in single-process tests; collectives then act on a group of one.
  autoshard::rt::Comm *comm = nullptr;
  std::unique_ptr<autoshard::rt::Stats> stats;
  /// Live asrt_alloc buffers and their sizes, for asrt_free's accounting and
  /// its check that a pointer came from asrt_alloc.
  std::unique_ptr<autoshard::rt::AllocationTable> allocations;
  /// asrt_bucket_*'s open bucket. Here rather than in the Comm because a
  /// context without one still runs buckets, as a group of one.
  std::unique_ptr<autoshard::rt::OpenBucket> bucket;
};
