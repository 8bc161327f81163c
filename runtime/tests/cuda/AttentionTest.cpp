// The CUDA causal attention (grouped-query heads) against the CPU backend's:
// forward out and log-sum-exp, and the gradient's dq, dk, dv, on the same
// inputs. Label `gpu`: the kernel tests skip without a CUDA device.
#include "CudaTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace cuda = autoshard::rt::cuda;
using namespace autoshard::rt::cuda::test;

namespace {

struct AttentionShape {
  int64_t batch, seq, heads, kvHeads, headDim;
};

std::string describe(const AttentionShape &s) {
  std::ostringstream os;
  os << "batch " << s.batch << ", seq " << s.seq << ", heads " << s.heads
     << ", kv_heads " << s.kvHeads << ", head_dim " << s.headDim;
  return os.str();
}

class CudaAttentionTest : public CudaKernelTest {
protected:
  /// Like expectClose, with an absolute floor proportional to the scale of
  /// the terms: the larger of the largest CPU element and 1 (the inputs are
  /// O(1)). Attention outputs and gradients are sums over up to
  /// seq * (heads / kv_heads) products with cancellation, in another order
  /// than OpenBLAS's, so an element near zero carries the rounding error of
  /// its terms, not of itself (with seq 1, dq and dk are exactly 0 and both
  /// backends return rounding noise of ~1e-7). A wrong kernel is off by
  /// O(max) instead. The batched-GEMM path in bf16 rounds the probabilities
  /// (and the backward's dS) to bf16 for its tensor-core GEMMs, as flash
  /// attention does, where the CPU keeps them in f32: each output then
  /// carries a relative 2^-9 of the sum of its terms' magnitudes, up to
  /// ~2e-3 of the largest element; its floor is 4e-3 of the scale (the
  /// CUDA emulator measured differences up to 1.5e-3 on these inputs).
  void expectCloseScaled(const HostTensor &gpu, const HostTensor &cpu,
                         const char *what, bool roundedProbabilities = false) {
    ASSERT_EQ(gpu.size(), cpu.size());
    bool bf16 = gpu.dtype == ASRT_DTYPE_BF16;
    const double inputScale = 1.0; // every input here is O(1)
    double largest = 0.0;
    for (size_t i = 0; i < cpu.size(); ++i)
      largest = std::max(largest, std::fabs(double(cpu.get(i))));
    double rel = bf16 ? 1e-2 : 1e-5;
    double abs = (bf16 ? (roundedProbabilities ? 4e-3 : 1e-3) : 1e-5) *
                 std::max(largest, inputScale);
    size_t bad = 0;
    for (size_t i = 0; i < gpu.size(); ++i) {
      double g = gpu.get(i), c = cpu.get(i);
      if (!(std::fabs(g - c) <= rel * std::fabs(c) + abs) && bad++ < 5)
        ADD_FAILURE() << what << "[" << i << "]: GPU " << g << ", CPU " << c
                      << " (largest |CPU| " << largest << ")";
    }
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << gpu.size()
                       << " elements differ";
  }

  /// Forward and gradient of one shape on both backends, compared, for
  /// each of the CUDA backend's two paths: the flash kernels and the
  /// batched GEMMs (AttentionGemm.cu). The gradients run on the CPU
  /// forward's out and lse, so that they are compared on the same inputs.
  void compare(const AttentionShape &s, uint32_t seed) {
    compare(s, seed, Path::Flash);
    compare(s, seed, Path::Gemm);
    compare(s, seed, Path::Wmma);
  }

  /// The CUDA backend's attention paths: the flash kernels (CUDA cores),
  /// the batched GEMMs and the WMMA flash kernels (tensor cores; bf16 with
  /// head_dim a multiple of 16 only, skipped otherwise).
  enum class Path { Flash, Gemm, Wmma };

