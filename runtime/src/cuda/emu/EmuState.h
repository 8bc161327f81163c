// The CUDA emulator's state shared by its parts (Fibers.cpp runs kernels,
// Runtime.cpp is the CUDA runtime API, Blas.cpp is cuBLAS): errors and
// streams. Not included by kernel files; those see CudaEmu.h.
#pragma once

#include <cuda_runtime_api.h>
#include <library_types.h>

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace asrt_emu {

/// The error cudaGetLastError returns and clears (per host thread).
void setLastError(cudaError_t error);
/// An error that every later CUDA call returns (a kernel trapped or broke
/// the emulator's rules), or cudaSuccess.
cudaError_t stickyError();
/// Makes `error` sticky, printing the emulator's reason on stderr.
void setStickyError(cudaError_t error, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/// Whether `stream` is the null stream or one created and not destroyed.
bool validStream(cudaStream_t stream);

/// The elements of the emulated BLAS (Blas.cpp): f32 (CUDA_R_32F) or bf16
/// (CUDA_R_16BF), element i of `base`, read as a double or stored rounded.
size_t elementBytes(cudaDataType type);
double loadElement(const void *base, cudaDataType type, int64_t i);
void storeElement(void *base, cudaDataType type, int64_t i, float v);

// ---- Streams and events (Streams.cpp) ----

/// Queues `op` on `stream`, to run when the stream is synchronized with or
/// waited for; on the null stream, runs it at once (after the blocking
/// streams' queued work). False if the stream is not live.
bool enqueue(cudaStream_t stream, std::function<void()> op);
/// Work that a stream starts when it reaches it and that finishes on
/// another host thread (an emulated NCCL collective, on its
/// communicator's thread). `start` runs once, after everything queued
/// before it; `done` says, without blocking, whether it has finished;
/// `wait` blocks until it has. The stream's later work runs after it.
struct AsyncOp {
  virtual ~AsyncOp() = default;
  virtual void start() = 0;
  virtual bool done() = 0;
  virtual void wait() = 0;
};
bool enqueueAsync(cudaStream_t stream, std::shared_ptr<AsyncOp> op);
/// cudaStreamQuery: runs `stream`'s queued work up to the first
/// asynchronous operation that has not finished (starting it);
/// cudaSuccess when nothing is left, cudaErrorNotReady otherwise (also
/// while another thread runs the queue), cudaErrorInvalidResourceHandle
/// for a stream that is not live.
cudaError_t queryStream(cudaStream_t stream);
cudaStream_t createStream(bool blocking);
/// Runs the stream's queued work, then forgets the stream.
bool destroyStream(cudaStream_t stream);
/// Runs everything queued on `stream` (the null stream: on the blocking
/// streams); on every stream.
bool synchronizeStream(cudaStream_t stream);
void synchronizeDevice();
cudaEvent_t createEvent(bool timing);
bool destroyEvent(cudaEvent_t event);
/// cudaEventRecord, cudaStreamWaitEvent, cudaEventSynchronize and
/// cudaEventElapsedTime (cudaErrorNotReady for a record not yet run).
cudaError_t recordEvent(cudaEvent_t event, cudaStream_t stream);
cudaError_t waitEvent(cudaStream_t stream, cudaEvent_t event);
cudaError_t synchronizeEvent(cudaEvent_t event);
cudaError_t eventMilliseconds(cudaEvent_t start, cudaEvent_t end, float *ms);

/// Whether [p, p + bytes) lies within one live device allocation.
bool isDeviceRange(const void *p, size_t bytes);

} // namespace asrt_emu
