// Deterministic initialisation of params, optimizer states and hypers.
#pragma once

#include "autoshard/rt/abi.h"
#include "core/Expected.h"
#include "io/Manifest.h"

#include <cstdint>
#include <string_view>

namespace autoshard::rt {

/// Whether `init` can fill a tensor of `dtype`: normal and uniform need a
/// float dtype; a constant for an integer dtype must be integral.
Status checkInitForDtype(const InitSpec &init, asrt_dtype dtype);

/// Fills `count` elements of `dst` with elements [globalOffset,
/// globalOffset + count) of the tensor `name` initialised by `init`
/// (init=load: zeros, until the file's values replace them).
///
/// Element i of a tensor is a pure function of (seed, name, i): a
/// Philox-4x32-10 stream keyed by the FNV-1a hash of the name, with the seed
/// in the counter's upper half. So every world size and every sharding of a
/// tensor sees the same values, and a shard fills only its slice.
Status fillInit(void *dst, asrt_dtype dtype, int64_t count,
                const InitSpec &init, uint64_t seed, std::string_view name,
                int64_t globalOffset = 0);

/// The value fillInit gives element `index` before conversion to the dtype.
double initValue(const InitSpec &init, uint64_t seed, std::string_view name,
                 int64_t index);

} // namespace autoshard::rt
