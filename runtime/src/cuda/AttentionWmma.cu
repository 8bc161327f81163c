// Causal attention's forward pass on tensor cores, through the WMMA API
// (bf16 operands, f32 accumulation), for ASRT_CUDA_ATTENTION=wmma: the
// flash scheme of Attention.cu (online softmax over key tiles, no score
// matrix in memory, the same lse), with Q K^T and P V as 16 x 16 x 16
// mma_sync products instead of f32 FMAs on CUDA cores. The backward pass
// stays Attention.cu's (it takes this forward's out and lse).
//
// Work decomposition. A block of kWarps warps owns kQueryRows = 64
// consecutive query rows of one (batch, head), 16 per warp. It streams the
// keys and values of the rows it can see in tiles of kKeyTile = 32 through
// shared memory (zero past the sequence). Per tile, each warp:
//   scores[16 x 32] = Q_w K^T           (2 accumulators, head_dim/16 k-steps)
//   online softmax per row (two lanes per row, 16 columns each), the
//   probabilities rounded to bf16 for the next product, as flash attention
//   does; the running sum l adds them unrounded, in f32
//   O_w[16 x d] = alpha O_w + P V       (head_dim/16 accumulators)
// WMMA does not say which lane holds which element of a fragment, so the
// per-row rescale by alpha goes through a 16 x 16 scratch tile in shared
// memory. At the end, out = O_w / l and lse = m + log(l), m and l of the
// scaled scores, as Attention.cu stores them.
//
// Supported: bf16 and head_dim a multiple of 16 up to 128 (the fragment
// arrays are sized at compile time); causalAttentionWmmaSupports says so,
// and Abi.cpp runs the flash kernels otherwise. Known limits: tiles above
// the diagonal are skipped per block, not per warp; K and V tiles are
// staged by plain loads (no cp.async/TMA); the rescale costs a scratch
// round trip per accumulator and tile.
#include "Cuda.h"
#include "Element.cuh"

#include "core/ArgChecks.h"
#include "core/Context.h"

#include <mma.h>

#include <cmath>
#include <cstdint>

namespace autoshard::rt::cuda {
namespace {

using namespace nvcuda;

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kFrag = 16; // WMMA's m = n = k
constexpr int kWarps = 4;
constexpr int kBlockThreads = kWarps * kWarp;
constexpr int kQueryRows = kWarps * kFrag;
constexpr int kKeyTile = 2 * kFrag;
constexpr int kMaxHeadDim = 128;
constexpr int64_t kMaxBlocks = 65535;
/// A warp's shared area: its 16 staged query rows (up to 16 x 128 bf16),
/// then, reused per key tile, the scores [16 x 32] f32 at 0, the
/// probabilities [16 x 32] bf16 at kProbsAt and a [16 x 16] f32 scratch
/// tile at kScratchAt. Offsets keep WMMA's 256-bit alignment.
constexpr int kWarpBytes = kFrag * kMaxHeadDim * 2;
constexpr int kProbsAt = kFrag * kKeyTile * 4;
constexpr int kScratchAt = kProbsAt + kFrag * kKeyTile * 2;
static_assert(kScratchAt + kFrag * kFrag * 4 <= kWarpBytes,
              "a warp's shared area holds scores, probabilities, scratch");

using FragA =
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
using FragBCol =
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major>;
using FragBRow =
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
using FragAcc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

struct WmmaShape {
  int64_t batch, seq, heads, kvHeads;
  float scale;

