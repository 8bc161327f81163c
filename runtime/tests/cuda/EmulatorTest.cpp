// The CUDA emulator (src/cuda/emu) against what CUDA promises: block
// barriers and shared memory, warp shuffles, launch configurations, sticky
// errors after a trap, the runtime's memory rules and cuBLAS's GEMM and
// argument checks. The kernel tests trust it to run the backend's kernels
// as a GPU would, so it is tested on its own first. Kernels are lambdas
// launched with asrt_emu::launch, what rewrite_launches.py makes of <<<>>>.
#include "CudaEmu.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <vector>

namespace {

/// Device memory holding `n` values of T, freed at scope exit.
template <typename T> struct DeviceArray {
  T *p = nullptr;
  explicit DeviceArray(size_t n) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void **>(&p), n * sizeof(T)),
              cudaSuccess);
  }
  ~DeviceArray() { cudaFree(p); }
};

TEST(CudaEmulator, SharedMemoryAndBarriersReduceABlockInEitherSchedule) {
  for (bool reverse : {false, true}) {
    asrt_emu::setReverseSchedule(reverse);
    DeviceArray<int> out(4);
    // Each of 4 blocks of 128 threads sums its thread indices through
    // shared memory, halving with a barrier between the steps.
    asrt_emu::launch(
        [&] {
          __shared__ int partial[128];
          unsigned t = threadIdx.x;
          partial[t] = int(t + blockIdx.x * 1000);
          __syncthreads();
          for (unsigned half = 64; half > 0; half /= 2) {
            if (t < half)
              partial[t] += partial[t + half];
            __syncthreads();
          }
          if (t == 0)
            out.p[blockIdx.x] = partial[0];
        },
        dim3(4), dim3(128));
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    for (int b = 0; b < 4; ++b)
      EXPECT_EQ(out.p[b], 127 * 128 / 2 + 128 * 1000 * b) << "block " << b;
  }
  asrt_emu::setReverseSchedule(false);
}

TEST(CudaEmulator, AMissingBarrierChangesTheResultWithTheSchedule) {
  // Thread 0 reads what thread 1 writes, with no barrier between: a race
  // on a GPU. The two schedules order the write and the read differently,
  // which is how ASRT_CUDA_EMU_SCHEDULE=reverse exposes such a kernel.
  int seen[2];
  for (bool reverse : {false, true}) {
    asrt_emu::setReverseSchedule(reverse);
    DeviceArray<int> out(1);
    asrt_emu::launch(
        [&] {
          __shared__ int slot;
          if (threadIdx.x == 0)
            slot = 0;
          __syncthreads();
          if (threadIdx.x == 1)
            slot = 42;
          if (threadIdx.x == 0)
            out.p[0] = slot; // no __syncthreads() before this read
        },
        dim3(1), dim3(2));
    seen[reverse] = out.p[0];
  }
  asrt_emu::setReverseSchedule(false);
  EXPECT_NE(seen[0], seen[1]);
}

TEST(CudaEmulator, WarpShufflesMoveValuesBetweenLanes) {
  DeviceArray<float> sums(64), down(64), broadcast(64), xorWidth(64);
  asrt_emu::launch(
      [&] {
        unsigned i = threadIdx.x, lane = i % 32;
        float v = float(i);
        float sum = v; // butterfly: every lane ends with its warp's sum
        for (int offset = 16; offset > 0; offset /= 2)
          sum += __shfl_xor_sync(0xffffffffu, sum, offset);
        sums.p[i] = sum;
        // down by 3: lanes 29..31 keep their own value
        down.p[i] = __shfl_down_sync(0xffffffffu, v, 3);
        broadcast.p[i] = __shfl_sync(0xffffffffu, v, 5);
        // segments of 8 lanes: lane ^ 4 stays inside its segment
        xorWidth.p[i] = __shfl_xor_sync(0xffffffffu, v, 4, 8);
        (void)lane;
      },
      dim3(1), dim3(64));
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (int i = 0; i < 64; ++i) {
    int base = i / 32 * 32, lane = i % 32;
    EXPECT_EQ(sums.p[i], float(31 * 32 / 2 + 32 * base)) << i;
    EXPECT_EQ(down.p[i], float(lane + 3 < 32 ? i + 3 : i)) << i;
    EXPECT_EQ(broadcast.p[i], float(base + 5)) << i;
    EXPECT_EQ(xorWidth.p[i], float(i ^ 4)) << i;
  }
}

