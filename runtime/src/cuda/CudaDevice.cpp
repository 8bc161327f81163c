// One GPU as the runtime's Device (host code): memory, streams, fences.
#include "CudaDevice.h"

#include "core/Context.h"

#include <cinttypes>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace autoshard::rt::cuda {

/// Events for fences, reused: a fence is taken per collective and per
/// offload transfer, and creating and destroying an event each time would
/// put two driver calls on every one of them. The pool grows to the most
/// fences alive at once (a few per collective in flight) and keeps them.
/// Reusing an event is safe once its fence is gone: cudaStreamWaitEvent
/// waits for the record current when it was called, not for later ones.
/// A second pool, of events that keep timing, serves the time marks of
/// --device-op-times.
class CudaDevice::EventPool {
public:
  /// `timing`: events that record a timestamp (cudaEventElapsedTime);
  /// fences only order, which is cheaper without one.
  EventPool(std::string deviceName, bool timing)
      : deviceName(std::move(deviceName)), timing(timing) {}
  ~EventPool() {
    // Destroying an event whose record is still pending is allowed; CUDA
    // frees it once the record completes. A fence dropped during static
    // destruction may find the CUDA runtime already unloaded: its events
    // went with it, which is no error.
    for (cudaEvent_t event : idle) {
      cudaError_t status = cudaEventDestroy(event);
      if (status != cudaErrorCudartUnloading) {
        std::string what = deviceName + ": destroying a fence event";
        cuda::check(status, what.c_str());
      }
    }
  }
  EventPool(const EventPool &) = delete;
  EventPool &operator=(const EventPool &) = delete;

  /// A free event, or a new one on the calling thread's current device
  /// (the caller made its device current).
  cudaEvent_t take() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!idle.empty()) {
        cudaEvent_t event = idle.back();
        idle.pop_back();
        return event;
      }
    }
    cudaEvent_t event = nullptr;
    cudaError_t status = cudaEventCreateWithFlags(
        &event, timing ? cudaEventDefault : cudaEventDisableTiming);
    if (status != cudaSuccess) {
      std::string what = deviceName + ": creating a fence event";
      cuda::check(status, what.c_str());
    }
    return event;
  }
  void give(cudaEvent_t event) {
    std::lock_guard<std::mutex> lock(mutex);
    idle.push_back(event);
  }

private:
  const std::string deviceName;
  const bool timing;
  std::mutex mutex;
  std::vector<cudaEvent_t> idle;
};

namespace {

constexpr size_t kLanes = 3;

size_t laneIndex(Lane lane) {
  size_t index = static_cast<size_t>(lane);
  if (index >= kLanes)
    fatal("cuda device: lane %zu is not Compute, Comm or Offload", index);
  return index;
}

const char *laneName(Lane lane) {
  switch (lane) {
  case Lane::Compute:
    return "compute";
  case Lane::Comm:
    return "comm";
  case Lane::Offload:
    return "offload";
  }
  return "unknown";
}

bool overlaps(const void *a, const void *b, int64_t bytes) {
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  auto n = static_cast<uintptr_t>(bytes);
  return x < y + n && y < x + n;
}

} // namespace

CudaDevice::CudaDevice(int ordinal)
    : ordinal_(ordinal), name_("cuda:" + std::to_string(ordinal)),
      events_(std::make_shared<EventPool>(name_, /*timing=*/false)),
      timingEvents_(std::make_shared<EventPool>(name_, /*timing=*/true)) {
  check(cudaSetDevice(ordinal_), "selecting the device (cudaSetDevice)");
  // The kernels' scratch (cudaMallocAsync) comes from the device's default
  // pool, whose release threshold of 0 hands its memory back to the driver
  // at every synchronisation (each step's end, the id checks), so that the
  // next step would map it again. Keep it: it holds the largest scratch a
  // step needs at once, a few MB.
  int pools = 0;
  check(
      cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, ordinal_),
      "asking for memory pools (cudaDeviceGetAttribute)");
  if (pools) {
    cudaMemPool_t pool = nullptr;
    check(cudaDeviceGetDefaultMemPool(&pool, ordinal_),
          "the default memory pool (cudaDeviceGetDefaultMemPool)");
    uint64_t keep = UINT64_MAX;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
          "keeping the memory pool's memory (cudaMemPoolSetAttribute)");
  }
  // Non-blocking: none of the lanes may synchronise with the legacy default
  // stream, which libraries (or a stray cudaMemcpy) use; lanes order their
  // work among themselves only through fences.
  for (cudaStream_t &stream : streams_)
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
          "creating a stream (cudaStreamCreateWithFlags)");
  blas_ = std::make_unique<Blas>(streams_[laneIndex(Lane::Compute)]);
}

