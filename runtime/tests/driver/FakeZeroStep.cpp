// A hand-written ZeRO-3 step, for testing the driver's sharded arguments.
//
// A two-layer MLP, logits = scale * (fc2(relu(fc1(x)))), cross-entropy,
// trained by SGD with momentum and weight decay after global-norm gradient
// clipping. Every param but fc2.bias and its momentum buffer are flat
// shards (abi.h) over the grid axes FAKE_SHARD_AXES: the step gathers the
// weights with asrt_all_gather_shards, computes gradients on its rows,
// reduces them to its shards with asrt_reduce_scatter_shards (then over
// the replica axes FAKE_REPLICA_AXES, for hybrid sharding) and updates only
// its shards. fc2.bias stays replicated, DDP style, to mix the two kinds.
// The sizes make every layout case appear: 40 and 20 elements (divisible),
// 5 (not divisible) and the 1-element scale (fewer elements than ranks).
//
// The step checks that the padding of every sharded argument it is given
// is zero (the driver's init= and --load-params promise) and fails the run
// otherwise. FAKE_* come from CMake: one binary per grid.
#include "autoshard/rt/abi.h"
#include "core/Backend.h"
#include "core/Context.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#define FAKE_STR2(x) #x
#define FAKE_STR(x) FAKE_STR2(x)

namespace {
constexpr int kIn = 8;
constexpr int kHidden = 5;
constexpr int kClasses = 4;
constexpr int kRows = FAKE_LOCAL_ROWS;
constexpr int kGlobalRows = 16;
constexpr int kShards = FAKE_SHARDS;
constexpr int32_t kShardAxes = FAKE_SHARD_AXES;
constexpr int32_t kReplicaAxes = FAKE_REPLICA_AXES; // 0: pure ZeRO-3
constexpr int32_t kAllAxes = kShardAxes | kReplicaAxes;
constexpr float kMomentum = 0.9f;
constexpr float kWeightDecay = 0.01f;
constexpr float kMaxNorm = 0.5f;

constexpr int shardSize(int numel) { return (numel + kShards - 1) / kShards; }

// The sharded params, in argument order; their momentum buffers follow
// them at kNumParams + p. Argument 3 is the replicated fc2.bias.
struct Sharded {
  const char *name;
  int arg;
  int numel;
};
constexpr Sharded kSharded[] = {
    {"fc1.weight", 0, kHidden * kIn},
    {"fc1.bias", 1, kHidden},
    {"fc2.weight", 2, kClasses * kHidden},
    {"scale", 4, 1},
};
constexpr int kNumParams = 5;
constexpr int kBias2 = 3;

static_assert(shardSize(kHidden *kIn) == FAKE_K_W1, "CMake's shard size");
static_assert(shardSize(kHidden) == FAKE_K_B1, "CMake's shard size");
static_assert(shardSize(kClasses *kHidden) == FAKE_K_W2, "CMake's shard size");
static_assert(kRows * FAKE_WORLD_SIZE == kGlobalRows, "CMake's local rows");
} // namespace

#define K_W1 FAKE_STR(FAKE_K_W1)
#define K_B1 FAKE_STR(FAKE_K_B1)
#define K_W2 FAKE_STR(FAKE_K_W2)
#define AXES " shard_axes=" FAKE_STR(FAKE_SHARD_AXES)
#define ROWS FAKE_STR(FAKE_LOCAL_ROWS)