TEST(CudaEmulator, CoordinatesCoverTheGrid) {
  DeviceArray<int> hits(2 * 3 * 4 * 5);
  cudaMemset(hits.p, 0, sizeof(int) * 120);
  asrt_emu::launch(
      [&] {
        unsigned block = blockIdx.x + gridDim.x * blockIdx.y;
        unsigned thread = threadIdx.x + blockDim.x * threadIdx.y;
        hits.p[block * 20 + thread] += 1;
      },
      dim3(2, 3), dim3(4, 5));
  for (int i = 0; i < 120; ++i)
    EXPECT_EQ(hits.p[i], 1) << i;
}

TEST(CudaEmulator, ConfigurationsCudaRefusesAreLaunchErrors) {
  bool ran = false;
  asrt_emu::launch([&] { ran = true; }, dim3(1), dim3(1025));
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  asrt_emu::launch([&] { ran = true; }, dim3(0), dim3(32));
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  asrt_emu::launch([&] { ran = true; }, dim3(1, 65536), dim3(32));
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  int bogus = 0;
  asrt_emu::launch([&] { ran = true; }, dim3(1), dim3(1), 0,
                   reinterpret_cast<cudaStream_t>(&bogus));
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  EXPECT_FALSE(ran);
  // Not sticky: the next launch runs.
  asrt_emu::launch([&] { ran = true; }, dim3(1), dim3(1));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_TRUE(ran);
}

// A kernel fault is sticky for the whole process, so each of these runs in
// a child (a death test) that exits 0 when what followed was right.