CudaDevice::~CudaDevice() {
  makeCurrent("destroying the device");
  // cuBLAS first: its destructor synchronises the device, so nothing queued
  // uses its workspace or the streams below any more.
  blas_.reset();
  for (cudaStream_t stream : streams_) {
    check(cudaStreamSynchronize(stream), "finishing a stream");
    check(cudaStreamDestroy(stream), "destroying a stream");
  }
  // events_ goes with its last fence (normally here).
}

void CudaDevice::check(cudaError_t status, const char *what,
                       int64_t bytes) const {
  if (status == cudaSuccess)
    return;
  // Formatted only on failure: the calls that succeed stay cheap.
  std::string message = name_ + ": " + what;
  if (bytes >= 0)
    message += " of " + std::to_string(bytes) + " bytes";
  cuda::check(status, message.c_str());
}

void CudaDevice::makeCurrent(const char *what) const {
  int current = -1;
  check(cudaGetDevice(&current), what);
  if (current != ordinal_)
    check(cudaSetDevice(ordinal_), what);
}

cudaStream_t CudaDevice::stream(Lane lane) const {
  return streams_[laneIndex(lane)];
}

// Memory is plain cudaMalloc / cudaFree, no caching allocator: a step's
// device memory is a static plan (the compiler's arena and the argument
// buffers), allocated once by the driver, so allocations are few and not on
// the step's path. cudaFree synchronises the device, which is fine there.
void *CudaDevice::allocate(int64_t bytes) {
  makeCurrent("allocate");
  if (bytes <= 0)
    fatal("%s: allocate of %" PRId64 " bytes (must be positive)", name(),
          bytes);
  void *ptr = nullptr;
  cudaError_t status = cudaMalloc(&ptr, static_cast<size_t>(bytes));
  if (status == cudaErrorMemoryAllocation) {
    // Out of memory is the caller's to report, with its statistics. Clear
    // the error so that the next CUDA call does not report it again.
    (void)cudaGetLastError();
    return nullptr;
  }
  // cudaMalloc aligns to at least 256 bytes, beyond the ABI's 64.
  check(status, "allocate (cudaMalloc)", bytes);
  return ptr;
}

void CudaDevice::release(void *ptr) {
  if (!ptr)
    return;
  makeCurrent("release");
  check(cudaFree(ptr), "release (cudaFree)");
}

// Pinned, so that the offload lane's copies run at full bus speed and
// asynchronously to the host; page-aligned.
void *CudaDevice::allocateHost(int64_t bytes) {
  makeCurrent("allocateHost");
  if (bytes <= 0)
    fatal("%s: allocateHost of %" PRId64 " bytes (must be positive)", name(),
          bytes);
  void *ptr = nullptr;
  cudaError_t status = cudaMallocHost(&ptr, static_cast<size_t>(bytes));
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return nullptr;
  }
  check(status, "allocateHost (cudaMallocHost)", bytes);
  return ptr;
}

void CudaDevice::releaseHost(void *ptr) {
  if (!ptr)
    return;
  makeCurrent("releaseHost");
  check(cudaFreeHost(ptr), "releaseHost (cudaFreeHost)");
}

void CudaDevice::copy(Lane lane, void *dst, const void *src, int64_t bytes) {
  if (bytes <= 0 || dst == src)
    return;
  makeCurrent("copy");
  cudaStream_t s = stream(lane);
  size_t n = static_cast<size_t>(bytes);
  // cudaMemcpyDefault: CUDA tells the memory from the pointers, so that a
  // copy that meets host memory is a copy, not undefined behaviour (asrt_copy
  // of a memory=host result from the host arena, a collective of a group of
  // one over host buffers); between device buffers it is the same copy.
  if (!overlaps(dst, src, bytes)) {
    check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s),
          "copy (cudaMemcpyAsync)", bytes);
    return;
  }
  // cudaMemcpy's result is undefined for overlapping ranges. Overlap is
  // rare (generated code moving a view within the arena), so a temporary
  // from the stream-ordered pool is simpler than splitting the copy into
  // non-overlapping chunks, and freed in stream order right after.
  void *staging = nullptr;
  check(cudaMallocAsync(&staging, n, s),
        "overlapping copy: staging buffer (cudaMallocAsync)", bytes);
  check(cudaMemcpyAsync(staging, src, n, cudaMemcpyDefault, s),
        "overlapping copy: to the staging buffer (cudaMemcpyAsync)", bytes);
  check(cudaMemcpyAsync(dst, staging, n, cudaMemcpyDefault, s),
        "overlapping copy: from the staging buffer (cudaMemcpyAsync)", bytes);
  check(cudaFreeAsync(staging, s),
        "overlapping copy: staging buffer (cudaFreeAsync)");
}

