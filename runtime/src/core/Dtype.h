// Element types of the ABI: names, sizes, 16-bit float conversions.
#pragma once

#include "autoshard/rt/abi.h"
#include "core/Expected.h"

#include <cstdint>
#include <cstring>
#include <string_view>

namespace autoshard::rt {

/// True for the values the asrt_dtype enum defines.
bool isValidDtype(int32_t dtype);
/// Bytes per element; 0 for a value that is not an asrt_dtype.
int64_t dtypeSize(int32_t dtype);
/// The manifest spelling ("f32", "bf16", ...); "?" for an invalid value.
const char *dtypeName(int32_t dtype);
/// The safetensors spelling ("F32", "BF16", ...); "?" for an invalid value.
const char *dtypeSafetensorsName(int32_t dtype);
/// Parses a manifest spelling; false when `text` names no dtype.
bool parseDtype(std::string_view text, asrt_dtype &dtype);
/// "f32, i32, bf16, f16, i64, u16", for diagnostics.
const char *dtypeList();

bool isFloatDtype(int32_t dtype);
bool isIntegerDtype(int32_t dtype);

/// Whether the collectives can reduce `dtype` with `op`: sums, maxima and
/// minima of f32, i32, i64 and bf16; averages of f32 and bf16 only, since an
/// integer average would silently truncate.
Status checkReduction(int32_t dtype, int32_t op);
const char *reduceOpName(int32_t op);

inline uint32_t floatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}
inline float floatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// bfloat16 is the top half of a float32.
inline float bf16ToFloat(uint16_t h) {
  return floatFromBits(static_cast<uint32_t>(h) << 16);
}
/// Round to nearest even; NaN stays a (quiet) NaN instead of rounding to Inf.
inline uint16_t floatToBf16(float f) {
  uint32_t bits = floatBits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

/// IEEE binary16 conversions, round to nearest even, with subnormals.
float f16ToFloat(uint16_t h);
uint16_t floatToF16(float f);

/// Stores `value` as element `index` of a buffer of `dtype`. Integer dtypes
/// truncate toward zero; callers pass integral values for them.
void storeElement(void *buffer, int32_t dtype, int64_t index, double value);
/// Reads element `index` of a buffer of `dtype` as a double; the buffer
/// need not be aligned to the dtype.
double loadElement(const void *buffer, int32_t dtype, int64_t index);

} // namespace autoshard::rt