TEST(CudaEmulatorDeathTest, ATrapBreaksEveryLaterCall) {
  EXPECT_EXIT(
      {
        int after = 0;
        asrt_emu::launch(
            [&] {
              if (threadIdx.x == 3)
                __trap();
              __syncthreads();
              after = 1;
            },
            dim3(1), dim3(8));
        void *p = nullptr;
        bool sticky = cudaGetLastError() == cudaErrorLaunchFailure &&
                      cudaGetLastError() == cudaErrorLaunchFailure &&
                      cudaStreamSynchronize(nullptr) == cudaErrorLaunchFailure &&
                      cudaMalloc(&p, 4) == cudaErrorLaunchFailure;
        std::exit(sticky && after == 0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "thread \\(3,0,0\\) executed __trap");
}

TEST(CudaEmulatorDeathTest, AShuffleAndABarrierWaitingForEachOtherAreReported) {
  // Half a warp shuffles with the whole warp while the other half waits in
  // __syncthreads: neither can complete (a hang on a GPU).
  EXPECT_EXIT(
      {
        asrt_emu::launch(
            [&] {
              if (threadIdx.x < 16)
                __shfl_sync(0xffffffffu, 1, 0);
              else
                __syncthreads();
            },
            dim3(1), dim3(32));
        std::exit(cudaGetLastError() == cudaErrorLaunchFailure ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "waits in __syncthreads");
}

TEST(CudaEmulatorDeathTest, AShuffleNamingAnExitedLaneIsReported) {
  EXPECT_EXIT(
      {
        asrt_emu::launch(
            [&] {
              if (threadIdx.x == 7)
                return;
              __shfl_sync(0xffffffffu, 1.0f, 0);
            },
            dim3(1), dim3(32));
        std::exit(cudaGetLastError() == cudaErrorLaunchFailure ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "exited");
}

TEST(CudaEmulatorDeathTest, APartialWarpCannotShuffleWithAFullMask) {
  EXPECT_EXIT(
      {
        asrt_emu::launch([&] { __shfl_xor_sync(0xffffffffu, 1, 1); },
                         dim3(1), dim3(16));
        std::exit(cudaGetLastError() == cudaErrorLaunchFailure ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "names lanes the block lacks");
}

TEST(CudaEmulatorRuntime, MemoryRules) {
  void *device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 64), cudaSuccess);
  std::vector<char> host(64, 1);
  EXPECT_EQ(cudaMemcpy(device, host.data(), 64, cudaMemcpyHostToDevice),
            cudaSuccess);
  // Directions are checked against the live allocations.
  EXPECT_EQ(cudaMemcpy(host.data(), device, 64, cudaMemcpyHostToDevice),
            cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemcpy(device, host.data(), 65, cudaMemcpyHostToDevice),
            cudaErrorInvalidMemcpyDirection); // one byte past the allocation
  EXPECT_EQ(cudaMemcpy(host.data(), device, 64, cudaMemcpyDefault),
            cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(host.data(), 0, 8, nullptr),
            cudaErrorInvalidValue); // host memory
  (void)cudaGetLastError();
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  EXPECT_EQ(cudaFree(device), cudaErrorInvalidValue); // twice
  (void)cudaGetLastError();
  // The device's capacity is finite (ASRT_CUDA_EMU_MEMORY_MIB).
  size_t freeBytes = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&freeBytes, &total), cudaSuccess);
  void *huge = nullptr;
  EXPECT_EQ(cudaMalloc(&huge, total + 1), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CudaEmulatorRuntime, StreamsAndEvents) {
  cudaStream_t stream = nullptr;
  cudaEvent_t a = nullptr, b = nullptr, untimed = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming),
            cudaSuccess);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaErrorInvalidResourceHandle)
      << "not recorded yet";
  EXPECT_EQ(cudaEventRecord(a, stream), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(b, stream), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaErrorNotReady)
      << "recorded, but the stream has not run the records yet";
  EXPECT_EQ(cudaEventSynchronize(b), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  EXPECT_EQ(cudaEventRecord(untimed, stream), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, untimed),
            cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamWaitEvent(stream, b, 0), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  for (cudaEvent_t e : {a, b, untimed})
    EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaErrorInvalidResourceHandle);
  (void)cudaGetLastError();
}

TEST(CudaEmulatorWmma, MmaOfBf16FragmentsInEveryLayout) {
  using namespace nvcuda;
  // A 16 x 32 (two k-steps), B 32 x 16, C 16 x 16; small integers, exact
  // in bf16 and in f32 sums.
  DeviceArray<__nv_bfloat16> a(16 * 32), b(32 * 16);
  DeviceArray<float> c(256), d(256), dt(256);
  for (int i = 0; i < 16 * 32; ++i) {
    a.p[i] = __float2bfloat16_rn(float(i % 7 - 3));
    b.p[i] = __float2bfloat16_rn(float(i % 5 - 2));
  }
  for (int i = 0; i < 256; ++i)
    c.p[i] = float(i % 3);
  asrt_emu::launch(
      [&] {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16,
                       wmma::row_major>
            fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16,
                       wmma::col_major>
            fb;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::load_matrix_sync(acc, c.p, 16, wmma::mem_row_major);
        for (int k = 0; k < 32; k += 16) {
          wmma::load_matrix_sync(fa, a.p + k, 32); // A row-major, ld 32
          // B stored column-major: element (k, n) at b[k + n * 32]
          wmma::load_matrix_sync(fb, b.p + k, 32);
          wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(d.p, acc, 16, wmma::mem_row_major);
        wmma::store_matrix_sync(dt.p, acc, 16, wmma::mem_col_major);
      },
      dim3(1), dim3(32));
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 16; ++n) {
      float want = c.p[r * 16 + n];
      for (int k = 0; k < 32; ++k)
        want += __bfloat162float(a.p[r * 32 + k]) *
                __bfloat162float(b.p[k + n * 32]);
      EXPECT_EQ(d.p[r * 16 + n], want) << r << ", " << n;
      EXPECT_EQ(dt.p[r + n * 16], want) << r << ", " << n;
    }
}

TEST(CudaEmulatorWmmaDeathTest, AMisalignedFragmentLoadIsReported) {
  EXPECT_EXIT(
      {
        DeviceArray<__nv_bfloat16> a(16 * 16 + 8);
        asrt_emu::launch(
            [&] {
              nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16,
                                     __nv_bfloat16, nvcuda::wmma::row_major>
                  fa;
              nvcuda::wmma::load_matrix_sync(fa, a.p + 1, 16); // 2 bytes off
            },
            dim3(1), dim3(32));
        std::exit(cudaGetLastError() == cudaErrorLaunchFailure ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "256-bit aligned pointer");
}

TEST(CudaEmulatorRuntime, WorkRunsWhenItsStreamIsWaitedFor) {
  // A producer stream fills a buffer; a consumer stream copies it. Without
  // the event wait the consumer reads what was there before (the producer's
  // work has not run), as it may on a GPU; with it, the filled values.
  cudaStream_t producer = nullptr, consumer = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking),
            cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking),
            cudaSuccess);
  cudaEvent_t filled = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&filled, cudaEventDisableTiming),
            cudaSuccess);
  for (bool wait : {false, true}) {
    DeviceArray<int> data(64), copy(64);
    cudaMemset(data.p, 0, 64 * sizeof(int));
    int *d = data.p;
    asrt_emu::launchKernel(
        [](int *p) { p[threadIdx.x] = int(threadIdx.x) + 1; }, dim3(1),
        dim3(64), 0, producer, d);
    ASSERT_EQ(cudaEventRecord(filled, producer), cudaSuccess);
    if (wait)
      ASSERT_EQ(cudaStreamWaitEvent(consumer, filled, 0), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(copy.p, data.p, 64 * sizeof(int),
                              cudaMemcpyDeviceToDevice, consumer),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
    for (int i = 0; i < 64; ++i)
      ASSERT_EQ(copy.p[i], wait ? i + 1 : 0) << "wait " << wait << ", " << i;
    ASSERT_EQ(cudaStreamSynchronize(producer), cudaSuccess);
    EXPECT_EQ(data.p[63], 64);
  }
  cudaEventDestroy(filled);
  cudaStreamDestroy(producer);
  cudaStreamDestroy(consumer);
}

