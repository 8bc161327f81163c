// ThreadPool: persistent workers that share one loop's tasks with the caller.
#include "core/ThreadPool.h"
#include "core/Context.h"

namespace autoshard::rt {

ThreadPool::ThreadPool(int threads) : numThreads(threads) {
  if (threads < 1)
    fatal("thread pool: thread count %d must be at least 1", threads);
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  for (std::thread &worker : workers)
    worker.join();
}

void ThreadPool::runErased(int64_t numTasks, TaskFn taskCall, void *taskFn) {
  if (numTasks <= 0)
    return;
  if (numThreads == 1 || numTasks == 1) {
    for (int64_t i = 0; i < numTasks; ++i)
      taskCall(taskFn, i);
    return;
  }
  // Started on first use, so that a pool sized for a run that never
  // reaches a large enough loop costs no threads.
  if (workers.empty()) {
    workers.reserve(numThreads - 1);
    for (int i = 1; i < numThreads; ++i)
      workers.emplace_back([this] { workerLoop(); });
  }
  std::unique_lock<std::mutex> lock(mutex);
  call = taskCall;
  fn = taskFn;
  tasks = numTasks;
  nextTask = 0;
  tasksDone = 0;
  lock.unlock();
  wake.notify_all();
  // The caller takes tasks too rather than sleeping while the workers wake.
  lock.lock();
  while (nextTask < tasks) {
    int64_t i = nextTask++;
    lock.unlock();
    taskCall(taskFn, i);
    lock.lock();
    ++tasksDone;
  }
  finished.wait(lock, [this] { return tasksDone == tasks; });
  // Idle until the next job: nothing left to take.
  call = nullptr;
  fn = nullptr;
  tasks = nextTask = tasksDone = 0;
}

void ThreadPool::workerLoop() {
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    wake.wait(lock, [this] { return stopping || nextTask < tasks; });
    if (stopping)
      return;
    int64_t i = nextTask++;
    TaskFn taskCall = call;
    void *taskFn = fn;
    lock.unlock();
    taskCall(taskFn, i);
    lock.lock();
    if (++tasksDone == tasks)
      finished.notify_one();
  }
}

} // namespace autoshard::rt
