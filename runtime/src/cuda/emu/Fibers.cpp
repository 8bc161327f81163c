// The CUDA emulator's kernel launches: a grid is queued on its stream
// (Streams.cpp); when the stream runs it, its blocks run one after another
// on the host thread running the stream, a block's threads as fibers that
// switch at barriers (CudaEmu.h says what this models and what it does
// not).
#include "CudaEmu.h"
#include "EmuState.h"

#include <sys/mman.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>

// Under AddressSanitizer every switch is announced, so that ASan knows
// which stack is live (scripts/cuda-emu-asan.sh runs the emulated tests so).
#if defined(__SANITIZE_ADDRESS__)
#define ASRT_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASRT_EMU_ASAN 1
#endif
#endif
#if ASRT_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#include <string>
#include <vector>

namespace asrt_emu {

thread_local const ThreadCoords *current = nullptr;

namespace {

constexpr unsigned kWarp = 32;
constexpr unsigned kMaxBlockThreads = 1024;
/// A worker's stack (local arrays of the kernels, e.g. the attention's
/// accumulators, and the host functions they call), with a guard page.
constexpr size_t kStackBytes = size_t(256) << 10;
constexpr size_t kGuardBytes = 4096;
/// Static shared memory is not sized here; dynamic shared memory, which
/// the backend does not use, is checked against the opt-in default.
constexpr size_t kMaxDynamicShared = 48 << 10;

// ---- Execution contexts ----
//
// A context is a stack and the registers to resume it with. On x86-64 the
// switch saves the callee-saved registers and the SSE/x87 control words on
// the old stack and loads them from the new one: no system call (glibc's
// swapcontext makes one per switch to save the signal mask, which made it
// the emulator's largest cost). Elsewhere, ucontext.
#if defined(__x86_64__)
extern "C" void asrt_emu_switch(void **saveSp, void *loadSp);
asm(R"(
  .text
  .globl asrt_emu_switch
  .type asrt_emu_switch, @function
asrt_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size asrt_emu_switch, .-asrt_emu_switch
)");

struct Context {
  void *sp = nullptr;
  const void *bottom = nullptr; // the stack, for ASan
  size_t size = 0;
};
void switchStacks(Context &from, Context &to) {
  asrt_emu_switch(&from.sp, to.sp);
}
/// A context that starts `entry` (which never returns) on the stack.
void prepareContext(Context &c, char *stack, size_t bytes, void (*entry)()) {
  c.bottom = stack;
  c.size = bytes;
  uintptr_t top = (uintptr_t(stack) + bytes) & ~uintptr_t(15);
  void **sp = reinterpret_cast<void **>(top);
  *--sp = nullptr;                          // entry's (absent) return address
  *--sp = reinterpret_cast<void *>(entry);  // where the switch's ret goes
  for (int i = 0; i < 6; ++i)
    *--sp = nullptr;                        // rbp, rbx, r12-r15
  --sp;                                     // the control words: the caller's
  uint32_t *control = reinterpret_cast<uint32_t *>(sp);
  control[0] = __builtin_ia32_stmxcsr();
  uint16_t fpu;
  asm volatile("fnstcw %0" : "=m"(fpu));
  control[1] = fpu;
  c.sp = sp;
}
#else
struct Context {
  ucontext_t uc;
  const void *bottom = nullptr; // the stack, for ASan
  size_t size = 0;
};
void switchStacks(Context &from, Context &to) { swapcontext(&from.uc, &to.uc); }
void prepareContext(Context &c, char *stack, size_t bytes, void (*entry)()) {
  c.bottom = stack;
  c.size = bytes;
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = bytes;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
}
#endif

/// Switches from `from` to `to`; returns when something switches back.
/// `leaving`: `from` is never resumed (ASan drops its fake stack).
void switchContext(Context &from, Context &to, bool leaving = false) {
#if ASRT_EMU_ASAN
  void *fakeStack = nullptr;
  __sanitizer_start_switch_fiber(leaving ? nullptr : &fakeStack, to.bottom,
                                 to.size);
#else
  (void)leaving;
#endif
  switchStacks(from, to);
#if ASRT_EMU_ASAN
  __sanitizer_finish_switch_fiber(fakeStack, nullptr, nullptr);
#endif
}

/// A stack about to be reused: under ASan, forgets the redzones of the
/// frames its last worker left without returning (a finished worker never
/// unwinds), which would otherwise be reported against the new frames.
void forgetFrames(char *stack, size_t bytes) {
#if ASRT_EMU_ASAN
  ASAN_UNPOISON_MEMORY_REGION(stack, bytes);
#else
  (void)stack;
  (void)bytes;
#endif
}

/// The first thing a new context does: under ASan, completes the switch
/// that started it and records the stack it came from in `from` (the
/// scheduler's, the host thread's own stack, whose bounds only ASan knows).
void enteredContext(Context &from) {
#if ASRT_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &from.bottom, &from.size);
#else
  (void)from;
#endif
}

// ---- Threads and workers ----
//
// A CUDA thread is state (coordinates, where it waits); a worker is a
// context that runs threads. A worker takes the next thread that has not
// started and runs it; when the thread finishes, the same worker takes the
// next one without a switch, so a block whose threads never wait runs on
// one worker at the cost of function calls. A thread that waits keeps its
// worker (its stack holds the thread's frames) and the scheduler starts a
// new worker for the threads that have not started.

enum class State {
  Unstarted,
  Running,
  Ready, // released from a barrier, to be resumed
  AtBlockBarrier,
  AtWarpBarrier,
  Done
};

struct Thread {
  ThreadCoords coords;
  State state = State::Unstarted;
  int worker = -1;
  // The shuffle the thread waits in: its value, partner and destination.
  uint64_t value = 0;
  int source = -1;
  void *out = nullptr;
  size_t bytes = 0;
  uint64_t *gathered = nullptr; // a gather's destination: every lane's value
};

struct Worker {
  Context context;
  bool busy = false;
};

struct Warp {
  unsigned exists = 0;  // lanes the block has
  unsigned arrived = 0; // lanes waiting in a shuffle
  unsigned mask = 0;    // the mask the waiting lanes named
};

/// One block in flight on this host thread.
struct BlockRun {
  std::vector<Thread> threads;
  std::vector<Warp> warps;
  std::vector<Worker> workers;
  Context scheduler;
  Thread *running = nullptr;
  Worker *runningWorker = nullptr;
  size_t started = 0; // threads started so far, in schedule order
  bool reverse = false;
  void (*body)(const void *) = nullptr;
  const void *closure = nullptr;
  bool failed = false; // trapped or broke a rule: the launch ends

