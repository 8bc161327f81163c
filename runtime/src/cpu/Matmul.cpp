// Batched matrix products on the CPU (asrt_matmul): one OpenBLAS SGEMM per
// batch, or one for the whole batch when its matrices stack into one.
#include "Checks.h"
#include "Element.h"
#include "Gemm.h"
#include "Scratch.h"

#include "core/Context.h"
#include "memory/StridedSpace.h"

#include <cstdint>
#include <limits>
#include <type_traits>

using autoshard::rt::coalescedSpace;
using autoshard::rt::OpTimer;
using autoshard::rt::stridedOffsets;
using autoshard::rt::StridedSpace;
using namespace autoshard::rt::cpu;

namespace {

/// An operand of `count` elements at `offset` as f32: the buffer itself for
/// f32; for bf16 a converted copy in `buffer` (count floats of scratch),
/// converted again only when the offset changed since the last call (a
/// broadcast operand is converted once per run of batches that share it).
template <typename T> struct Widened {
  const T *base;
  int64_t count;
  float *buffer = nullptr;
  int64_t converted = -1; // the offset `buffer` holds, -1 for none

  Widened(ScratchFrame &scratch, const T *base, int64_t count)
      : base(base), count(count) {
    if constexpr (!std::is_same_v<T, float>)
      buffer = scratch.take<float>(count);
  }
  const float *at(int64_t offset) {
    if constexpr (std::is_same_v<T, float>) {
      return base + offset;
    } else {
      if (offset != converted) {
        loadRow(base + offset, count, buffer);
        converted = offset;
      }
      return buffer;
    }
  }
};

} // namespace

extern "C" void
asrt_matmul(asrt_context *ctx, int32_t dtype, const void *a, const void *b,
            void *y, int32_t batch_rank, const int64_t *batch_dims,
            const int64_t *a_batch_strides, const int64_t *b_batch_strides,
            int64_t m, int64_t n, int64_t k, int32_t trans_a, int32_t trans_b) {
  OpTimer timer(ctx, "matmul");
  const char *op = "matmul";
  blasDim(op, "m", m);
  blasDim(op, "n", n);
  blasDim(op, "k", k);
  const StridedSpace batch =
      coalescedSpace(op, "batch_dims", batch_rank, batch_dims,
                     {a_batch_strides, b_batch_strides});
  const bool ta = trans_a != 0, tb = trans_b != 0;
  // Row-major leading dimensions of the stored (untransposed) matrices.
  const int64_t lda = ta ? m : k, ldb = tb ? k : n;
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    T *out = static_cast<T *>(y);
    if (batch.count == 0 || m == 0 || n == 0)
      return;
    ScratchFrame scratch(op);
    // One GEMM of batch * m rows when the batches of op(a) stack into one
    // dense matrix (a not transposed, its batches m * k apart) and b is
    // the same matrix for all of them: x[B, T, K] @ w[K, N].
    // (Only within the BLAS's index range: per-batch GEMMs take any batch.)
    const bool stacked = !ta && batch.rank == 1 &&
                         batch.strides[0][0] == m * k &&
                         batch.strides[1][0] == 0 &&
                         batch.count * m <= std::numeric_limits<blasint>::max();
    if (stacked) {
      const int64_t rows = batch.count * m;
      const float *af = gemmInput(scratch, static_cast<const T *>(a), rows * k);
      const float *bf = gemmInput(scratch, static_cast<const T *>(b), k * n);
      float *yf = gemmOutput(scratch, out, rows * n);
      gemm(false, tb, rows, n, k, 1.0f, af, k, bf, ldb, 0.0f, yf, n);
      finishGemmOutput(yf, out, rows * n);
      return;
    }
    Widened<T> wa(scratch, static_cast<const T *>(a), m * k);
    Widened<T> wb(scratch, static_cast<const T *>(b), k * n);
    float *yf = std::is_same_v<T, float> ? nullptr : scratch.take<float>(m * n);
    int64_t offsets[StridedSpace::kMaxOperands];
    for (int64_t i = 0; i < batch.count; ++i) {
      stridedOffsets(batch, i, offsets);
      T *yi = out + i * m * n;
      float *c = yf ? yf : reinterpret_cast<float *>(yi);
      gemm(ta, tb, m, n, k, 1.0f, wa.at(offsets[0]), lda, wb.at(offsets[1]),
           ldb, 0.0f, c, n);
      finishGemmOutput(c, yi, m * n);
    }
  });
}
