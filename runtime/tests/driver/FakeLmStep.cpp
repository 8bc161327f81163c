// A hand-written language-model step, for testing the driver's token paths.
//
// A bigram model (logits of the next token = wte[current token]) with
// cross-entropy, trained by AdamW with an i32 step counter, data parallel:
// one asrt_all_reduce (AVG) averages the gradient, which the step also
// exposes as a grad result, another averages the loss. Plain loops, so the
// test needs no backend library. FAKE_WORLD_SIZE and FAKE_LOCAL_ROWS come
// from CMake: one binary per compiled world size.
#include "autoshard/rt/abi.h"
#include "core/Backend.h"
#include "core/Context.h"

#include <cmath>
#include <cstring>

#define FAKE_STR2(x) #x
#define FAKE_STR(x) FAKE_STR2(x)

namespace {
constexpr int kVocab = 16;
constexpr int kSeq = 8;
constexpr int kRows = FAKE_LOCAL_ROWS;
constexpr int kTable = kVocab * kVocab;
constexpr float kBeta1 = 0.9f, kBeta2 = 0.95f, kEps = 1e-8f;
} // namespace

// clang-format off
extern "C" const char autoshard_manifest[] =
    "autoshard-manifest 1\n"
    "abi " FAKE_STR(ASRT_ABI_VERSION) "\n"
    "step fake_bigram_lm\n"
    "strategy ddp\n"
    "grid " FAKE_STR(FAKE_WORLD_SIZE) "\n"
    "arg 0 param wte f32 16x16 init=normal:0.02\n"
    "arg 1 opt_state wte.exp_avg f32 16x16 init=zeros\n"
    "arg 2 opt_state wte.exp_avg_sq f32 16x16 init=zeros\n"
    "arg 3 opt_state step i32 scalar init=zeros\n"
    "arg 4 input idx i32 " FAKE_STR(FAKE_LOCAL_ROWS) "x8 batch_dim=0 global=8 classes=16\n"
    "arg 5 label targets i32 " FAKE_STR(FAKE_LOCAL_ROWS) "x8 batch_dim=0 global=8 classes=16\n"
    "arg 6 hyper lr f32 scalar init=constant:0.05\n"
    "result 0 param wte f32 16x16 updates=0\n"
    "result 1 opt_state wte.exp_avg f32 16x16 updates=1\n"
    "result 2 opt_state wte.exp_avg_sq f32 16x16 updates=2\n"
    "result 3 opt_state step i32 scalar updates=3\n"
    "result 4 grad wte.grad f32 16x16 of=0\n"
    "result 5 loss loss f32 scalar\n"
    "end\n";
// clang-format on

extern "C" void autoshard_step(asrt_context *ctx, void *const *args,
                               void *const *results) {
  const auto *wte = static_cast<const float *>(args[0]);
  const auto *m = static_cast<const float *>(args[1]);
  const auto *v = static_cast<const float *>(args[2]);
  const int32_t step = *static_cast<const int32_t *>(args[3]) + 1;
  const auto *idx = static_cast<const int32_t *>(args[4]);
  const auto *targets = static_cast<const int32_t *>(args[5]);
  const float lr = *static_cast<const float *>(args[6]);

  auto *grad = static_cast<float *>(asrt_alloc(ctx, kTable * sizeof(float)));
  std::memset(grad, 0, kTable * sizeof(float));
  const int positions = kRows * kSeq;
  float loss = 0;
  for (int i = 0; i < positions; ++i) {
    // The driver validates data before the first step; a bad id here is a
    // runtime bug, reported as the real kernels would.
    if (idx[i] < 0 || idx[i] >= kVocab || targets[i] < 0 ||
        targets[i] >= kVocab)
      autoshard::rt::fatal("fake_bigram_lm: position %d has token %d, target "
                           "%d, outside [0, %d)",
                           i, idx[i], targets[i], kVocab);
    const float *logits = wte + idx[i] * kVocab;
    float maxLogit = -INFINITY, p[kVocab], sum = 0;
    for (int c = 0; c < kVocab; ++c)
      maxLogit = std::fmax(maxLogit, logits[c]);
    for (int c = 0; c < kVocab; ++c)
      sum += (p[c] = std::exp(logits[c] - maxLogit));
    loss -= std::log(p[targets[i]] / sum) / positions;
    for (int c = 0; c < kVocab; ++c)
      grad[idx[i] * kVocab + c] +=
          (p[c] / sum - (c == targets[i] ? 1.0f : 0.0f)) / positions;
  }
  auto *g = static_cast<float *>(results[4]);
  asrt_all_reduce(ctx, grad, g, kTable, ASRT_DTYPE_F32, ASRT_REDUCE_AVG, 1);
  asrt_all_reduce(ctx, &loss, results[5], 1, ASRT_DTYPE_F32, ASRT_REDUCE_AVG,
                  1);

  // torch.optim.AdamW without weight decay; elementwise and read before
  // write, so results may alias their arguments.
  const float correction1 = 1 - std::pow(kBeta1, static_cast<float>(step));
  const float correction2 = 1 - std::pow(kBeta2, static_cast<float>(step));
  for (int i = 0; i < kTable; ++i) {
    float mi = kBeta1 * m[i] + (1 - kBeta1) * g[i];
    float vi = kBeta2 * v[i] + (1 - kBeta2) * g[i] * g[i];
    float param =
        wte[i] - lr * (mi / correction1) / (std::sqrt(vi / correction2) + kEps);
    static_cast<float *>(results[1])[i] = mi;
    static_cast<float *>(results[2])[i] = vi;
    static_cast<float *>(results[0])[i] = param;
  }
  *static_cast<int32_t *>(results[3]) = step;
  asrt_free(ctx, grad);
}

