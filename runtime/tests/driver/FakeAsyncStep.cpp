// A hand-written step with asynchronous gradient buckets, for the driver's
// tests of asrt_bucket_start / asrt_wait, --trace and --collective-timeout.
//
// FakeStep.cpp's softmax regression, with its data-parallel gradient
// average split the way an overlapping DDP backward issues it: the bias
// gradient's bucket starts as soon as it is known, the weight gradient is
// computed while it is in flight, and its bucket (two members, one in
// place) starts next; the loss is averaged by a blocking all-reduce issued
// while both are in flight, and the buckets are waited in the opposite
// order. The arithmetic is FakeStep's, so the two binaries train to the
// same parameters. The hand-written compute is timed as ops, so that it
// shows on the trace's compute track.
//
// FAKE_* come from CMake: the world size, and optionally a fault:
//   FAKE_FAULT_SIGNAL=S  rank FAKE_FAULT_RANK raises signal S (SIGKILL,
//                        SIGSTOP) at the start of step FAKE_FAULT_STEP,
//                        as a rank that dies or hangs mid-run; with
//                        FAKE_FAULT_AT_STEP_END, at the end of that step
//                        instead, once its collectives are done, so that
//                        the rank hangs between steps (in the checkpoint
//                        after the step, say) while its peers go on;
//   FAKE_SKIP_WAIT_STEP=N  step N returns without waiting its bias bucket.
// FAKE_WITH_EVAL: an evaluation step linked beside it, as shard-compile
// --with-eval links one: the forward and its loss, averaged over the ranks
// by a blocking all-reduce (the collective a rank stopped before an
// evaluation leaves its peers waiting in).
// FAKE_CUDA_EMU: linked with the CUDA backend built for the CUDA emulator
// (its collectives over the emulated NCCL), whose device memory is host
// memory: the step still computes on the host, once the streams that wrote
// its arguments have run.
#include "autoshard/rt/abi.h"
#include "comm/Comm.h"
#include "core/Backend.h"
#include "core/Context.h"

#include <cmath>
#include <csignal>
#include <cstring>

#ifdef FAKE_CUDA_EMU
#include <cuda_runtime_api.h>
#endif

#define FAKE_STR2(x) #x
#define FAKE_STR(x) FAKE_STR2(x)

namespace {
constexpr int kIn = 8;
constexpr int kClasses = 4;
constexpr int kRows = FAKE_LOCAL_ROWS;
constexpr float kMomentum = 0.9f;
} // namespace

// clang-format off
extern "C" const char autoshard_manifest[] =
    "autoshard-manifest 1\n"
    "abi " FAKE_STR(ASRT_ABI_VERSION) "\n"
    "step fake_async_softmax_regression\n"
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

namespace {

int64_t stepsRun = 0;

/// Raises the fault if it is due: `atStepEnd` says where the step is.
void injectFault(asrt_context *ctx, bool atStepEnd) {
#ifdef FAKE_FAULT_SIGNAL
#ifdef FAKE_FAULT_AT_STEP_END
  constexpr bool kFaultAtStepEnd = true;
#else
  constexpr bool kFaultAtStepEnd = false;
#endif
  if (atStepEnd == kFaultAtStepEnd && stepsRun == FAKE_FAULT_STEP &&
      ctx->comm && ctx->comm->rank() == FAKE_FAULT_RANK)
    std::raise(FAKE_FAULT_SIGNAL);
#else
  (void)ctx;
  (void)atStepEnd;
#endif
}

} // namespace

#ifdef FAKE_WITH_EVAL
// clang-format off
extern "C" const char autoshard_eval_manifest[] =
    "autoshard-manifest 1\n"
    "abi " FAKE_STR(ASRT_ABI_VERSION) "\n"
    "step fake_async_softmax_regression_eval\n"
    "strategy ddp\n"
    "grid " FAKE_STR(FAKE_WORLD_SIZE) "\n"
    "arg 0 param w f32 4x8 init=normal:0.1\n"
    "arg 1 param b f32 4 init=zeros\n"
    "arg 2 input x f32 " FAKE_STR(FAKE_LOCAL_ROWS) "x8 batch_dim=0 global=16\n"
    "arg 3 label y i32 " FAKE_STR(FAKE_LOCAL_ROWS) " batch_dim=0 global=16 classes=4\n"
    "result 0 loss loss f32 scalar\n"
    "end\n";
// clang-format on

