// Causal attention on tensor cores through the WMMA API (bf16 operands,
// f32 accumulation), for ASRT_CUDA_ATTENTION=wmma: the flash scheme of
// Attention.cu (online softmax over key tiles, no score matrix in memory,
// the same lse, a backward that recomputes probabilities from it) with the
// products as 16 x 16 x 16 mma_sync instead of f32 FMAs on CUDA cores.
//
// Forward. A block of kWarps warps owns kQueryRows = 64 consecutive query
// rows of one (batch, head), 16 per warp. It streams the keys and values
// of the rows it can see in tiles of kKeyTile = 32 through shared memory
// (zero past the sequence). Per tile, each warp:
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
// Backward, split as Attention.cu splits it: rowDot = dO . O per query
// row; a dq kernel (per warp 16 query rows, over key tiles: S = Q K^T,
// dP = dO V^T, dS = P (dP - rowDot) rounded to bf16, dq += dS K) and a
// dk/dv kernel (per warp 16 key rows, over the group's query heads and the
// query tiles that see them: S^T = K Q^T, dP^T = V dO^T, dv += P^T dO,
// dk += dS^T Q). Each output row is one warp's: no atomics, deterministic.
//
// Supported: bf16 and head_dim a multiple of 16 up to 128 (the fragment
// arrays are sized at compile time); causalAttentionWmmaSupports says so,
// and Abi.cpp runs the flash kernels otherwise. Known limits (not yet
// timed on a GPU): tiles above the diagonal are skipped per block, not per
// warp; tiles are staged by plain loads (no cp.async/TMA); the rescale
// costs a scratch round trip per accumulator and tile; the dk/dv kernel
// holds K, V and two accumulator sets per warp in registers (heavy at
// head_dim 128).
#include "Cuda.h"
#include "Element.cuh"
#include "Grid.cuh"

#include "core/ArgChecks.h"
#include "core/Context.h"

