// The CUDA emulator's runtime API: the cudart functions the backend and its
// tests call, on emulated devices whose memory is host memory.
//
// The emulated machine has ASRT_CUDA_EMU_DEVICES GPUs (default 8, as an
// HGX node), each with its own UUID, the same in every process on the host
// as a real machine's are: ranks on local ranks 0 and 1 get different
// GPUs, and ASRT_CUDA_EMU_DEVICES=1 makes them share one. The current
// device is per host thread (cudaSetDevice), so that one process can run a
// rank per device on threads; the devices share the one memory capacity
// below, and their streams are one set.
//
// Asynchronous calls check their arguments at once and queue the work on
// their stream (Streams.cpp), which runs it when something waits for it;
// synchronous ones first run what the legacy stream would wait for. What
// it checks, as CUDA does or more strictly: launch configurations
// and streams (Fibers.cpp), copy directions against live device
// allocations, double or foreign frees, and a device memory limit
// (ASRT_CUDA_EMU_MEMORY_MIB, default 4096) so that out-of-memory paths run.
#include "EmuState.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>

namespace asrt_emu {
namespace {

thread_local cudaError_t lastError = cudaSuccess;
std::atomic<int> sticky{cudaSuccess};

/// The integer environment variable `name`, `fallback` when unset or
/// empty; anything but a whole number in [min, max] ends the process with
/// a message naming the variable (a typo must not silently mean the
/// default).
long long envInteger(const char *name, long long fallback, long long min,
                     long long max) {
  const char *text = std::getenv(name);
  if (!text || !*text)
    return fallback;
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < min || value > max) {
    std::fprintf(stderr,
                 "CUDA emulator: %s='%s': expected a whole number from %lld "
                 "to %lld (unset: %lld)\n",
                 name, text, min, max, fallback);
    std::exit(2);
  }
  return value;
}

/// The device's allocations. One mutex: the backend's communication thread
/// calls CUDA too.
struct Device {
  std::mutex mutex;
  // Device memory: start -> the bytes asked for (what range checks use;
  // the allocation itself is rounded up to kAlignment).
  std::map<uintptr_t, size_t> allocations;
  std::set<void *> pinned;                 // cudaMallocHost
  size_t used = 0;
  size_t capacity =
      size_t(envInteger("ASRT_CUDA_EMU_MEMORY_MIB", 4096, 1, 1 << 24)) << 20;
};

Device &device() {
  static Device *d = new Device; // never destroyed: used until exit
  return *d;
}

/// How many devices the emulated machine has.
int deviceCount() {
  static const int count =
      static_cast<int>(envInteger("ASRT_CUDA_EMU_DEVICES", 8, 1, 64));
  return count;
}

bool validOrdinal(int ordinal) { return ordinal >= 0 && ordinal < deviceCount(); }

thread_local int currentOrdinal = 0;

/// Alignment of every emulated allocation, as cudaMalloc guarantees.
constexpr size_t kAlignment = 256;

cudaError_t fail(cudaError_t error) {
  lastError = error;
  return error;
}

/// The sticky error if there is one, else cudaSuccess: every call starts
/// with it, as CUDA's do after a kernel fault.
cudaError_t broken() { return cudaError_t(sticky.load()); }

cudaError_t allocate(void **ptr, size_t bytes) {
  if (!ptr)
    return fail(cudaErrorInvalidValue);
  if (cudaError_t e = broken())
    return e;
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  size_t rounded = std::max<size_t>(1, (bytes + kAlignment - 1) / kAlignment *
                                           kAlignment);
  if (bytes > d.capacity || d.used + rounded > d.capacity)
    return fail(cudaErrorMemoryAllocation);
  // The size asked for, not `rounded`: under AddressSanitizer a kernel
  // that reads or writes a byte past it is caught.
  void *p = nullptr;
  if (posix_memalign(&p, kAlignment, std::max<size_t>(1, bytes)) != 0)
    return fail(cudaErrorMemoryAllocation);
  // Fresh device memory holds garbage: make it NaN-like, not zero, so a
  // kernel that reads what nobody wrote is caught by the comparisons.
  std::memset(p, 0xff, bytes);
  d.allocations[uintptr_t(p)] = std::max<size_t>(1, bytes);
  d.used += rounded;
  *ptr = p;
  return cudaSuccess;
}

bool isAllocation(void *ptr) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  return d.allocations.count(uintptr_t(ptr)) != 0;
}

/// Frees a live device allocation (checked by the caller).
void releaseNow(void *ptr) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  auto it = d.allocations.find(uintptr_t(ptr));
  if (it == d.allocations.end())
    return; // freed twice in stream order: reported when it was queued
  d.used -= std::max<size_t>(1, (it->second + kAlignment - 1) / kAlignment *
                                    kAlignment);
  d.allocations.erase(it);
  std::free(ptr);
}