/// Column-major C[m, n] = op(A) op(B) in double, the GEMM's definition.
std::vector<double> referenceGemm(bool ta, bool tb, int m, int n, int k,
                                  const std::vector<float> &a, int lda,
                                  const std::vector<float> &b, int ldb) {
  std::vector<double> c(size_t(m) * n);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i)
      for (int l = 0; l < k; ++l)
        c[i + size_t(j) * m] += double(ta ? a[l + i * lda] : a[i + l * lda]) *
                                double(tb ? b[j + l * ldb] : b[l + j * ldb]);
  return c;
}

TEST(CudaEmulatorBlas, GemmWithTransposesAndPaddedLeadingDimensions) {
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  const int m = 5, n = 3, k = 4;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      int lda = (ta ? k : m) + 2, ldb = (tb ? n : k) + 1, ldc = m + 3;
      std::vector<float> a(size_t(lda) * (ta ? m : k)),
          b(size_t(ldb) * (tb ? k : n));
      for (size_t i = 0; i < a.size(); ++i)
        a[i] = float(i % 7) - 3.0f;
      for (size_t i = 0; i < b.size(); ++i)
        b[i] = float(i % 5) * 0.5f - 1.0f;
      DeviceArray<float> da(a.size()), db(b.size()), dc(size_t(ldc) * n);
      cudaMemcpy(da.p, a.data(), a.size() * 4, cudaMemcpyHostToDevice);
      cudaMemcpy(db.p, b.data(), b.size() * 4, cudaMemcpyHostToDevice);
      // C starts as NaN (fresh emulated memory): beta = 0 must not read it.
      const float alpha = 1.0f, beta = 0.0f;
      ASSERT_EQ(cublasGemmEx_64(handle, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k,
                                &alpha, da.p, CUDA_R_32F, lda, db.p,
                                CUDA_R_32F, ldb, &beta, dc.p, CUDA_R_32F, ldc,
                                CUBLAS_COMPUTE_32F_PEDANTIC,
                                CUBLAS_GEMM_DEFAULT),
                CUBLAS_STATUS_SUCCESS);
      std::vector<double> want = referenceGemm(ta, tb, m, n, k, a, lda, b, ldb);
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i)
          EXPECT_EQ(dc.p[i + j * ldc], float(want[i + size_t(j) * m]))
              << "ta " << ta << " tb " << tb << " (" << i << ", " << j << ")";
    }
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
}