  /// The k-th thread in schedule order.
  Thread &inOrder(size_t k) {
    return threads[reverse ? threads.size() - 1 - k : k];
  }
};

thread_local BlockRun *active = nullptr;

/// Stacks reused by every launch of this host thread, mapped on first use
/// (the pages a worker does not touch are never backed).
class StackPool {
public:
  ~StackPool() {
    for (char *stack : stacks_)
      munmap(stack, kStackBytes);
  }
  char *get(size_t i) {
    while (stacks_.size() <= i) {
      void *p = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) {
        std::fprintf(stderr, "CUDA emulator: cannot map a fiber stack\n");
        std::abort();
      }
      mprotect(p, kGuardBytes, PROT_NONE); // overflow faults, not corrupts
      stacks_.push_back(static_cast<char *>(p));
    }
    return stacks_[i];
  }

private:
  std::vector<char *> stacks_;
};

thread_local StackPool stacks;

/// ASRT_CUDA_EMU_SCHEDULE=reverse, or what setReverseSchedule said last.
std::atomic<int> reverseOrder{-1};

bool reverseSchedule() {
  int order = reverseOrder.load();
  if (order < 0) {
    const char *value = std::getenv("ASRT_CUDA_EMU_SCHEDULE");
    std::string text = value ? value : "";
    if (!text.empty() && text != "reverse" && text != "forward") {
      std::fprintf(stderr,
                   "CUDA emulator: ASRT_CUDA_EMU_SCHEDULE='%s': expected "
                   "forward (the default) or reverse\n",
                   value);
      std::exit(2);
    }
    order = text == "reverse";
    reverseOrder.store(order);
  }
  return order == 1;
}

[[noreturn]] void workerMain() {
  BlockRun &run = *active;
  enteredContext(run.scheduler);
  Worker &self = *run.runningWorker;
  const int index = int(&self - run.workers.data());
  while (run.started < run.threads.size()) {
    Thread &t = run.inOrder(run.started++);
    t.worker = index;
    t.state = State::Running;
    run.running = &t;
    current = &t.coords;
    run.body(run.closure);
    t.state = State::Done;
  }
  self.busy = false;
  switchContext(self.context, run.scheduler, /*leaving=*/true);
  std::fprintf(stderr, "CUDA emulator: a finished worker was resumed\n");
  std::abort();
}

/// From a thread back to the scheduler; returns when the scheduler resumes
/// the thread.
void yieldToScheduler() {
  BlockRun &run = *active;
  switchContext(run.workers[run.running->worker].context, run.scheduler);
}

/// Ends the launch from inside a thread: never returns.
[[noreturn]] void failFromThread() {
  BlockRun &run = *active;
  run.failed = true;
  run.running->state = State::Done;
  switchContext(run.workers[run.running->worker].context, run.scheduler,
                /*leaving=*/true);
  std::fprintf(stderr, "CUDA emulator: a failed thread was resumed\n");
  std::abort();
}

const char *describe(const ThreadCoords &c) {
  thread_local char text[96];
  std::snprintf(text, sizeof text, "block (%u,%u,%u) thread (%u,%u,%u)",
                c.block.x, c.block.y, c.block.z, c.thread.x, c.thread.y,
                c.thread.z);
  return text;
}

/// Completes every warp shuffle whose lanes have all arrived; true if any.
bool releaseShuffles(BlockRun &run) {
  bool released = false;
  for (size_t w = 0; w < run.warps.size(); ++w) {
    Warp &warp = run.warps[w];
    if (!warp.arrived || warp.arrived != warp.mask)
      continue;
    for (unsigned lane = 0; lane < kWarp; ++lane) {
      if (!(warp.mask >> lane & 1))
        continue;
      Thread &t = run.threads[w * kWarp + lane];
      if (t.source >= 0 && !(warp.mask >> t.source & 1)) {
        setStickyError(cudaErrorLaunchFailure,
                       "%s: warp shuffle reads lane %d, which is not in its "
                       "mask 0x%08x",
                       describe(t.coords), t.source, warp.mask);
        return false;
      }
      if (t.gathered) {
        for (unsigned from = 0; from < kWarp; ++from)
          t.gathered[from] = warp.mask >> from & 1
                                 ? run.threads[w * kWarp + from].value
                                 : 0;
      } else {
        const Thread &from =
            t.source < 0 ? t : run.threads[w * kWarp + t.source];
        std::memcpy(t.out, &from.value, t.bytes);
      }
      t.state = State::Ready;
    }
    warp.arrived = warp.mask = 0;
    released = true;
  }
  return released;
}

/// Releases the block barrier if every live thread waits in it; true if so.
bool releaseBarrier(BlockRun &run) {
  bool any = false;
  for (const Thread &t : run.threads) {
    if (t.state == State::Done)
      continue;
    if (t.state != State::AtBlockBarrier)
      return false;
    any = true;
  }
  for (Thread &t : run.threads)
    if (t.state == State::AtBlockBarrier)
      t.state = State::Ready;
  return any;
}

/// Says why no thread of the block can go on (a barrier in divergent code,
/// a shuffle naming a lane that exited or waits elsewhere).
void reportDeadlock(BlockRun &run) {
  for (const Thread &t : run.threads) {
    if (t.state == State::AtWarpBarrier) {
      setStickyError(cudaErrorLaunchFailure,
                     "%s waits in a warp shuffle whose mask names a lane "
                     "that exited, does not exist or waits in "
                     "__syncthreads (a deadlock on a GPU, or undefined)",
                     describe(t.coords));
      return;
    }
  }
  const uint3 b = run.threads[0].coords.block;
  setStickyError(cudaErrorLaunchFailure,
                 "the threads of block (%u,%u,%u) wait in different barriers "
                 "(a deadlock on a GPU)",
                 b.x, b.y, b.z);
}

/// Starts workers until every thread has started (each runs threads until
/// one waits or none is left).
void startThreads(BlockRun &run) {
  while (run.started < run.threads.size() && !run.failed) {
    size_t w = 0;
    while (w < run.workers.size() && run.workers[w].busy)
      ++w;
    if (w == run.workers.size())
      run.workers.emplace_back();
    Worker &worker = run.workers[w];
    worker.busy = true;
    forgetFrames(stacks.get(w) + kGuardBytes, kStackBytes - kGuardBytes);
    prepareContext(worker.context, stacks.get(w) + kGuardBytes,
                   kStackBytes - kGuardBytes, workerMain);
    run.runningWorker = &worker;
    switchContext(run.scheduler, worker.context);
    current = nullptr;
  }
}

/// Runs one block to completion (or failure).
void runBlock(BlockRun &run, uint3 block) {
  for (Thread &t : run.threads) {
    t.coords.block = block;
    t.state = State::Unstarted;
    t.worker = -1;
  }
  for (Warp &warp : run.warps)
    warp.arrived = warp.mask = 0;
  run.workers.clear();
  run.workers.reserve(run.threads.size());
  run.started = 0;
  for (;;) {
    startThreads(run);
    if (run.failed)
      return;
    for (size_t k = 0; k < run.threads.size(); ++k) {
      Thread &t = run.inOrder(k);
      if (t.state != State::Ready)
        continue;
      t.state = State::Running;
      run.running = &t;
      run.runningWorker = &run.workers[t.worker];
      current = &t.coords;
      switchContext(run.scheduler, run.runningWorker->context);
      current = nullptr;
      if (run.failed)
        return;
    }
    bool allDone = true;
    for (const Thread &t : run.threads)
      allDone = allDone && t.state == State::Done;
    if (allDone)
      return;
    if (releaseShuffles(run))
      continue;
    if (stickyError() != cudaSuccess) {
      run.failed = true;
      return;
    }
    if (releaseBarrier(run))
      continue;
    reportDeadlock(run);
    run.failed = true;
    return;
  }
}

bool validConfiguration(dim3 grid, dim3 block, size_t sharedBytes) {
  uint64_t threads = uint64_t(block.x) * block.y * block.z;
  return threads >= 1 && threads <= kMaxBlockThreads && block.x <= 1024 &&
         block.y <= 1024 && block.z <= 64 && grid.x >= 1 &&
         grid.x <= 0x7fffffffu && grid.y >= 1 && grid.y <= 65535 &&
         grid.z >= 1 && grid.z <= 65535 && sharedBytes <= kMaxDynamicShared;
}

} // namespace

