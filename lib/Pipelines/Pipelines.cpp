//===- Pipelines.cpp - the strategy and compile pipelines -----------------===//

#include "autoshard/Pipelines/Pipelines.h"
#include "autoshard/Pipelines/AutoStrategy.h"

#include "autoshard/Conversion/MemoryPlan.h"
#include "autoshard/Conversion/Passes.h"
#include "autoshard/Dialect/Train/Transforms/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ConvertToLLVM/ToLLVMPass.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace autoshard;

namespace {
/// A pass option from the strategy option of the same field.
template <typename T>
void setPassOption(T &option, const T &value) {
  option = value;
}
void setPassOption(SmallVectorImpl<std::string> &option,
                   const std::vector<std::string> &values) {
  option.assign(values.begin(), values.end());
}
} // namespace

void autoshard::buildStrategyPipeline(OpPassManager &pm,
                                      const StrategyOptions &options,
                                      StrategyOptions *built) {
  if (options.strategy == strategy::kAutoStrategy)
    return buildAutoStrategyPipeline(pm, options, built);
  if (built)
    *built = options;
  // Before autodiff: the backward pass is then derived from the fused ops'
  // gradient rules, and runs on their kernels too.
  if (options.raise)
    pm.addPass(train::createRaisePass());
  train::AutodiffPassOptions autodiff;
  autodiff.exposeGradients = options.exposeGradients;
  autodiff.forwardOnly = options.forwardOnly;
  autodiff.allowNoOptimizer = options.allowNoOptimizer;
  autodiff.allowUnusedParams = options.allowUnusedParams;
  pm.addPass(train::createAutodiffPass(autodiff));
  if (options.activationCheckpointing !=
      strategy::ActivationCheckpointing::None) {
    train::CheckpointActivationsPassOptions checkpoint;
    checkpoint.mode = options.activationCheckpointing;
    pm.addPass(train::createCheckpointActivationsPass(checkpoint));
  }
  train::PlanPassOptions plan;
#define STRATEGY_PLAN_OPTION(FIELD) setPassOption(plan.FIELD, options.FIELD);
#include "autoshard/Pipelines/StrategyOptions.def"
  pm.addPass(train::createPlanPass(plan));
  pm.addPass(train::createPartitionPass());
  pm.addPass(train::createGroupCollectivesPass());
  if (options.offload != strategy::Offload::None ||
      options.offloadParams != strategy::Offload::None) {
    train::OffloadPassOptions offload;
    offload.optimizer = options.offload;
    offload.params = options.offloadParams;
    pm.addPass(train::createOffloadPass(offload));
  }
  if (options.overlap) {
    train::ScheduleCollectivesPassOptions schedule;
    schedule.prefetchDepth = options.prefetchDepth;
    pm.addPass(train::createScheduleCollectivesPass(schedule));
  }
  addMemoryBudgetPasses(pm, options);
}

void autoshard::addMemoryBudgetPasses(OpPassManager &pm,
                                      const StrategyOptions &options) {
  if (options.memoryBudget.empty())
    return;
  PlanMemoryPassOptions memory;
  memory.budget = options.memoryBudget;
  pm.addPass(createPlanMemoryPass(memory));
}

