// The CUDA emulator's cuBLASLt: the handle, descriptor and matmul calls the
// linear layers make (Linear.cu), for column-major matrices with the
// default epilogue, CUBLASLT_EPILOGUE_BIAS (a bias of D's row count added
// to every column before D is rounded), CUBLASLT_EPILOGUE_GELU_AUX_BIAS
// (the biased sum stored, rounded, into the auxiliary matrix, and D the
// tanh-approximated GELU of the unrounded sum), CUBLASLT_EPILOGUE_DGELU
// (D = the product times GELU's derivative at the auxiliary matrix's
// element), CUBLASLT_EPILOGUE_DGELU_BGRAD (also the bias pointer's
// vector = the row sums of that D before rounding) and
// CUBLASLT_EPILOGUE_BGRADB (the bias pointer's vector, one element per
// column of D, = op(B)'s column sums over k). What it checks, as
// cuBLASLt does: the auxiliary pointer and leading dimension set (a
// multiple of 8, at least D's rows), inside a device allocation;
// descriptor attributes of the right size, layouts whose shapes agree with
// the transposes (CUBLAS_STATUS_INVALID_VALUE otherwise), the type
// combinations of Blas.cpp, an algorithm from the heuristic, pointers at
// least as aligned as the preference let the algorithm assume (256 bytes
// by default; CUBLAS_STATUS_NOT_SUPPORTED otherwise), and operands inside
// device allocations (a sticky illegal address otherwise). The
// product runs in the stream's order (Streams.cpp), summed in double and
// rounded once, bias included.
#include "EmuState.h"

#include <cublasLt.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace {

struct MatmulDesc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  bool biasTypeSet = false; // default: D's type
  cudaDataType_t biasType = CUDA_R_32F;
  void *aux = nullptr; // GELU_AUX_BIAS's output: D's type and shape
  int64_t auxLd = 0;
};

struct Layout {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
};

struct Preference {
  uint64_t maxWorkspace = 0;
  uint32_t reductionSchemes = CUBLASLT_REDUCTION_SCHEME_MASK; // sums exactly here
  // The alignment (bytes) the chosen algorithm may assume of A, B, C, D:
  // cuBLASLt's default is 256.
  uint32_t minAlignment[4] = {256, 256, 256, 256};
};

