// The CUDA emulator's state shared by its parts (Fibers.cpp runs kernels,
// Runtime.cpp is the CUDA runtime API, Blas.cpp is cuBLAS): errors and
// streams. Not included by kernel files; those see CudaEmu.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdarg>

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

/// Whether [p, p + bytes) lies within one live device allocation.
bool isDeviceRange(const void *p, size_t bytes);

} // namespace asrt_emu
