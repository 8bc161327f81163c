// In-run evaluation (--eval-every) over held-out batches.
#include "driver/Evaluator.h"
#include "core/Context.h"
#include "driver/ArgBuffers.h"
#include "driver/CheckpointPolicy.h"
#include "driver/Driver.h"
#include "driver/RankErrors.h"
#include "driver/StepLog.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace autoshard::rt {

Evaluator::Evaluator(const Options &options, StepFunction step,
                     ControlPlane &control)
    : options(options), step(step), control(control) {}

Status Evaluator::configure(const char *manifestText, const Manifest &train) {
  Expected<Manifest> parsed = parseManifest(manifestText);
  if (!parsed)
    return Error("the evaluation step's manifest compiled into this binary "
                 "is invalid: " +
                 parsed.message());
  Expected<std::vector<int>> paired = evaluationParamSources(train, *parsed);
  if (!paired)
    return paired.status();
  evalManifest = std::move(*parsed);
  sources = std::move(*paired);
  return Status::success();
}

void Evaluator::planMemory(int64_t &arena, int64_t &hostArena,
                           int64_t &plannedPeakBytes) const {
  int64_t evalArena = evalManifest.plannedBytes("arena");
  if (plannedPeakBytes >= 0 && evalArena > arena)
    plannedPeakBytes += evalArena - std::max<int64_t>(arena, 0);
  arena = std::max(arena, evalArena);
  hostArena = std::max(hostArena, evalManifest.plannedBytes("host_arena"));
  for (const TensorSpec &arg : evalManifest.args)
    if (sources[arg.index] < 0 && arg.memory == MemoryKind::Device &&
        plannedPeakBytes >= 0)
      plannedPeakBytes += arg.numBytes();
  for (const TensorSpec &result : evalManifest.results)
    if (result.updates < 0 && plannedPeakBytes >= 0)
      plannedPeakBytes += result.numBytes();
}

void Evaluator::allocate(asrt_context &context, int rank,
                         const Manifest &trainManifest,
                         const std::vector<void *> &trainBuffers) {
  ctx = &context;
  train = &trainManifest;
  trainArgs = &trainBuffers;
  args = allocateArgs(context, evalManifest, options, rank, nullptr, sources,
                      trainBuffers);
  results = allocateResults(context, evalManifest, args, ownedResults);
}

Status Evaluator::openBatches(int rank, int size) {
  if (options.evalDataFile.empty()) {
    Expected<std::unique_ptr<BatchSource>> synthetic =
        makeSyntheticBatches(evalManifest, options.seed, rank, size);
    if (!synthetic)
      return synthetic.status();
    batches = std::move(*synthetic);
    firstBatch = options.steps;
    return Status::success();
  }
  Expected<std::unique_ptr<BatchSource>> file =
      openDataFile(options.evalDataFile, evalManifest, rank, size,
                   options.dataFormat, options.seed);
  // The same checks as --data's, named after the flag that gave it.
  if (!file)
    return Error("--eval-data: " + file.message());
  batches = std::move(*file);
  return Status::success();
}

void Evaluator::printHeader() const {
  std::printf("autoshard: evaluation every %" PRId64 " steps%s: %" PRId64
              " held-out %s, %s%s\n",
              options.evalEvery,
              options.evalAtStart ? ", after the last and before the first"
                                  : " and after the last",
              options.evalSteps, options.evalSteps == 1 ? "batch" : "batches",
              options.evalDataFile.empty() ? "synthetic, after step " : "",
              options.evalDataFile.empty()
                  ? std::to_string(options.steps).c_str()
                  : batches->describe().c_str());
}

void Evaluator::stageBatches() {
  batchArgs.emplace(*ctx, evalManifest, args,
                    std::vector<Role>{Role::Input, Role::Label},
                    Staging::WriteOnly);
}

bool Evaluator::evaluate(int64_t afterStep, bool atStart,
                         CheckpointPolicy &policy) {
  Stats::Snapshot kept = ctx->stats->snapshot();
  ctx->setNvmeArgIndices(&sources);
  EvaluationInfo info;
  info.afterStep = afterStep;
  info.atStart = atStart;
  info.batches = options.evalSteps;
  double totalLoss = 0;
  const int lossResult = evalManifest.lossResult();
  const std::string phase =
      atStart ? "the evaluation before step " + std::to_string(afterStep + 1)
              : "the evaluation after step " + std::to_string(afterStep);
  // Test hook: this rank hangs before the evaluation's first batch, its
  // peers in the evaluation step's collectives.
  if (options.stopRankAt.due(StopPoint::Eval, afterStep, control.rank()))
    stopThisRank();
  for (int64_t i = 0; i < options.evalSteps; ++i) {
    batches->fill(firstBatch + i, batchArgs->args().data());
    batchArgs->writeBack();
    StepRun run = runCompiledStep(*ctx, step, args, results, lossResult,
                                  evalManifest.gradNormSqResult(), afterStep,
                                  "eval", evalManifest, phase);
    info.ms += run.ms;
    totalLoss += run.loss;
  }
  ctx->setNvmeArgIndices(nullptr);
  Stats::Snapshot after = ctx->stats->snapshot();
  for (int k = 0; k < kNumCollectiveKinds; ++k)
    info.bytesSent +=
        after.collectives[k].bytesSent - kept.collectives[k].bytesSent;
  info.meanLoss = totalLoss / static_cast<double>(options.evalSteps);
  // Every rank has the same (all-reduced) losses, so every rank takes
  // the same branches below.
  const bool best = policy.isNewBest(info.meanLoss, atStart);
  // --save-best: as every output, through a temporary file renamed over
  // the old one (writeOutputFile), so that a run killed while writing
  // keeps the previous best. Its gather stays out of the training
  // counters too.
  Status savedBest;
  const bool saveBest = best && !options.saveBestFile.empty();
  if (saveBest) {
    char loss[32];
    std::snprintf(loss, sizeof loss, "%.17g", info.meanLoss);
    savedBest = saveGlobalParams(
        *ctx, *train, *trainArgs, control, options.saveBestFile,
        "--save-best", afterStep, options.seed,
        {{"eval_loss", loss},
         {"eval_after_step", std::to_string(afterStep)},
         {"eval_batches", std::to_string(info.batches)}});
  }
  ctx->stats->restoreCounters(kept);
  if (control.rank() == 0) {
    const bool saved = saveBest && savedBest;
    if (options.logFormat == LogFormat::Json)
      std::printf("%s\n", formatEvalJson(afterStep, info.meanLoss,
                                         info.batches, info.ms, saved)
                              .c_str());
    else
      std::printf("eval after step %" PRId64 ": loss %.8g over %" PRId64
                  " %s, ms %.3f%s\n",
                  afterStep, info.meanLoss, info.batches,
                  info.batches == 1 ? "batch" : "batches", info.ms,
                  saved ? " (best: parameters saved)" : "");
    std::fflush(stdout);
  }
  if (!allRanksOk(savedBest, control))
    return false;
  if (!std::isfinite(info.meanLoss)) {
    printErrorOnRankZero(
        control, "evaluation after " +
                     nonFiniteLossMessage(afterStep, info.meanLoss, options,
                                          policy.newestStep()));
    return false;
  }
  if (best)
    policy.recordBest(info.meanLoss);
  finished.push_back(info);
  return true;
}

void Evaluator::release() {
  batchArgs.reset();
  for (void *buffer : ownedResults)
    asrt_free(ctx, buffer);
  freeArgs(*ctx, evalManifest, args, sources);
}

} // namespace autoshard::rt
