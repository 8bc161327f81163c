//===- AutoStrategy.h - choose the strategy from the cost model -*- C++ -*-===//
//
// --strategy=auto: describe the step for the cost model (parameters, which
// the backward pass reads, FLOPs from the ops, activations from the memory
// plan), estimate every plan the compiler can build on the cluster, choose,
// and run the chosen strategy's pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_PIPELINES_AUTOSTRATEGY_H
#define AUTOSHARD_PIPELINES_AUTOSTRATEGY_H

#include "autoshard/CostModel/CostModel.h"
#include "autoshard/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace autoshard {

/// One candidate of the choice, and why it was or was not chosen.
struct Candidate {
  cost::CostEstimate estimate;
  /// The strategy options that build it.
  StrategyOptions options;
  bool fits = false;
  std::vector<std::string> overflows;
  /// The compiler's exact memory plan (peak plus communication buffers) of
  /// the candidate, once it has been built to verify the choice; -1 before.
  int64_t plannedBytes = -1;
  /// That plan's peak by category, in the estimate's categories
  /// (`estimate.memory.device.atPeak`); empty before.
  cost::PeakBreakdown plannedAtPeak;
};

struct Choice {
  std::vector<Candidate> candidates;
  /// Index of the chosen candidate, or -1 when none fits.
  int chosen = -1;
  std::string reason;
  cost::ClusterSpec cluster;
  std::string model;
};

/// The model description of the module's training step, for the cost model:
/// parameters (with the backward pass's reads and their blocks), optimizer,
/// precision, clipping, batch, FLOPs summed over the step's ops, and the
/// activations the memory plan finds for each checkpointing mode at
/// `worldSize` ranks. The module is not changed. It is raised first unless
/// `accept` says --raise=false, and autodiff accepts what its
/// --allow-no-optimizer and --allow-unused-params accept.
mlir::FailureOr<cost::ModelDescription>
describeStep(mlir::ModuleOp module, int64_t worldSize,
             const StrategyOptions &accept = {});

/// Estimates every plan the compiler can build and chooses: DDP when it
/// fits; otherwise the fastest plan that fits, and among plans within 5% of
/// its time the least sharded, then the one that sends the fewest bytes.
Choice chooseStrategy(const cost::ModelDescription &model,
                      const cost::ClusterSpec &cluster,
                      const StrategyOptions &base);

/// Chooses again among the candidates that (still) fit, by the same rule.
void selectCandidate(Choice &choice);

/// The cost report's forms (`--cost-report=text|all|json`).
enum class CostReportForm {
  /// The chosen plan and, of each strategy, the few best candidates: those
  /// that fit, fastest first, then those that do not, smallest first.
  Summary,
  /// One line per candidate.
  All,
  /// One JSON object per candidate.
  Json,
};

/// How many candidates of each strategy the summary shows.
constexpr size_t kReportedPerStrategy = 3;

/// The cost report of `choice` in `form`.
std::string formatCostReport(const Choice &choice, CostReportForm form);

/// Adds the pass that does all of this on the module and then runs the
/// chosen strategy's pipeline (`autoshard-auto-strategy`); options.strategy
/// is "auto", the other options hold for every candidate. `chosen`, when
/// not null, receives the chosen candidate's options when the pass runs
/// (shard-compile --with-eval builds the evaluation step with them), their
/// memory budget the bytes per rank the choice was made to fit (the
/// --memory-budget, else the device's).
void buildAutoStrategyPipeline(mlir::OpPassManager &pm,
                               const StrategyOptions &options,
                               StrategyOptions *chosen = nullptr);

void registerAutoStrategyPass();

} // namespace autoshard

#endif // AUTOSHARD_PIPELINES_AUTOSTRATEGY_H
