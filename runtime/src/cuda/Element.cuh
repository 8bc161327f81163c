// Loads and stores of the backend's float types on the device: every kernel
// computes in f32 and rounds a bf16 output once (round to nearest-even), as
// the CPU backend does.
#pragma once

#include "autoshard/rt/abi.h"

#include <cuda_bf16.h>

#include <cstdint>

namespace autoshard::rt::cuda {

__device__ __forceinline__ float load(const float *p, int64_t i) {
  return p[i];
}
__device__ __forceinline__ float load(const __nv_bfloat16 *p, int64_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ void store(float *p, int64_t i, float v) {
  p[i] = v;
}
__device__ __forceinline__ void store(__nv_bfloat16 *p, int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

/// Calls fn(float{}) or fn(__nv_bfloat16{}) for an f32 or bf16 dtype code;
/// fatal for anything else, naming `op`.
void badDtype(const char *op, int32_t dtype);
template <typename Fn> void dispatchFloat(const char *op, int32_t dtype, Fn fn) {
  if (dtype == ASRT_DTYPE_F32)
    fn(float{});
  else if (dtype == ASRT_DTYPE_BF16)
    fn(__nv_bfloat16{});
  else
    badDtype(op, dtype);
}

/// As dispatchFloat, and fn(int32_t{}) for i32: the kernels that only move
/// elements (copies and fills of the view ops), which also move labels.
void badViewDtype(const char *op, int32_t dtype);
template <typename Fn>
void dispatchView(const char *op, int32_t dtype, Fn fn) {
  if (dtype == ASRT_DTYPE_I32)
    fn(int32_t{});
  else if (dtype == ASRT_DTYPE_F32 || dtype == ASRT_DTYPE_BF16)
    dispatchFloat(op, dtype, fn);
  else
    badViewDtype(op, dtype);
}

/// Fatal, naming the kernel, when its launch failed.
void checkLaunch(const char *op);

} // namespace autoshard::rt::cuda
