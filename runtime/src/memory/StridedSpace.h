// The iteration space of the generic tensor kernels (abi.h, "Generic tensor
// ops"): dims and the element strides of the operands over them, checked
// and simplified once on the host for every backend.
#pragma once

#include "autoshard/rt/abi.h"

#include <cstdint>
#include <initializer_list>

namespace autoshard::rt {

/// A row-major iteration space of `rank` dims and the strides of up to
/// kMaxOperands operands over it. A plain aggregate (no pointers), so that
/// a CUDA kernel takes it by value, the dims and strides arriving with the
/// launch's parameters instead of through device memory.
struct StridedSpace {
  static constexpr int kMaxOperands = 3;
  int32_t rank = 0;
  int32_t operands = 0;
  /// The number of elements: the product of dims (1 for rank 0).
  int64_t count = 1;
  int64_t dims[ASRT_MAX_RANK] = {};
  int64_t strides[kMaxOperands][ASRT_MAX_RANK] = {};

  /// Operand k's stride along the innermost dim (0 at rank 0).
  int64_t innerStride(int k) const {
    return rank > 0 ? strides[k][rank - 1] : 0;
  }
};

/// Checks a shape argument of a generic kernel: 0 <= rank <= ASRT_MAX_RANK,
/// `dims` non-null when rank > 0, every dim non-negative, and the product
/// of dims within int64_t. Fatal otherwise, naming `op` and `what` (the
/// argument: "dims", "out_dims", ...). Returns the product of dims.
int64_t checkedElementCount(const char *op, const char *what, int32_t rank,
                            const int64_t *dims);

/// The checked space of `dims` and the operands' `strides` (each a
/// non-null array of `rank` strides when rank > 0; fatal otherwise), then
/// coalesced: dims of size 1 are dropped and adjacent dims merged where
/// every operand's strides allow it (stride[d] == stride[d+1] * dims[d+1]),
/// which visits the same elements in the same row-major order. A dense
/// operand thus becomes one dim, and an element's row-major position over
/// the original dims is its position over the coalesced ones. A space with
/// no element keeps one dim of size 0.
StridedSpace coalescedSpace(const char *op, const char *what, int32_t rank,
                            const int64_t *dims,
                            std::initializer_list<const int64_t *> strides);

/// Row-major offsets of each operand at position `linear` of `space`:
/// offsets[k] = sum_d index_d * strides[k][d]. For the host loops' start of
/// a chunk and the tests; the CUDA kernels compute it on the device.
void stridedOffsets(const StridedSpace &space, int64_t linear,
                    int64_t offsets[StridedSpace::kMaxOperands]);

} // namespace autoshard::rt
