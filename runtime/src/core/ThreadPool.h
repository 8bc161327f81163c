// A small pool of persistent threads for the host's data-parallel loops.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace autoshard::rt {

/// Runs the independent tasks of one loop on `threads` threads: the calling
/// thread and threads - 1 workers. The workers start at the first call that
/// has work for them and sleep on a condition variable between calls; the
/// destructor wakes and joins them, so a pool never outlives its owner's
/// threads or hangs the exit.
///
/// Plain std::thread rather than OpenMP: the runtime then needs no OpenMP
/// runtime (libomp for clang, libgomp for g++; mixing them in one binary
/// with OpenBLAS's own threads is its own trouble), and the threads are the
/// context's, sized by the driver like its communication thread.
///
/// One thread at a time calls run() (the context's caller, like every ABI
/// call); a task must not call run() on the same pool.
class ThreadPool {
public:
  /// `threads` >= 1; 1 runs everything on the calling thread.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int threads() const { return numThreads; }

  /// Calls task(i) once for every i in [0, tasks), spread over the pool's
  /// threads, the calling one included, and returns when every call has
  /// returned and no worker still touches `task`.
  template <typename Task> void run(int64_t tasks, Task &&task) {
    using Fn = std::remove_reference_t<Task>;
    runErased(
        tasks, [](void *fn, int64_t i) { (*static_cast<Fn *>(fn))(i); },
        const_cast<void *>(static_cast<const void *>(&task)));
  }

private:
  using TaskFn = void (*)(void *fn, int64_t i);

  void runErased(int64_t tasks, TaskFn call, void *fn);
  void workerLoop();

  const int numThreads;
  std::vector<std::thread> workers;

  /// The current job, all under `mutex`. A thread takes a task index and
  /// the job's function together, so a worker that wakes late can only
  /// join the job that is current, never run a finished one's function.
  std::mutex mutex;
  std::condition_variable wake;     // workers: tasks to take, or stop
  std::condition_variable finished; // caller: the last task returned
  TaskFn call = nullptr;
  void *fn = nullptr;
  int64_t tasks = 0;
  int64_t nextTask = 0;
  int64_t tasksDone = 0;
  bool stopping = false;
};

} // namespace autoshard::rt