// clang-format off
extern "C" const char autoshard_manifest[] =
    "autoshard-manifest 1\n"
    "abi " FAKE_STR(ASRT_ABI_VERSION) "\n"
    "step fake_zero3_mlp\n"
    "strategy zero3\n"
    "grid " FAKE_STR(FAKE_GRID) "\n"
    "arg 0 param fc1.weight f32 " K_W1 " init=normal:0.4 full=5x8" AXES "\n"
    "arg 1 param fc1.bias f32 " K_B1 " init=constant:0.1 full=5" AXES "\n"
    "arg 2 param fc2.weight f32 " K_W2 " init=normal:0.4 full=4x5" AXES "\n"
    "arg 3 param fc2.bias f32 4 init=zeros\n"
    "arg 4 param scale f32 1 init=ones full=scalar" AXES "\n"
    "arg 5 opt_state fc1.weight.momentum f32 " K_W1 " init=zeros full=5x8" AXES "\n"
    "arg 6 opt_state fc1.bias.momentum f32 " K_B1 " init=zeros full=5" AXES "\n"
    "arg 7 opt_state fc2.weight.momentum f32 " K_W2 " init=zeros full=4x5" AXES "\n"
    "arg 8 opt_state fc2.bias.momentum f32 4 init=zeros\n"
    "arg 9 opt_state scale.momentum f32 1 init=zeros full=scalar" AXES "\n"
    "arg 10 input x f32 " ROWS "x8 batch_dim=0 global=16\n"
    "arg 11 label y i32 " ROWS " batch_dim=0 global=16 classes=4\n"
    "arg 12 hyper lr f32 scalar init=constant:0.2\n"
    "result 0 param fc1.weight f32 " K_W1 " updates=0 full=5x8" AXES "\n"
    "result 1 param fc1.bias f32 " K_B1 " updates=1 full=5" AXES "\n"
    "result 2 param fc2.weight f32 " K_W2 " updates=2 full=4x5" AXES "\n"
    "result 3 param fc2.bias f32 4 updates=3\n"
    "result 4 param scale f32 1 updates=4 full=scalar" AXES "\n"
    "result 5 opt_state fc1.weight.momentum f32 " K_W1 " updates=5 full=5x8" AXES "\n"
    "result 6 opt_state fc1.bias.momentum f32 " K_B1 " updates=6 full=5" AXES "\n"
    "result 7 opt_state fc2.weight.momentum f32 " K_W2 " updates=7 full=4x5" AXES "\n"
    "result 8 opt_state fc2.bias.momentum f32 4 updates=8\n"
    "result 9 opt_state scale.momentum f32 1 updates=9 full=scalar" AXES "\n"
    "result 10 grad fc1.weight.grad f32 " K_W1 " of=0 full=5x8" AXES "\n"
    "result 11 grad fc1.bias.grad f32 " K_B1 " of=1 full=5" AXES "\n"
    "result 12 loss loss f32 scalar\n"
    "end\n";
// clang-format on

namespace {

/// Fails the run when a padding element of a sharded argument is not zero:
/// `valid` (asrt_shard_of of a tensor of ones) is 1 on real elements and 0
/// on padding, whichever shard this rank holds.
void checkPadding(const char *what, const float *shard, const float *valid,
                  int k) {
  for (int j = 0; j < k; ++j)
    if (valid[j] == 0.0f && shard[j] != 0.0f)
      autoshard::rt::fatal("fake_zero3_mlp: padding element %d of the shard "
                           "of %s is %g, expected 0",
                           j, what, static_cast<double>(shard[j]));
}

} // namespace

