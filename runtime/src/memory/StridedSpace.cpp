// Checking and coalescing the generic kernels' strided iteration spaces.
#include "memory/StridedSpace.h"

#include "core/Context.h"

#include <limits>

namespace autoshard::rt {

int64_t checkedElementCount(const char *op, const char *what, int32_t rank,
                            const int64_t *dims) {
  if (rank < 0 || rank > ASRT_MAX_RANK)
    fatal("%s: the rank of %s is %d, outside [0, %d] (ASRT_MAX_RANK)", op, what,
          rank, ASRT_MAX_RANK);
  if (rank > 0 && !dims)
    fatal("%s: %s is null for rank %d", op, what, rank);
  int64_t count = 1;
  bool empty = false;
  for (int32_t d = 0; d < rank; ++d) {
    if (dims[d] < 0)
      fatal("%s: %s[%d] = %lld is negative", op, what, d,
            static_cast<long long>(dims[d]));
    empty = empty || dims[d] == 0;
  }
  if (empty)
    return 0;
  for (int32_t d = 0; d < rank; ++d) {
    if (count > std::numeric_limits<int64_t>::max() / dims[d])
      fatal("%s: the element count of %s overflows int64_t (at dim %d)", op,
            what, d);
    count *= dims[d];
  }
  return count;
}

StridedSpace coalescedSpace(const char *op, const char *what, int32_t rank,
                            const int64_t *dims,
                            std::initializer_list<const int64_t *> strides) {
  StridedSpace s;
  s.count = checkedElementCount(op, what, rank, dims);
  if (strides.size() > size_t(StridedSpace::kMaxOperands))
    fatal("%s: %zu strided operands, at most %d", op, strides.size(),
          StridedSpace::kMaxOperands);
  s.operands = static_cast<int32_t>(strides.size());
  if (rank > 0)
    for (const int64_t *operandStrides : strides)
      if (!operandStrides)
        fatal("%s: a strides array over %s is null for rank %d", op, what,
              rank);
  if (s.count == 0) {
    s.rank = 1; // nothing to visit; one empty dim keeps loops uniform
    return s;
  }
  // Outer to inner: each dim of size > 1 either extends the last kept dim
  // (when every operand steps through the pair as through one dim) or is
  // kept as a dim of its own.
  for (int32_t d = 0; d < rank; ++d) {
    if (dims[d] == 1)
      continue;
    bool merge = s.rank > 0;
    int k = 0;
    for (const int64_t *operandStrides : strides) {
      int64_t step = 0; // a product that overflows cannot match a stride
      merge = merge &&
              !__builtin_mul_overflow(operandStrides[d], dims[d], &step) &&
              s.strides[k][s.rank - 1] == step;
      ++k;
    }
    if (merge) {
      s.dims[s.rank - 1] *= dims[d];
    } else {
      s.dims[s.rank] = dims[d];
      ++s.rank;
    }
    k = 0;
    for (const int64_t *operandStrides : strides)
      s.strides[k++][s.rank - 1] = operandStrides[d];
  }
  return s;
}

void stridedOffsets(const StridedSpace &space, int64_t linear,
                    int64_t offsets[StridedSpace::kMaxOperands]) {
  for (int k = 0; k < StridedSpace::kMaxOperands; ++k)
    offsets[k] = 0;
  for (int32_t d = space.rank - 1; d >= 0; --d) {
    int64_t index = linear % space.dims[d];
    linear /= space.dims[d];
    for (int k = 0; k < space.operands; ++k)
      offsets[k] += index * space.strides[k][d];
  }
}

} // namespace autoshard::rt
