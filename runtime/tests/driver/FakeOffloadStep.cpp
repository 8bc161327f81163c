// FakeStep's training step with offloaded params and optimizer states.
//
// The softmax regression of FakeStep.cpp, with the same argument names,
// init= specs and arithmetic, so that it trains bit for bit like it; but
// ZeRO-Offload keeps w's momentum in host memory (memory=host) and
// ZeRO-Infinity keeps the bias b and its momentum in NVMe files
// (memory=nvme). Each step moves them as generated code would: NVMe files
// into the host arena (asrt_nvme_read), host to device
// (asrt_copy_to_device), the update on the device, back to host memory
// (asrt_copy_to_host) and into the files (asrt_nvme_write). Per step:
// 160 bytes each way between device and host, 32 bytes read from and
// written to NVMe.
//
// FAKE_ASYNC_TRANSFERS = 1 moves the same bytes with asrt_transfer_start /
// asrt_transfer_wait instead, as a prefetching step would: both NVMe reads
// and the three copies to the device are started at once, the forward waits
// only for the bias, and the momenta arrive while it computes; the five
// transfers back are started together and waited in another order. The
// arithmetic is untouched, so the parameters are the same bit for bit.
//
// The step fails the run when the driver breaks the offload contract: an
// nvme argument or its result given a buffer, a host result not donated its
// argument's buffer. FAKE_BAD_NVME_STEP = K makes step K read b.momentum
// with a wrong byte count (a fatal error) to test that the store still
// removes its files; FAKE_SKIP_TRANSFER_WAIT_STEP = K (with
// FAKE_ASYNC_TRANSFERS) makes step K return without waiting the write of
// b.momentum.
#include "autoshard/rt/abi.h"
#include "core/Backend.h"
#include "core/Context.h"

#include <cmath>
#include <cstring>
#include <optional>

#define FAKE_STR2(x) #x
#define FAKE_STR(x) FAKE_STR2(x)

#ifndef FAKE_BAD_NVME_STEP
#define FAKE_BAD_NVME_STEP 0
#endif
#ifndef FAKE_ASYNC_TRANSFERS
#define FAKE_ASYNC_TRANSFERS 0
#endif
#ifndef FAKE_SKIP_TRANSFER_WAIT_STEP
#define FAKE_SKIP_TRANSFER_WAIT_STEP 0
#endif

namespace {
constexpr int kIn = 8;
constexpr int kClasses = 4;
constexpr int kRows = FAKE_LOCAL_ROWS;
constexpr int kParams = kClasses * kIn + kClasses;
constexpr float kMomentum = 0.9f;
constexpr int kBias = 1, kWeightMomentum = 2, kBiasMomentum = 3;
constexpr int64_t kBiasBytes = kClasses * sizeof(float);
constexpr int64_t kWeightBytes = kClasses * kIn * sizeof(float);
int stepsRun = 0;
} // namespace

// clang-format off
extern "C" const char autoshard_manifest[] =
    "autoshard-manifest 1\n"
    "abi " FAKE_STR(ASRT_ABI_VERSION) "\n"
    "step fake_softmax_regression\n"
    "strategy ddp\n"
    "grid " FAKE_STR(FAKE_WORLD_SIZE) "\n"
    "arg 0 param w f32 4x8 init=normal:0.1\n"
    "arg 1 param b f32 4 init=zeros memory=nvme\n"
    "arg 2 opt_state w.momentum f32 4x8 init=zeros memory=host\n"
    "arg 3 opt_state b.momentum f32 4 init=zeros memory=nvme\n"
    "arg 4 input x f32 " FAKE_STR(FAKE_LOCAL_ROWS) "x8 batch_dim=0 global=16\n"
    "arg 5 label y i32 " FAKE_STR(FAKE_LOCAL_ROWS) " batch_dim=0 global=16 classes=4\n"
    "arg 6 hyper lr f32 scalar init=constant:0.5\n"
    "result 0 param w f32 4x8 updates=0\n"
    "result 1 param b f32 4 updates=1 memory=nvme\n"
    "result 2 opt_state w.momentum f32 4x8 updates=2 memory=host\n"
    "result 3 opt_state b.momentum f32 4 updates=3 memory=nvme\n"
    "result 4 loss loss f32 scalar\n"
    "memory host_persistent=128 host_arena=32 nvme=32\n"
    "end\n";
// clang-format on