void CudaDevice::zero(Lane lane, void *dst, int64_t bytes) {
  if (bytes <= 0)
    return;
  makeCurrent("zero");
  check(cudaMemsetAsync(dst, 0, static_cast<size_t>(bytes), stream(lane)),
        "zero (cudaMemsetAsync)", bytes);
}

// Queued on the lane's stream, so the copy sees what the lane queued
// before; the synchronisation then makes it done on return, as Device
// promises (pageable host memory is only safe to reuse after it anyway).
// cudaMemcpyDefault lets CUDA tell the memory kinds apart: the "device"
// side may be host memory too (a memory=host argument or the host arena,
// which offload's transfers and host-staged collectives move).
void CudaDevice::toHost(Lane lane, void *dstHost, const void *srcDevice,
                        int64_t bytes) {
  if (bytes <= 0)
    return;
  makeCurrent("toHost");
  cudaStream_t s = stream(lane);
  check(cudaMemcpyAsync(dstHost, srcDevice, static_cast<size_t>(bytes),
                        cudaMemcpyDefault, s),
        "toHost (cudaMemcpyAsync)", bytes);
  check(cudaStreamSynchronize(s), "toHost (cudaStreamSynchronize)", bytes);
}

void CudaDevice::toDevice(Lane lane, void *dstDevice, const void *srcHost,
                          int64_t bytes) {
  if (bytes <= 0)
    return;
  makeCurrent("toDevice");
  cudaStream_t s = stream(lane);
  check(cudaMemcpyAsync(dstDevice, srcHost, static_cast<size_t>(bytes),
                        cudaMemcpyDefault, s),
        "toDevice (cudaMemcpyAsync)", bytes);
  check(cudaStreamSynchronize(s), "toDevice (cudaStreamSynchronize)", bytes);
}

std::shared_ptr<void>
CudaDevice::recordEvent(const std::shared_ptr<EventPool> &pool, Lane lane,
                        const char *what) {
  makeCurrent(what);
  cudaEvent_t event = pool->take();
  cudaError_t status = cudaEventRecord(event, stream(lane));
  if (status != cudaSuccess) {
    pool->give(event);
    std::string where = std::string(what) + " on the " + laneName(lane) +
                        " lane (cudaEventRecord)";
    check(status, where.c_str());
  }
  // The deleter holds the pool, not the device: a fence dropped late (on
  // another thread, after the device) still returns its event safely.
  return std::shared_ptr<void>(
      static_cast<void *>(event),
      [pool](void *e) { pool->give(static_cast<cudaEvent_t>(e)); });
}

Fence CudaDevice::fence(Lane lane) {
  return recordEvent(events_, lane, "fence");
}

TimeMark CudaDevice::markTime(Lane lane) {
  return recordEvent(timingEvents_, lane, "time mark");
}

int64_t CudaDevice::elapsedNs(const TimeMark &begin, const TimeMark &end) {
  if (!begin || !end)
    return 0;
  makeCurrent("elapsedNs");
  float ms = 0;
  // Microsecond resolution (CUDA's documentation: about 0.5 us).
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(begin.get()),
                             static_cast<cudaEvent_t>(end.get())),
        "timing an op between two marks (cudaEventElapsedTime)");
  return static_cast<int64_t>(double(ms) * 1e6);
}

void CudaDevice::waitFence(Lane lane, const Fence &fence) {
  if (!fence)
    return;
  makeCurrent("waitFence");
  cudaError_t status = cudaStreamWaitEvent(
      stream(lane), static_cast<cudaEvent_t>(fence.get()), 0);
  if (status != cudaSuccess) {
    std::string what = std::string("waiting on the ") + laneName(lane) +
                       " lane for a fence (cudaStreamWaitEvent)";
    check(status, what.c_str());
  }
}

void CudaDevice::synchronize(Lane lane) {
  makeCurrent("synchronize");
  cudaError_t status = cudaStreamSynchronize(stream(lane));
  if (status != cudaSuccess) {
    // A kernel fault surfaces here: say which lane was waited for.
    std::string what = std::string("synchronizing the ") + laneName(lane) +
                       " lane (cudaStreamSynchronize)";
    check(status, what.c_str());
  }
}

CudaDevice &cudaDevice(asrt_context *ctx, const char *op) {
  if (!ctx)
    fatal("%s: context is null", op);
  auto *device = dynamic_cast<CudaDevice *>(ctx->device.get());
  if (!device)
    fatal("%s: the context's device is %s, not a CUDA device: the CUDA "
          "backend's initBackend has not installed its device (the driver "
          "calls it before the first step; a test must call it too)",
          op, ctx->device ? ctx->device->name() : "missing");
  return *device;
}

} // namespace autoshard::rt::cuda