extern "C" void autoshard_eval_step(asrt_context *ctx, void *const *args,
                                    void *const *results) {
  const auto *w = static_cast<const float *>(args[0]);
  const auto *b = static_cast<const float *>(args[1]);
  const auto *x = static_cast<const float *>(args[2]);
  const auto *y = static_cast<const int32_t *>(args[3]);
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
  }
  auto *lossBuffer = static_cast<float *>(asrt_alloc(ctx, 4));
  *lossBuffer = loss;
  asrt_all_reduce(ctx, lossBuffer, results[0], 1, ASRT_DTYPE_F32,
                  ASRT_REDUCE_AVG, 1);
  asrt_free(ctx, lossBuffer);
}
#endif

extern "C" void autoshard_step(asrt_context *ctx, void *const *args,
                               void *const *results) {
  using autoshard::rt::OpTimer;
  ++stepsRun;
  injectFault(ctx, /*atStepEnd=*/false);
#ifdef FAKE_CUDA_EMU
  // The driver's uploads are queued on the device's streams.
  if (cudaDeviceSynchronize() != cudaSuccess)
    autoshard::rt::fatal("fake step: cudaDeviceSynchronize failed");
#endif
  const auto *w = static_cast<const float *>(args[0]);
  const auto *b = static_cast<const float *>(args[1]);
  const auto *mw = static_cast<const float *>(args[2]);
  const auto *mb = static_cast<const float *>(args[3]);
  const auto *x = static_cast<const float *>(args[4]);
  const auto *y = static_cast<const int32_t *>(args[5]);
  const float lr = *static_cast<const float *>(args[6]);

  auto *dw = static_cast<float *>(asrt_alloc(ctx, kClasses * kIn * 4));
  auto *db = static_cast<float *>(asrt_alloc(ctx, kClasses * 4));
  // The second half of the weight gradient is averaged out of place.
  auto *dwHigh = static_cast<float *>(asrt_alloc(ctx, kClasses * kIn * 2));
  float dlogits[kRows][kClasses];
  float loss = 0;
  {
    OpTimer timer(ctx, "fake_forward");
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
      for (int c = 0; c < kClasses; ++c)
        dlogits[r][c] = (logits[c] / sum - (c == y[r] ? 1.0f : 0.0f)) / kRows;
    }
  }
  {
    OpTimer timer(ctx, "fake_bias_grad");
    std::memset(db, 0, kClasses * 4);
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < kClasses; ++c)
        db[c] += dlogits[r][c];
  }
  asrt_bucket_begin(ctx, ASRT_BUCKET_ALL_REDUCE, ASRT_DTYPE_F32,
                    ASRT_REDUCE_AVG, 1);
  asrt_bucket_add(ctx, db, db, kClasses);
  int64_t biasBucket = asrt_bucket_start(ctx);
  {
    OpTimer timer(ctx, "fake_weight_grad");
    std::memset(dw, 0, kClasses * kIn * 4);
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < kClasses; ++c)
        for (int j = 0; j < kIn; ++j)
          dw[c * kIn + j] += dlogits[r][c] * x[r * kIn + j];
  }
  const int half = kClasses * kIn / 2;
  asrt_bucket_begin(ctx, ASRT_BUCKET_ALL_REDUCE, ASRT_DTYPE_F32,
                    ASRT_REDUCE_AVG, 1);
  asrt_bucket_add(ctx, dw, dw, half);
  asrt_bucket_add(ctx, dw + half, dwHigh, half);
  int64_t weightBucket = asrt_bucket_start(ctx);
  // Blocking, issued while both buckets are in flight: it runs after them.
  // From device memory, as a compiled step's loss is (NCCL's buffers must
  // be).
  auto *lossBuffer = static_cast<float *>(asrt_alloc(ctx, 4));
  *lossBuffer = loss;
  asrt_all_reduce(ctx, lossBuffer, results[4], 1, ASRT_DTYPE_F32,
                  ASRT_REDUCE_AVG, 1);
  asrt_wait(ctx, weightBucket);
#ifdef FAKE_SKIP_WAIT_STEP
  if (stepsRun != FAKE_SKIP_WAIT_STEP)
#endif
    asrt_wait(ctx, biasBucket);
  std::memcpy(dw + half, dwHigh, half * 4);

  // Elementwise and read-before-write: correct whether or not results
  // alias their arguments.
  OpTimer timer(ctx, "fake_update");
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
  asrt_free(ctx, dw);
  asrt_free(ctx, db);
  asrt_free(ctx, dwHigh);
  asrt_free(ctx, lossBuffer);
  injectFault(ctx, /*atStepEnd=*/true);
}
