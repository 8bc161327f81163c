// Embedding lookups on the GPU: token tables and learned position
// embeddings, as runtime/src/cpu/Embedding.cpp.
//
// Token ids are checked on the host, from a copy read back before any kernel
// runs (indicesToHost, which synchronises the stream), with the CPU's
// message for the first id out of range; a bad batch therefore changes
// nothing, as on the CPU. The gradient reuses that copy: the host sorts the
// positions by (id, position), as the CPU does, and a kernel sums each id's
// rows in that order in double and writes its table row once. That repeats
// the CPU's result bit for bit, is deterministic, rounds a bf16 row once,
// and needs no f32 copy of the table (150 MB for GPT-2's vocabulary) and no
// atomics. Known performance limitations: the stream synchronisations
// (reading the ids back; in the gradient also waiting for the sorted index
// to reach the device), the host sort (n_ids log n_ids) per call, and one
// block summing all the rows of an id that repeats very often (a padding
// token) serially.
#include "ArgChecks.h"
#include "Cuda.h"
#include "Element.cuh"
#include "Grid.cuh"

#include <algorithm>
#include <vector>

namespace autoshard::rt::cuda {
namespace {

/// A gather of whole rows: no arithmetic, so bf16 rows copy bit for bit.
/// The ids were checked on the host; an id outside the table (which would
/// mean the device copy changed since) is still never read through.
template <typename T>
__global__ void embeddingFwdKernel(const int32_t *ids, const T *table, T *y,
                                   int64_t nIds, int64_t numEmbeddings,
                                   int64_t dim) {
  for (int64_t e : gridThreads(nIds * dim)) {
    const int64_t i = e / dim, j = e % dim;
    const int64_t id = ids[i];
    if (id >= 0 && id < numEmbeddings)
      y[e] = table[id * dim + j];
  }
}

/// dtable[segIds[s], :] = the sum of dy[order[k], :] for k in
/// [segStart[s], segStart[s + 1]), in that order, in double: one block per
/// segment (an id's occurrences), its threads over the columns.
template <typename T>
__global__ void embeddingGradKernel(const T *dy, const int64_t *order,
                                    const int64_t *segStart,
                                    const int64_t *segIds, T *dtable,
                                    int64_t nSegments, int64_t dim) {
  for (int64_t s : gridBlocks(nSegments)) {
    T *dst = dtable + segIds[s] * dim;
    for (int64_t j : blockThreads(dim)) {
      double acc = 0.0;
      for (int64_t k = segStart[s]; k < segStart[s + 1]; ++k)
        acc += load(dy, order[k] * dim + j);
      store(dst, j, static_cast<float>(acc));
    }
  }
}

/// y[b, t, :] = x[b, t, :] + wpe[t, :]: elementwise over x, so y may alias
/// x (each element is read, then written, by one thread).
template <typename T>
__global__ void addPositionEmbeddingFwdKernel(const T *x, const T *wpe, T *y,
                                              int64_t n, int64_t seqDim) {
  for (int64_t e : gridThreads(n))
    store(y, e, load(x, e) + load(wpe, e % seqDim));
}

/// dwpe[t, j] = the sum over b of dy[b, t, j] in double, in b order, for
/// t < seq; 0 for the positions the sequence does not reach.
template <typename T>
__global__ void
addPositionEmbeddingGradKernel(const T *dy, T *dwpe, int64_t batch, int64_t seq,
                               int64_t maxPositions, int64_t dim) {
  const int64_t seqDim = seq * dim;
  for (int64_t e : gridThreads(maxPositions * dim)) {
    double acc = 0.0;
    if (e < seqDim)
      for (int64_t b = 0; b < batch; ++b)
        acc += load(dy, b * seqDim + e);
    store(dwpe, e, static_cast<float>(acc));
  }
}

/// The ids read back to the host and checked, as the CPU backend checks
/// them (checkEmbeddingIds).
std::vector<int32_t> checkedIds(cudaStream_t stream, const char *op,
                                const int32_t *ids, int64_t nIds,
                                int64_t numEmbeddings) {
  std::vector<int32_t> host = indicesToHost(stream, op, ids, nIds);
  checkEmbeddingIds(op, host.data(), nIds, numEmbeddings);
  return host;
}

} // namespace

void embeddingFwd(cudaStream_t stream, int32_t dtype, const int32_t *ids,
                  const void *table, void *y, int64_t nIds,
                  int64_t numEmbeddings, int64_t dim) {
  const char *op = "embedding_fwd";
  checkEmbeddingShape(op, nIds, numEmbeddings, dim);
  // Checked before any row is written, so a bad batch changes nothing.
  checkedIds(stream, op, ids, nIds, numEmbeddings);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    if (nIds == 0 || dim == 0)
      return;
    embeddingFwdKernel<<<blocksFor(nIds * dim), kThreads, 0, stream>>>(
        ids, static_cast<const T *>(table), static_cast<T *>(y), nIds,
        numEmbeddings, dim);
    checkLaunch(op);
  });
}

