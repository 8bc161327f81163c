//===- EvaluationStep.cpp - a training binary's evaluation step -----------===//

#include "autoshard/Pipelines/EvaluationStep.h"

#include "autoshard/Conversion/MemoryPlan.h"
#include "autoshard/Conversion/StepBufferAssignment.h"
#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "autoshard/Dialect/Train/IR/TrainDialect.h"

using namespace mlir;
using namespace autoshard::train;

autoshard::StrategyOptions
autoshard::evaluationStepOptions(const StrategyOptions &training) {
  StrategyOptions eval = training;
  eval.forwardOnly = true;
  eval.exposeGradients = false;
  eval.activationCheckpointing = strategy::ActivationCheckpointing::None;
  StrategyOptions defaults;
  eval.reduceDtype = defaults.reduceDtype;
  eval.reduceEvery = defaults.reduceEvery;
  // The budget is checked on the binary's two steps together.
  eval.memoryBudget.clear();
  eval.costReport.clear();
  eval.costReportFile.clear();
  return eval;
}

namespace {

/// "tensor<8xf32> #train.flat_shard<shape = [4, 4], grid_axes = [0]> in
/// device memory": the type, the shard (or "(whole)") and the place.
std::string describeLayout(FunctionOpInterface step, unsigned index) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << step.getArgumentTypes()[index];
  if (Attribute shard = step.getArgAttr(index, TrainDialect::kShardAttrName))
    os << " " << shard;
  else
    os << " (whole)";
  if (Attribute memory = step.getArgAttr(index, TrainDialect::kMemoryAttrName))
    os << " " << memory;
  else
    os << " in device memory";
  return text;
}

} // namespace

LogicalResult autoshard::checkEvaluationStepShares(ModuleOp train,
                                                   ModuleOp eval) {
  FailureOr<FunctionOpInterface> trainStep = findStepFunction(train);
  FailureOr<FunctionOpInterface> evalStep = findStepFunction(eval);
  if (failed(trainStep) || failed(evalStep))
    return failure();
  StepSignature trainSig(*trainStep), evalSig(*evalStep);
  for (const StepValue &arg : evalSig.getArgs()) {
    if (arg.role != Role::Param)
      continue;
    std::optional<unsigned> index = trainSig.getArgIndex(arg.name);
    if (!index || trainSig.getArgs()[*index].role != Role::Param)
      return (*evalStep).emitOpError()
             << "evaluates parameter '" << arg.name
             << "', which the training step does not have";
    auto same = [&](StringRef attr) {
      return (*trainStep).getArgAttr(*index, attr) ==
             (*evalStep).getArgAttr(arg.index, attr);
    };
    if ((*trainStep).getArgumentTypes()[*index] !=
            (*evalStep).getArgumentTypes()[arg.index] ||
        !same(TrainDialect::kShardAttrName) ||
        !same(TrainDialect::kMemoryAttrName))
      return (*evalStep).emitOpError()
             << "cannot read the training step's parameter '" << arg.name
             << "': the training step holds "
             << describeLayout(*trainStep, *index) << ", the evaluation step "
             << describeLayout(*evalStep, arg.index)
             << "; compile a separate evaluation binary with --forward-only "
                "(it loads the parameters the training run saves)";
  }
  return success();
}

FailureOr<autoshard::EvaluationBinaryMemory>
autoshard::combineStepMemory(const MemoryPlan &trainPlan, ModuleOp eval,
                             const MemoryPlan &evalPlan) {
  FailureOr<FunctionOpInterface> evalStep = findStepFunction(eval);
  if (failed(evalStep))
    return failure();
  // The evaluation step's parameters in device memory are the training
  // step's buffers (checkEvaluationStepShares).
  int64_t shared = 0;
  StepSignature sig(*evalStep);
  for (const StepValue &arg : sig.getArgs()) {
    if (arg.role != Role::Param ||
        (*evalStep).getArgAttr(arg.index, TrainDialect::kMemoryAttrName))
      continue;
    auto type =
        cast<RankedTensorType>((*evalStep).getArgumentTypes()[arg.index]);
    shared += type.getNumElements() *
              llvm::divideCeil(type.getElementTypeBitWidth(), 8);
  }
  EvaluationBinaryMemory plan;
  plan.trainPersistent = trainPlan.persistent;
  plan.evalOwn = evalPlan.persistent - shared;
  plan.trainArena = trainPlan.stepPeak;
  plan.evalArena = evalPlan.stepPeak;
  return plan;
}

FailureOr<autoshard::EvaluationBinaryMemory>
autoshard::planEvaluationBinary(ModuleOp train, ModuleOp eval) {
  FailureOr<StepBufferAssignment> trainPlan = assignStepBuffers(train);
  if (failed(trainPlan))
    return failure();
  FailureOr<StepBufferAssignment> evalPlan = assignStepBuffers(eval);
  if (failed(evalPlan))
    return failure();
  return combineStepMemory(trainPlan->memory, eval, evalPlan->memory);
}

LogicalResult autoshard::checkEvaluationMemoryBudget(ModuleOp train,
                                                     ModuleOp eval,
                                                     StringRef budget,
                                                     StringRef budgetSource) {
  FailureOr<int64_t> budgetBytes = parseMemoryBudget(eval, budget);
  if (failed(budgetBytes))
    return failure();
  FailureOr<EvaluationBinaryMemory> plan = planEvaluationBinary(train, eval);
  if (failed(plan))
    return failure();
  if (plan->total() <= *budgetBytes)
    return success();
  FailureOr<FunctionOpInterface> evalStep = findStepFunction(eval);
  return (*evalStep).emitOpError()
         << "makes the training binary need " << formatBytes(plan->total())
         << " per rank, over the memory budget of " << formatBytes(*budgetBytes)
         << (budgetSource.empty() ? "" : " (" + budgetSource.str() + ")")
         << ": the training step's persistent "
         << formatBytes(plan->trainPersistent)
         << ", the evaluation step's batch and loss "
         << formatBytes(plan->evalOwn) << " and the larger step arena ("
         << (plan->evalArena > plan->trainArena ? "the evaluation step's "
                                                : "the training step's ")
         << formatBytes(std::max(plan->trainArena, plan->evalArena))
         << "). Without "
            "--with-eval the training step alone needs "
         << formatBytes(plan->trainingAlone());
}
