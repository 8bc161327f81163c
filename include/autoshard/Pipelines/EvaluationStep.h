//===- EvaluationStep.h - a training binary's evaluation step ---*- C++ -*-===//
//
// shard-compile --with-eval links a second, forward-only step into the
// training binary: the same model under the same strategy, run every N
// training steps on held-out batches. It reads the training step's
// parameter buffers, so both steps must hold each parameter alike.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_PIPELINES_EVALUATIONSTEP_H
#define AUTOSHARD_PIPELINES_EVALUATIONSTEP_H

#include "autoshard/Conversion/MemoryPlan.h"
#include "autoshard/Pipelines/Pipelines.h"
#include "mlir/IR/BuiltinOps.h"

#include <algorithm>

namespace autoshard {

/// The options of the evaluation step of a training step built with
/// `training` (a named strategy: for "auto", the options of the plan it
/// chose, buildStrategyPipeline's `built`): forward-only, with the same
/// strategy, grid, parameter groups, offload and schedule; what only a
/// backward pass or an optimizer has (exposed gradients, activation
/// checkpointing, the gradients' reduction type and cadence) is dropped.
StrategyOptions evaluationStepOptions(const StrategyOptions &training);

/// Checks that the partitioned evaluation step of `eval` can read the
/// partitioned training step's (of `train`) parameters: every parameter of
/// the evaluation step is one of the training step's, by name, with the
/// same per-rank type, flat shard and memory place. Emits an error on the
/// evaluation step naming the parameter and both layouts otherwise.
mlir::LogicalResult checkEvaluationStepShares(mlir::ModuleOp train,
                                              mlir::ModuleOp eval);

/// The device bytes per rank of a training binary with its evaluation step,
/// as its driver allocates them: the training step's persistent state, the
/// evaluation step's arguments and results that are not shared parameters
/// (its batch, its loss), and one arena, the larger of the two steps' (they
/// never run at once).
struct EvaluationBinaryMemory {
  int64_t trainPersistent = 0;
  int64_t evalOwn = 0;
  int64_t trainArena = 0;
  int64_t evalArena = 0;
  int64_t total() const {
    return trainPersistent + evalOwn + std::max(trainArena, evalArena);
  }
  /// What the training step alone needs.
  int64_t trainingAlone() const { return trainPersistent + trainArena; }
};

/// The binary's memory from the two steps' plans (`eval` partitioned, as
/// checkEvaluationStepShares accepts it).
mlir::FailureOr<EvaluationBinaryMemory>
combineStepMemory(const MemoryPlan &trainPlan, mlir::ModuleOp eval,
                  const MemoryPlan &evalPlan);
/// The same, from the buffer assignments of both steps (partitioned and
/// cleaned up for the lowering: addLoweringCleanupPasses).
mlir::FailureOr<EvaluationBinaryMemory>
planEvaluationBinary(mlir::ModuleOp train, mlir::ModuleOp eval);

/// --memory-budget for a binary with an evaluation step (both partitioned
/// and cleaned up, as planEvaluationBinary takes them):
/// its device bytes per rank as the driver allocates them (the training
/// step's persistent state, the evaluation step's own batch and loss, one
/// arena, the larger of the two steps'; they never run at once) must fit.
/// The error, on the evaluation step, names the bytes, their parts and the
/// budget (and `budgetSource`, where it came from, when not empty).
mlir::LogicalResult
checkEvaluationMemoryBudget(mlir::ModuleOp train, mlir::ModuleOp eval,
                            llvm::StringRef budget,
                            llvm::StringRef budgetSource = "");

} // namespace autoshard

#endif // AUTOSHARD_PIPELINES_EVALUATIONSTEP_H
