// One call of a compiled step, timed, checked and traced.
#include "driver/StepCall.h"
#include "core/CommStream.h"
#include "core/Context.h"
#include "memory/Device.h"
#include "core/InFlightBuckets.h"
#include "memory/InFlightTransfers.h"
#include "stats/Trace.h"

#include <chrono>
#include <cmath>
#include <string>

namespace autoshard::rt {

namespace {

/// Fatal when the step returned with asynchronous collectives or offload
/// transfers in flight: their buffers would change under the communication
/// or offload thread.
void checkStepWaited(const asrt_context &ctx, int64_t step) {
  if (ctx.inflight->inFlight() > 0) {
    Status s = ctx.inflight->checkAllWaited("step " + std::to_string(step) +
                                            " returned");
    fatal("%s", s.message().c_str());
  }

  // Asynchronous offload transfers (asrt_transfer_start). The offload
  // thread finishes them first, so that no read or write is still under
  // way in an NVMe file when fatal() removes the store.
  if (ctx.transfers->inFlight() > 0) {
    Status s = ctx.transfers->checkAllWaited("step " + std::to_string(step) +
                                             " returned");
    ctx.offloadStream->drain("the driver's check after the step",
                             StreamOpInfo());
    fatal("%s", s.message().c_str());
  }
}

void traceStep(Trace &trace, int64_t step,
               std::chrono::steady_clock::time_point start,
               std::chrono::steady_clock::time_point end, const char *name) {
  auto ns = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               t.time_since_epoch())
        .count();
  };
  TraceEvent e;
  e.name = name;
  e.category = "step";
  e.startNs = ns(start);
  e.endNs = ns(end);
  e.step = step;
  trace.record(e);
}

} // namespace

StepRun runCompiledStep(asrt_context &ctx, StepFunction step,
                        std::vector<void *> &args,
                        std::vector<void *> &results, int lossResult,
                        int gradNormSqResult, int64_t stepNumber,
                        const char *traceName, const Manifest &manifest,
                        const std::string &phase) {
  // The step's asrt_op_site calls index its manifest's sites; the
  // driver's own calls between steps belong to none.
  ctx.setSites(&manifest.sites);
  ctx.stream->setPhase(phase);
  ctx.offloadStream->setPhase(phase);
  auto start = std::chrono::steady_clock::now();
  step(&ctx, args.data(), results.data());
  ctx.device->synchronize(Lane::Compute);
  auto end = std::chrono::steady_clock::now();
  ctx.stream->setPhase("");
  ctx.offloadStream->setPhase("");
  ctx.setSites(nullptr);
  ctx.resolveDeviceOpTimes();
  checkStepWaited(ctx, stepNumber);
  // Only while the context traces: --trace-steps' window.
  if (ctx.trace())
    traceStep(*ctx.trace(), stepNumber, start, end, traceName);
  StepRun run{std::chrono::duration<double, std::milli>(end - start).count(),
              0.0f};
  ctx.device->toHost(Lane::Compute, &run.loss, results[lossResult],
                     sizeof run.loss);
  if (gradNormSqResult >= 0) {
    float sumOfSquares = 0;
    ctx.device->toHost(Lane::Compute, &sumOfSquares, results[gradNormSqResult],
                       sizeof sumOfSquares);
    run.gradNorm = std::sqrt(static_cast<double>(sumOfSquares));
  }
  return run;
}

} // namespace autoshard::rt