namespace {
/// Runs a grid now, on this host thread (its stream's turn has come).
void executeGrid(const std::function<void()> &body, dim3 grid, dim3 block) {
  if (stickyError() != cudaSuccess)
    return; // the context is broken: the launch does nothing
  BlockRun run;
  run.body = [](const void *closure) {
    (*static_cast<const std::function<void()> *>(closure))();
  };
  run.closure = &body;
  run.reverse = reverseSchedule();
  const size_t threads = size_t(block.x) * block.y * block.z;
  run.threads.resize(threads);
  run.warps.resize((threads + kWarp - 1) / kWarp);
  for (size_t i = 0; i < threads; ++i) {
    ThreadCoords &c = run.threads[i].coords;
    c.thread = {unsigned(i % block.x), unsigned(i / block.x % block.y),
                unsigned(i / (size_t(block.x) * block.y))};
    c.blockSize = block;
    c.gridSize = grid;
    c.lane = unsigned(i % kWarp);
    run.warps[i / kWarp].exists |= 1u << c.lane;
  }
  active = &run;
  for (unsigned z = 0; z < grid.z && !run.failed; ++z)
    for (unsigned y = 0; y < grid.y && !run.failed; ++y)
      for (unsigned x = 0; x < grid.x && !run.failed; ++x)
        runBlock(run, uint3{x, y, z});
  active = nullptr;
  std::fflush(stdout); // the kernels' printf, before any later message
}
} // namespace

