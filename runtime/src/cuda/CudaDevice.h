// One GPU as the runtime's Device: its memory, a stream per lane, cuBLAS.
#pragma once

#include "Cuda.h"

#include "memory/Device.h"

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>

namespace autoshard::rt::cuda {

/// The CUDA backend's device (memory/Device.h) for the GPU of one rank: device
/// memory from cudaMalloc, pinned host memory, and one non-blocking stream
/// per lane, so that compute, collectives and offload copies queue apart and
/// meet only where a fence says so. Owns the cuBLAS handle of the compute
/// stream. The CUDA backend's initBackend installs one in the context.
///
/// Any thread may call it (each lane's own thread queues on that lane);
/// every method first makes this GPU current on the calling thread, since
/// the communication and offload threads are started by the runtime core,
/// which knows nothing of CUDA. Every CUDA error is fatal, naming the
/// operation and the device.
class CudaDevice final : public Device {
public:
  /// Makes `ordinal` current on the calling thread and creates the streams
  /// and the cuBLAS handle.
  explicit CudaDevice(int ordinal);
  /// Waits for every lane, then releases the handle, streams and events.
  ~CudaDevice() override;
  CudaDevice(const CudaDevice &) = delete;
  CudaDevice &operator=(const CudaDevice &) = delete;

  const char *name() const override { return name_.c_str(); }
  bool hostAccessible() const override { return false; }

  void *allocate(int64_t bytes) override;
  void release(void *ptr) override;
  void *allocateHost(int64_t bytes) override;
  void releaseHost(void *ptr) override;

  void copy(Lane lane, void *dst, const void *src, int64_t bytes) override;
  void zero(Lane lane, void *dst, int64_t bytes) override;
  void toHost(Lane lane, void *dstHost, const void *srcDevice,
              int64_t bytes) override;
  void toDevice(Lane lane, void *dstDevice, const void *srcHost,
                int64_t bytes) override;

  /// A CUDA event recorded on the lane's stream; the last copy of the fence
  /// to go returns the event to a pool for the next fence.
  Fence fence(Lane lane) override;
  void waitFence(Lane lane, const Fence &fence) override;
  void synchronize(Lane lane) override;
  /// An event of a timing pool recorded on the lane's stream, and the
  /// device's time between two of them.
  TimeMark markTime(Lane lane) override;
  int64_t elapsedNs(const TimeMark &begin, const TimeMark &end) override;

  /// The stream `lane`'s work is queued on.
  cudaStream_t stream(Lane lane) const;
  /// cuBLAS bound to the compute stream (the linear layers).
  Blas &blas() { return *blas_; }
  /// The CUDA device ordinal, as cudaSetDevice takes it.
  int ordinal() const { return ordinal_; }
  /// Makes this GPU the calling thread's current device, as kernel launches
  /// on its streams require; cheap when it already is. `what` names the
  /// caller in the error.
  void makeCurrent(const char *what) const;

private:
  /// The fences' events, reused (CudaDevice.cpp).
  class EventPool;

  /// An event of `pool` recorded on `lane`'s stream, returned to the pool
  /// when the last copy goes; `what` names the caller in errors.
  std::shared_ptr<void> recordEvent(const std::shared_ptr<EventPool> &pool,
                                    Lane lane, const char *what);

  /// Fatal unless `status` is cudaSuccess, naming this device, `what` and,
  /// when not negative, the bytes involved.
  void check(cudaError_t status, const char *what, int64_t bytes = -1) const;

  int ordinal_;
  std::string name_;
  std::array<cudaStream_t, 3> streams_{};
  std::unique_ptr<Blas> blas_;
  /// Shared with the fences (and time marks), which may be dropped on any
  /// thread.
  std::shared_ptr<EventPool> events_, timingEvents_;
};

/// The context's device as the CUDA backend's; fatal, naming `op`, when
/// `ctx` is null or its device is not a CudaDevice (the CUDA backend's
/// initBackend has not run on it).
CudaDevice &cudaDevice(asrt_context *ctx, const char *op);

} // namespace autoshard::rt::cuda
