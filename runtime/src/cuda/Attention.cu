// Causal self-attention with grouped-query heads on the GPU: a flash-style
// forward and a backward that recomputes probabilities from the forward's
// log-sum-exp, as runtime/src/cpu/Attention.cpp (abi.h has the contract).
//
// Work decomposition. A thread block of kRowsPerBlock warps owns
// kRowsPerBlock consecutive rows of one (batch, head) — query rows in the
// forward and dq kernels, key rows of one key/value head in the dk/dv
// kernel — one row per warp. The block streams the other side in tiles of
// kTile = 32 rows through shared memory; lane i of a warp computes the
// score of tile row i (a head_dim-long dot product), and the warp then
// accumulates the tile into its row's f32 accumulators, lane c owning
// columns c, c + 32, c + 64, c + 96 of the head.
//
//   forward:   m, l, acc per query row, online softmax over key tiles
//              (running max and sum in f32); out = acc / l,
//              lse = m + log(l). No score matrix is stored.
//   backward:  rowDot[t] = dO[t] . O[t]  (the softmax Jacobian term)
//              dq kernel:    per query row, over its visible keys,
//                            p = exp(scale q.k - lse), ds = p (dO.v - rowDot),
//                            dq = scale sum ds k
//              dk/dv kernel: per key row, over the query heads of its group
//                            and the query rows that see it, the same p and
//                            ds; dv = sum p dO, dk = scale sum ds q.
//   Every output element is written by exactly one warp, so the backward
//   needs no atomics and is deterministic; rowDot is the only scratch
//   (batch * heads * seq floats, stream-ordered cudaMallocAsync).
//
// Known performance limitations (correctness first): f32 FMAs on CUDA cores,
// no tensor cores (no mma/wgmma) and no TMA or asynchronous copies; one row
// per warp gives only kRowsPerBlock-fold reuse of each shared tile; the
// backward computes the scores twice (dq pass and dk/dv pass); causal tiles
// above the diagonal are skipped per warp but still loaded per block; a
// long key/value group serializes its query heads in one block. Shared
// memory is sized for head_dim <= kMaxHeadDim = 128 (larger is fatal).
#include "Cuda.h"
#include "Element.cuh"
#include "Grid.cuh"

#include "core/ArgChecks.h"
#include "core/Context.h"

#include <cmath>
#include <cstdint>

namespace autoshard::rt::cuda {
namespace {

constexpr int kMaxHeadDim = 128;
constexpr int kColumnsPerLane = kMaxHeadDim / kWarp;
/// Warps per block, each owning one row.
constexpr int kRowsPerBlock = 8;
constexpr int kBlockThreads = kRowsPerBlock * kWarp;
/// Rows of a shared tile: one per lane.
constexpr int kTile = kWarp;
/// Row pitch of shared tiles: lane i reads row i column by column, and the
/// odd pitch puts the 32 lanes' words in 32 different banks.
constexpr int kPitch = kMaxHeadDim + 1;

struct Shape {
  int64_t batch, seq, heads, kvHeads, headDim;
  float scale;

  __host__ __device__ int64_t group() const { return heads / kvHeads; }
  /// Blocks of kRowsPerBlock rows covering the sequence.
  __host__ __device__ int64_t rowBlocks() const {
    return (seq + kRowsPerBlock - 1) / kRowsPerBlock;
  }
  /// Offset of element 0 of row t of head h of batch b in a tensor of
  /// layout [batch, seq, nHeads, headDim].
  __device__ int64_t at(int64_t b, int64_t t, int64_t nHeads, int64_t h) const {
    return ((b * seq + t) * nHeads + h) * headDim;
  }
  /// Offset of (b, h, t) in lse and rowDot, [batch, heads, seq].
  __device__ int64_t rowStat(int64_t b, int64_t h, int64_t t) const {
    return (b * heads + h) * seq + t;
  }
};

Shape checkShape(const char *op, int64_t batch, int64_t seq, int64_t heads,
                 int64_t kvHeads, int64_t headDim, float scale) {
  checkAttentionShape(op, batch, seq, heads, kvHeads, headDim, scale);
  if (headDim > kMaxHeadDim)
    fatal("%s: head_dim = %lld exceeds %d, the most the CUDA attention "
          "kernels support (their shared-memory tiles are sized for it)",
          op, static_cast<long long>(headDim), kMaxHeadDim);
  return {batch, seq, heads, kvHeads, headDim, scale};
}

__device__ __forceinline__ float warpMax(float x) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    x = fmaxf(x, __shfl_xor_sync(kFullMask, x, offset));
  return x;
}

__device__ __forceinline__ float warpSum(float x) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    x += __shfl_xor_sync(kFullMask, x, offset);
  return x;
}

