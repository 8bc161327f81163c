// Deterministic initialisation of params, optimizer states and hypers.
#include "core/Init.h"
#include "core/Dtype.h"
#include "data/Philox.h"

#include <cmath>
#include <cstdint>
#include <string>

namespace autoshard::rt {

Status checkInitForDtype(const InitSpec &init, asrt_dtype dtype) {
  if (!isValidDtype(dtype))
    return Error("dtype " + std::to_string(dtype) + " is not an asrt_dtype");
  if (isFloatDtype(dtype))
    return Status::success();
  if (init.kind == InitKind::Normal || init.kind == InitKind::Uniform)
    return Error("init=" + formatInitSpec(init) +
                 " needs a float dtype but the dtype is " + dtypeName(dtype) +
                 "; integers take zeros, ones or constant:N");
  if (init.kind == InitKind::Constant && init.value != std::floor(init.value))
    return Error("init=" + formatInitSpec(init) +
                 " is not an integer, but the dtype is " + dtypeName(dtype));
  return Status::success();
}

namespace {
double valueFromStream(const InitSpec &init, const PhiloxStream &stream,
                       int64_t index) {
  switch (init.kind) {
  case InitKind::Zeros:
  // A placeholder until the file's value replaces it: the driver does not
  // start a run in which none does.
  case InitKind::Load:
    return 0.0;
  case InitKind::Ones:
    return 1.0;
  case InitKind::Constant:
    return init.value;
  case InitKind::Normal:
    return init.value * stream.normal(static_cast<uint64_t>(index));
  case InitKind::Uniform: {
    double u = stream.uniform(static_cast<uint64_t>(index));
    return -init.value + 2.0 * init.value * u;
  }
  }
  return 0.0;
}

// Rounding to the dtype can carry a sample just below +BOUND onto BOUND;
// step such an element down one ulp so uniform stays in [-BOUND, BOUND).
void keepBelowBound(void *dst, asrt_dtype dtype, int64_t i, double bound) {
  while (bound > 0 && loadElement(dst, dtype, i) >= bound) {
    if (dtype == ASRT_DTYPE_F32)
      static_cast<uint32_t *>(dst)[i] -= 1; // positive: one ulp down
    else
      static_cast<uint16_t *>(dst)[i] -= 1;
  }
}

PhiloxStream initStream(uint64_t seed, std::string_view name) {
  return PhiloxStream(fnv1a64(name), seed);
}
} // namespace

double initValue(const InitSpec &init, uint64_t seed, std::string_view name,
                 int64_t index) {
  return valueFromStream(init, initStream(seed, name), index);
}

Status fillInit(void *dst, asrt_dtype dtype, int64_t count,
                const InitSpec &init, uint64_t seed, std::string_view name,
                int64_t globalOffset) {
  if (Status s = checkInitForDtype(init, dtype); !s)
    return Error("cannot initialise '" + std::string(name) +
                 "': " + s.message());
  if (count < 0 || globalOffset < 0)
    return Error("cannot initialise '" + std::string(name) + "': count " +
                 std::to_string(count) + " and offset " +
                 std::to_string(globalOffset) + " must not be negative");
  if (count > 0 && !dst)
    return Error("cannot initialise '" + std::string(name) +
                 "': the buffer is null");
  PhiloxStream stream = initStream(seed, name);
  if (init.kind != InitKind::Normal && init.kind != InitKind::Uniform) {
    double value = valueFromStream(init, stream, 0);
    for (int64_t i = 0; i < count; ++i)
      storeElement(dst, dtype, i, value);
    return Status::success();
  }
  // Same values as valueFromStream, but each Philox block is computed once
  // for the 2 normals or 4 uniforms it yields; initialising a large model is
  // otherwise dominated by repeated blocks.
  bool normal = init.kind == InitKind::Normal;
  uint64_t perBlock = normal ? 2 : 4;
  uint64_t cachedBlock = UINT64_MAX;
  PhiloxCounter words{};
  for (int64_t i = 0; i < count; ++i) {
    uint64_t index = static_cast<uint64_t>(globalOffset + i);
    if (index / perBlock != cachedBlock) {
      cachedBlock = index / perBlock;
      words = stream.block(cachedBlock);
    }
    unsigned slot = static_cast<unsigned>(index % perBlock);
    double value;
    if (normal) {
      value = init.value * normalFromBits(words[2 * slot], words[2 * slot + 1]);
    } else {
      double u = uniformFromBits(words[slot]);
      value = -init.value + 2.0 * init.value * u;
    }
    storeElement(dst, dtype, i, value);
    if (!normal)
      keepBelowBound(dst, dtype, i, init.value);
  }
  return Status::success();
}

} // namespace autoshard::rt