void embeddingGrad(cudaStream_t stream, int32_t dtype, const void *dy,
                   const int32_t *ids, void *dtable, int64_t nIds,
                   int64_t numEmbeddings, int64_t dim) {
  const char *op = "embedding_grad";
  checkEmbeddingShape(op, nIds, numEmbeddings, dim);
  const std::vector<int32_t> host =
      checkedIds(stream, op, ids, nIds, numEmbeddings);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const size_t tableBytes =
        static_cast<size_t>(numEmbeddings * dim) * sizeof(T);
    if (nIds == 0 || dim == 0) {
      if (tableBytes > 0) // zero bits are +0 in both f32 and bf16
        check(cudaMemsetAsync(dtable, 0, tableBytes, stream), op);
      return;
    }
    // One index buffer: order[nIds], segStart[nSegments + 1],
    // segIds[nSegments], with nSegments <= nIds.
    std::vector<int64_t> index;
    index.reserve(static_cast<size_t>(3 * nIds + 1));
    for (int64_t i = 0; i < nIds; ++i)
      index.push_back(i);
    std::sort(index.begin(), index.end(), [&host](int64_t a, int64_t b) {
      return host[a] != host[b] ? host[a] < host[b] : a < b;
    });
    std::vector<int64_t> segIds;
    for (int64_t k = 0; k < nIds; ++k)
      if (k == 0 || host[index[k]] != host[index[k - 1]]) {
        index.push_back(k); // segStart
        segIds.push_back(host[index[k]]);
      }
    index.push_back(nIds);
    index.insert(index.end(), segIds.begin(), segIds.end());
    const int64_t nSegments = static_cast<int64_t>(segIds.size());
    const size_t indexBytes = index.size() * sizeof(int64_t);
    void *deviceIndex = nullptr;
    check(cudaMallocAsync(&deviceIndex, indexBytes, stream), op);
    check(cudaMemcpyAsync(deviceIndex, index.data(), indexBytes,
                          cudaMemcpyHostToDevice, stream),
          op);
    // The documentation does not promise that an asynchronous copy from
    // pageable memory is done with `index` when it returns: wait for it.
    // The stream is idle since checkedIds, so this waits for the copy only.
    check(cudaStreamSynchronize(stream), op);
    check(cudaMemsetAsync(dtable, 0, tableBytes, stream), op);
    const int64_t *dOrder = static_cast<const int64_t *>(deviceIndex);
    embeddingGradKernel<<<rowBlocksFor(nSegments), kThreads, 0, stream>>>(
        static_cast<const T *>(dy), dOrder, dOrder + nIds,
        dOrder + nIds + nSegments + 1, static_cast<T *>(dtable), nSegments,
        dim);
    checkLaunch(op);
    check(cudaFreeAsync(deviceIndex, stream), op);
  });
}

void addPositionEmbeddingFwd(cudaStream_t stream, int32_t dtype, const void *x,
                             const void *wpe, void *y, int64_t batch,
                             int64_t seq, int64_t dim) {
  const char *op = "add_position_embedding_fwd";
  checkPositionEmbeddingShape(op, batch, seq, dim);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = batch * seq * dim;
    if (n == 0)
      return;
    addPositionEmbeddingFwdKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const T *>(x), static_cast<const T *>(wpe),
        static_cast<T *>(y), n, seq * dim);
    checkLaunch(op);
  });
}

void addPositionEmbeddingGrad(cudaStream_t stream, int32_t dtype,
                              const void *dy, void *dwpe, int64_t batch,
                              int64_t seq, int64_t maxPositions, int64_t dim) {
  const char *op = "add_position_embedding_grad";
  checkPositionEmbeddingGradShape(op, batch, seq, maxPositions, dim);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = maxPositions * dim;
    if (n == 0)
      return;
    addPositionEmbeddingGradKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const T *>(dy), static_cast<T *>(dwpe), batch, seq,
        maxPositions, dim);
    checkLaunch(op);
  });
}

} // namespace autoshard::rt::cuda