/// Rows [r0, r0 + kTile) of head h of a [batch, seq, nHeads, headDim]
/// tensor into a shared tile of pitch kPitch, in f32; rows past the
/// sequence are zero (their scores are masked, and 0 * 0 adds nothing).
/// Called by the whole block.
template <typename T>
__device__ void loadTile(float *tile, const T *src, const Shape &s, int64_t b,
                         int64_t r0, int64_t nHeads, int64_t h) {
  const int d = static_cast<int>(s.headDim);
  for (int e : blockThreads(kTile * d)) {
    const int r = e / d, c = e % d;
    const int64_t t = r0 + r;
    tile[r * kPitch + c] =
        t < s.seq ? load(src, s.at(b, t, nHeads, h) + c) : 0.0f;
  }
}

/// One row of head h into `row` (kMaxHeadDim floats), by one warp.
template <typename T>
__device__ void loadRow(float *row, const T *src, const Shape &s, int64_t b,
                        int64_t t, int64_t nHeads, int64_t h, int lane) {
  const int64_t base = s.at(b, t, nHeads, h);
  for (int c : warpLanes(int(s.headDim), lane))
    row[c] = load(src, base + c);
}

/// sum over c < d of a[c] * b[c], in order, in f32 (as the CPU's GEMMs).
__device__ __forceinline__ float dot(const float *a, const float *b, int d) {
  float sum = 0.0f;
  for (int c = 0; c < d; ++c)
    sum = fmaf(a[c], b[c], sum);
  return sum;
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    forwardKernel(Shape s, const T *q, const T *k, const T *v, T *out,
                  float *lse) {
  __shared__ float qRows[kRowsPerBlock][kMaxHeadDim];
  __shared__ float kTileBuf[kTile * kPitch];
  __shared__ float vTileBuf[kTile * kPitch];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int d = static_cast<int>(s.headDim);
  const int64_t rowBlocks = s.rowBlocks();
  const int64_t tiles = s.batch * s.heads * rowBlocks;

  for (int64_t tile : gridBlocks(tiles)) {
    const int64_t q0 = (tile % rowBlocks) * kRowsPerBlock;
    const int64_t h = (tile / rowBlocks) % s.heads;
    const int64_t b = tile / (rowBlocks * s.heads);
    const int64_t g = h / s.group();
    const int64_t t = q0 + warp; // this warp's query row
    const bool active = t < s.seq;
    __syncthreads(); // the previous tile is done with shared memory
    if (active)
      loadRow(qRows[warp], q, s, b, t, s.heads, h, lane);

    float m = -INFINITY, l = 0.0f, acc[kColumnsPerLane] = {};
    // Keys [0, keyEnd) are visible to some row of the block.
    const int64_t keyEnd =
        q0 + kRowsPerBlock < s.seq ? q0 + kRowsPerBlock : s.seq;
    for (int64_t k0 = 0; k0 < keyEnd; k0 += kTile) {
      __syncthreads();
      loadTile(kTileBuf, k, s, b, k0, s.kvHeads, g);
      loadTile(vTileBuf, v, s, b, k0, s.kvHeads, g);
      __syncthreads();
      if (!active || k0 > t) // warp-uniform: the whole tile is masked
        continue;
      const int64_t j = k0 + lane;
      const bool visible = j <= t;
      const float score =
          visible ? s.scale * dot(qRows[warp], kTileBuf + lane * kPitch, d)
                  : -INFINITY;
      // Key k0 <= t is visible, so the tile's maximum and mNew are finite
      // (for finite inputs), and the first tile's alpha is exp(-inf) = 0.
      const float mNew = fmaxf(m, warpMax(score));
      const float p = visible ? expf(score - mNew) : 0.0f;
      const float alpha = expf(m - mNew);
      l = l * alpha + warpSum(p);
#pragma unroll
      for (int i = 0; i < kColumnsPerLane; ++i)
        acc[i] *= alpha;
      for (int jj = 0; jj < kTile; ++jj) {
        const float pj = __shfl_sync(kFullMask, p, jj);
        const float *vRow = vTileBuf + jj * kPitch;
#pragma unroll
        for (int i = 0; i < kColumnsPerLane; ++i) {
          const int c = lane + i * kWarp;
          if (c < d)
            acc[i] = fmaf(pj, vRow[c], acc[i]);
        }
      }
      m = mNew;
    }

    if (active) {
      // As the CPU: normalize by the reciprocal of the row's sum.
      const float inv = 1.0f / l;
      const int64_t base = s.at(b, t, s.heads, h);
#pragma unroll
      for (int i = 0; i < kColumnsPerLane; ++i) {
        const int c = lane + i * kWarp;
        if (c < d)
          store(out, base + c, acc[i] * inv);
      }
      if (lane == 0)
        lse[s.rowStat(b, h, t)] = m + logf(l);
    }
  }
}

/// rowDot[b, h, t] = dO[b, t, h] . O[b, t, h], one warp per row.
template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    rowDotKernel(Shape s, const T *dout, const T *out, float *rowDot) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t rows = s.batch * s.seq * s.heads;
  for (int64_t r : gridWarps(rows, kRowsPerBlock, warp)) {
    // r enumerates rows in memory order: r = (b * seq + t) * heads + h.
    const int64_t h = r % s.heads, t = (r / s.heads) % s.seq,
                  b = r / (s.heads * s.seq);
    const int64_t base = r * s.headDim;
    float partial = 0.0f;
    for (int64_t c : warpLanes(s.headDim, lane))
      partial = fmaf(load(dout, base + c), load(out, base + c), partial);
    const float sum = warpSum(partial);
    if (lane == 0)
      rowDot[s.rowStat(b, h, t)] = sum;
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    gradQueryKernel(Shape s, const T *dout, const T *q, const T *k, const T *v,
                    const float *lse, const float *rowDot, T *dq) {
  __shared__ float qRows[kRowsPerBlock][kMaxHeadDim];
  __shared__ float doRows[kRowsPerBlock][kMaxHeadDim];
  __shared__ float kTileBuf[kTile * kPitch];
  __shared__ float vTileBuf[kTile * kPitch];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int d = static_cast<int>(s.headDim);
  const int64_t rowBlocks = s.rowBlocks();
  const int64_t tiles = s.batch * s.heads * rowBlocks;

  for (int64_t tile : gridBlocks(tiles)) {
    const int64_t q0 = (tile % rowBlocks) * kRowsPerBlock;
    const int64_t h = (tile / rowBlocks) % s.heads;
    const int64_t b = tile / (rowBlocks * s.heads);
    const int64_t g = h / s.group();
    const int64_t t = q0 + warp;
    const bool active = t < s.seq;
    __syncthreads();
    float rowLse = 0.0f, rowD = 0.0f;
    if (active) {
      loadRow(qRows[warp], q, s, b, t, s.heads, h, lane);
      loadRow(doRows[warp], dout, s, b, t, s.heads, h, lane);
      rowLse = lse[s.rowStat(b, h, t)];
      rowD = rowDot[s.rowStat(b, h, t)];
    }

    float acc[kColumnsPerLane] = {};
    const int64_t keyEnd =
        q0 + kRowsPerBlock < s.seq ? q0 + kRowsPerBlock : s.seq;
    for (int64_t k0 = 0; k0 < keyEnd; k0 += kTile) {
      __syncthreads();
      loadTile(kTileBuf, k, s, b, k0, s.kvHeads, g);
      loadTile(vTileBuf, v, s, b, k0, s.kvHeads, g);
      __syncthreads();
      if (!active || k0 > t)
        continue;
      const int64_t j = k0 + lane;
      float ds = 0.0f;
      if (j <= t) {
        const float p = expf(
            s.scale * dot(qRows[warp], kTileBuf + lane * kPitch, d) - rowLse);
        const float dp = dot(doRows[warp], vTileBuf + lane * kPitch, d);
        ds = p * (dp - rowD);
      }
      for (int jj = 0; jj < kTile; ++jj) {
        const float dsj = __shfl_sync(kFullMask, ds, jj);
        const float *kRow = kTileBuf + jj * kPitch;
#pragma unroll
        for (int i = 0; i < kColumnsPerLane; ++i) {
          const int c = lane + i * kWarp;
          if (c < d)
            acc[i] = fmaf(dsj, kRow[c], acc[i]);
        }
      }
    }

    if (active) {
      const int64_t base = s.at(b, t, s.heads, h);
#pragma unroll
      for (int i = 0; i < kColumnsPerLane; ++i) {
        const int c = lane + i * kWarp;
        if (c < d)
          store(dq, base + c, s.scale * acc[i]);
      }
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    gradKeyValueKernel(Shape s, const T *dout, const T *q, const T *k,
                       const T *v, const float *lse, const float *rowDot, T *dk,
                       T *dv) {
  __shared__ float kRows[kRowsPerBlock][kMaxHeadDim];
  __shared__ float vRows[kRowsPerBlock][kMaxHeadDim];
  __shared__ float qTileBuf[kTile * kPitch];
  __shared__ float doTileBuf[kTile * kPitch];
  __shared__ float lseTile[kTile];
  __shared__ float rowDotTile[kTile];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int d = static_cast<int>(s.headDim);
  const int64_t rowBlocks = s.rowBlocks();
  const int64_t tiles = s.batch * s.kvHeads * rowBlocks;
  const int64_t group = s.group();

  for (int64_t tile : gridBlocks(tiles)) {
    const int64_t j0 = (tile % rowBlocks) * kRowsPerBlock;
    const int64_t g = (tile / rowBlocks) % s.kvHeads;
    const int64_t b = tile / (rowBlocks * s.kvHeads);
    const int64_t j = j0 + warp; // this warp's key row
    const bool active = j < s.seq;
    __syncthreads();
    if (active) {
      loadRow(kRows[warp], k, s, b, j, s.kvHeads, g, lane);
      loadRow(vRows[warp], v, s, b, j, s.kvHeads, g, lane);
    }

    float dkAcc[kColumnsPerLane] = {}, dvAcc[kColumnsPerLane] = {};
    // The query heads sharing key/value head g, and the query rows that see
    // some key of the block: t >= j0.
    for (int64_t h = g * group; h < (g + 1) * group; ++h)
      for (int64_t t0 = j0; t0 < s.seq; t0 += kTile) {
        __syncthreads();
        loadTile(qTileBuf, q, s, b, t0, s.heads, h);
        loadTile(doTileBuf, dout, s, b, t0, s.heads, h);
        for (int e : blockThreads(kTile)) {
          const int64_t t = t0 + e;
          lseTile[e] = t < s.seq ? lse[s.rowStat(b, h, t)] : 0.0f;
          rowDotTile[e] = t < s.seq ? rowDot[s.rowStat(b, h, t)] : 0.0f;
        }
        __syncthreads();
        if (!active)
          continue;
        const int64_t t = t0 + lane;
        float p = 0.0f, ds = 0.0f;
        if (t < s.seq && t >= j) { // query t sees key j
          p = expf(s.scale * dot(qTileBuf + lane * kPitch, kRows[warp], d) -
                   lseTile[lane]);
          const float dp = dot(doTileBuf + lane * kPitch, vRows[warp], d);
          ds = p * (dp - rowDotTile[lane]);
        }
        for (int tt = 0; tt < kTile; ++tt) {
          const float pt = __shfl_sync(kFullMask, p, tt);
          const float dst = __shfl_sync(kFullMask, ds, tt);
          const float *qRow = qTileBuf + tt * kPitch;
          const float *doRow = doTileBuf + tt * kPitch;
#pragma unroll
          for (int i = 0; i < kColumnsPerLane; ++i) {
            const int c = lane + i * kWarp;
            if (c < d) {
              dvAcc[i] = fmaf(pt, doRow[c], dvAcc[i]);
              dkAcc[i] = fmaf(dst, qRow[c], dkAcc[i]);
            }
          }
        }
      }

    if (active) {
      const int64_t base = s.at(b, j, s.kvHeads, g);
#pragma unroll
      for (int i = 0; i < kColumnsPerLane; ++i) {
        const int c = lane + i * kWarp;
        if (c < d) {
          store(dk, base + c, s.scale * dkAcc[i]);
          store(dv, base + c, dvAcc[i]);
        }
      }
    }
  }
}

} // namespace

void causalAttentionFwd(cudaStream_t stream, int32_t dtype, const void *q,
                        const void *k, const void *v, void *out, float *lse,
                        int64_t batch, int64_t seq, int64_t heads,
                        int64_t kv_heads, int64_t head_dim, float scale) {
  const char *op = "causal_attention_fwd";
  Shape s = checkShape(op, batch, seq, heads, kv_heads, head_dim, scale);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t tiles = s.batch * s.heads * s.rowBlocks();
    if (tiles == 0)
      return;
    forwardKernel<T><<<tileBlocksFor(tiles), kBlockThreads, 0, stream>>>(
        s, static_cast<const T *>(q), static_cast<const T *>(k),
        static_cast<const T *>(v), static_cast<T *>(out), lse);
    checkLaunch(op);
  });
}

void causalAttentionGrad(cudaStream_t stream, int32_t dtype, const void *dout,
                         const void *q, const void *k, const void *v,
                         const void *out, const float *lse, void *dq, void *dk,
                         void *dv, int64_t batch, int64_t seq, int64_t heads,
                         int64_t kv_heads, int64_t head_dim, float scale) {
  const char *op = "causal_attention_grad";
  Shape s = checkShape(op, batch, seq, heads, kv_heads, head_dim, scale);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *tq = static_cast<const T *>(q), *tk = static_cast<const T *>(k),
            *tv = static_cast<const T *>(v),
            *tdout = static_cast<const T *>(dout);
    const int64_t queryRows = s.batch * s.seq * s.heads;
    float *rowDot = nullptr;
    if (queryRows > 0) {
      check(cudaMallocAsync(reinterpret_cast<void **>(&rowDot),
                            static_cast<size_t>(queryRows) * sizeof(float),
                            stream),
            "causal_attention_grad: cudaMallocAsync of the dO . O scratch");
      const int64_t rowBlocks = (queryRows + kRowsPerBlock - 1) / kRowsPerBlock;
      rowDotKernel<T><<<tileBlocksFor(rowBlocks), kBlockThreads, 0, stream>>>(
          s, tdout, static_cast<const T *>(out), rowDot);
      checkLaunch(op);
      const unsigned queryBlocks =
          tileBlocksFor(s.batch * s.heads * s.rowBlocks());
      gradQueryKernel<T><<<queryBlocks, kBlockThreads, 0, stream>>>(
          s, tdout, tq, tk, tv, lse, rowDot, static_cast<T *>(dq));
      checkLaunch(op);
    }
    // Also with heads == 0 (group 0): dk and dv are then zero, as the CPU's.
    const int64_t keyTiles = s.batch * s.kvHeads * s.rowBlocks();
    if (keyTiles > 0) {
      const unsigned keyBlocks = tileBlocksFor(keyTiles);
      gradKeyValueKernel<T><<<keyBlocks, kBlockThreads, 0, stream>>>(
          s, tdout, tq, tk, tv, lse, rowDot, static_cast<T *>(dk),
          static_cast<T *>(dv));
      checkLaunch(op);
    }
    if (rowDot)
      check(cudaFreeAsync(rowDot, stream),
            "causal_attention_grad: cudaFreeAsync of the dO . O scratch");
  });
}

} // namespace autoshard::rt::cuda