  __device__ int64_t at(int64_t b, int64_t t, int64_t nHeads, int64_t h,
                        int64_t d) const {
    return ((b * seq + t) * nHeads + h) * d;
  }
  __device__ int64_t rowStat(int64_t b, int64_t h, int64_t t) const {
    return (b * heads + h) * seq + t;
  }
  __host__ __device__ int64_t queryBlocks() const {
    return (seq + kQueryRows - 1) / kQueryRows;
  }
};

/// acc[f] row r *= factor[r] for every accumulator, through `scratch`;
/// called by the whole warp.
template <int Frags>
__device__ void scaleRows(FragAcc (&acc)[Frags], float *scratch,
                          const float *factor, int lane) {
  for (int f = 0; f < Frags; ++f) {
    wmma::store_matrix_sync(scratch, acc[f], kFrag, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < kFrag * kFrag; e += kWarp)
      scratch[e] *= factor[e / kFrag];
    __syncwarp();
    wmma::load_matrix_sync(acc[f], scratch, kFrag, wmma::mem_row_major);
    __syncwarp(); // every lane has its part before the next store
  }
}

template <int D>
__global__ void __launch_bounds__(kBlockThreads)
    wmmaForwardKernel(WmmaShape s, const __nv_bfloat16 *q,
                      const __nv_bfloat16 *k, const __nv_bfloat16 *v,
                      __nv_bfloat16 *out, float *lse) {
  constexpr int Frags = D / kFrag;
  __shared__ __align__(32) __nv_bfloat16 keys[kKeyTile * D];
  __shared__ __align__(32) __nv_bfloat16 values[kKeyTile * D];
  __shared__ __align__(32) unsigned char area[kWarps][kWarpBytes];
  __shared__ float rowFactor[kWarps][kFrag];

  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const __nv_bfloat16 zero = __float2bfloat16_rn(0.0f);
  __nv_bfloat16 *staged = reinterpret_cast<__nv_bfloat16 *>(area[warp]);
  float *scores = reinterpret_cast<float *>(area[warp]);
  __nv_bfloat16 *probs =
      reinterpret_cast<__nv_bfloat16 *>(area[warp] + kProbsAt);
  float *scratch = reinterpret_cast<float *>(area[warp] + kScratchAt);
  float *factor = rowFactor[warp];
  const int64_t group = s.heads / s.kvHeads;
  const int64_t tiles = s.batch * s.heads * s.queryBlocks();

  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t bh = tile / s.queryBlocks();
    const int64_t b = bh / s.heads, h = bh % s.heads, g = h / group;
    const int64_t q0 = tile % s.queryBlocks() * kQueryRows;
    const int64_t qw = q0 + warp * kFrag;

    // This warp's query rows as fragments (zero rows past the sequence).
    __syncwarp(); // the previous tile's last reads of the area are done
    for (int e = lane; e < kFrag * D; e += kWarp) {
      const int64_t t = qw + e / D;
      staged[e] = t < s.seq ? q[s.at(b, t, s.heads, h, D) + e % D] : zero;
    }
    __syncwarp();
    FragA query[Frags];
    for (int f = 0; f < Frags; ++f)
      wmma::load_matrix_sync(query[f], staged + f * kFrag, D);
    __syncwarp(); // the area becomes scores and probabilities

    FragAcc acc[Frags];
    for (int f = 0; f < Frags; ++f)
      wmma::fill_fragment(acc[f], 0.0f);
    // Row `row` of the warp's 16: lanes 2 row and 2 row + 1, each with 16
    // of the tile's 32 columns, both holding the row's m and l.
    const int row = lane / 2, half = lane % 2;
    const int64_t t = qw + row;
    float m = -INFINITY, l = 0.0f;

    // Keys the block's last row can see.
    const int64_t keyEnd =
        q0 + kQueryRows < s.seq ? q0 + kQueryRows : s.seq;
    for (int64_t j0 = 0; j0 < keyEnd; j0 += kKeyTile) {
      __syncthreads(); // every warp is done with the previous tile
      for (int e = threadIdx.x; e < kKeyTile * D; e += kBlockThreads) {
        const int64_t j = j0 + e / D;
        const bool inside = j < s.seq;
        const int64_t at = inside ? s.at(b, j, s.kvHeads, g, D) + e % D : 0;
        keys[e] = inside ? k[at] : zero;
        values[e] = inside ? v[at] : zero;
      }
      __syncthreads();

      // scores = Q K^T: K's rows read as the columns of a col-major B.
      for (int n = 0; n < kKeyTile / kFrag; ++n) {
        FragAcc part;
        wmma::fill_fragment(part, 0.0f);
        for (int f = 0; f < Frags; ++f) {
          FragBCol keyFrag;
          wmma::load_matrix_sync(keyFrag, keys + n * kFrag * D + f * kFrag, D);
          wmma::mma_sync(part, query[f], keyFrag, part);
        }
        wmma::store_matrix_sync(scores + n * kFrag, part, kKeyTile,
                                wmma::mem_row_major);
      }
      __syncwarp();

      // Online softmax over this lane's 16 columns of its row.
      float x[kFrag];
      float tileMax = -INFINITY;
      for (int c = 0; c < kFrag; ++c) {
        const int col = half * kFrag + c;
        const int64_t j = j0 + col;
        x[c] = j <= t && j < s.seq ? s.scale * scores[row * kKeyTile + col]
                                   : -INFINITY;
        tileMax = fmaxf(tileMax, x[c]);
      }
      tileMax = fmaxf(tileMax, __shfl_xor_sync(kFullMask, tileMax, 1));
      const float mNew = fmaxf(m, tileMax);
      // A row that has seen no key yet keeps m = -inf and scales by 1.
      const float alpha = mNew == -INFINITY ? 1.0f : expf(m - mNew);
      float sum = 0.0f;
      for (int c = 0; c < kFrag; ++c) {
        const float p = x[c] == -INFINITY ? 0.0f : expf(x[c] - mNew);
        probs[row * kKeyTile + half * kFrag + c] = __float2bfloat16_rn(p);
        sum += p;
      }
      sum += __shfl_xor_sync(kFullMask, sum, 1);
      l = l * alpha + sum;
      m = mNew;
      if (half == 0)
        factor[row] = alpha;
      __syncwarp();

      // O = alpha O + P V.
      scaleRows(acc, scratch, factor, lane);
      for (int kk = 0; kk < kKeyTile / kFrag; ++kk) {
        FragA p;
        wmma::load_matrix_sync(p, probs + kk * kFrag, kKeyTile);
        for (int f = 0; f < Frags; ++f) {
          FragBRow valueFrag;
          wmma::load_matrix_sync(valueFrag, values + kk * kFrag * D + f * kFrag,
                                 D);
          wmma::mma_sync(acc[f], p, valueFrag, acc[f]);
        }
      }
      __syncwarp(); // scores and probabilities are rewritten next tile
    }

    // out = O / l (rows inside the sequence), lse = m + log(l).
    if (half == 0)
      factor[row] = l;
    __syncwarp();
    for (int f = 0; f < Frags; ++f) {
      wmma::store_matrix_sync(scratch, acc[f], kFrag, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < kFrag * kFrag; e += kWarp) {
        const int r = e / kFrag;
        const int64_t tr = qw + r;
        if (tr < s.seq)
          store(out, s.at(b, tr, s.heads, h, D) + f * kFrag + e % kFrag,
                scratch[e] / factor[r]);
      }
      __syncwarp();
    }
    if (half == 0 && t < s.seq)
      lse[s.rowStat(b, h, t)] = m + logf(l);
  }
}

template <int D>
void launchForward(cudaStream_t stream, const WmmaShape &s, const void *q,
                   const void *k, const void *v, void *out, float *lse) {
  const int64_t tiles = s.batch * s.heads * s.queryBlocks();
  wmmaForwardKernel<D><<<unsigned(tiles < kMaxBlocks ? tiles : kMaxBlocks),
                         kBlockThreads, 0, stream>>>(
      s, static_cast<const __nv_bfloat16 *>(q),
      static_cast<const __nv_bfloat16 *>(k),
      static_cast<const __nv_bfloat16 *>(v), static_cast<__nv_bfloat16 *>(out),
      lse);
}

} // namespace

