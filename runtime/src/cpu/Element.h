// Storage types of the CPU kernels' activations and their f32 compute type.
#pragma once

#include "core/Context.h"
#include "core/Dtype.h"

#include <cstdint>
#include <type_traits>

/// Before a loop whose iteration i reads and writes element i only: an
/// in-place call (output = input) is then not sent to the scalar loop by the
/// vectorizer's runtime overlap checks. Partially overlapping buffers are
/// not allowed by the ABI anyway.
#if defined(__clang__)
#define ASRT_INDEPENDENT_ITERATIONS                                            \
  _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define ASRT_INDEPENDENT_ITERATIONS _Pragma("GCC ivdep")
#else
#define ASRT_INDEPENDENT_ITERATIONS
#endif

namespace autoshard::rt::cpu {

/// A bfloat16 element as stored in memory. A distinct type (not a bare
/// uint16_t) so that kernel templates cannot confuse it with f16 or u16 and
/// overloads below pick the conversion by type.
struct BFloat16 {
  uint16_t bits;
};
static_assert(sizeof(BFloat16) == 2 && std::is_trivial_v<BFloat16>,
              "BFloat16 must have the layout of a bf16 buffer element");

// Kernels are templates over the storage type T (float or BFloat16); they
// read elements as float, compute in float and store through these, which
// round bf16 to nearest-even (Dtype.h).
inline float load(const float *p, int64_t i) { return p[i]; }
inline float load(const BFloat16 *p, int64_t i) {
  return bf16ToFloat(p[i].bits);
}
inline void store(float *p, int64_t i, float value) { p[i] = value; }
inline void store(BFloat16 *p, int64_t i, float value) {
  p[i].bits = floatToBf16(value);
}

/// dst[0, n) = src[0, n) as float.
template <typename T> void loadRow(const T *src, int64_t n, float *dst) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = load(src, i);
}
/// dst[0, n) = src[0, n), rounded to T.
template <typename T> void storeRow(const float *src, int64_t n, T *dst) {
  for (int64_t i = 0; i < n; ++i)
    store(dst, i, src[i]);
}

/// Calls fn(T{}) with T the storage type of `dtype`; any dtype other than
/// f32 and bf16 is fatal and named with the op. The kernels then cast their
/// void pointers to T inside fn, so each kernel is written once.
template <typename Fn>
void dispatchFloatDtype(const char *op, int32_t dtype, Fn &&fn) {
  switch (dtype) {
  case ASRT_DTYPE_F32:
    fn(float{});
    return;
  case ASRT_DTYPE_BF16:
    fn(BFloat16{});
    return;
  default:
    fatal("%s: dtype %d (%s) is not supported; expected f32 (%d) or bf16 (%d)",
          op, dtype, dtypeName(dtype), ASRT_DTYPE_F32, ASRT_DTYPE_BF16);
  }
}

/// As dispatchFloatDtype, and fn(int32_t{}) for i32: the kernels that
/// only move elements (copies and fills of the view ops), which also move
/// labels and ids.
template <typename Fn>
void dispatchViewDtype(const char *op, int32_t dtype, Fn &&fn) {
  if (dtype == ASRT_DTYPE_I32) {
    fn(int32_t{});
    return;
  }
  if (dtype == ASRT_DTYPE_F32 || dtype == ASRT_DTYPE_BF16) {
    dispatchFloatDtype(op, dtype, fn);
    return;
  }
  fatal("%s: dtype %d (%s) is not supported; expected f32 (%d), bf16 (%d) "
        "or i32 (%d)",
        op, dtype, dtypeName(dtype), ASRT_DTYPE_F32, ASRT_DTYPE_BF16,
        ASRT_DTYPE_I32);
}

} // namespace autoshard::rt::cpu