  void compare(const AttentionShape &s, uint32_t seed, Path path) {
    const int32_t t = GetParam();
    if (path == Path::Wmma && !cuda::causalAttentionWmmaSupports(t, s.headDim))
      return;
    const bool gemm = path == Path::Gemm;
    // Both tensor-core paths round probabilities (and dS) to bf16.
    const bool rounded = path != Path::Flash;
    SCOPED_TRACE(describe(s) + (gemm                   ? ", batched GEMMs"
                                : path == Path::Wmma ? ", WMMA"
                                                     : ", flash kernels"));
    if (gemm && !blas)
      blas = std::make_unique<cuda::Blas>(stream);
    const size_t qSize = size_t(s.batch * s.seq * s.heads * s.headDim);
    const size_t kvSize = size_t(s.batch * s.seq * s.kvHeads * s.headDim);
    const size_t lseSize = size_t(s.batch * s.heads * s.seq);
    const float scale = 1.0f / std::sqrt(float(s.headDim));

    // Queries wider than keys: peaked rows, so that the online softmax's
    // rescaling matters.
    HostTensor hq(t, uniform(qSize, seed, -3, 3));
    HostTensor hk(t, uniform(kvSize, seed + 1, -1, 1));
    HostTensor hv(t, uniform(kvSize, seed + 2, -1, 1));
    HostTensor hdout(t, uniform(qSize, seed + 3, -1, 1));

    HostTensor cpuOut(t, qSize), cpuLse(ASRT_DTYPE_F32, lseSize);
    asrt_causal_attention_fwd(&ctx, t, hq.data(), hk.data(), hv.data(),
                              cpuOut.data(),
                              static_cast<float *>(cpuLse.data()), s.batch,
                              s.seq, s.heads, s.kvHeads, s.headDim, scale);

    void *dq = upload(hq), *dk = upload(hk), *dv = upload(hv);
    HostTensor gpuOut(t, qSize), gpuLse(ASRT_DTYPE_F32, lseSize);
    void *dOut = upload(gpuOut), *dLse = upload(gpuLse);
    if (gemm)
      cuda::causalAttentionFwdGemm(*blas, t, dq, dk, dv, dOut,
                                   static_cast<float *>(dLse), s.batch, s.seq,
                                   s.heads, s.kvHeads, s.headDim, scale);
    else if (path == Path::Wmma)
      cuda::causalAttentionFwdWmma(stream, t, dq, dk, dv, dOut,
                                   static_cast<float *>(dLse), s.batch, s.seq,
                                   s.heads, s.kvHeads, s.headDim, scale);
    else
      cuda::causalAttentionFwd(stream, t, dq, dk, dv, dOut,
                               static_cast<float *>(dLse), s.batch, s.seq,
                               s.heads, s.kvHeads, s.headDim, scale);
    download(dOut, gpuOut);
    download(dLse, gpuLse);
    expectCloseScaled(gpuOut, cpuOut, "causal_attention_fwd out", rounded);
    // The log-sum-exp is f32 for either dtype, from the same (rounded)
    // inputs: f32's tolerance.
    expectCloseScaled(gpuLse, cpuLse, "causal_attention_fwd lse");

    HostTensor cpuDq(t, qSize), cpuDk(t, kvSize), cpuDv(t, kvSize);
    asrt_causal_attention_grad(
        &ctx, t, hdout.data(), hq.data(), hk.data(), hv.data(), cpuOut.data(),
        static_cast<const float *>(cpuLse.data()), cpuDq.data(), cpuDk.data(),
        cpuDv.data(), s.batch, s.seq, s.heads, s.kvHeads, s.headDim, scale);

    void *dDout = upload(hdout), *dCpuOut = upload(cpuOut),
         *dCpuLse = upload(cpuLse);
    HostTensor gpuDq(t, qSize), gpuDk(t, kvSize), gpuDv(t, kvSize);
    void *dDq = upload(gpuDq), *dDk = upload(gpuDk), *dDv = upload(gpuDv);
    if (gemm)
      cuda::causalAttentionGradGemm(*blas, t, dDout, dq, dk, dv, dCpuOut,
                                    static_cast<const float *>(dCpuLse), dDq,
                                    dDk, dDv, s.batch, s.seq, s.heads,
                                    s.kvHeads, s.headDim, scale);
    else if (path == Path::Wmma)
      cuda::causalAttentionGradWmma(stream, t, dDout, dq, dk, dv, dCpuOut,
                                    static_cast<const float *>(dCpuLse), dDq,
                                    dDk, dDv, s.batch, s.seq, s.heads,
                                    s.kvHeads, s.headDim, scale);
    else
      cuda::causalAttentionGrad(stream, t, dDout, dq, dk, dv, dCpuOut,
                                static_cast<const float *>(dCpuLse), dDq, dDk,
                                dDv, s.batch, s.seq, s.heads, s.kvHeads,
                                s.headDim, scale);
    download(dDq, gpuDq);
    download(dDk, gpuDk);
    download(dDv, gpuDv);
    expectCloseScaled(gpuDq, cpuDq, "causal_attention_grad dq", rounded);
    expectCloseScaled(gpuDk, cpuDk, "causal_attention_grad dk", rounded);
    expectCloseScaled(gpuDv, cpuDv, "causal_attention_grad dv", rounded);
  }

