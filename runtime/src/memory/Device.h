// Where a backend keeps its tensors and how the runtime moves bytes there.
#pragma once

#include <cstdint>
#include <memory>

namespace autoshard::rt {

/// The three queues of work a context has, each driven by one host thread:
/// the main thread's kernels (Compute), the communication thread's
/// collectives (Comm) and the offload thread's transfers (Offload). On a GPU
/// each is a CUDA stream; on the CPU every operation completes on the
/// calling thread and lanes only document intent.
enum class Lane { Compute, Comm, Offload };

/// A point in one lane's queue (Device::fence): work queued on another
/// lane after waitFence(lane, fence) runs after everything queued before
/// the fence. Null on a device whose operations complete when issued.
using Fence = std::shared_ptr<void>;

/// A point in one lane's queue that the device timestamps when its work
/// gets there (Device::markTime). Null on a device whose operations
/// complete when issued: the host's clock times those.
using TimeMark = std::shared_ptr<void>;

/// A backend's device memory and the runtime's byte movement in it: what
/// asrt_alloc, asrt_copy, the collectives' packing and padding, offload's
/// copies and the driver's staging go through, so that the same runtime
/// code serves host memory (the CPU backend) and GPU memory (the CUDA
/// backend). The context owns one (asrt_context::device); the CPU backend
/// keeps the default, hostDevice(); the CUDA backend's initBackend installs
/// its own before the driver allocates anything.
///
/// Every operation is queued on a lane and runs after what was queued on
/// that lane before it; only the thread that drives a lane may queue on it.
/// copy and zero return once queued; toHost, toDevice and synchronize
/// return once done. Errors (a failed copy, a device fault) are fatal.
class Device {
public:
  virtual ~Device();

  /// "host" or "cuda:0": printed, and named in errors.
  virtual const char *name() const = 0;
  /// True when host code may read and write device memory directly (the
  /// CPU backend): the driver then needs no staging copies.
  virtual bool hostAccessible() const = 0;

  /// `bytes` (> 0) of device memory, at least 64-byte aligned; null when
  /// the device has no room (the caller reports it, with its statistics).
  virtual void *allocate(int64_t bytes) = 0;
  /// A pointer allocate() returned (or null: nothing).
  virtual void release(void *ptr) = 0;
  /// `bytes` (> 0) of host memory the device copies to and from fastest
  /// (pinned on a GPU), 64-byte aligned; null when exhausted.
  virtual void *allocateHost(int64_t bytes) = 0;
  virtual void releaseHost(void *ptr) = 0;

  /// Device to device; the ranges may overlap (memmove semantics).
  virtual void copy(Lane lane, void *dst, const void *src, int64_t bytes) = 0;
  /// Sets `bytes` bytes at dst to zero.
  virtual void zero(Lane lane, void *dst, int64_t bytes) = 0;
  /// Device to host and host to device; done when they return. Host memory
  /// may be pageable or from allocateHost.
  virtual void toHost(Lane lane, void *dstHost, const void *srcDevice,
                      int64_t bytes) = 0;
  virtual void toDevice(Lane lane, void *dstDevice, const void *srcHost,
                        int64_t bytes) = 0;

  /// Marks what `lane` has queued so far (null when nothing can be
  /// pending). Called by the lane's own thread.
  virtual Fence fence(Lane lane) = 0;
  /// Makes `lane`'s later work wait for `fence` (null: nothing to wait).
  virtual void waitFence(Lane lane, const Fence &fence) = 0;
  /// Blocks the calling thread until `lane`'s queued work has completed.
  virtual void synchronize(Lane lane) = 0;

  /// Device-side timing (the driver's --device-op-times): a mark of what
  /// `lane` has queued so far, which the device stamps when it runs there;
  /// null (the default) where operations complete when issued. Called by
  /// the lane's own thread.
  virtual TimeMark markTime(Lane lane);
  /// Nanoseconds the device took from `begin` to `end`, two marks of one
  /// lane, once the lane has passed both (after synchronize). 0 for null
  /// marks.
  virtual int64_t elapsedNs(const TimeMark &begin, const TimeMark &end);
};

/// Grow-only scratch in a device's memory (the buckets' pack buffers):
/// steps repeat the same collectives, so after the first step it allocates
/// nothing. Not counted in the memory statistics, as the communication
/// library's own buffers are not. Its device must outlive it.
class DeviceScratch {
public:
  DeviceScratch() = default;
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch &) = delete;
  DeviceScratch &operator=(const DeviceScratch &) = delete;

  /// At least `bytes` bytes of `device`'s memory, valid until a larger
  /// request; what it held is not kept. A negative size or an exhausted
  /// device is fatal, naming `what`.
  void *reserve(Device &device, int64_t bytes, const char *what);

private:
  Device *owner = nullptr;
  void *buffer = nullptr;
  int64_t capacityBytes = 0;
};

/// Host memory as the device (the CPU backend): aligned_alloc and memmove,
/// every operation done when it returns, no fences.
std::unique_ptr<Device> makeHostDevice();

} // namespace autoshard::rt
