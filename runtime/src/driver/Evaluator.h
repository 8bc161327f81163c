// In-run evaluation (--eval-every): the evaluation step linked beside the
// training step, run over held-out batches between training steps.
#pragma once

#include "autoshard/rt/abi.h"
#include "core/Control.h"
#include "data/Data.h"
#include "io/Manifest.h"
#include "stats/Stats.h"
#include "driver/OffloadArgs.h"
#include "driver/Options.h"
#include "driver/StepCall.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace autoshard::rt {

class CheckpointPolicy;

/// The evaluation step (shard-compile --with-eval) of a training run: it
/// reads the training step's parameter buffers (evaluationParamSources)
/// and owns the rest of its arguments, its results and its held-out
/// batches (the first --eval-steps of --eval-data, or the synthetic
/// batches after the run's last training step). Each evaluation's work is
/// kept out of the training steps' counters (Stats::restoreCounters).
class Evaluator {
public:
  Evaluator(const Options &options, StepFunction step, ControlPlane &control);

  /// Parses the evaluation step's manifest (`manifestText`) and pairs its
  /// parameters with `train`'s. The error (exit status 1) names an
  /// invalid manifest or a parameter the two steps do not share.
  Status configure(const char *manifestText, const Manifest &train);
  const Manifest &manifest() const { return evalManifest; }

  /// Grows the training step's arena sizes and planned device peak
  /// (ctx.plannedPeakBytes(); negative: none) by what this step adds: its larger
  /// arena (a binary's two steps never run at once, so they share the
  /// larger one) and its own device buffers (the batch, hypers, the loss).
  void planMemory(int64_t &arena, int64_t &hostArena,
                  int64_t &plannedPeakBytes) const;

  /// Allocates the step's own arguments and results; its parameters are
  /// `trainArgs`' buffers, which `save-best` writes (`train`'s parameters).
  void allocate(asrt_context &ctx, int rank, const Manifest &train,
                const std::vector<void *> &trainArgs);

  /// Opens the held-out batches. The error names --eval-data.
  Status openBatches(int rank, int size);
  /// The startup header's line about evaluation (rank 0 prints it).
  void printHeader() const;

  /// Host views of the batch arguments, which each evaluation fills.
  void stageBatches();

  /// Evaluates the parameters after 0-based step `afterStep` (`atStart`:
  /// --eval-at-start's baseline, which --save-best skips) over the
  /// held-out batches, prints its line on rank 0, and on a new best saves
  /// the parameters (--save-best). False, the error printed on rank 0,
  /// when saving failed or the loss is not finite. Collective.
  bool evaluate(int64_t afterStep, bool atStart, CheckpointPolicy &policy);

  /// Every evaluation of the run, for the statistics.
  const std::vector<EvaluationInfo> &evaluations() const {
    return finished;
  }

  /// Frees the buffers allocate() allocated.
  void release();

private:
  const Options &options;
  StepFunction step;
  ControlPlane &control;
  Manifest evalManifest;
  /// For each argument, the training step's parameter whose buffer it
  /// reads (-1: its own).
  std::vector<int> sources;

  asrt_context *ctx = nullptr;
  const Manifest *train = nullptr;
  const std::vector<void *> *trainArgs = nullptr;
  std::vector<void *> args, results, ownedResults;

  std::unique_ptr<BatchSource> batches;
  /// The index of the first held-out batch in `batches`.
  int64_t firstBatch = 0;
  std::optional<StagedArgs> batchArgs;
  std::vector<EvaluationInfo> finished;
};

} // namespace autoshard::rt