void autoshard::buildLowerToLLVMPipeline(OpPassManager &pm,
                                         bool evaluationEntry,
                                         bool cleanedUp) {
  if (!cleanedUp)
    addLoweringCleanupPasses(pm);
  LowerToRuntimePassOptions lowering;
  lowering.entry = evaluationEntry ? "eval" : "step";
  pm.addPass(createLowerToRuntimePass(lowering));
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void autoshard::registerAutoshardDialects(DialectRegistry &registry) {
  registry.insert<train::TrainDialect, shard::ShardDialect, func::FuncDialect,
                  arith::ArithDialect, cf::ControlFlowDialect,
                  LLVM::LLVMDialect>();
  arith::registerConvertArithToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
}

const char *autoshard::strategyOptionHelp() {
  static const std::string help =
      "Distribution strategy (" + strategy::listStrategyNames() + "), or " +
      strategy::kAutoStrategy +
      ": the cost model chooses one for --device (docs/CostModel.md)";
  return help.c_str();
}

StrategyOptions StrategyPipelineOptions::getOptions() const {
  StrategyOptions options;
#define STRATEGY_OPTION(TYPE, FIELD, NAME, DEFAULT, HELP)                      \
  options.FIELD = FIELD;
#define STRATEGY_LIST_OPTION(FIELD, NAME, VALUE_NAME, HELP)                    \
  options.FIELD.assign(FIELD.begin(), FIELD.end());
#include "autoshard/Pipelines/StrategyOptions.def"
  return options;
}

namespace {
void appendOption(std::string &text, const char *name, bool value) {
  text += std::string(" ") + name + "=" + (value ? "true" : "false");
}
void appendOption(std::string &text, const char *name, int64_t value) {
  text += std::string(" ") + name + "=" + std::to_string(value);
}
/// Strings in braces, so that the pipeline syntax's spaces and commas in
/// them stay theirs; an empty string is left out (its default).
void appendOption(std::string &text, const char *name,
                  const std::string &value) {
  if (!value.empty())
    text += std::string(" ") + name + "={" + value + "}";
}
template <typename E, typename = decltype(strategy::EnumSpellings<E>::all)>
void appendOption(std::string &text, const char *name, E value) {
  text += std::string(" ") + name + "=" + strategy::stringify(value);
}
/// Each value quoted: a regular expression may hold the syntax's commas.
void appendList(std::string &text, const char *name,
                const std::vector<std::string> &values) {
  if (values.empty())
    return;
  text += std::string(" ") + name + "={";
  for (size_t i = 0; i < values.size(); ++i)
    text += (i ? ",\"" : "\"") + values[i] + "\"";
  text += "}";
}
} // namespace

std::string autoshard::strategyPipelineText(const StrategyOptions &options) {
  std::string text = "autoshard-strategy{";
#define STRATEGY_OPTION(TYPE, FIELD, NAME, DEFAULT, HELP)                      \
  appendOption(text, NAME, options.FIELD);
#define STRATEGY_LIST_OPTION(FIELD, NAME, VALUE_NAME, HELP)                    \
  appendList(text, NAME, options.FIELD);
#include "autoshard/Pipelines/StrategyOptions.def"
  return text + "}";
}

std::string autoshard::verifyStrategyOptions(const StrategyOptions &options) {
  const std::string &name = options.strategy;
  bool automatic = name == strategy::kAutoStrategy;
  const strategy::StrategyPreset *preset = strategy::lookupStrategy(name);
  if (!automatic && !preset)
    return "unknown strategy '" + name +
           "'; valid strategies: " + strategy::listStrategyNames() + ", " +
           strategy::kAutoStrategy;
  if (!options.costReport.empty() && options.costReport != "text" &&
      options.costReport != "all" && options.costReport != "json")
    return "unknown --cost-report '" + options.costReport +
           "'; valid: text, all, json";
  // Checked before the numbers, whose "at least 1" would read as if 0 had
  // been asked for.
  if (options.worldSize == 0)
    return "--world-size is required: give the number of ranks the binary "
           "will run on (mpirun -np N), e.g. --world-size=8, or "
           "--world-size=1 for a single process";
  if (options.nodes < 0 || options.ranksPerNode < 0)
    return "--nodes and --ranks-per-node must be at least 1";
  std::string numbers = strategy::verifyPlanNumbers(
      preset, options.worldSize, options.shardGroupSize, options.bucketCapMb,
      options.persistenceThreshold);
  if (!numbers.empty())
    return numbers;
  if (!options.memoryBudget.empty()) {
    FailureOr<int64_t> budget = parseByteSize(options.memoryBudget);
    if (failed(budget) || *budget <= 0)
      return "--memory-budget '" + options.memoryBudget +
             "' is not a positive size; write bytes or a size with a unit, "
             "such as 80GiB or 1.5GB";
  }
  if (options.prefetchDepth < 0)
    return "--prefetch-depth must be at least 0, got " +
           std::to_string(options.prefetchDepth);
  // auto chooses the placements and reshard points itself.
  if (automatic &&
      (!options.paramGroups.empty() || !options.keepGathered.empty()))
    return std::string(!options.paramGroups.empty() ? "--param-group"
                                                    : "--keep-gathered") +
           " refines a preset's plan; --strategy=auto chooses the plan "
           "itself (give a preset: " +
           strategy::listStrategyNames() + ")";
  // An evaluation step has no optimizer, backward pass or micro-batches.
  if (options.forwardOnly) {
    if (automatic)
      return "--forward-only compiles an evaluation step; --strategy=auto "
             "prices training steps (give a preset: " +
             strategy::listStrategyNames() + ")";
    if (options.offload != strategy::Offload::None)
      return "--offload keeps optimizer states off the device; a "
             "--forward-only step has none";
    if (options.activationCheckpointing !=
        strategy::ActivationCheckpointing::None)
      return "--activation-checkpointing recomputes what the backward pass "
             "reads; a --forward-only step has none";
    if (options.reduceEvery != strategy::ReduceEvery::Step ||
        options.reduceDtype != strategy::ReduceDtype::Gradient)
      return "--reduce-every and --reduce-dtype set how gradients are "
             "reduced; a --forward-only step has none";
  }
  return "";
}

void autoshard::registerAutoshardPasses() {
  train::registerTrainPasses();
  registerAutoStrategyPass();
  registerConversionPasses();
  // The upstream passes the pipelines use, so that a printed pipeline parses.
  registerTransformsPasses();
  registerPass([] { return createConvertToLLVMPass(); });
  registerPass([] { return createReconcileUnrealizedCastsPass(); });
  // Registered by hand rather than through PassPipelineRegistration so
  // that the textual form refuses what the tools' flags refuse (a missing
  // world size above all) instead of planning with a bad value.
  registerPassPipeline(
      "autoshard-strategy",
      "Plan and partition a training step for a named strategy",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        StrategyPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        StrategyOptions values = options.getOptions();
        if (std::string problem = verifyStrategyOptions(values);
            !problem.empty())
          return errorHandler("autoshard-strategy: " + problem);
        buildStrategyPipeline(pm, values);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> printOptions) {
        printOptions(StrategyPipelineOptions());
      });
  PassPipelineRegistration<>(
      "autoshard-lower-to-llvm",
      "Lower a per-rank training step to runtime calls in the LLVM dialect",
      [](OpPassManager &pm) { buildLowerToLLVMPipeline(pm); });
}