TEST(CudaEmulatorBlas, ArgumentsCublasRefusesAreRefused) {
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  DeviceArray<float> a(64), b(64), c(64);
  DeviceArray<__nv_bfloat16> h(64);
  const float alpha = 1.0f, beta = 0.0f;
  auto gemm = [&](int64_t lda, cudaDataType bType, const void *bp,
                  cudaDataType cType, cublasComputeType_t compute) {
    return cublasGemmEx_64(handle, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &alpha,
                           a.p, CUDA_R_32F, lda, bp, bType, 4, &beta, c.p,
                           cType, 4, compute, CUBLAS_GEMM_DEFAULT);
  };
  EXPECT_EQ(gemm(4, CUDA_R_32F, b.p, CUDA_R_32F, CUBLAS_COMPUTE_32F),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(gemm(3, CUDA_R_32F, b.p, CUDA_R_32F, CUBLAS_COMPUTE_32F),
            CUBLAS_STATUS_INVALID_VALUE); // lda < m
  EXPECT_EQ(gemm(4, CUDA_R_16BF, h.p, CUDA_R_32F, CUBLAS_COMPUTE_32F),
            CUBLAS_STATUS_NOT_SUPPORTED); // A f32, B bf16
  EXPECT_EQ(gemm(4, CUDA_R_32F, b.p, CUDA_R_32F, CUBLAS_COMPUTE_16F),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
}

TEST(CudaEmulatorBlas, LtMatmulAddsTheBiasEpilogueAndChecksShapes) {
  cublasLtHandle_t lt = nullptr;
  ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  const int m = 3, n = 2, k = 4; // D[m, n] = A^T B + bias, A stored [k, m]
  DeviceArray<float> a(k * m), b(k * n), d(m * n), bias(m);
  for (int i = 0; i < k * m; ++i)
    a.p[i] = float(i % 5 - 2);
  for (int i = 0; i < k * n; ++i)
    b.p[i] = float(i % 3 - 1);
  for (int i = 0; i < m; ++i)
    bias.p[i] = 10.0f * float(i + 1);
  cublasLtMatmulDesc_t desc = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            CUBLAS_STATUS_SUCCESS);
  const cublasOperation_t transA = CUBLAS_OP_T;
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  const float *biasPointer = bias.p;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                           &transA, sizeof transA),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                           &epilogue, sizeof epilogue),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(
                desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &biasPointer,
                sizeof biasPointer),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                           &epilogue, 1),
            CUBLAS_STATUS_INVALID_VALUE); // a wrong attribute size
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr,
                         wrong = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, k, m, k),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&wrong, CUDA_R_32F, m, k, m),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreference_t pref = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  // A laid out [m, k] under a transpose does not make m x k.
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(lt, desc, wrong, lb, ld, ld, pref,
                                           1, &result, &found),
            CUBLAS_STATUS_INVALID_VALUE);
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1,
                                           &result, &found),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(found, 1);
  const float alpha = 1.0f, beta = 0.0f;
  ASSERT_EQ(cublasLtMatmul(lt, desc, &alpha, a.p, la, b.p, lb, &beta, d.p, ld,
                           d.p, ld, &result.algo, nullptr, 0, nullptr),
            CUBLAS_STATUS_SUCCESS);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      float want = bias.p[i];
      for (int l = 0; l < k; ++l)
        want += a.p[l + i * k] * b.p[l + j * k];
      EXPECT_EQ(d.p[i + j * m], want) << i << ", " << j;
    }
  // D 4 bytes past a 256-byte boundary: the default heuristic's algorithm
  // assumes 256-byte alignment and cannot run it; one chosen with D's
  // actual alignment can.
  DeviceArray<float> shifted(m * n + 1);
  EXPECT_EQ(cublasLtMatmul(lt, desc, &alpha, a.p, la, b.p, lb, &beta,
                           shifted.p + 1, ld, shifted.p + 1, ld, &result.algo,
                           nullptr, 0, nullptr),
            CUBLAS_STATUS_NOT_SUPPORTED);
  const uint32_t four = 4;
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    ASSERT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, attr, &four,
                                                   sizeof four),
              CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1,
                                           &result, &found),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmul(lt, desc, &alpha, a.p, la, b.p, lb, &beta,
                           shifted.p + 1, ld, shifted.p + 1, ld, &result.algo,
                           nullptr, 0, nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(shifted.p[1], d.p[0]);
  for (cublasLtMatrixLayout_t layout : {la, lb, ld, wrong})
    cublasLtMatrixLayoutDestroy(layout);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(lt);
}

TEST(CudaEmulatorBlasDeathTest, AGemmReachingPastItsBufferIsAnIllegalAddress) {
  EXPECT_EXIT(
      {
        cublasHandle_t handle = nullptr;
        cublasCreate(&handle);
        DeviceArray<float> a(16);
        DeviceArray<float> b(16);
        DeviceArray<float> c(16);
        const float alpha = 1.0f;
        const float beta = 0.0f;
        // 4 x 4 with ld 5 reads 19 elements of a 16-element buffer.
        cublasStatus_t s = cublasGemmEx_64(
            handle, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &alpha, a.p,
            CUDA_R_32F, 5, b.p, CUDA_R_32F, 4, &beta, c.p, CUDA_R_32F, 4,
            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        std::exit(s == CUBLAS_STATUS_EXECUTION_FAILED &&
                          cudaGetLastError() == cudaErrorIllegalAddress
                      ? 0
                      : 1);
      },
      ::testing::ExitedWithCode(0), "A \\(4 x 4, ld 5.*outside every device");
}

} // namespace