  /// Bound to the test's stream (the batched-GEMM path's GEMMs and kernels
  /// run on it); destroyed before the stream.
  std::unique_ptr<cuda::Blas> blas;

  void TearDown() override {
    blas.reset();
    CudaKernelTest::TearDown();
  }
};

// seq 37 crosses one 32-key tile boundary and leaves a partial block of 8
// query rows; kv_heads 2 shares each key/value head between two query heads.
TEST_P(CudaAttentionTest, GroupedAndPlainHeads) {
  uint32_t seed = 100;
  for (int64_t kvHeads : {2, 4})
    for (int64_t headDim : {16, 64}) {
      compare({2, 37, 4, kvHeads, headDim}, seed);
      seed += 10;
    }
}

// One position: every query sees only its own key (p = 1, out = v).
TEST_P(CudaAttentionTest, SingleToken) {
  compare({2, 1, 4, 2, 16}, 200);
  compare({2, 1, 4, 4, 64}, 210);
}

// The largest supported head_dim (every lane owns 4 columns), four query
// heads per key/value head, and several key tiles.
TEST_P(CudaAttentionTest, WidestHeadsAndLongerSequence) {
  compare({1, 100, 8, 2, 128}, 300);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaAttentionTest, kDtypes, dtypeName);

// The shape checks run before anything touches the device, so these run
// on machines without a GPU too.
TEST(CudaAttentionDeathTest, HeadDimAboveTheSupportedLimitIsFatal) {
  // Re-executes the binary rather than forking a process with CUDA threads.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(cuda::causalAttentionFwd(nullptr, ASRT_DTYPE_F32, nullptr,
                                        nullptr, nullptr, nullptr, nullptr, 1,
                                        4, 2, 1, 129, 0.1f),
               "causal_attention_fwd: head_dim = 129 exceeds 128");
  EXPECT_DEATH(cuda::causalAttentionGrad(nullptr, ASRT_DTYPE_BF16, nullptr,
                                         nullptr, nullptr, nullptr, nullptr,
                                         nullptr, nullptr, nullptr, nullptr, 1,
                                         4, 2, 1, 256, 0.1f),
               "causal_attention_grad: head_dim = 256 exceeds 128");
}

TEST(CudaAttentionDeathTest, TheWmmaKernelsRefuseWhatTheyDoNotSupport) {
  // Abi.cpp only calls them where causalAttentionWmmaSupports says so.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_FALSE(cuda::causalAttentionWmmaSupports(ASRT_DTYPE_F32, 64));
  EXPECT_FALSE(cuda::causalAttentionWmmaSupports(ASRT_DTYPE_BF16, 24));
  EXPECT_FALSE(cuda::causalAttentionWmmaSupports(ASRT_DTYPE_BF16, 144));
  EXPECT_TRUE(cuda::causalAttentionWmmaSupports(ASRT_DTYPE_BF16, 128));
  EXPECT_DEATH(cuda::causalAttentionFwdWmma(nullptr, ASRT_DTYPE_F32, nullptr,
                                            nullptr, nullptr, nullptr, nullptr,
                                            1, 4, 2, 1, 64, 0.1f),
               "causal_attention_fwd: the WMMA attention takes bf16 with "
               "head_dim a multiple of 16 up to 128, not dtype 0 with "
               "head_dim 64");
  EXPECT_DEATH(cuda::causalAttentionGradWmma(
                   nullptr, ASRT_DTYPE_BF16, nullptr, nullptr, nullptr,
                   nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 4,
                   2, 1, 24, 0.1f),
               "causal_attention_grad: the WMMA attention takes bf16 with "
               "head_dim a multiple of 16 up to 128, not dtype 2 with "
               "head_dim 24");
}

TEST(CudaAttentionDeathTest, HeadsNotAMultipleOfKvHeadsIsFatal) {
  // Re-executes the binary rather than forking a process with CUDA threads.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(cuda::causalAttentionFwd(nullptr, ASRT_DTYPE_F32, nullptr,
                                        nullptr, nullptr, nullptr, nullptr, 1,
                                        4, 3, 2, 16, 0.25f),
               "heads = 3 must be a multiple of kv_heads = 2");
}

} // namespace
