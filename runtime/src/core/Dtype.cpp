// Element types of the ABI: names, sizes, 16-bit float conversions.
#include "core/Dtype.h"

#include <cstring>

#include <cmath>
#include <string>

namespace autoshard::rt {

namespace {
struct DtypeInfo {
  asrt_dtype dtype;
  const char *name;
  const char *safetensorsName;
  int64_t size;
  bool isFloat;
};
// Indexed by the enum value, which the ABI fixes.
constexpr DtypeInfo kDtypes[] = {
    {ASRT_DTYPE_F32, "f32", "F32", 4, true},
    {ASRT_DTYPE_I32, "i32", "I32", 4, false},
    {ASRT_DTYPE_BF16, "bf16", "BF16", 2, true},
    {ASRT_DTYPE_F16, "f16", "F16", 2, true},
    {ASRT_DTYPE_I64, "i64", "I64", 8, false},
    {ASRT_DTYPE_U16, "u16", "U16", 2, false},
};
constexpr int32_t kNumDtypes = sizeof(kDtypes) / sizeof(kDtypes[0]);
} // namespace

bool isValidDtype(int32_t dtype) { return dtype >= 0 && dtype < kNumDtypes; }

int64_t dtypeSize(int32_t dtype) {
  return isValidDtype(dtype) ? kDtypes[dtype].size : 0;
}

const char *dtypeName(int32_t dtype) {
  return isValidDtype(dtype) ? kDtypes[dtype].name : "?";
}

const char *dtypeSafetensorsName(int32_t dtype) {
  return isValidDtype(dtype) ? kDtypes[dtype].safetensorsName : "?";
}

bool parseDtype(std::string_view text, asrt_dtype &dtype) {
  for (const DtypeInfo &info : kDtypes) {
    if (text == info.name) {
      dtype = info.dtype;
      return true;
    }
  }
  return false;
}

const char *dtypeList() { return "f32, i32, bf16, f16, i64, u16"; }

bool isFloatDtype(int32_t dtype) {
  return isValidDtype(dtype) && kDtypes[dtype].isFloat;
}

bool isIntegerDtype(int32_t dtype) {
  return isValidDtype(dtype) && !kDtypes[dtype].isFloat;
}

const char *reduceOpName(int32_t op) {
  switch (op) {
  case ASRT_REDUCE_SUM:
    return "sum";
  case ASRT_REDUCE_AVG:
    return "avg";
  case ASRT_REDUCE_MAX:
    return "max";
  case ASRT_REDUCE_MIN:
    return "min";
  }
  return "?";
}

Status checkReduction(int32_t dtype, int32_t op) {
  if (op < ASRT_REDUCE_SUM || op > ASRT_REDUCE_MIN)
    return Error("reduce_op " + std::to_string(op) +
                 " is not an asrt_reduce_op; expected 0 (sum), 1 (avg), "
                 "2 (max) or 3 (min)");
  if (!isValidDtype(dtype))
    return Error("dtype " + std::to_string(dtype) +
                 " is not an asrt_dtype; expected 0..5 (" + dtypeList() + ")");
  if (dtype == ASRT_DTYPE_F16 || dtype == ASRT_DTYPE_U16)
    return Error(std::string("reductions of ") + dtypeName(dtype) +
                 " are not supported; reduce f32, i32, i64 or bf16");
  if (op == ASRT_REDUCE_AVG && isIntegerDtype(dtype))
    return Error(std::string("avg of ") + dtypeName(dtype) +
                 " would truncate; average only f32 or bf16 (or use sum)");
  return Status::success();
}

float f16ToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31)
    return floatFromBits(sign | 0x7f800000u | (mantissa << 13));
  return floatFromBits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

uint16_t floatToF16(float f) {
  uint32_t bits = floatBits(f);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u)
    return sign | 0x7e00u;
  // 65520 and above round to infinity (65504 is the largest finite half).
  if (magnitude >= 0x477ff000u)
    return sign | 0x7c00u;
  if (magnitude < 0x38800000u) {
    // Below 2^-14 the result is subnormal: round |f| * 2^24 to an integer.
    // Scaling by a power of two is exact, and nearbyint rounds to even in
    // the default rounding mode.
    float scaled = floatFromBits(magnitude) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  // Rebias the exponent (127 -> 15) and round the mantissa from 23 to 10
  // bits; a carry out of the mantissa correctly bumps the exponent.
  uint32_t rebiased = magnitude - (112u << 23);
  rebiased += 0xfffu + ((rebiased >> 13) & 1u);
  return sign | static_cast<uint16_t>(rebiased >> 13);
}

void storeElement(void *buffer, int32_t dtype, int64_t index, double value) {
  switch (dtype) {
  case ASRT_DTYPE_F32:
    static_cast<float *>(buffer)[index] = static_cast<float>(value);
    return;
  case ASRT_DTYPE_I32:
    static_cast<int32_t *>(buffer)[index] = static_cast<int32_t>(value);
    return;
  case ASRT_DTYPE_BF16:
    static_cast<uint16_t *>(buffer)[index] =
        floatToBf16(static_cast<float>(value));
    return;
  case ASRT_DTYPE_F16:
    static_cast<uint16_t *>(buffer)[index] =
        floatToF16(static_cast<float>(value));
    return;
  case ASRT_DTYPE_I64:
    static_cast<int64_t *>(buffer)[index] = static_cast<int64_t>(value);
    return;
  case ASRT_DTYPE_U16:
    static_cast<uint16_t *>(buffer)[index] = static_cast<uint16_t>(value);
    return;
  }
}

double loadElement(const void *buffer, int32_t dtype, int64_t index) {
  // Copied out rather than dereferenced: the buffer may be unaligned (an
  // asdata field in a mapped file starts wherever its header ends).
  auto load = [&](auto value) {
    std::memcpy(&value,
                static_cast<const char *>(buffer) + index * sizeof value,
                sizeof value);
    return value;
  };
  switch (dtype) {
  case ASRT_DTYPE_F32:
    return load(float());
  case ASRT_DTYPE_I32:
    return load(int32_t());
  case ASRT_DTYPE_BF16:
    return bf16ToFloat(load(uint16_t()));
  case ASRT_DTYPE_F16:
    return f16ToFloat(load(uint16_t()));
  case ASRT_DTYPE_I64:
    return static_cast<double>(load(int64_t()));
  case ASRT_DTYPE_U16:
    return load(uint16_t());
  }
  return 0.0;
}

} // namespace autoshard::rt