/// cudaFree / cudaFreeAsync on `stream`.
cudaError_t release(void *ptr, cudaStream_t stream) {
  if (cudaError_t e = broken())
    return e;
  if (!ptr)
    return cudaSuccess;
  if (!isAllocation(ptr))
    return fail(cudaErrorInvalidValue); // not a live device allocation
  if (!enqueue(stream, [ptr] { releaseNow(ptr); }))
    return fail(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

/// cudaMemcpyAsync on `stream` (cudaMemcpy: the null stream).
cudaError_t copy(void *dst, const void *src, size_t count,
                 cudaMemcpyKind kind, cudaStream_t stream) {
  if (cudaError_t e = broken())
    return e;
  if (count == 0)
    return cudaSuccess;
  if (!dst || !src)
    return fail(cudaErrorInvalidValue);
  bool dstDevice = isDeviceRange(dst, count);
  bool srcDevice = isDeviceRange(src, count);
  bool ok = true;
  switch (kind) {
  case cudaMemcpyHostToHost:
    ok = !dstDevice && !srcDevice;
    break;
  case cudaMemcpyHostToDevice:
    ok = dstDevice && !srcDevice;
    break;
  case cudaMemcpyDeviceToHost:
    ok = !dstDevice && srcDevice;
    break;
  case cudaMemcpyDeviceToDevice:
    ok = dstDevice && srcDevice;
    break;
  case cudaMemcpyDefault:
    break;
  default:
    ok = false;
  }
  if (!ok)
    return fail(cudaErrorInvalidMemcpyDirection);
  if (!enqueue(stream, [dst, src, count] { std::memmove(dst, src, count); }))
    return fail(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

} // namespace

void setLastError(cudaError_t error) { lastError = error; }
cudaError_t stickyError() { return broken(); }

void setStickyError(cudaError_t error, const char *format, ...) {
  std::fprintf(stderr, "CUDA emulator: ");
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fprintf(stderr, "\n");
  int expected = cudaSuccess;
  sticky.compare_exchange_strong(expected, error);
}

bool isDeviceRange(const void *p, size_t bytes) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  auto it = d.allocations.upper_bound(uintptr_t(p));
  if (it == d.allocations.begin())
    return false;
  --it;
  return uintptr_t(p) + bytes <= it->first + it->second;
}

} // namespace asrt_emu

using namespace asrt_emu;

// ---- Errors and the device ----

cudaError_t cudaGetLastError() {
  if (cudaError_t e = broken())
    return e;
  cudaError_t e = lastError;
  lastError = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() {
  if (cudaError_t e = broken())
    return e;
  return lastError;
}

const char *cudaGetErrorName(cudaError_t error) {
  switch (error) {
  case cudaSuccess: return "cudaSuccess";
  case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
  case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
  case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
  case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
  case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
  case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
  case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
  case cudaErrorNoDevice: return "cudaErrorNoDevice";
  case cudaErrorNotReady: return "cudaErrorNotReady";
  default: return "cudaErrorUnknown";
  }
}

const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess: return "no error";
  case cudaErrorInvalidValue: return "invalid argument";
  case cudaErrorMemoryAllocation: return "out of memory";
  case cudaErrorInvalidConfiguration: return "invalid configuration argument";
  case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
  case cudaErrorInvalidResourceHandle: return "invalid resource handle";
  case cudaErrorInvalidDevice: return "invalid device ordinal";
  case cudaErrorLaunchFailure: return "unspecified launch failure";
  case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
  case cudaErrorNoDevice: return "no CUDA-capable device is detected";
  case cudaErrorNotReady: return "device not ready";
  default: return "unknown error";
  }
}

