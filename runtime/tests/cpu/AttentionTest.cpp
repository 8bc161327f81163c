// Tests of the CPU causal attention with grouped-query heads.
#include "TestUtil.h"

#include "autoshard/rt/abi.h"

#include <string>

namespace autoshard::rt::test {
namespace {

struct AttnShape {
  int64_t batch, seq, heads, kvHeads, headDim;
  size_t qSize() const { return batch * seq * heads * headDim; }
  size_t kvSize() const { return batch * seq * kvHeads * headDim; }
  size_t lseSize() const { return batch * heads * seq; }
  float scale() const {
    return headDim > 0 ? 1.0f / std::sqrt(static_cast<float>(headDim)) : 1.0f;
  }
  int64_t qAt(int64_t b, int64_t t, int64_t h) const {
    return ((b * seq + t) * heads + h) * headDim;
  }
  int64_t kvAt(int64_t b, int64_t t, int64_t h) const {
    // Query head h reads key/value head h / (heads / kvHeads).
    return ((b * seq + t) * kvHeads + h / (heads / kvHeads)) * headDim;
  }
};

struct AttnRef {
  std::vector<double> out, outTol, lse;
  std::vector<double> dq, dqTol, dk, dkTol, dv, dvTol;
};

/// abi.h's attention, forward and backward, in double and by the textbook
/// formulas: for each query position t and j <= t,
///   s_j = scale q_t . k_j,  p = softmax(s),  out_t = sum_j p_j v_j,
///   dv_j += p_j dout_t,  dp_j = dout_t . v_j,
///   ds_j = p_j (dp_j - sum_i p_i dp_i),
///   dq_t = scale sum_j ds_j k_j,  dk_j += scale ds_j q_t.
/// Tolerances are relative to the sums of the terms' magnitudes.
AttnRef attentionRef(const AttnShape &s, const std::vector<float> &q,
                     const std::vector<float> &k, const std::vector<float> &v,
                     const std::vector<float> &dout) {
  const int64_t d = s.headDim;
  const double scale = s.scale();
  AttnRef r;
  r.out.assign(s.qSize(), 0.0);
  r.outTol.assign(s.qSize(), 1e-30);
  r.lse.assign(s.lseSize(), 0.0);
  r.dq.assign(s.qSize(), 0.0);
  r.dqTol.assign(s.qSize(), 1e-30);
  r.dk.assign(s.kvSize(), 0.0);
  r.dkTol.assign(s.kvSize(), 1e-30);
  r.dv.assign(s.kvSize(), 0.0);
  r.dvTol.assign(s.kvSize(), 1e-30);
  const double rel = 3e-5;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t t = 0; t < s.seq; ++t) {
        const int64_t qi = s.qAt(b, t, h);
        std::vector<double> p(t + 1), dp(t + 1);
        double m = -INFINITY;
        for (int64_t j = 0; j <= t; ++j) {
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c)
            dot += static_cast<double>(q[qi + c]) * k[s.kvAt(b, j, h) + c];
          p[j] = scale * dot;
          m = std::max(m, p[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= t; ++j)
          sum += std::exp(p[j] - m);
        r.lse[(b * s.heads + h) * s.seq + t] = m + std::log(sum);
        double pdp = 0.0, pAbsDp = 0.0;
        for (int64_t j = 0; j <= t; ++j) {
          p[j] = std::exp(p[j] - m) / sum;
          const int64_t vj = s.kvAt(b, j, h);
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c) {
            r.out[qi + c] += p[j] * v[vj + c];
            r.outTol[qi + c] += rel * p[j] * std::fabs(v[vj + c]);
            dot += static_cast<double>(dout[qi + c]) * v[vj + c];
            r.dv[vj + c] += p[j] * dout[qi + c];
            r.dvTol[vj + c] += rel * p[j] * std::fabs(dout[qi + c]);
          }
          dp[j] = dot;
          pdp += p[j] * dot;
          pAbsDp += p[j] * std::fabs(dot);
        }
        for (int64_t j = 0; j <= t; ++j) {
          const double ds = p[j] * (dp[j] - pdp);
          const double dsMag = p[j] * (std::fabs(dp[j]) + pAbsDp) + 1e-7;
          const int64_t kj = s.kvAt(b, j, h);
          for (int64_t c = 0; c < d; ++c) {
            r.dq[qi + c] += scale * ds * k[kj + c];
            r.dqTol[qi + c] += rel * scale * dsMag * std::fabs(k[kj + c]);
            r.dk[kj + c] += scale * ds * q[qi + c];
            r.dkTol[kj + c] += rel * scale * dsMag * std::fabs(q[qi + c]);
          }
        }
      }
  return r;
}

class AttentionTest : public CpuKernelTest,
                      public ::testing::WithParamInterface<AttnShape> {
protected:
  void SetUp() override {
    s = GetParam();
    // Scores of a few units: softmax rows that are neither uniform nor
    // one-hot.
    q = uniformFloats(s.qSize(), 1, -2.0f, 2.0f);
    k = uniformFloats(s.kvSize(), 2, -2.0f, 2.0f);
    v = uniformFloats(s.kvSize(), 3, -1.0f, 1.0f);
    dout = uniformFloats(s.qSize(), 4, -1.0f, 1.0f);
  }

  void forward(std::vector<float> &out, std::vector<float> &lse) {
    out = poisoned(s.qSize());
    lse = poisoned(s.lseSize());
    asrt_causal_attention_fwd(&ctx, ASRT_DTYPE_F32, q.data(), k.data(),
                              v.data(), out.data(), lse.data(), s.batch, s.seq,
                              s.heads, s.kvHeads, s.headDim, s.scale());
  }

  std::vector<float> forwardOut() {
    std::vector<float> out, lse;
    forward(out, lse);
    return out;
  }

  void grad(const std::vector<float> &dy, const std::vector<float> &out,
            const std::vector<float> &lse, std::vector<float> &dq,
            std::vector<float> &dk, std::vector<float> &dv) {
    dq = poisoned(s.qSize());
    dk = poisoned(s.kvSize());
    dv = poisoned(s.kvSize());
    asrt_causal_attention_grad(&ctx, ASRT_DTYPE_F32, dy.data(), q.data(),
                               k.data(), v.data(), out.data(), lse.data(),
                               dq.data(), dk.data(), dv.data(), s.batch, s.seq,
                               s.heads, s.kvHeads, s.headDim, s.scale());
  }

  AttnShape s{};
  std::vector<float> q, k, v, dout;
};

TEST_P(AttentionTest, ForwardMatchesReference) {
  std::vector<float> out, lse;
  forward(out, lse);
  AttnRef ref = attentionRef(s, q, k, v, dout);
  EXPECT_TRUE(allWithin(out, ref.out, ref.outTol)) << "out";
  EXPECT_TRUE(allNear(lse, ref.lse, 1e-6, 1e-6)) << "lse";
}

TEST_P(AttentionTest, GradMatchesAnalyticReference) {
  std::vector<float> out, lse, dq, dk, dv;
  forward(out, lse);
  grad(dout, out, lse, dq, dk, dv);
  AttnRef ref = attentionRef(s, q, k, v, dout);
  EXPECT_TRUE(allWithin(dq, ref.dq, ref.dqTol)) << "dq";
  EXPECT_TRUE(allWithin(dk, ref.dk, ref.dkTol)) << "dk";
  EXPECT_TRUE(allWithin(dv, ref.dv, ref.dvTol)) << "dv";
}

TEST_P(AttentionTest, GradMatchesFiniteDifferencesOfKernelForward) {
  std::vector<float> out, lse, dq, dk, dv;
  forward(out, lse);
  // dout plays the random weights w of L = sum(w * out).
  grad(dout, out, lse, dq, dk, dv);
  auto fwd = [&] { return forwardOut(); };
  // Step 1e-2 on inputs of order 1: truncation (h^2/6 times a third
  // derivative of a few units) and f32 rounding of the changed outputs
  // over 2h both stay near 1e-4.
  EXPECT_TRUE(gradMatchesDifferences(dq, fwd, q, dout, 1e-2f, 1e-2, 5e-4, 48))
      << "dq";
  EXPECT_TRUE(gradMatchesDifferences(dk, fwd, k, dout, 1e-2f, 1e-2, 5e-4, 48))
      << "dk";
  EXPECT_TRUE(gradMatchesDifferences(dv, fwd, v, dout, 1e-2f, 1e-2, 5e-4, 48))
      << "dv";
}

TEST_P(AttentionTest, Bf16AgreesWithF32) {
  q = bf16Rounded(q);
  k = bf16Rounded(k);
  v = bf16Rounded(v);
  dout = bf16Rounded(dout);
  std::vector<uint16_t> qB = toBf16(q), kB = toBf16(k), vB = toBf16(v),
                        doB = toBf16(dout);
  std::vector<float> out, lse;
  forward(out, lse);
  std::vector<uint16_t> outB = poisonedBf16(s.qSize());
  std::vector<float> lseB = poisoned(s.lseSize());
  asrt_causal_attention_fwd(&ctx, ASRT_DTYPE_BF16, qB.data(), kB.data(),
                            vB.data(), outB.data(), lseB.data(), s.batch, s.seq,
                            s.heads, s.kvHeads, s.headDim, s.scale());
  // The bf16 kernel runs the same f32 GEMMs on converted copies: its
  // output is the f32 output rounded (within half a bf16 ulp), its f32 lse
  // equal up to f32 rounding.
  const double halfUlp = 1.0 / 256;
  EXPECT_TRUE(bf16CloseToF32(outB, out, halfUlp, 1e-6)) << "out";
  EXPECT_TRUE(allNear(lseB, toDouble(lse), 1e-6, 1e-6)) << "lse";

  // The gradient reads the forward output; both variants get the bf16 one
  // so that they see the same values.
  std::vector<float> outRounded = fromBf16(outB), dq, dk, dv;
  grad(dout, outRounded, lseB, dq, dk, dv);
  std::vector<uint16_t> dqB = poisonedBf16(s.qSize()),
                        dkB = poisonedBf16(s.kvSize()),
                        dvB = poisonedBf16(s.kvSize());
  asrt_causal_attention_grad(&ctx, ASRT_DTYPE_BF16, doB.data(), qB.data(),
                             kB.data(), vB.data(), outB.data(), lseB.data(),
                             dqB.data(), dkB.data(), dvB.data(), s.batch, s.seq,
                             s.heads, s.kvHeads, s.headDim, s.scale());
  EXPECT_TRUE(bf16CloseToF32(dqB, dq, halfUlp, 1e-6)) << "dq";
  EXPECT_TRUE(bf16CloseToF32(dkB, dk, halfUlp, 1e-6)) << "dk";
  EXPECT_TRUE(bf16CloseToF32(dvB, dv, halfUlp, 1e-6)) << "dv";

  // End to end, against the double reference on the rounded inputs.
  AttnRef ref = attentionRef(s, q, k, v, dout);
  EXPECT_TRUE(allNear(fromBf16(outB), ref.out, 1e-2, 1e-3)) << "out vs ref";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionTest,
    ::testing::Values(
        // One position: p = 1, out = v, dq = dk = 0.
        AttnShape{1, 1, 2, 2, 4},
        // Grouped-query heads (2 per key/value head), seq below a block.
        AttnShape{2, 13, 4, 2, 8},
        // Two row blocks, the second partial; groups of 2 over 3 kv heads.
        AttnShape{1, 70, 6, 3, 16},
        // Multi-query (one kv head for 4), three blocks, the last of 2 rows.
        AttnShape{2, 130, 4, 1, 8},
        // Plain multi-head attention, odd head_dim.
        AttnShape{1, 67, 3, 3, 5}),
    [](const ::testing::TestParamInfo<AttnShape> &p) {
      const AttnShape &s = p.param;
      return "b" + std::to_string(s.batch) + "_t" + std::to_string(s.seq) +
             "_h" + std::to_string(s.heads) + "_kv" +
             std::to_string(s.kvHeads) + "_d" + std::to_string(s.headDim);
    });

using AttentionEdgeTest = CpuKernelTest;

TEST_F(AttentionEdgeTest, LargeScoresStayFinite) {
  // Scores of +-400: exp without the row maximum would overflow.
  AttnShape s{1, 9, 1, 1, 2};
  std::vector<float> q(s.qSize()), k(s.kvSize()), v(s.kvSize());
  for (int64_t t = 0; t < s.seq; ++t) {
    q[t * 2] = 20.0f;
    q[t * 2 + 1] = 0.0f;
    k[t * 2] = (t % 2 ? 1.0f : -1.0f) * 20.0f * std::sqrt(2.0f);
    k[t * 2 + 1] = 1.0f;
    v[t * 2] = static_cast<float>(t);
    v[t * 2 + 1] = 1.0f;
  }
  std::vector<float> out = poisoned(s.qSize()), lse = poisoned(s.lseSize());
  asrt_causal_attention_fwd(&ctx, ASRT_DTYPE_F32, q.data(), k.data(), v.data(),
                            out.data(), lse.data(), s.batch, s.seq, s.heads,
                            s.kvHeads, s.headDim, s.scale());
  std::vector<float> dout(s.qSize(), 1.0f);
  AttnRef ref = attentionRef(s, q, k, v, dout);
  EXPECT_TRUE(allWithin(out, ref.out, ref.outTol));
  EXPECT_TRUE(allNear(lse, ref.lse, 1e-6, 0.0));
  // Row 0 sees only key 0 (score -400): out = v_0 and lse = the score.
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(lse[0], -400.0, 1e-3);
}

TEST_F(AttentionEdgeTest, EmptyHeadDimGivesUniformWeights) {
  // head_dim 0: every score is 0, so lse[t] = log(t + 1); nothing else to
  // write.
  std::vector<float> lse = poisoned(2 * 5);
  float none = 0.0f;
  asrt_causal_attention_fwd(&ctx, ASRT_DTYPE_F32, &none, &none, &none, &none,
                            lse.data(), 1, 5, 2, 1, 0, 1.0f);
  std::vector<double> ref;
  for (int h = 0; h < 2; ++h)
    for (int t = 0; t < 5; ++t)
      ref.push_back(std::log(t + 1.0));
  EXPECT_TRUE(allNear(lse, ref, 1e-6, 0.0));
}

TEST_F(AttentionEdgeTest, BadHeadsAreFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float x[64] = {};
  EXPECT_DEATH(asrt_causal_attention_fwd(&ctx, ASRT_DTYPE_F32, x, x, x, x, x, 1,
                                         2, 3, 2, 4, 0.5f),
               "causal_attention_fwd: heads = 3 must be a multiple of "
               "kv_heads = 2 >= 1");
  EXPECT_DEATH(asrt_causal_attention_grad(&ctx, ASRT_DTYPE_F32, x, x, x, x, x,
                                          x, x, x, x, 1, 2, 2, 0, 4, 0.5f),
               "causal_attention_grad: heads = 2 must be a multiple of "
               "kv_heads = 0 >= 1");
}

} // namespace
} // namespace autoshard::rt::test