extern "C" void autoshard_step(asrt_context *ctx, void *const *args,
                               void *const *results) {
  const auto *x = static_cast<const float *>(args[10]);
  const auto *y = static_cast<const int32_t *>(args[11]);
  const float lr = *static_cast<const float *>(args[12]);

  // Gather the full weights (ZeRO-3's all-gather before use) and check the
  // shards' padding on the way.
  std::vector<float> full[kNumParams];
  for (const Sharded &p : kSharded) {
    int k = shardSize(p.numel);
    std::vector<float> ones(p.numel, 1.0f), valid(k);
    asrt_shard_of(ctx, ASRT_DTYPE_F32, ones.data(), valid.data(), p.numel,
                  kShardAxes);
    checkPadding(p.name, static_cast<const float *>(args[p.arg]), valid.data(),
                 k);
    checkPadding(p.name, static_cast<const float *>(args[kNumParams + p.arg]),
                 valid.data(), k);
    full[p.arg].resize(p.numel);
    asrt_all_gather_shards(ctx, ASRT_DTYPE_F32, args[p.arg], full[p.arg].data(),
                           p.numel, kShardAxes);
  }
  const float *w1 = full[0].data(), *b1 = full[1].data(), *w2 = full[2].data(),
              scale = full[4][0];
  const auto *b2 = static_cast<const float *>(args[kBias2]);

  // Gradients of the mean loss over the global batch, from this rank's rows.
  std::vector<float> grad[kNumParams];
  for (int p = 0; p < kNumParams; ++p)
    grad[p].assign(p == kBias2 ? kClasses : full[p].size(), 0.0f);
  float loss = 0;
  for (int r = 0; r < kRows; ++r) {
    const float *xr = x + r * kIn;
    float a[kHidden], h[kHidden], z[kClasses], logits[kClasses];
    for (int i = 0; i < kHidden; ++i) {
      a[i] = b1[i];
      for (int j = 0; j < kIn; ++j)
        a[i] += w1[i * kIn + j] * xr[j];
      h[i] = std::max(a[i], 0.0f);
    }
    float maxLogit = -INFINITY;
    for (int c = 0; c < kClasses; ++c) {
      z[c] = b2[c];
      for (int i = 0; i < kHidden; ++i)
        z[c] += w2[c * kHidden + i] * h[i];
      logits[c] = scale * z[c];
      maxLogit = std::max(maxLogit, logits[c]);
    }
    float sum = 0, p[kClasses];
    for (int c = 0; c < kClasses; ++c)
      sum += (p[c] = std::exp(logits[c] - maxLogit));
    loss -= std::log(p[y[r]] / sum) / kGlobalRows;
    float dh[kHidden] = {};
    for (int c = 0; c < kClasses; ++c) {
      float dlogit = (p[c] / sum - (c == y[r] ? 1.0f : 0.0f)) / kGlobalRows;
      grad[4][0] += dlogit * z[c];
      float dz = scale * dlogit;
      grad[kBias2][c] += dz;
      for (int i = 0; i < kHidden; ++i) {
        grad[2][c * kHidden + i] += dz * h[i];
        dh[i] += w2[c * kHidden + i] * dz;
      }
    }
    for (int i = 0; i < kHidden; ++i) {
      float da = a[i] > 0 ? dh[i] : 0.0f;
      grad[1][i] += da;
      for (int j = 0; j < kIn; ++j)
        grad[0][i * kIn + j] += da * xr[j];
    }
  }
  asrt_all_reduce(ctx, &loss, results[12], 1, ASRT_DTYPE_F32, ASRT_REDUCE_SUM,
                  kAllAxes);

  // Each rank keeps the sum of its shard group's gradients for its shard
  // (exposed for fc1), then sums over the replicas of that shard.
  std::vector<float> shardGrad[kNumParams];
  float *g[kNumParams];
  for (const Sharded &p : kSharded) {
    shardGrad[p.arg].resize(shardSize(p.numel));
    g[p.arg] = p.arg < 2 ? static_cast<float *>(results[10 + p.arg])
                         : shardGrad[p.arg].data();
    asrt_reduce_scatter_shards(ctx, ASRT_DTYPE_F32, grad[p.arg].data(),
                               g[p.arg], p.numel, ASRT_REDUCE_SUM, kShardAxes);
    if (kReplicaAxes)
      asrt_all_reduce(ctx, g[p.arg], g[p.arg], shardSize(p.numel),
                      ASRT_DTYPE_F32, ASRT_REDUCE_SUM, kReplicaAxes);
  }
  g[kBias2] = grad[kBias2].data();
  asrt_all_reduce(ctx, g[kBias2], g[kBias2], kClasses, ASRT_DTYPE_F32,
                  ASRT_REDUCE_SUM, kAllAxes);

  // Global-norm clipping: whole shards, padding included (it must be
  // zero), summed over the shard group; the replicated bias counts once.
  float sumsq = 0;
  for (const Sharded &p : kSharded)
    for (int j = 0; j < shardSize(p.numel); ++j)
      sumsq += g[p.arg][j] * g[p.arg][j];
  asrt_all_reduce(ctx, &sumsq, &sumsq, 1, ASRT_DTYPE_F32, ASRT_REDUCE_SUM,
                  kShardAxes);
  for (int c = 0; c < kClasses; ++c)
    sumsq += g[kBias2][c] * g[kBias2][c];
  float coef = std::min(1.0f, kMaxNorm / (std::sqrt(sumsq) + 1e-6f));

  // torch.optim.SGD on what this rank holds; elementwise and read before
  // write, so results may alias their arguments.
  for (int p = 0; p < kNumParams; ++p) {
    int n = p == kBias2 ? kClasses : 0;
    for (const Sharded &s : kSharded)
      if (s.arg == p)
        n = shardSize(s.numel);
    const auto *param = static_cast<const float *>(args[p]);
    const auto *buf = static_cast<const float *>(args[kNumParams + p]);
    auto *paramOut = static_cast<float *>(results[p]);
    auto *bufOut = static_cast<float *>(results[kNumParams + p]);
    for (int j = 0; j < n; ++j) {
      float d = coef * g[p][j] + kWeightDecay * param[j];
      float b = kMomentum * buf[j] + d;
      bufOut[j] = b;
      paramOut[j] = param[j] - lr * b;
    }
  }
}

