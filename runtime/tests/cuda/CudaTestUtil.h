// Shared by the CUDA kernel tests: host tensors of f32/bf16 values and a
// fixture that runs a kernel on device copies and compares with the CPU's.
#pragma once

#include "Cuda.h"

#include "core/Context.h"
#include "core/Dtype.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace autoshard::rt::cuda::test {

/// A tensor of `n` elements of `dtype` (f32 or bf16) in host memory, its
/// values given as floats (rounded to bf16 for a bf16 tensor).
struct HostTensor {
  int32_t dtype = ASRT_DTYPE_F32;
  std::vector<unsigned char> bytes;

  HostTensor(int32_t dtype, const std::vector<float> &values) : dtype(dtype) {
    bytes.resize(values.size() * elementSize());
    for (size_t i = 0; i < values.size(); ++i)
      set(i, values[i]);
  }
  HostTensor(int32_t dtype, size_t n) : dtype(dtype) {
    bytes.assign(n * elementSize(), 0xff); // NaN in both types
  }
  size_t elementSize() const { return dtype == ASRT_DTYPE_F32 ? 4 : 2; }
  size_t size() const { return bytes.size() / elementSize(); }
  void *data() { return bytes.data(); }
  float get(size_t i) const {
    if (dtype == ASRT_DTYPE_F32) {
      float v;
      std::memcpy(&v, &bytes[i * 4], 4);
      return v;
    }
    uint16_t h;
    std::memcpy(&h, &bytes[i * 2], 2);
    return bf16ToFloat(h);
  }
  void set(size_t i, float v) {
    if (dtype == ASRT_DTYPE_F32) {
      std::memcpy(&bytes[i * 4], &v, 4);
    } else {
      uint16_t h = floatToBf16(v);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
};

inline std::vector<float> uniform(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

inline void checkCuda(cudaError_t status, const char *what) {
  ASSERT_EQ(status, cudaSuccess) << what << ": " << cudaGetErrorName(status)
                                 << " (" << cudaGetErrorString(status) << ")";
}

/// The fixture of tests parameterised by dtype (f32, bf16). Each test file
/// derives its own fixture from it (gtest needs one class per suite) and
/// instantiates it with kDtypes and dtypeName.
class CudaKernelTest : public ::testing::TestWithParam<int32_t> {
protected:
  void SetUp() override {
    std::string error;
    if (deviceCount(error) <= 0)
      GTEST_SKIP() << error;
    checkCuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  }
  void TearDown() override {
    for (void *p : allocations)
      cudaFree(p);
    if (stream)
      cudaStreamDestroy(stream);
  }

  /// A device copy of `bytes` bytes of host memory.
  void *uploadBytes(const void *host, size_t bytes) {
    void *p = nullptr;
    checkCuda(cudaMalloc(&p, bytes < 1 ? 1 : bytes), "cudaMalloc");
    allocations.push_back(p);
    if (bytes > 0)
      checkCuda(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice),
                "cudaMemcpy to the device");
    return p;
  }
  /// A device copy of `t`.
  void *upload(HostTensor &t) { return uploadBytes(t.data(), t.bytes.size()); }
  /// `bytes` bytes read back from `device` once the stream is done.
  void downloadBytes(const void *device, void *host, size_t bytes) {
    checkCuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (bytes > 0)
      checkCuda(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost),
                "cudaMemcpy to the host");
  }
  /// `t` read back from `device` once the stream is done.
  void download(void *device, HostTensor &t) {
    downloadBytes(device, t.data(), t.bytes.size());
  }

  /// Every element of the GPU's output within tolerance of the CPU's: f32
  /// within `f32Rel` relative (default 1e-5) plus a small absolute floor,
  /// bf16 within 1e-2 relative.
  void expectClose(const HostTensor &gpu, const HostTensor &cpu,
                   const char *what, double f32Rel = 1e-5) {
    ASSERT_EQ(gpu.size(), cpu.size());
    bool bf16 = gpu.dtype == ASRT_DTYPE_BF16;
    double rel = bf16 ? 1e-2 : f32Rel, abs = bf16 ? 1e-3 : 1e-6;
    size_t bad = 0;
    for (size_t i = 0; i < gpu.size(); ++i) {
      double g = gpu.get(i), c = cpu.get(i);
      if (!(std::fabs(g - c) <= rel * std::fabs(c) + abs) && bad++ < 5)
        ADD_FAILURE() << what << "[" << i << "]: GPU " << g << ", CPU " << c;
    }
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << gpu.size()
                       << " elements differ";
  }

  /// Runs a unary elementwise op (x -> y) on both backends and compares.
  void unary(const char *what, const std::vector<float> &x,
             const std::function<void(const void *, void *, int64_t)> &cpu,
             const std::function<void(const void *, void *, int64_t)> &gpu) {
    int32_t dtype = GetParam();
    HostTensor hx(dtype, x), cpuOut(dtype, x.size()), gpuOut(dtype, x.size());
    cpu(hx.data(), cpuOut.data(), int64_t(x.size()));
    void *dx = upload(hx);
    void *dy = upload(gpuOut);
    gpu(dx, dy, int64_t(x.size()));
    download(dy, gpuOut);
    expectClose(gpuOut, cpuOut, what);
  }

  /// Runs a binary elementwise op (a, b -> y) on both backends.
  void
  binary(const char *what, const std::vector<float> &a,
         const std::vector<float> &b,
         const std::function<void(const void *, const void *, void *, int64_t)>
             &cpu,
         const std::function<void(const void *, const void *, void *, int64_t)>
             &gpu) {
    int32_t dtype = GetParam();
    HostTensor ha(dtype, a), hb(dtype, b), cpuOut(dtype, a.size()),
        gpuOut(dtype, a.size());
    cpu(ha.data(), hb.data(), cpuOut.data(), int64_t(a.size()));
    void *da = upload(ha), *db = upload(hb), *dy = upload(gpuOut);
    gpu(da, db, dy, int64_t(a.size()));
    download(dy, gpuOut);
    expectClose(gpuOut, cpuOut, what);
  }

  asrt_context ctx;
  cudaStream_t stream = nullptr;
  std::vector<void *> allocations;
};

/// A kernel test that also has a cuBLAS handle on the test's stream.
class CudaBlasKernelTest : public CudaKernelTest {
protected:
  void SetUp() override {
    CudaKernelTest::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    blas = std::make_unique<cuda::Blas>(stream);
  }
  void TearDown() override {
    blas.reset(); // before the base class destroys its stream
    CudaKernelTest::TearDown();
  }

  std::unique_ptr<cuda::Blas> blas;
};

/// The dtypes every kernel test runs with, and their test-name suffixes.
inline const auto kDtypes = ::testing::Values(ASRT_DTYPE_F32, ASRT_DTYPE_BF16);
inline std::string dtypeName(const ::testing::TestParamInfo<int32_t> &info) {
  return info.param == ASRT_DTYPE_F32 ? std::string("f32")
                                      : std::string("bf16");
}

} // namespace autoshard::rt::cuda::test
