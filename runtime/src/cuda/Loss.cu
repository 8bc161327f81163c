// The losses on the GPU. Softmax cross-entropy, row by row with max-shifted
// log-sum-exp, as runtime/src/cpu/Loss.cpp: the maximum and the exponentials
// in float, their sum, each row's loss and the mean over rows in double.
//
// One thread block per row. Labels are checked on the host, from a copy
// read back before any kernel runs (indicesToHost, which synchronises the
// stream), with the CPU's message for the first counted row whose label is
// out of range; the same copy counts the rows whose label is not the ignore
// index, the mean's divisor, which the kernels take as an argument. The
// mean is deterministic: the forward kernel writes each row's loss (0 for
// an ignored row) to device scratch and one block adds them up in a fixed
// order.
// Known performance limitations: the stream synchronisation per call, and a
// row (a vocabulary of logits) read three times from global memory.
//
// The negative log-likelihood reads one element per row: the labels are
// checked and counted on the host in the same way; one block sums the
// forward's rows in a fixed order, and the gradient writes one element per
// counted row into a zeroed tensor.
#include "ArgChecks.h"
#include "Cuda.h"
#include "Element.cuh"
#include "Grid.cuh"
#include "RowReduce.cuh"

#include <vector>

namespace autoshard::rt::cuda {
namespace {

/// The row's maximum and the sum of exp(z - max) in double (the
/// exponentials rounded to float first, as the CPU's expShifted).
struct RowSoftmax {
  float max;
  double sum;
};
template <typename T>
__device__ RowSoftmax rowSoftmax(const T *row, int64_t classes) {
  float m = -INFINITY;
  for (int64_t j : blockThreads(classes)) {
    const float v = load(row, j);
    m = v > m ? v : m;
  }
  m = blockMax(m);
  double sum = 0.0;
  for (int64_t j : blockThreads(classes))
    sum += expf(load(row, j) - m);
  return {m, blockSum(sum)};
}

/// rowLoss[r] = -log softmax(logits[r, :])[labels[r]], in double; 0 for a
/// row whose label is ignoreIndex.
template <typename T>
__global__ void xentRowLossKernel(const T *logits, const int32_t *labels,
                                  double *rowLoss, int64_t rows,
                                  int64_t classes, int64_t ignoreIndex) {
  for (int64_t r : gridBlocks(rows)) {
    // The whole block skips the row (no reductions to meet).
    if (labels[r] == ignoreIndex) {
      if (threadIdx.x == 0)
        rowLoss[r] = 0.0;
      continue;
    }
    const T *row = logits + r * classes;
    const RowSoftmax s = rowSoftmax(row, classes);
    if (threadIdx.x == 0) {
      // Checked on the host; a label that changed since gives NaN, never a
      // read outside the row.
      const int64_t label = labels[r];
      const double zLabel =
          label >= 0 && label < classes ? load(row, label) : NAN;
      // -log softmax(z)[label] = log sum_j exp(z_j - m) - (z_label - m)
      rowLoss[r] = log(s.sum) - (zLabel - static_cast<double>(s.max));
    }
  }
}

/// loss[0] = the sum of rowLoss[0, rows) over `counted`, rounded once to
/// f32; 0 when no row counts (abi.h). One block.
__global__ void meanKernel(const double *rowLoss, float *loss, int64_t rows,
                           int64_t counted) {
  double sum = 0.0;
  for (int64_t r : blockThreads(rows))
    sum += rowLoss[r];
  sum = blockSum(sum);
  if (threadIdx.x == 0)
    loss[0] =
        counted ? static_cast<float>(sum / static_cast<double>(counted)) : 0.0f;
}

/// dlogits = (softmax(logits) - onehot(labels)) * scale, scale =
/// dloss[0] / counted (dloss null: 1 / counted), for the rows whose label is
/// not ignoreIndex; 0 for the others, and everywhere when counted is 0.
/// dlogits may alias logits: every thread has read the row for the maximum
/// and the sum before the block reductions return, and then each element
/// is read and written by one thread.
template <typename T>
__global__ void xentGradKernel(const T *logits, const int32_t *labels,
                               const float *dloss, T *dlogits, int64_t rows,
                               int64_t classes, int64_t ignoreIndex,
                               int64_t counted) {
  const double scale =
      counted ? (dloss ? static_cast<double>(dloss[0]) : 1.0) /
                    static_cast<double>(counted)
              : 0.0;
  for (int64_t r : gridBlocks(rows)) {
    const T *row = logits + r * classes;
    T *g = dlogits + r * classes;
    const int64_t label = labels[r]; // checked on the host
    if (label == ignoreIndex) {
      for (int64_t j : blockThreads(classes))
        store(g, j, 0.0f);
      continue;
    }
    const RowSoftmax s = rowSoftmax(row, classes);
    const double factor = scale / s.sum;
    for (int64_t j : blockThreads(classes)) {
      const double p = static_cast<double>(expf(load(row, j) - s.max)) * factor;
      // (p - 1) * scale in double: p is close to 1 for a confident model.
      store(g, j, static_cast<float>(j == label ? p - scale : p));
    }
  }
}

/// loss[0] = -(the sum of input[r, labels[r]] over the counted rows) /
/// counted, in double, rounded once to f32; 0 when no row counts. One
/// block: each thread adds a fixed set of rows and the block reduction
/// combines them in a fixed order (deterministic).
template <typename T>
__global__ void nllMeanKernel(const T *input, const int32_t *labels,
                              float *loss, int64_t rows, int64_t classes,
                              int64_t ignoreIndex, int64_t counted) {
  double sum = 0.0;
  for (int64_t r : blockThreads(rows)) {
    const int64_t label = labels[r]; // checked on the host
    if (label != ignoreIndex && label >= 0 && label < classes)
      sum += load(input + r * classes, label);
  }
  sum = blockSum(sum);
  if (threadIdx.x == 0)
    loss[0] = counted ? static_cast<float>(-sum / static_cast<double>(counted))
                      : 0.0f;
}

/// dinput[r, labels[r]] = -dloss[0] / counted (dloss null: 1) for the
/// counted rows, on a zeroed dinput; one thread per row.
template <typename T>
__global__ void nllGradKernel(const int32_t *labels, const float *dloss,
                              T *dinput, int64_t rows, int64_t classes,
                              int64_t ignoreIndex, int64_t counted) {
  if (counted == 0)
    return;
  const double scale = (dloss ? static_cast<double>(dloss[0]) : 1.0) /
                       static_cast<double>(counted);
  for (int64_t r : gridThreads(rows)) {
    const int64_t label = labels[r]; // checked on the host
    if (label != ignoreIndex && label >= 0 && label < classes)
      store(dinput + r * classes, label, static_cast<float>(-scale));
  }
}

/// The labels read back to the host and checked, as the CPU backend checks
/// them (countedLabels); returns the number of rows whose label is not the
/// ignore index.
int64_t countedRows(cudaStream_t stream, const char *op, const int32_t *labels,
                    int64_t rows, int64_t classes, int64_t ignoreIndex) {
  std::vector<int32_t> host = indicesToHost(stream, op, labels, rows);
  return countedLabels(op, host.data(), rows, classes, ignoreIndex);
}

} // namespace

void softmaxXentFwd(cudaStream_t stream, int32_t dtype, const void *logits,
                    const int32_t *labels, float *loss, int64_t rows,
                    int64_t classes, int64_t ignoreIndex) {
  const char *op = "softmax_xent_fwd";
  checkLossShape(op, rows, classes);
  checkNotNull(op, "loss", loss);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t counted =
        countedRows(stream, op, labels, rows, classes, ignoreIndex);
    void *rowLoss = nullptr;
    check(cudaMallocAsync(&rowLoss, static_cast<size_t>(rows) * sizeof(double),
                          stream),
          op);
    xentRowLossKernel<<<rowBlocksFor(rows), kRowThreads, 0, stream>>>(
        static_cast<const T *>(logits), labels, static_cast<double *>(rowLoss),
        rows, classes, ignoreIndex);
    checkLaunch(op);
    meanKernel<<<1, kRowThreads, 0, stream>>>(static_cast<double *>(rowLoss),
                                              loss, rows, counted);
    checkLaunch(op);
    check(cudaFreeAsync(rowLoss, stream), op);
  });
}

