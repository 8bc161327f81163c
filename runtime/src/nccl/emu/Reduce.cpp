// The emulated NCCL's arithmetic.
#include "Reduce.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace asrt_nccl_emu {
namespace {

/// bfloat16 as its bits: widened exactly, narrowed to nearest-even.
struct Bf16 {
  uint16_t bits;
};
float widen(Bf16 v) {
  uint32_t bits = uint32_t(v.bits) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}
Bf16 narrow(float v, Bf16 *) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  if (std::isnan(v))
    return {uint16_t((bits >> 16) | 0x40)}; // stays a NaN
  bits += 0x7fff + ((bits >> 16) & 1);
  return {uint16_t(bits >> 16)};
}
float widen(_Float16 v) { return static_cast<float>(v); }
_Float16 narrow(float v, _Float16 *) { return static_cast<_Float16>(v); }

/// Arithmetic in `Wide`, stored as `T`.
template <typename T> struct Traits {
  using Wide = T;
  static Wide up(T v) { return v; }
  static T down(Wide v) { return v; }
};
template <> struct Traits<Bf16> {
  using Wide = float;
  static float up(Bf16 v) { return widen(v); }
  static Bf16 down(float v) { return narrow(v, static_cast<Bf16 *>(nullptr)); }
};
template <> struct Traits<_Float16> {
  using Wide = float;
  static float up(_Float16 v) { return widen(v); }
  static _Float16 down(float v) {
    return narrow(v, static_cast<_Float16 *>(nullptr));
  }
};

template <typename T>
void combineAs(void *acc, const void *in, size_t n, ncclRedOp_t op) {
  using Tr = Traits<T>;
  auto *a = static_cast<T *>(acc);
  const auto *b = static_cast<const T *>(in);
  for (size_t i = 0; i < n; ++i) {
    typename Tr::Wide x = Tr::up(a[i]), y = Tr::up(b[i]), r;
    switch (op) {
    case ncclProd:
      r = x * y;
      break;
    case ncclMax:
      r = std::max(x, y);
      break;
    case ncclMin:
      r = std::min(x, y);
      break;
    default: // ncclSum, ncclAvg
      r = x + y;
      break;
    }
    a[i] = Tr::down(r);
  }
}

template <typename T> void scaleAs(void *data, size_t n, double factor) {
  using Tr = Traits<T>;
  auto *d = static_cast<T *>(data);
  for (size_t i = 0; i < n; ++i)
    d[i] = Tr::down(static_cast<typename Tr::Wide>(Tr::up(d[i]) * factor));
}

template <typename T> void divideAs(void *data, size_t n, int divisor) {
  auto *d = static_cast<T *>(data);
  for (size_t i = 0; i < n; ++i)
    d[i] = static_cast<T>(d[i] / static_cast<T>(divisor));
}

/// Calls f.template operator()<T>() for the C++ type of `type`.
template <typename F> void dispatch(ncclDataType_t type, F &&f) {
  switch (type) {
  case ncclInt8:
    return f(int8_t{});
  case ncclUint8:
    return f(uint8_t{});
  case ncclInt32:
    return f(int32_t{});
  case ncclUint32:
    return f(uint32_t{});
  case ncclInt64:
    return f(int64_t{});
  case ncclUint64:
    return f(uint64_t{});
  case ncclFloat16:
    return f(_Float16{});
  case ncclFloat32:
    return f(float{});
  case ncclFloat64:
    return f(double{});
  case ncclBfloat16:
    return f(Bf16{});
  default:
    return; // refused before any collective runs (elementSize 0)
  }
}

} // namespace

size_t elementSize(ncclDataType_t type) {
  size_t size = 0;
  dispatch(type, [&](auto v) { size = sizeof v; });
  return size;
}

bool isFloating(ncclDataType_t type) {
  return type == ncclFloat16 || type == ncclFloat32 || type == ncclFloat64 ||
         type == ncclBfloat16;
}

const char *typeName(ncclDataType_t type) {
  switch (type) {
  case ncclInt8: return "ncclInt8";
  case ncclUint8: return "ncclUint8";
  case ncclInt32: return "ncclInt32";
  case ncclUint32: return "ncclUint32";
  case ncclInt64: return "ncclInt64";
  case ncclUint64: return "ncclUint64";
  case ncclFloat16: return "ncclFloat16";
  case ncclFloat32: return "ncclFloat32";
  case ncclFloat64: return "ncclFloat64";
  case ncclBfloat16: return "ncclBfloat16";
  case ncclFloat8e4m3: return "ncclFloat8e4m3";
  case ncclFloat8e5m2: return "ncclFloat8e5m2";
  default: return "an unknown ncclDataType_t";
  }
}

const char *opName(ncclRedOp_t op) {
  switch (op) {
  case ncclSum: return "ncclSum";
  case ncclProd: return "ncclProd";
  case ncclMax: return "ncclMax";
  case ncclMin: return "ncclMin";
  case ncclAvg: return "ncclAvg";
  default: return "an unknown ncclRedOp_t";
  }
}

void combine(void *acc, const void *in, size_t n, ncclDataType_t type,
             ncclRedOp_t op) {
  dispatch(type, [&](auto v) { combineAs<decltype(v)>(acc, in, n, op); });
}

void scale(void *data, size_t n, ncclDataType_t type, double factor) {
  dispatch(type, [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_same_v<T, Bf16> || std::is_floating_point_v<T> ||
                  std::is_same_v<T, _Float16>)
      scaleAs<T>(data, n, factor);
  });
}

void divide(void *data, size_t n, ncclDataType_t type, int divisor) {
  dispatch(type, [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_integral_v<T>)
      divideAs<T>(data, n, divisor);
  });
}

} // namespace asrt_nccl_emu