void runGrid(std::function<void()> body, dim3 grid, dim3 block,
             size_t sharedBytes, cudaStream_t stream) {
  if (active) {
    std::fprintf(stderr, "CUDA emulator: a kernel launched a kernel\n");
    std::abort();
  }
  if (stickyError() != cudaSuccess)
    return;
  if (!validConfiguration(grid, block, sharedBytes)) {
    setLastError(cudaErrorInvalidConfiguration);
    return;
  }
  auto shared = std::make_shared<std::function<void()>>(std::move(body));
  if (!enqueue(stream, [shared, grid, block] {
        executeGrid(*shared, grid, block);
      }))
    setLastError(cudaErrorInvalidResourceHandle);
}

void setReverseSchedule(bool reverse) { reverseOrder.store(reverse ? 1 : 0); }

void syncThreads() {
  if (!active) {
    std::fprintf(stderr, "CUDA emulator: __syncthreads outside a kernel\n");
    std::abort();
  }
  active->running->state = State::AtBlockBarrier;
  yieldToScheduler();
}

namespace {
/// Publishes `value` to the lanes of `mask` and waits until all arrive;
/// then either `out` receives lane `source`'s value (a shuffle) or
/// `gathered` every lane's (a gather).
void exchange(unsigned mask, const void *value, size_t bytes, int source,
              void *out, uint64_t *gathered);
} // namespace

