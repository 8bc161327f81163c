// A hand-written training step, for testing the driver without the compiler.
//
// Softmax regression (logits = x w^T + b, cross-entropy) trained by SGD with
// momentum 0.9, data parallel: each rank computes gradients on its rows,
// one asrt_all_reduce (AVG) averages them, another averages the loss. Plain
// loops, so the test needs no backend library. FAKE_WORLD_SIZE and
// FAKE_LOCAL_ROWS come from CMake: one binary per compiled world size.
#include "autoshard/rt/abi.h"
#include "core/Backend.h"

#include <cmath>
#include <cstring>

#define FAKE_STR2(x) #x
#define FAKE_STR(x) FAKE_STR2(x)

namespace {
constexpr int kIn = 8;
constexpr int kClasses = 4;
constexpr int kRows = FAKE_LOCAL_ROWS;
constexpr int kParams = kClasses * kIn + kClasses;
constexpr float kMomentum = 0.9f;
} // namespace

// clang-format off
extern "C" const char autoshard_manifest[] =
    "autoshard-manifest 1\n"
    "abi " FAKE_STR(ASRT_ABI_VERSION) "\n"
    "step fake_softmax_regression\n"
    "strategy ddp\n"
    "grid " FAKE_STR(FAKE_WORLD_SIZE) "\n"
    "arg 0 param w f32 4x8 init=normal:0.1\n"
    "arg 1 param b f32 4 init=zeros\n"
    "arg 2 opt_state w.momentum f32 4x8 init=zeros\n"
    "arg 3 opt_state b.momentum f32 4 init=zeros\n"
    "arg 4 input x f32 " FAKE_STR(FAKE_LOCAL_ROWS) "x8 batch_dim=0 global=16\n"
    "arg 5 label y i32 " FAKE_STR(FAKE_LOCAL_ROWS) " batch_dim=0 global=16 classes=4\n"
    "arg 6 hyper lr f32 scalar init=constant:0.5\n"
    "result 0 param w f32 4x8 updates=0\n"
    "result 1 param b f32 4 updates=1\n"
    "result 2 opt_state w.momentum f32 4x8 updates=2\n"
    "result 3 opt_state b.momentum f32 4 updates=3\n"
    "result 4 loss loss f32 scalar\n"
    "end\n";
// clang-format on

extern "C" void autoshard_step(asrt_context *ctx, void *const *args,
                               void *const *results) {
  const auto *w = static_cast<const float *>(args[0]);
  const auto *b = static_cast<const float *>(args[1]);
  const auto *mw = static_cast<const float *>(args[2]);
  const auto *mb = static_cast<const float *>(args[3]);
  const auto *x = static_cast<const float *>(args[4]);
  const auto *y = static_cast<const int32_t *>(args[5]);
  const float lr = *static_cast<const float *>(args[6]);

  // One flat gradient bucket [dw | db], as DDP would send it.
  auto *grad = static_cast<float *>(asrt_alloc(ctx, kParams * sizeof(float)));
  std::memset(grad, 0, kParams * sizeof(float));
  float *dw = grad, *db = grad + kClasses * kIn;
  float loss = 0;
  for (int r = 0; r < kRows; ++r) {
    float logits[kClasses], maxLogit = -INFINITY;
    for (int c = 0; c < kClasses; ++c) {
      logits[c] = b[c];
      for (int j = 0; j < kIn; ++j)
        logits[c] += w[c * kIn + j] * x[r * kIn + j];
      maxLogit = std::fmax(maxLogit, logits[c]);
    }
    float sum = 0;
    for (float &l : logits)
      sum += (l = std::exp(l - maxLogit));
    loss -= std::log(logits[y[r]] / sum) / kRows;
    for (int c = 0; c < kClasses; ++c) {
      float d = (logits[c] / sum - (c == y[r] ? 1.0f : 0.0f)) / kRows;
      db[c] += d;
      for (int j = 0; j < kIn; ++j)
        dw[c * kIn + j] += d * x[r * kIn + j];
    }
  }
  asrt_all_reduce(ctx, grad, grad, kParams, ASRT_DTYPE_F32, ASRT_REDUCE_AVG, 1);
  asrt_all_reduce(ctx, &loss, results[4], 1, ASRT_DTYPE_F32, ASRT_REDUCE_AVG,
                  1);

  // Elementwise and read-before-write: correct whether or not results
  // alias their arguments.
  auto update = [&](const float *p, const float *m, const float *g, void *pOut,
                    void *mOut, int n) {
    for (int i = 0; i < n; ++i) {
      float momentum = kMomentum * m[i] + g[i];
      float param = p[i] - lr * momentum;
      static_cast<float *>(mOut)[i] = momentum;
      static_cast<float *>(pOut)[i] = param;
    }
  };
  update(w, mw, dw, results[0], results[2], kClasses * kIn);
  update(b, mb, db, results[1], results[3], kClasses);
  asrt_free(ctx, grad);
}

