// The batched-GEMM attention path's plan (AttentionGemmPlan.h), run on the
// host: a column-major strided-batched GEMM with cuBLAS's semantics and the
// row steps' math, in f32, against the CPU backend's attention. Checks every
// transpose, leading dimension, offset and stride the GPU path passes to
// cuBLAS, without a GPU (the GPU tests then compare the kernels).
#include "AttentionGemmPlan.h"

#include "autoshard/rt/abi.h"
#include "core/Context.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

namespace cuda = autoshard::rt::cuda;
using cuda::AttnBuf;
using cuda::AttnGemm;
using cuda::AttnShape;

namespace {

using Buffers = std::map<AttnBuf, std::vector<float> *>;

/// cublasGemmStridedBatchedEx on host floats: column-major, element (r, c)
/// of an untransposed X at X[r + c * ldx].
void hostGemm(const AttnGemm &g, Buffers &bufs) {
  const float *a = bufs.at(g.a)->data(), *b = bufs.at(g.b)->data();
  std::vector<float> &cv = *bufs.at(g.c);
  for (int64_t p = 0; p < g.batch; ++p) {
    const float *ap = a + g.aOffset + p * g.aStride;
    const float *bp = b + g.bOffset + p * g.bStride;
    float *cp = cv.data() + g.cOffset + p * g.cStride;
    for (int64_t col = 0; col < g.n; ++col)
      for (int64_t row = 0; row < g.m; ++row) {
        double sum = 0;
        for (int64_t x = 0; x < g.k; ++x) {
          double av = g.transA ? ap[x + row * g.lda] : ap[row + x * g.lda];
          double bv = g.transB ? bp[col + x * g.ldb] : bp[x + col * g.ldb];
          sum += av * bv;
        }
        float &out = cp[row + col * g.ldc];
        out = static_cast<float>(g.alpha * sum +
                                 (g.beta != 0.0f ? g.beta * out : 0.0));
      }
  }
}

std::vector<float> uniform(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

void expectNear(const std::vector<float> &got, const std::vector<float> &want,
                const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-5 + 1e-4 * std::fabs(want[i])) &&
        bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: plan " << got[i] << ", CPU "
                    << want[i];
  EXPECT_EQ(bad, 0) << what;
}

class AttentionGemmPlanTest : public ::testing::TestWithParam<AttnShape> {};

TEST_P(AttentionGemmPlanTest, MatchesTheCpuAttention) {
  const AttnShape s = GetParam();
  const int64_t qSize = s.batch * s.seq * s.heads * s.headDim;
  const int64_t kvSize = s.batch * s.seq * s.kvHeads * s.headDim;
  std::vector<float> q = uniform(qSize, 1), k = uniform(kvSize, 2),
                     v = uniform(kvSize, 3), dout = uniform(qSize, 4);

  // The CPU backend's forward and gradient.
  asrt_context ctx;
  std::vector<float> cpuOut(qSize), cpuLse(s.batch * s.heads * s.seq),
      cpuDq(qSize), cpuDk(kvSize), cpuDv(kvSize);
  asrt_causal_attention_fwd(&ctx, ASRT_DTYPE_F32, q.data(), k.data(), v.data(),
                            cpuOut.data(), cpuLse.data(), s.batch, s.seq,
                            s.heads, s.kvHeads, s.headDim, s.scale);
  asrt_causal_attention_grad(&ctx, ASRT_DTYPE_F32, dout.data(), q.data(),
                             k.data(), v.data(), cpuOut.data(), cpuLse.data(),
                             cpuDq.data(), cpuDk.data(), cpuDv.data(), s.batch,
                             s.seq, s.heads, s.kvHeads, s.headDim, s.scale);

  // The plan, with the row steps as Attention.cu's kernels compute them.
  const int64_t square = s.heads * s.seq * s.seq;
  const int64_t accSize = s.seq * s.kvHeads * s.headDim;
  std::vector<float> out(qSize), lse(cpuLse.size()), dq(qSize), dk(kvSize),
      dv(kvSize), scores(square), probs(square), dprobs(square),
      dscores(square), dkAcc(accSize), dvAcc(accSize);
  Buffers bufs{{AttnBuf::Q, &q},           {AttnBuf::K, &k},
               {AttnBuf::V, &v},           {AttnBuf::Out, &out},
               {AttnBuf::DOut, &dout},     {AttnBuf::DQ, &dq},
               {AttnBuf::Scores, &scores}, {AttnBuf::Probs, &probs},
               {AttnBuf::DProbs, &dprobs}, {AttnBuf::DScores, &dscores},
               {AttnBuf::DKAcc, &dkAcc},   {AttnBuf::DVAcc, &dvAcc}};
  auto row = [&](int64_t h, int64_t t) { return (h * s.seq + t) * s.seq; };
  auto stat = [&](int64_t b, int64_t h, int64_t t) {
    return (b * s.heads + h) * s.seq + t;
  };
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t i = 0; i < s.group(); ++i) {
      std::vector<AttnGemm> fwd = cuda::attentionForwardGemms(s, b, i);
      hostGemm(fwd[0], bufs);
      // The softmax row step, for the query heads of group index i.
      for (int64_t h = i; h < s.heads; h += s.group())
        for (int64_t t = 0; t < s.seq; ++t) {
          const float *sr = &scores[row(h, t)];
          float m = *std::max_element(sr, sr + t + 1);
          double l = 0;
          for (int64_t j = 0; j <= t; ++j)
            l += std::exp(sr[j] - m);
          const float rowLse = m + static_cast<float>(std::log(l));
          lse[stat(b, h, t)] = rowLse;
          for (int64_t j = 0; j < s.seq; ++j)
            probs[row(h, t) + j] = j <= t ? std::exp(sr[j] - rowLse) : 0.0f;
        }
      hostGemm(fwd[1], bufs);
    }
  }
  expectNear(out, cpuOut, "out");
  expectNear(lse, cpuLse, "lse");

  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t i = 0; i < s.group(); ++i) {
      for (const AttnGemm &g : cuda::attentionBackwardScoreGemms(s, b, i))
        hostGemm(g, bufs);
      for (int64_t h = i; h < s.heads; h += s.group())
        for (int64_t t = 0; t < s.seq; ++t) {
          // rowDot = dO[t] . O[t] of head h.
          const int64_t at = ((b * s.seq + t) * s.heads + h) * s.headDim;
          double dot = 0;
          for (int64_t d = 0; d < s.headDim; ++d)
            dot += double(dout[at + d]) * out[at + d];
          for (int64_t j = 0; j < s.seq; ++j) {
            float p = j <= t ? std::exp(scores[row(h, t) + j] -
                                        lse[stat(b, h, t)])
                             : 0.0f;
            probs[row(h, t) + j] = p;
            dscores[row(h, t) + j] =
                p * (dprobs[row(h, t) + j] - static_cast<float>(dot));
          }
        }
      for (const AttnGemm &g : cuda::attentionBackwardGradGemms(s, b, i))
        hostGemm(g, bufs);
    }
    // The accumulators hold batch row b's dk and dv.
    std::copy(dkAcc.begin(), dkAcc.end(), dk.begin() + b * accSize);
    std::copy(dvAcc.begin(), dvAcc.end(), dv.begin() + b * accSize);
  }
  expectNear(dq, cpuDq, "dq");
  expectNear(dk, cpuDk, "dk");
  expectNear(dv, cpuDv, "dv");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionGemmPlanTest,
    ::testing::Values(AttnShape{1, 1, 1, 1, 1, 1.0f},
                      AttnShape{2, 5, 4, 2, 3, 0.57735f},   // grouped query
                      AttnShape{2, 7, 3, 3, 4, 0.5f},       // one per group
                      AttnShape{1, 6, 6, 1, 8, 0.35355f}),  // multi-query
    [](const ::testing::TestParamInfo<AttnShape> &p) {
      const AttnShape &s = p.param;
      return "b" + std::to_string(s.batch) + "_s" + std::to_string(s.seq) +
             "_h" + std::to_string(s.heads) + "_kv" +
             std::to_string(s.kvHeads) + "_d" + std::to_string(s.headDim);
    });

} // namespace