template <typename T>
cublasStatus_t setValue(T &field, const void *buf, size_t size) {
  if (!buf || size != sizeof(T))
    return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

using asrt_emu::elementBytes;
using asrt_emu::loadElement;
using asrt_emu::storeElement;

bool supported(cudaDataType type) {
  return type == CUDA_R_32F || type == CUDA_R_16BF;
}

/// Whether `layout`'s elements from `p` lie in one device allocation; a
/// sticky illegal address naming `what` if not.
bool inside(const void *p, const Layout &layout, const char *what) {
  if (layout.rows == 0 || layout.cols == 0)
    return true;
  size_t last = (layout.rows - 1) + (layout.cols - 1) * size_t(layout.ld);
  if (asrt_emu::isDeviceRange(p, (last + 1) * elementBytes(layout.type)))
    return true;
  asrt_emu::setStickyError(cudaErrorIllegalAddress,
                           "cublasLtMatmul: %s (%llu x %llu, ld %lld) reaches "
                           "outside every device allocation",
                           what, (unsigned long long)layout.rows,
                           (unsigned long long)layout.cols,
                           (long long)layout.ld);
  return false;
}

} // namespace

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  if (!handle)
    return CUBLAS_STATUS_INVALID_VALUE;
  static int theLibrary; // a handle holds no state here
  *handle = reinterpret_cast<cublasLtHandle_t>(&theLibrary);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  return handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                        cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (!desc)
    return CUBLAS_STATUS_INVALID_VALUE;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(new MatmulDesc{compute, scale});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete reinterpret_cast<MatmulDesc *>(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t handle,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size) {
  auto *desc = reinterpret_cast<MatmulDesc *>(handle);
  if (!desc)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  switch (attr) {
  case CUBLASLT_MATMUL_DESC_TRANSA: return setValue(desc->transA, buf, size);
  case CUBLASLT_MATMUL_DESC_TRANSB: return setValue(desc->transB, buf, size);
  case CUBLASLT_MATMUL_DESC_EPILOGUE: return setValue(desc->epilogue, buf, size);
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return setValue(desc->bias, buf, size);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
    return setValue(desc->aux, buf, size);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    return setValue(desc->auxLd, buf, size);
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: {
    cublasStatus_t status = setValue(desc->biasType, buf, size);
    desc->biasTypeSet = status == CUBLAS_STATUS_SUCCESS;
    return status;
  }
  default: return CUBLAS_STATUS_NOT_SUPPORTED; // not modelled here
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                          cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (!layout)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (ld < int64_t(rows > 1 ? rows : 1))
    return CUBLAS_STATUS_INVALID_VALUE; // column-major: ld >= rows
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(
      new Layout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete reinterpret_cast<Layout *>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  if (!pref)
    return CUBLAS_STATUS_INVALID_VALUE;
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete reinterpret_cast<Preference *>(pref);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t handle, cublasLtMatmulPreferenceAttributes_t attr,
    const void *buf, size_t size) {
  auto *pref = reinterpret_cast<Preference *>(handle);
  if (!pref)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)
    return setValue(pref->maxWorkspace, buf, size);
  if (attr == CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK)
    return setValue(pref->reductionSchemes, buf, size);
  if (attr >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
      attr <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES)
    return setValue(
        pref->minAlignment[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES],
        buf, size);
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

namespace {

/// Whether `e` reads or writes the auxiliary (GELU input) matrix, and
/// whether it has a bias vector (read, or written for DGELU_BGRAD).
bool usesAux(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU ||
         e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}
bool usesBias(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
         e == CUBLASLT_EPILOGUE_DGELU_BGRAD || e == CUBLASLT_EPILOGUE_BGRADB;
}
/// GPT-2's tanh GELU and its derivative, in f32 as the kernels take them.
float gelu(float x) {
  const float u = 0.7978845608f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + std::tanh(u));
}
float geluDerivative(float x) {
  const float c = std::fmin(std::fmax(x, -20.0f), 20.0f);
  const float t = std::tanh(0.7978845608f * (c + 0.044715f * c * c * c));
  const float du = 0.7978845608f * (1.0f + 3.0f * 0.044715f * c * c);
  return 0.5f * (1.0f + t) + c * 0.5f * (1.0f - t * t) * du;
}

/// The shapes and types of a matmul, checked: m x n = op(A) (m x k) op(B).
cublasStatus_t check(const MatmulDesc &d, const Layout &a, const Layout &b,
                     const Layout &c, const Layout &out, uint64_t &m,
                     uint64_t &n, uint64_t &k) {
  const bool ta = d.transA != CUBLAS_OP_N, tb = d.transB != CUBLAS_OP_N;
  m = ta ? a.cols : a.rows;
  k = ta ? a.rows : a.cols;
  n = tb ? b.rows : b.cols;
  const uint64_t kb = tb ? b.cols : b.rows;
  if (kb != k || c.rows != m || c.cols != n || out.rows != m || out.cols != n)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (a.type != b.type || !supported(a.type) || c.type != out.type ||
      (out.type != a.type && out.type != CUDA_R_32F))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if ((d.compute != CUBLAS_COMPUTE_32F &&
       d.compute != CUBLAS_COMPUTE_32F_PEDANTIC) ||
      d.scale != CUDA_R_32F)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d.epilogue != CUBLASLT_EPILOGUE_DEFAULT && !usesBias(d.epilogue) &&
      !usesAux(d.epilogue))
    return CUBLAS_STATUS_NOT_SUPPORTED; // not modelled here
  const cudaDataType_t biasType =
      d.biasTypeSet ? d.biasType : out.type;
  if (usesBias(d.epilogue) && !supported(biasType))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  // The GELU input matrix: its leading dimension a multiple of 8 and at
  // least D's rows (cublasLt.h's rule for CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD).
  if (usesAux(d.epilogue) &&
      (d.auxLd % 8 != 0 || d.auxLd < int64_t(m) || d.auxLd < 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

} // namespace

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
    cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
    cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
    cublasLtMatmulPreference_t pref, int requested,
    cublasLtMatmulHeuristicResult_t results[], int *returned) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!desc || !a || !b || !c || !d || !pref || requested < 1 || !results ||
      !returned)
    return CUBLAS_STATUS_INVALID_VALUE;
  uint64_t m, n, k;
  cublasStatus_t status = check(*reinterpret_cast<MatmulDesc *>(desc),
                                *reinterpret_cast<Layout *>(a),
                                *reinterpret_cast<Layout *>(b),
                                *reinterpret_cast<Layout *>(c),
                                *reinterpret_cast<Layout *>(d), m, n, k);
  if (status != CUBLAS_STATUS_SUCCESS) {
    *returned = 0;
    return status;
  }
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].algo.data[0] = 0x617372745f656d75ull; // the one emulated algo
  // The algorithm may assume the alignments the preference allowed.
  for (int i = 0; i < 4; ++i)
    results[0].algo.data[1 + i] =
        reinterpret_cast<Preference *>(pref)->minAlignment[i];
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle,
                              cublasLtMatmulDesc_t descHandle,
                              const void *alpha, const void *A,
                              cublasLtMatrixLayout_t aHandle, const void *B,
                              cublasLtMatrixLayout_t bHandle, const void *beta,
                              const void *C, cublasLtMatrixLayout_t cHandle,
                              void *D, cublasLtMatrixLayout_t dHandle,
                              const cublasLtMatmulAlgo_t *algo, void *, size_t,
                              cudaStream_t stream) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!descHandle || !aHandle || !bHandle || !cHandle || !dHandle || !alpha ||
      !beta || !algo)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (asrt_emu::stickyError() != cudaSuccess)
    return CUBLAS_STATUS_EXECUTION_FAILED;
  // Copies: the descriptors may be destroyed once the call returns.
  const MatmulDesc desc = *reinterpret_cast<MatmulDesc *>(descHandle);
  const Layout a = *reinterpret_cast<Layout *>(aHandle),
               b = *reinterpret_cast<Layout *>(bHandle),
               c = *reinterpret_cast<Layout *>(cHandle),
               d = *reinterpret_cast<Layout *>(dHandle);
  uint64_t m, n, k;
  cublasStatus_t status = check(desc, a, b, c, d, m, n, k);
  if (status != CUBLAS_STATUS_SUCCESS)
    return status;
  const cublasLtEpilogue_t epilogue = desc.epilogue;
  if ((usesBias(epilogue) && !desc.bias) || (usesAux(epilogue) && !desc.aux))
    return CUBLAS_STATUS_INVALID_VALUE;
  // An algorithm chosen for more alignment than the pointers have cannot
  // run them (the heuristic assumes 256 bytes unless the preference says
  // less).
  const void *pointers[4] = {A, B, C, D};
  for (int i = 0; i < 4; ++i)
    if (reinterpret_cast<uintptr_t>(pointers[i]) % algo->data[1 + i] != 0)
      return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!asrt_emu::validStream(stream))
    return CUBLAS_STATUS_INVALID_VALUE;
  const float alphaValue = *static_cast<const float *>(alpha);
  const float betaValue = *static_cast<const float *>(beta);
  const cudaDataType_t biasType =
      desc.biasTypeSet ? desc.biasType : d.type;
  asrt_emu::enqueue(stream, [=] {
    const bool ta = desc.transA != CUBLAS_OP_N, tb = desc.transB != CUBLAS_OP_N;
    const bool addBias = epilogue == CUBLASLT_EPILOGUE_BIAS ||
                         epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    const bool geluForward = epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    const bool geluBackward = epilogue == CUBLASLT_EPILOGUE_DGELU ||
                              epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    const bool biasGradient = epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    const bool biasGradientOfB = epilogue == CUBLASLT_EPILOGUE_BGRADB;
    const uint64_t biasLength = biasGradientOfB ? n : m;
    const Layout auxLayout{d.type, m, n, desc.auxLd};
    if (!inside(A, a, "A") || !inside(B, b, "B") ||
        (betaValue != 0.0f && !inside(C, c, "C")) || !inside(D, d, "D") ||
        (usesBias(epilogue) &&
         !inside(desc.bias,
                 Layout{biasType, biasLength, 1, int64_t(biasLength)},
                 "the bias")) ||
        (usesAux(epilogue) &&
         !inside(desc.aux, auxLayout, "the GELU input (aux)")))
      return;
    std::vector<double> rowSums(biasGradient ? m : 0, 0.0);
    for (uint64_t j = 0; j < n; ++j)
      for (uint64_t i = 0; i < m; ++i) {
        double sum = 0.0;
        for (uint64_t l = 0; l < k; ++l)
          sum += loadElement(A, a.type, ta ? l + i * a.ld : i + l * a.ld) *
                 loadElement(B, b.type, tb ? j + l * b.ld : l + j * b.ld);
        double result = double(alphaValue) * sum;
        if (betaValue != 0.0f)
          result += double(betaValue) * loadElement(C, c.type, i + j * c.ld);
        if (addBias)
          result += loadElement(desc.bias, biasType, int64_t(i));
        const int64_t auxAt = int64_t(i + j * desc.auxLd);
        if (geluForward) {
          // The GELU input as the auxiliary output; the GELU of the f32
          // sum, not of its rounding.
          const float pre = float(result);
          storeElement(desc.aux, d.type, auxAt, pre);
          result = gelu(pre);
        }
        if (geluBackward)
          result = float(result) *
                   geluDerivative(float(loadElement(desc.aux, d.type, auxAt)));
        if (biasGradient)
          rowSums[i] += float(result);
        storeElement(D, d.type, int64_t(i + j * d.ld), float(result));
      }
    for (uint64_t i = 0; i < rowSums.size(); ++i)
      storeElement(const_cast<void *>(desc.bias), biasType, int64_t(i),
                   float(rowSums[i]));
    if (biasGradientOfB)
      for (uint64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (uint64_t l = 0; l < k; ++l)
          sum += loadElement(B, b.type, tb ? j + l * b.ld : l + j * b.ld);
        storeElement(const_cast<void *>(desc.bias), biasType, int64_t(j),
                     float(sum));
      }
  });
  return CUBLAS_STATUS_SUCCESS;
}