bool causalAttentionWmmaSupports(int32_t dtype, int64_t headDim) {
  return dtype == ASRT_DTYPE_BF16 && headDim > 0 && headDim % kFrag == 0 &&
         headDim <= kMaxHeadDim;
}

void causalAttentionFwdWmma(cudaStream_t stream, int32_t dtype, const void *q,
                            const void *k, const void *v, void *out,
                            float *lse, int64_t batch, int64_t seq,
                            int64_t heads, int64_t kv_heads, int64_t head_dim,
                            float scale) {
  const char *op = "causal_attention_fwd";
  checkAttentionShape(op, batch, seq, heads, kv_heads, head_dim, scale);
  if (!causalAttentionWmmaSupports(dtype, head_dim))
    fatal("%s: the WMMA attention takes bf16 with head_dim a multiple of 16 "
          "up to %d, not dtype %d with head_dim %lld",
          op, kMaxHeadDim, dtype, static_cast<long long>(head_dim));
  const WmmaShape s{batch, seq, heads, kv_heads, scale};
  if (s.batch * s.heads * s.queryBlocks() == 0)
    return;
  switch (head_dim / kFrag) {
  case 1: launchForward<16>(stream, s, q, k, v, out, lse); break;
  case 2: launchForward<32>(stream, s, q, k, v, out, lse); break;
  case 3: launchForward<48>(stream, s, q, k, v, out, lse); break;
  case 4: launchForward<64>(stream, s, q, k, v, out, lse); break;
  case 5: launchForward<80>(stream, s, q, k, v, out, lse); break;
  case 6: launchForward<96>(stream, s, q, k, v, out, lse); break;
  case 7: launchForward<112>(stream, s, q, k, v, out, lse); break;
  default: launchForward<128>(stream, s, q, k, v, out, lse); break;
  }
  checkLaunch(op);
}

} // namespace autoshard::rt::cuda