extern "C" void autoshard_step(asrt_context *ctx, void *const *args,
                               void *const *results) {
  using autoshard::rt::fatal;
  if (args[kBias] || args[kBiasMomentum] || results[kBias] ||
      results[kBiasMomentum])
    fatal("fake offload step: the nvme arguments and results must be null");
  if (!args[kWeightMomentum] ||
      results[kWeightMomentum] != args[kWeightMomentum])
    fatal("fake offload step: the host result must be donated its argument");
  ++stepsRun;

  const auto *w = static_cast<const float *>(args[0]);
  const auto *x = static_cast<const float *>(args[4]);
  const auto *y = static_cast<const int32_t *>(args[5]);
  const float lr = *static_cast<const float *>(args[6]);

  // ZeRO-Infinity: the bias and its momentum come from their files into
  // the host arena; ZeRO-Offload: w's momentum is host memory already.
  auto *staged = static_cast<float *>(asrt_host_arena(ctx));
  float *hostB = staged, *hostMb = staged + kClasses;
  auto *device =
      static_cast<float *>(asrt_alloc(ctx, 2 * kBiasBytes + kWeightBytes));
  float *b = device, *mb = device + kClasses, *mw = device + 2 * kClasses;
#if FAKE_ASYNC_TRANSFERS
  // The offload stream runs them in start order, so each copy to the
  // device reads what the read before it staged.
  int64_t readB = asrt_transfer_start(ctx, ASRT_TRANSFER_NVME_READ, kBias,
                                      hostB, nullptr, kBiasBytes);
  int64_t readMb = asrt_transfer_start(
      ctx, ASRT_TRANSFER_NVME_READ, kBiasMomentum, hostMb, nullptr, kBiasBytes);
  int64_t inMw = asrt_transfer_start(ctx, ASRT_TRANSFER_TO_DEVICE, -1, mw,
                                     args[kWeightMomentum], kWeightBytes);
  int64_t inB = asrt_transfer_start(ctx, ASRT_TRANSFER_TO_DEVICE, -1, b, hostB,
                                    kBiasBytes);
  int64_t inMb = asrt_transfer_start(ctx, ASRT_TRANSFER_TO_DEVICE, -1, mb,
                                     hostMb, kBiasBytes);
  // The forward needs the bias; the transfers before it are done too.
  asrt_transfer_wait(ctx, inB);
  asrt_transfer_wait(ctx, readB);
  asrt_transfer_wait(ctx, readMb);
#else
  asrt_nvme_read(ctx, kBias, hostB, kBiasBytes);
  asrt_nvme_read(ctx, kBiasMomentum, hostMb,
                 stepsRun == FAKE_BAD_NVME_STEP ? kBiasBytes / 2 : kBiasBytes);
  asrt_copy_to_device(ctx, b, hostB, kBiasBytes);
  asrt_copy_to_device(ctx, mb, hostMb, kBiasBytes);
  asrt_copy_to_device(ctx, mw, args[kWeightMomentum], kWeightBytes);
#endif

  // From here on FakeStep's arithmetic, operation for operation.
  auto *grad = static_cast<float *>(asrt_alloc(ctx, kParams * sizeof(float)));
  std::memset(grad, 0, kParams * sizeof(float));
  float *dw = grad, *db = grad + kClasses * kIn;
  float loss = 0;
  // Timed as a kernel would be, for the trace's compute track.
  std::optional<autoshard::rt::OpTimer> compute(std::in_place, ctx,
                                                "fake_forward_backward");
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
  compute.reset();
  asrt_all_reduce(ctx, grad, grad, kParams, ASRT_DTYPE_F32, ASRT_REDUCE_AVG, 1);
  asrt_all_reduce(ctx, &loss, results[4], 1, ASRT_DTYPE_F32, ASRT_REDUCE_AVG,
                  1);
#if FAKE_ASYNC_TRANSFERS
  // The update reads the momenta.
  asrt_transfer_wait(ctx, inMb);
  asrt_transfer_wait(ctx, inMw);
#endif
  auto update = [&](const float *p, const float *m, const float *g, void *pOut,
                    void *mOut, int n) {
    for (int i = 0; i < n; ++i) {
      float momentum = kMomentum * m[i] + g[i];
      float param = p[i] - lr * momentum;
      static_cast<float *>(mOut)[i] = momentum;
      static_cast<float *>(pOut)[i] = param;
    }
  };
  update(w, mw, dw, results[0], mw, kClasses * kIn);
  update(b, mb, db, b, mb, kClasses);
  asrt_free(ctx, grad);

  // The new states go back where they live.
#if FAKE_ASYNC_TRANSFERS
  int64_t outMw =
      asrt_transfer_start(ctx, ASRT_TRANSFER_TO_HOST, -1,
                          results[kWeightMomentum], mw, kWeightBytes);
  int64_t outB =
      asrt_transfer_start(ctx, ASRT_TRANSFER_TO_HOST, -1, hostB, b, kBiasBytes);
  int64_t outMb = asrt_transfer_start(ctx, ASRT_TRANSFER_TO_HOST, -1, hostMb,
                                      mb, kBiasBytes);
  int64_t writeB = asrt_transfer_start(ctx, ASRT_TRANSFER_NVME_WRITE, kBias,
                                       nullptr, hostB, kBiasBytes);
  int64_t writeMb =
      asrt_transfer_start(ctx, ASRT_TRANSFER_NVME_WRITE, kBiasMomentum, nullptr,
                          hostMb, kBiasBytes);
  // The device buffers may go once the copies out of them are done.
  asrt_transfer_wait(ctx, outMb);
  asrt_transfer_wait(ctx, outMw);
  asrt_transfer_wait(ctx, outB);
  asrt_free(ctx, device);
  asrt_transfer_wait(ctx, writeB);
  if (stepsRun != FAKE_SKIP_TRANSFER_WAIT_STEP)
    asrt_transfer_wait(ctx, writeMb);
#else
  asrt_copy_to_host(ctx, results[kWeightMomentum], mw, kWeightBytes);
  asrt_copy_to_host(ctx, hostB, b, kBiasBytes);
  asrt_copy_to_host(ctx, hostMb, mb, kBiasBytes);
  asrt_nvme_write(ctx, kBias, hostB, kBiasBytes);
  asrt_nvme_write(ctx, kBiasMomentum, hostMb, kBiasBytes);
  asrt_free(ctx, device);
#endif
}

