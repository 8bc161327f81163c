// The emulated NCCL's arithmetic: elementwise reductions of its data types
// on host memory, as the ring's reduce steps apply them.
#pragma once

#include <nccl.h>

#include <cstddef>

namespace asrt_nccl_emu {

/// Bytes of one element of `type`; 0 for a type the emulator does not
/// support (the fp8 types) or a value that is no ncclDataType_t.
size_t elementSize(ncclDataType_t type);
/// Whether `type` is a floating-point type (ncclAvg scales its inputs).
bool isFloating(ncclDataType_t type);
/// NCCL's names, for messages: "ncclFloat32", "ncclSum".
const char *typeName(ncclDataType_t type);
const char *opName(ncclRedOp_t op);

/// acc[i] = acc[i] (op) in[i] for n elements; ncclAvg combines as ncclSum
/// (the average is the sum of scaled inputs, or for integers the sum
/// divided at the end). Half precision types round each result to their
/// precision, as NCCL's kernels do.
void combine(void *acc, const void *in, size_t n, ncclDataType_t type,
             ncclRedOp_t op);
/// data[i] *= factor, rounded to the type (ncclAvg's scaling of floating
/// inputs by 1 / nranks, which NCCL applies before summing).
void scale(void *data, size_t n, ncclDataType_t type, double factor);
/// data[i] /= divisor (ncclAvg's integer division after the sum).
void divide(void *data, size_t n, ncclDataType_t type, int divisor);

} // namespace asrt_nccl_emu