void softmaxXentGrad(cudaStream_t stream, int32_t dtype, const void *logits,
                     const int32_t *labels, const float *dloss, void *dlogits,
                     int64_t rows, int64_t classes, int64_t ignoreIndex) {
  const char *op = "softmax_xent_grad";
  checkLossShape(op, rows, classes);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t counted =
        countedRows(stream, op, labels, rows, classes, ignoreIndex);
    xentGradKernel<<<rowBlocksFor(rows), kRowThreads, 0, stream>>>(
        static_cast<const T *>(logits), labels, dloss,
        static_cast<T *>(dlogits), rows, classes, ignoreIndex, counted);
    checkLaunch(op);
  });
}

void nllLossFwd(cudaStream_t stream, int32_t dtype, const void *input,
                const int32_t *labels, float *loss, int64_t rows,
                int64_t classes, int64_t ignoreIndex) {
  const char *op = "nll_loss_fwd";
  checkLossShape(op, rows, classes);
  checkNotNull(op, "loss", loss);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t counted =
        countedRows(stream, op, labels, rows, classes, ignoreIndex);
    nllMeanKernel<<<1, kRowThreads, 0, stream>>>(
        static_cast<const T *>(input), labels, loss, rows, classes,
        ignoreIndex, counted);
    checkLaunch(op);
  });
}

void nllLossGrad(cudaStream_t stream, int32_t dtype, const int32_t *labels,
                 const float *dloss, void *dinput, int64_t rows,
                 int64_t classes, int64_t ignoreIndex) {
  const char *op = "nll_loss_grad";
  checkLossShape(op, rows, classes);
  dispatchFloat(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t counted =
        countedRows(stream, op, labels, rows, classes, ignoreIndex);
    // Zero in f32 and bf16 alike is all bits clear.
    check(cudaMemsetAsync(dinput, 0,
                          static_cast<size_t>(rows * classes) * sizeof(T),
                          stream),
          op);
    nllGradKernel<<<blocksFor(rows), kThreads, 0, stream>>>(
        labels, dloss, static_cast<T *>(dinput), rows, classes, ignoreIndex,
        counted);
    checkLaunch(op);
  });
}

} // namespace autoshard::rt::cuda