cudaError_t cudaGetDeviceCount(int *count) {
  if (!count)
    return fail(cudaErrorInvalidValue);
  *count = deviceCount();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int ordinal) {
  if (cudaError_t e = broken())
    return e;
  if (!validOrdinal(ordinal))
    return fail(cudaErrorInvalidDevice);
  currentOrdinal = ordinal;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *ordinal) {
  if (!ordinal)
    return fail(cudaErrorInvalidValue);
  *ordinal = currentOrdinal;
  return broken();
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int ordinal) {
  if (!prop)
    return fail(cudaErrorInvalidValue);
  if (!validOrdinal(ordinal))
    return fail(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "autoshard CUDA emulator");
  // 16 bytes: "asrt-emu-gpu-" and the ordinal in three digits.
  char uuid[sizeof prop->uuid.bytes + 1];
  std::snprintf(uuid, sizeof uuid, "asrt-emu-gpu-%03d", ordinal);
  std::memcpy(prop->uuid.bytes, uuid, sizeof prop->uuid.bytes);
  prop->totalGlobalMem = device().capacity;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 1;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->sharedMemPerBlock = 48 << 10;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr,
                                   int ordinal) {
  if (!value)
    return fail(cudaErrorInvalidValue);
  if (!validOrdinal(ordinal))
    return fail(cudaErrorInvalidDevice);
  switch (attr) {
  case cudaDevAttrMemoryPoolsSupported: *value = 1; break;
  case cudaDevAttrWarpSize: *value = 32; break;
  case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
  case cudaDevAttrMultiProcessorCount: *value = 1; break;
  case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
  case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
  default: return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int ordinal) {
  if (!pool)
    return fail(cudaErrorInvalidValue);
  if (!validOrdinal(ordinal))
    return fail(cudaErrorInvalidDevice);
  static int thePool;
  *pool = reinterpret_cast<cudaMemPool_t>(&thePool);
  return broken();
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr,
                                    void *value) {
  // The emulator's pool is malloc: its attributes change nothing.
  return pool && value ? broken() : fail(cudaErrorInvalidValue);
}

cudaError_t cudaDeviceSynchronize() {
  synchronizeDevice();
  return broken();
}

cudaError_t cudaMemGetInfo(size_t *freeBytes, size_t *totalBytes) {
  if (!freeBytes || !totalBytes)
    return fail(cudaErrorInvalidValue);
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  *totalBytes = d.capacity;
  *freeBytes = d.capacity - d.used;
  return broken();
}

// ---- Memory ----

cudaError_t cudaMalloc(void **ptr, size_t bytes) { return allocate(ptr, bytes); }

cudaError_t cudaFree(void *ptr) {
  synchronizeDevice(); // as CUDA's cudaFree does
  return release(ptr, nullptr);
}

cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t stream) {
  if (!validStream(stream))
    return fail(cudaErrorInvalidResourceHandle);
  return allocate(ptr, bytes);
}

cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream) {
  if (!validStream(stream))
    return fail(cudaErrorInvalidResourceHandle);
  return release(ptr, stream);
}

cudaError_t cudaMallocHost(void **ptr, size_t bytes) {
  if (!ptr)
    return fail(cudaErrorInvalidValue);
  if (cudaError_t e = broken())
    return e;
  void *p = std::aligned_alloc(kAlignment, std::max<size_t>(
      1, (bytes + kAlignment - 1) / kAlignment * kAlignment));
  if (!p)
    return fail(cudaErrorMemoryAllocation);
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  d.pinned.insert(p);
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void *ptr) {
  if (cudaError_t e = broken())
    return e;
  if (!ptr)
    return cudaSuccess;
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  if (!d.pinned.erase(ptr))
    return fail(cudaErrorInvalidValue);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
                       cudaMemcpyKind kind) {
  return copy(dst, src, count, kind, nullptr);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                            cudaMemcpyKind kind, cudaStream_t stream) {
  if (!validStream(stream))
    return fail(cudaErrorInvalidResourceHandle);
  return copy(dst, src, count, kind, stream);
}

cudaError_t cudaMemset(void *ptr, int value, size_t count) {
  return cudaMemsetAsync(ptr, value, count, nullptr);
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count,
                            cudaStream_t stream) {
  if (cudaError_t e = broken())
    return e;
  if (!validStream(stream))
    return fail(cudaErrorInvalidResourceHandle);
  if (count == 0)
    return cudaSuccess;
  if (!isDeviceRange(ptr, count))
    return fail(cudaErrorInvalidValue);
  enqueue(stream, [ptr, value, count] { std::memset(ptr, value, count); });
  return cudaSuccess;
}

// ---- Streams and events (Streams.cpp) ----

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
  if (!stream)
    return fail(cudaErrorInvalidValue);
  if (cudaError_t e = broken())
    return e;
  *stream = createStream(!(flags & cudaStreamNonBlocking));
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream || !destroyStream(stream))
    return fail(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!synchronizeStream(stream))
    return fail(cudaErrorInvalidResourceHandle);
  return broken();
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (cudaError_t e = broken())
    return e;
  cudaError_t status = queryStream(stream);
  // Not ready is an answer, not an error: CUDA does not record it.
  return status == cudaSuccess || status == cudaErrorNotReady ? status
                                                              : fail(status);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags) {
  if (!event)
    return fail(cudaErrorInvalidValue);
  if (cudaError_t e = broken())
    return e;
  *event = createEvent(!(flags & cudaEventDisableTiming));
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  return destroyEvent(event) ? cudaSuccess
                             : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (cudaError_t e = broken())
    return e;
  cudaError_t status = recordEvent(event, stream);
  return status == cudaSuccess ? status : fail(status);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  cudaError_t status = synchronizeEvent(event);
  if (status != cudaSuccess)
    return fail(status);
  return broken();
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start,
                                 cudaEvent_t end) {
  if (cudaError_t e = broken())
    return e;
  if (!ms)
    return fail(cudaErrorInvalidValue);
  cudaError_t status = eventMilliseconds(start, end, ms);
  return status == cudaSuccess ? status : fail(status);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned) {
  if (cudaError_t e = broken())
    return e;
  cudaError_t status = waitEvent(stream, event);
  return status == cudaSuccess ? status : fail(status);
}