void shuffle(unsigned mask, const void *value, size_t bytes, int source,
             void *out) {
  exchange(mask, value, bytes, source, out, nullptr);
}

void gather(unsigned mask, uint64_t value, uint64_t *all) {
  exchange(mask, &value, sizeof value, -1, nullptr, all);
}

namespace {
void exchange(unsigned mask, const void *value, size_t bytes, int source,
              void *out, uint64_t *gathered) {
  if (!active) {
    std::fprintf(stderr, "CUDA emulator: a warp shuffle outside a kernel\n");
    std::abort();
  }
  BlockRun &run = *active;
  Thread &self = *run.running;
  const size_t index = size_t(&self - run.threads.data());
  Warp &warp = run.warps[index / kWarp];
  const unsigned bit = 1u << self.coords.lane;
  if (!(mask & bit) || (mask & ~warp.exists) ||
      (warp.arrived && warp.mask != mask)) {
    setStickyError(cudaErrorLaunchFailure,
                   "%s: warp shuffle with mask 0x%08x, which %s",
                   describe(self.coords), mask,
                   !(mask & bit)          ? "leaves out the calling lane"
                   : (mask & ~warp.exists) ? "names lanes the block lacks"
                                           : "differs from its partners' mask");
    failFromThread();
  }
  self.value = 0;
  std::memcpy(&self.value, value, bytes);
  self.source = source;
  self.out = out;
  self.bytes = bytes;
  self.gathered = gathered;
  warp.mask = mask;
  warp.arrived |= bit;
  self.state = State::AtWarpBarrier;
  yieldToScheduler();
}

} // namespace

void wmmaMisuse(const char *what, const void *pointer, unsigned ldm) {
  setStickyError(cudaErrorLaunchFailure,
                 "%s: WMMA load or store of %s at %p with ldm %u: CUDA needs "
                 "a 256-bit aligned pointer and ldm a multiple of 16 bytes",
                 active ? describe(active->running->coords) : "host", what,
                 pointer, ldm);
  if (active)
    failFromThread();
  std::abort();
}

void trap() {
  if (!active) {
    std::fprintf(stderr, "CUDA emulator: __trap outside a kernel\n");
    std::abort();
  }
  std::fflush(stdout);
  setStickyError(cudaErrorLaunchFailure, "%s executed __trap()",
                 describe(active->running->coords));
  failFromThread();
}

} // namespace asrt_emu