#include <mma.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace autoshard::rt::cuda {
namespace {

using namespace nvcuda;

constexpr int kFrag = 16; // WMMA's m = n = k
constexpr int kWarps = 4;
constexpr int kBlockThreads = kWarps * kWarp;
constexpr int kQueryRows = kWarps * kFrag;
constexpr int kKeyTile = 2 * kFrag;
constexpr int kMaxHeadDim = 128;
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

/// Every accumulator = 0.
template <int Frags> __device__ void clear(FragAcc (&acc)[Frags]) {
  for (int f = 0; f < Frags; ++f)
    wmma::fill_fragment(acc[f], 0.0f);
}

/// What a block's tile index names: 64 rows from r0 of head `head` (of
/// nHeads) of batch row b, the warp's 16 from rw.
struct RowBlock {
  int64_t b, head, r0, rw;
};
__device__ RowBlock rowBlock(const WmmaShape &s, int64_t tile, int64_t nHeads,
                             int warp) {
  const int64_t bh = tile / s.queryBlocks();
  const int64_t r0 = tile % s.queryBlocks() * kQueryRows;
  return {bh / nHeads, bh % nHeads, r0, r0 + warp * kFrag};
}

/// acc[f] row r *= factor[r] for every accumulator, through `scratch`;
/// called by the whole warp.
template <int Frags>
__device__ void scaleRows(FragAcc (&acc)[Frags], float *scratch,
                          const float *factor, int lane) {
  for (int f = 0; f < Frags; ++f) {
    wmma::store_matrix_sync(scratch, acc[f], kFrag, wmma::mem_row_major);
    __syncwarp();
    for (int e : warpLanes(kFrag * kFrag, lane))
      scratch[e] *= factor[e / kFrag];
    __syncwarp();
    wmma::load_matrix_sync(acc[f], scratch, kFrag, wmma::mem_row_major);
    __syncwarp(); // every lane has its part before the next store
  }
}

/// Rows from t0 of head h of a [batch, seq, nHeads, D] tensor into `dst`
/// ([rows, D], zero past the sequence): the elements of [0, rows * D) that
/// `elements` gives this thread (a warp's lanes or a block's threads).
template <int D, typename Elements>
__device__ void stageRows(__nv_bfloat16 *dst, const __nv_bfloat16 *src,
                          const WmmaShape &s, int64_t b, int64_t t0,
                          int64_t nHeads, int64_t h, Elements elements) {
  const __nv_bfloat16 zero = __float2bfloat16_rn(0.0f);
  for (int e : elements) {
    const int64_t t = t0 + e / D;
    dst[e] = t < s.seq ? src[s.at(b, t, nHeads, h, D) + e % D] : zero;
  }
}

/// 16 rows from t0 of head h of `src` as this warp's matrix_a fragments,
/// staged through `staged` (16 x D bf16 of the warp's shared area).
template <int Frags>
__device__ void loadRowFragments(FragA (&frags)[Frags], __nv_bfloat16 *staged,
                                 const __nv_bfloat16 *src, const WmmaShape &s,
                                 int64_t b, int64_t t0, int64_t nHeads,
                                 int64_t h, int lane) {
  constexpr int D = Frags * kFrag;
  __syncwarp(); // earlier reads of the area are done
  stageRows<D>(staged, src, s, b, t0, nHeads, h, warpLanes(kFrag * D, lane));
  __syncwarp();
  for (int f = 0; f < Frags; ++f)
    wmma::load_matrix_sync(frags[f], staged + f * kFrag, D);
  __syncwarp(); // the area may be written again
}

/// c[16 x 32] (f32, ldm 32) = a[16 x D] b^T, a as this warp's fragments,
/// b as 32 rows of D in shared memory read as the columns of a col-major
/// operand. Called by the whole warp.
template <int Frags>
__device__ void productWithRows(float *c, const FragA (&a)[Frags],
                                const __nv_bfloat16 *rows) {
  constexpr int D = Frags * kFrag;
  for (int n = 0; n < kKeyTile / kFrag; ++n) {
    FragAcc part;
    wmma::fill_fragment(part, 0.0f);
    for (int f = 0; f < Frags; ++f) {
      FragBCol b;
      wmma::load_matrix_sync(b, rows + n * kFrag * D + f * kFrag, D);
      wmma::mma_sync(part, a[f], b, part);
    }
    wmma::store_matrix_sync(c + n * kFrag, part, kKeyTile, wmma::mem_row_major);
  }
}

/// acc[f] += a[16 x 32] (bf16 in shared, ldm 32) times columns
/// [16 f, 16 f + 16) of b[32 x D] (bf16 in shared). Called by the warp.
template <int Frags>
__device__ void accumulateProduct(FragAcc (&acc)[Frags],
                                  const __nv_bfloat16 *a,
                                  const __nv_bfloat16 *b) {
  constexpr int D = Frags * kFrag;
  for (int kk = 0; kk < kKeyTile / kFrag; ++kk) {
    FragA left;
    wmma::load_matrix_sync(left, a + kk * kFrag, kKeyTile);
    for (int f = 0; f < Frags; ++f) {
      FragBRow right;
      wmma::load_matrix_sync(right, b + kk * kFrag * D + f * kFrag, D);
      wmma::mma_sync(acc[f], left, right, acc[f]);
    }
  }
}

/// Writes factor * acc (row r divided by divisor[r] when there is a
/// divisor; rows inside the sequence) to rows [t0, t0 + 16) of head h of
/// `dst`, through `scratch`. Called by the warp.
template <int Frags>
__device__ void storeRows(__nv_bfloat16 *dst, const FragAcc (&acc)[Frags],
                          float *scratch, float factor, const float *divisor,
                          const WmmaShape &s, int64_t b, int64_t t0,
                          int64_t nHeads, int64_t h, int lane) {
  constexpr int D = Frags * kFrag;
  for (int f = 0; f < Frags; ++f) {
    wmma::store_matrix_sync(scratch, acc[f], kFrag, wmma::mem_row_major);
    __syncwarp();
    for (int e : warpLanes(kFrag * kFrag, lane)) {
      const int64_t t = t0 + e / kFrag;
      if (t < s.seq)
        store(dst, s.at(b, t, nHeads, h, D) + f * kFrag + e % kFrag,
              divisor ? factor * scratch[e] / divisor[e / kFrag]
                      : factor * scratch[e]);
    }
    __syncwarp();
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
  __nv_bfloat16 *staged = reinterpret_cast<__nv_bfloat16 *>(area[warp]);
  float *scores = reinterpret_cast<float *>(area[warp]);
  __nv_bfloat16 *probs =
      reinterpret_cast<__nv_bfloat16 *>(area[warp] + kProbsAt);
  float *scratch = reinterpret_cast<float *>(area[warp] + kScratchAt);
  float *factor = rowFactor[warp];
  const int64_t group = s.heads / s.kvHeads;
  const int64_t tiles = s.batch * s.heads * s.queryBlocks();

  for (int64_t tile : gridBlocks(tiles)) {
    const RowBlock block = rowBlock(s, tile, s.heads, warp);
    const int64_t b = block.b, h = block.head, g = h / group;
    const int64_t q0 = block.r0, qw = block.rw;

    // This warp's query rows as fragments (zero rows past the sequence).
    FragA query[Frags];
    loadRowFragments(query, staged, q, s, b, qw, s.heads, h, lane);

    FragAcc acc[Frags];
    clear(acc);
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
      stageRows<D>(keys, k, s, b, j0, s.kvHeads, g,
                   blockThreads(kKeyTile * D));
      stageRows<D>(values, v, s, b, j0, s.kvHeads, g,
                   blockThreads(kKeyTile * D));
      __syncthreads();
      productWithRows(scores, query, keys); // S = Q K^T
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
      accumulateProduct(acc, probs, values);
      __syncwarp(); // scores and probabilities are rewritten next tile
    }

    // out = O / l (rows inside the sequence), lse = m + log(l).
    if (half == 0)
      factor[row] = l;
    __syncwarp();
    storeRows(out, acc, scratch, 1.0f, factor, s, b, qw, s.heads, h, lane);
    if (half == 0 && t < s.seq)
      lse[s.rowStat(b, h, t)] = m + logf(l);
  }
}

template <int D>
void launchForward(cudaStream_t stream, const WmmaShape &s, const void *q,
                   const void *k, const void *v, void *out, float *lse) {
  const int64_t tiles = s.batch * s.heads * s.queryBlocks();
  wmmaForwardKernel<D><<<tileBlocksFor(tiles), kBlockThreads, 0, stream>>>(
      s, static_cast<const __nv_bfloat16 *>(q),
      static_cast<const __nv_bfloat16 *>(k),
      static_cast<const __nv_bfloat16 *>(v), static_cast<__nv_bfloat16 *>(out),
      lse);
}

/// rowDot[b, h, t] = dO[t] . O[t] over the head, in f32: one thread per
/// row.
__global__ void rowDotKernel(WmmaShape s, int64_t headDim,
                             const __nv_bfloat16 *dout,
                             const __nv_bfloat16 *out, float *rowDot) {
  const int64_t rows = s.batch * s.heads * s.seq;
  for (int64_t i : gridThreads(rows)) {
    const int64_t t = i % s.seq, bh = i / s.seq;
    const int64_t at = s.at(bh / s.heads, t, s.heads, bh % s.heads, headDim);
    float sum = 0.0f;
    for (int64_t c = 0; c < headDim; ++c)
      sum += load(dout, at + c) * load(out, at + c);
    rowDot[i] = sum;
  }
}

/// dq for 64 query rows of one (batch, head) per block, 16 per warp: over
/// the key tiles the block's rows see, P = exp(scale S - lse) from S = Q K^T,
/// dP = dO V^T, dS = P (dP - rowDot) rounded to bf16, dq += dS K; at the
/// end dq = scale dq.
template <int D>
__global__ void __launch_bounds__(kBlockThreads)
    wmmaGradQueryKernel(WmmaShape s, const __nv_bfloat16 *dout,
                        const __nv_bfloat16 *q, const __nv_bfloat16 *k,
                        const __nv_bfloat16 *v, const float *lse,
                        const float *rowDot, __nv_bfloat16 *dq) {
  constexpr int Frags = D / kFrag;
  __shared__ __align__(32) __nv_bfloat16 keys[kKeyTile * D];
  __shared__ __align__(32) __nv_bfloat16 values[kKeyTile * D];
  __shared__ __align__(32) unsigned char area[kWarps][kWarpBytes];

  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  __nv_bfloat16 *staged = reinterpret_cast<__nv_bfloat16 *>(area[warp]);
  float *scores = reinterpret_cast<float *>(area[warp]);
  float *dprobs = reinterpret_cast<float *>(area[warp] + kProbsAt);
  __nv_bfloat16 *dscores = reinterpret_cast<__nv_bfloat16 *>(area[warp]);
  float *scratch = reinterpret_cast<float *>(area[warp] + kScratchAt);
  const int64_t group = s.heads / s.kvHeads;
  const int64_t tiles = s.batch * s.heads * s.queryBlocks();

  for (int64_t tile : gridBlocks(tiles)) {
    const RowBlock block = rowBlock(s, tile, s.heads, warp);
    const int64_t b = block.b, h = block.head, g = h / group;
    const int64_t q0 = block.r0, qw = block.rw;

    FragA query[Frags], gradOut[Frags];
    loadRowFragments(query, staged, q, s, b, qw, s.heads, h, lane);
    loadRowFragments(gradOut, staged, dout, s, b, qw, s.heads, h, lane);

    FragAcc acc[Frags];
    clear(acc);
    const int row = lane / 2, half = lane % 2;
    const int64_t t = qw + row;
    const float rowLse = t < s.seq ? lse[s.rowStat(b, h, t)] : 0.0f;
    const float rowD = t < s.seq ? rowDot[s.rowStat(b, h, t)] : 0.0f;

    const int64_t keyEnd = q0 + kQueryRows < s.seq ? q0 + kQueryRows : s.seq;
    for (int64_t j0 = 0; j0 < keyEnd; j0 += kKeyTile) {
      __syncthreads();
      stageRows<D>(keys, k, s, b, j0, s.kvHeads, g,
                   blockThreads(kKeyTile * D));
      stageRows<D>(values, v, s, b, j0, s.kvHeads, g,
                   blockThreads(kKeyTile * D));
      __syncthreads();
      productWithRows(scores, query, keys);    // S = Q K^T
      productWithRows(dprobs, gradOut, values); // dP = dO V^T
      __syncwarp();
      float ds[kFrag];
      for (int c = 0; c < kFrag; ++c) {
        const int col = half * kFrag + c;
        const int64_t j = j0 + col;
        const float p =
            j <= t && j < s.seq
                ? expf(s.scale * scores[row * kKeyTile + col] - rowLse)
                : 0.0f;
        ds[c] = p * (dprobs[row * kKeyTile + col] - rowD);
      }
      __syncwarp(); // dS overwrites the scores
      for (int c = 0; c < kFrag; ++c)
        dscores[row * kKeyTile + half * kFrag + c] = __float2bfloat16_rn(ds[c]);
      __syncwarp();
      accumulateProduct(acc, dscores, keys); // dq += dS K
      __syncwarp();
    }
    storeRows(dq, acc, scratch, s.scale, nullptr, s, b, qw, s.heads, h, lane);
  }
}

/// dk and dv for 64 key rows of one (batch, kv head) per block, 16 per
/// warp: over the query heads of the group and the query tiles that see
/// the block's keys, S^T = K Q^T, P^T = exp(scale S^T - lse), dP^T = V dO^T,
/// dS^T = P^T (dP^T - rowDot); dv += P^T dO, dk += dS^T Q (P^T and dS^T
/// rounded to bf16); at the end dk = scale dk. Every key row is one warp's,
/// so no atomics.
template <int D>
__global__ void __launch_bounds__(kBlockThreads)
    wmmaGradKeyValueKernel(WmmaShape s, const __nv_bfloat16 *dout,
                           const __nv_bfloat16 *q, const __nv_bfloat16 *k,
                           const __nv_bfloat16 *v, const float *lse,
                           const float *rowDot, __nv_bfloat16 *dk,
                           __nv_bfloat16 *dv) {
  constexpr int Frags = D / kFrag;
  __shared__ __align__(32) __nv_bfloat16 queries[kKeyTile * D];
  __shared__ __align__(32) __nv_bfloat16 gradOuts[kKeyTile * D];
  __shared__ __align__(32) unsigned char area[kWarps][kWarpBytes];
  __shared__ float tileLse[kKeyTile], tileRowDot[kKeyTile];

  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  __nv_bfloat16 *staged = reinterpret_cast<__nv_bfloat16 *>(area[warp]);
  float *scores = reinterpret_cast<float *>(area[warp]);
  float *dprobs = reinterpret_cast<float *>(area[warp] + kProbsAt);
  __nv_bfloat16 *probsT = reinterpret_cast<__nv_bfloat16 *>(area[warp]);
  __nv_bfloat16 *dscoresT =
      reinterpret_cast<__nv_bfloat16 *>(area[warp] + kFrag * kKeyTile * 2);
  float *scratch = reinterpret_cast<float *>(area[warp] + kScratchAt);
  const int64_t group = s.heads / s.kvHeads;
  const int64_t tiles = s.batch * s.kvHeads * s.queryBlocks();

  for (int64_t tile : gridBlocks(tiles)) {
    const RowBlock block = rowBlock(s, tile, s.kvHeads, warp);
    const int64_t b = block.b, g = block.head;
    const int64_t k0 = block.r0, kw = block.rw;

    FragA key[Frags], value[Frags];
    loadRowFragments(key, staged, k, s, b, kw, s.kvHeads, g, lane);
    loadRowFragments(value, staged, v, s, b, kw, s.kvHeads, g, lane);

    FragAcc accK[Frags], accV[Frags];
    clear(accK);
    clear(accV);
    const int row = lane / 2, half = lane % 2;
    const int64_t j = kw + row;

    for (int64_t i = 0; i < group; ++i) {
      const int64_t h = g * group + i;
      // Query tiles from the one holding the block's first key.
      for (int64_t t0 = k0 / kKeyTile * kKeyTile; t0 < s.seq; t0 += kKeyTile) {
        __syncthreads();
        stageRows<D>(queries, q, s, b, t0, s.heads, h,
                     blockThreads(kKeyTile * D));
        stageRows<D>(gradOuts, dout, s, b, t0, s.heads, h,
                     blockThreads(kKeyTile * D));
        for (int r : blockThreads(kKeyTile)) {
          const int64_t tr = t0 + r;
          tileLse[r] = tr < s.seq ? lse[s.rowStat(b, h, tr)] : 0.0f;
          tileRowDot[r] = tr < s.seq ? rowDot[s.rowStat(b, h, tr)] : 0.0f;
        }
        __syncthreads();
        productWithRows(scores, key, queries);    // S^T = K Q^T
        productWithRows(dprobs, value, gradOuts); // dP^T = V dO^T
        __syncwarp();
        float p[kFrag], ds[kFrag];
        for (int c = 0; c < kFrag; ++c) {
          const int col = half * kFrag + c;
          const int64_t t = t0 + col;
          p[c] = t >= j && t < s.seq && j < s.seq
                     ? expf(s.scale * scores[row * kKeyTile + col] -
                            tileLse[col])
                     : 0.0f;
          ds[c] = p[c] * (dprobs[row * kKeyTile + col] - tileRowDot[col]);
        }
        __syncwarp(); // P^T and dS^T overwrite the scores
        for (int c = 0; c < kFrag; ++c) {
          probsT[row * kKeyTile + half * kFrag + c] = __float2bfloat16_rn(p[c]);
          dscoresT[row * kKeyTile + half * kFrag + c] =
              __float2bfloat16_rn(ds[c]);
        }
        __syncwarp();
        accumulateProduct(accV, probsT, gradOuts); // dv += P^T dO
        accumulateProduct(accK, dscoresT, queries); // dk += dS^T Q
        __syncwarp();
      }
    }
    storeRows(dk, accK, scratch, s.scale, nullptr, s, b, kw, s.kvHeads, g,
              lane);
    storeRows(dv, accV, scratch, 1.0f, nullptr, s, b, kw, s.kvHeads, g, lane);
  }
}

template <int D>
void launchGrad(cudaStream_t stream, const WmmaShape &s, const void *dout,
                const void *q, const void *k, const void *v, const float *lse,
                const float *rowDot, void *dq, void *dk, void *dv) {
  auto bf = [](const void *p) { return static_cast<const __nv_bfloat16 *>(p); };
  const unsigned queryBlocks =
      tileBlocksFor(s.batch * s.heads * s.queryBlocks());
  const unsigned keyBlocks =
      tileBlocksFor(s.batch * s.kvHeads * s.queryBlocks());
  wmmaGradQueryKernel<D><<<queryBlocks, kBlockThreads, 0, stream>>>(
      s, bf(dout), bf(q), bf(k), bf(v), lse, rowDot,
      static_cast<__nv_bfloat16 *>(dq));
  checkLaunch("causal_attention_grad");
  wmmaGradKeyValueKernel<D><<<keyBlocks, kBlockThreads, 0, stream>>>(
      s, bf(dout), bf(q), bf(k), bf(v), lse, rowDot,
      static_cast<__nv_bfloat16 *>(dk), static_cast<__nv_bfloat16 *>(dv));
  checkLaunch("causal_attention_grad");
}

/// Calls fn(std::integral_constant<int, D>) for head_dim D (a multiple of
/// 16 up to 128).
template <typename Fn> void dispatchHeadDim(int64_t headDim, Fn fn) {
  switch (headDim / kFrag) {
  case 1: fn(std::integral_constant<int, 16>{}); break;
  case 2: fn(std::integral_constant<int, 32>{}); break;
  case 3: fn(std::integral_constant<int, 48>{}); break;
  case 4: fn(std::integral_constant<int, 64>{}); break;
  case 5: fn(std::integral_constant<int, 80>{}); break;
  case 6: fn(std::integral_constant<int, 96>{}); break;
  case 7: fn(std::integral_constant<int, 112>{}); break;
  default: fn(std::integral_constant<int, 128>{}); break;
  }
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
  dispatchHeadDim(head_dim, [&](auto d) {
    launchForward<decltype(d)::value>(stream, s, q, k, v, out, lse);
  });
  checkLaunch(op);
}

void causalAttentionGradWmma(cudaStream_t stream, int32_t dtype,
                             const void *dout, const void *q, const void *k,
                             const void *v, const void *out, const float *lse,
                             void *dq, void *dk, void *dv, int64_t batch,
                             int64_t seq, int64_t heads, int64_t kv_heads,
                             int64_t head_dim, float scale) {
  const char *op = "causal_attention_grad";
  checkAttentionShape(op, batch, seq, heads, kv_heads, head_dim, scale);
  if (!causalAttentionWmmaSupports(dtype, head_dim))
    fatal("%s: the WMMA attention takes bf16 with head_dim a multiple of 16 "
          "up to %d, not dtype %d with head_dim %lld",
          op, kMaxHeadDim, dtype, static_cast<long long>(head_dim));
  const WmmaShape s{batch, seq, heads, kv_heads, scale};
  const int64_t queryRows = batch * heads * seq;
  if (queryRows == 0) {
    // No query sees a key (heads == 0 included): dk and dv are zero, as
    // the CPU's, and there is no dq to write.
    causalAttentionGrad(stream, dtype, dout, q, k, v, out, lse, dq, dk, dv,
                        batch, seq, heads, kv_heads, head_dim, scale);
    return;
  }
  float *rowDot = nullptr;
  check(cudaMallocAsync(reinterpret_cast<void **>(&rowDot),
                        static_cast<size_t>(queryRows) * sizeof(float), stream),
        "causal_attention_grad: cudaMallocAsync of the dO . O scratch");
  rowDotKernel<<<blocksFor(queryRows), kThreads, 0, stream>>>(
      s, head_dim, static_cast<const __nv_bfloat16 *>(dout),
      static_cast<const __nv_bfloat16 *>(out), rowDot);
  checkLaunch(op);
  dispatchHeadDim(head_dim, [&](auto d) {
    launchGrad<decltype(d)::value>(stream, s, dout, q, k, v, lse, rowDot, dq,
                                   dk, dv);
  });
  check(cudaFreeAsync(rowDot, stream),
        "causal_attention_grad: cudaFreeAsync of the dO . O scratch");
}

} // namespace autoshard::rt::cuda
