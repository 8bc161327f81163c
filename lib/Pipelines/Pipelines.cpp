//===- Pipelines.cpp - the strategy and compile pipelines -----------------===//

#include "autoshard/Pipelines/Pipelines.h"
#include "autoshard/Pipelines/AutoStrategy.h"

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

void autoshard::buildStrategyPipeline(OpPassManager &pm,
                                      const StrategyOptions &options,
                                      StrategyOptions *built) {
  if (options.strategy == "auto")
    return buildAutoStrategyPipeline(pm, options, built);
  if (built)
    *built = options;
  train::AutodiffPassOptions autodiff;
  autodiff.exposeGradients = options.exposeGradients;
  autodiff.forwardOnly = options.forwardOnly;
  pm.addPass(train::createAutodiffPass(autodiff));
  if (options.activationCheckpointing != "none") {
    train::CheckpointActivationsPassOptions checkpoint;
    checkpoint.mode = options.activationCheckpointing;
    pm.addPass(train::createCheckpointActivationsPass(checkpoint));
  }
  train::PlanPassOptions plan;
  plan.strategy = options.strategy;
  plan.worldSize = options.worldSize;
  plan.shardGroupSize = options.shardGroupSize;
  plan.reshardAfterForward = options.reshardAfterForward;
  plan.bucketCapMb = options.bucketCapMb;
  plan.reduceDtype = options.reduceDtype;
  plan.reduceEvery = options.reduceEvery;
  plan.paramGroups.assign(options.paramGroups.begin(),
                          options.paramGroups.end());
  plan.persistenceThreshold = options.persistenceThreshold;
  plan.keepGathered.assign(options.keepGathered.begin(),
                           options.keepGathered.end());
  pm.addPass(train::createPlanPass(plan));
  pm.addPass(train::createPartitionPass());
  pm.addPass(train::createGroupCollectivesPass());
  if (options.offload != "none" || options.offloadParams != "none") {
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
  if (!options.memoryBudget.empty()) {
    PlanMemoryPassOptions memory;
    memory.budget = options.memoryBudget;
    pm.addPass(createPlanMemoryPass(memory));
  }
}

void autoshard::buildLowerToLLVMPipeline(OpPassManager &pm,
                                         bool evaluationEntry) {
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
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

namespace {
struct StrategyPipelineOptions
    : public PassPipelineOptions<StrategyPipelineOptions> {
  Option<std::string> strategy{*this, "strategy",
                               llvm::cl::desc("Named distribution strategy"),
                               llvm::cl::init("ddp")};
  Option<int64_t> worldSize{*this, "world-size",
                            llvm::cl::desc("Number of ranks"),
                            llvm::cl::init(1)};
  Option<bool> exposeGradients{
      *this, "expose-gradients",
      llvm::cl::desc("Return each parameter's gradient as a result"),
      llvm::cl::init(false)};
  Option<bool> forwardOnly{
      *this, "forward-only",
      llvm::cl::desc("An evaluation step: the forward pass and the loss"),
      llvm::cl::init(false)};
  Option<int64_t> shardGroupSize{
      *this, "shard-group-size",
      llvm::cl::desc("Ranks per shard group (hybrid)"), llvm::cl::init(0)};
  Option<bool> reshardAfterForward{
      *this, "reshard-after-forward",
      llvm::cl::desc("Release gathered parameters after the forward pass"),
      llvm::cl::init(true)};
  Option<int64_t> bucketCapMb{
      *this, "bucket-cap-mb",
      llvm::cl::desc("Largest bucket of merged collectives, in MiB"),
      llvm::cl::init(25)};
  Option<std::string> reduceDtype{
      *this, "reduce-dtype",
      llvm::cl::desc("Element type gradients are reduced in (gradient, f32)"),
      llvm::cl::init("gradient")};
  Option<std::string> reduceEvery{
      *this, "reduce-every",
      llvm::cl::desc("When sharded gradients are reduced under gradient "
                     "accumulation (step, micro-batch)"),
      llvm::cl::init("step")};
  ListOption<std::string> paramGroups{
      *this, "param-groups",
      llvm::cl::desc("Parameter groups with their own placements, "
                     "PRESET=REGEX")};
  Option<int64_t> persistenceThreshold{
      *this, "persistence-threshold",
      llvm::cl::desc("Keep parameters of at most this many elements whole"),
      llvm::cl::init(0)};
  ListOption<std::string> keepGathered{
      *this, "keep-gathered",
      llvm::cl::desc("Sharded parameters (whole-name REGEX) kept gathered "
                     "from the forward pass to the backward pass")};
  Option<bool> overlap{
      *this, "overlap",
      llvm::cl::desc("Overlap collectives with compute (start/wait pairs)"),
      llvm::cl::init(true)};
  Option<int64_t> prefetchDepth{
      *this, "prefetch-depth",
      llvm::cl::desc("Parameter gathers in flight ahead of the one in use"),
      llvm::cl::init(1)};
  Option<std::string> activationCheckpointing{
      *this, "activation-checkpointing",
      llvm::cl::desc("Recompute activations in backward: none, blocks, "
                     "selective"),
      llvm::cl::init("none")};
  Option<std::string> device{*this, "device",
                             llvm::cl::desc("strategy=auto: the device"),
                             llvm::cl::init("cpu-node")};
  Option<int64_t> nodes{*this, "nodes",
                        llvm::cl::desc("strategy=auto: nodes (0: derive)"),
                        llvm::cl::init(0)};
  Option<int64_t> ranksPerNode{
      *this, "ranks-per-node",
      llvm::cl::desc("strategy=auto: ranks per node (0: derive)"),
      llvm::cl::init(0)};
  Option<std::string> costReport{
      *this, "cost-report",
      llvm::cl::desc("strategy=auto: text or json report of the candidates"),
      llvm::cl::init("")};
  Option<std::string> costReportFile{
      *this, "cost-report-file",
      llvm::cl::desc("strategy=auto: the report's file (default stderr)"),
      llvm::cl::init("")};
  Option<std::string> offload{
      *this, "offload",
      llvm::cl::desc("Optimizer states and fp32 master weights: none, cpu "
                     "or nvme"),
      llvm::cl::init("none")};
  Option<std::string> offloadParams{
      *this, "offload-params",
      llvm::cl::desc("Sharded parameters: none, cpu or nvme"),
      llvm::cl::init("none")};
  Option<std::string> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("Plan memory and fail above this budget per rank"),
      llvm::cl::init("")};
};
} // namespace

void autoshard::registerAutoshardPasses() {
  train::registerTrainPasses();
  registerAutoStrategyPass();
  registerConversionPasses();
  // The upstream passes the pipelines use, so that a printed pipeline parses.
  registerTransformsPasses();
  registerPass([] { return createConvertToLLVMPass(); });
  registerPass([] { return createReconcileUnrealizedCastsPass(); });
  PassPipelineRegistration<StrategyPipelineOptions>(
      "autoshard-strategy",
      "Plan and partition a training step for a named strategy",
      [](OpPassManager &pm, const StrategyPipelineOptions &cl) {
        StrategyOptions options;
        options.strategy = cl.strategy;
        options.worldSize = cl.worldSize;
        options.exposeGradients = cl.exposeGradients;
        options.forwardOnly = cl.forwardOnly;
        options.shardGroupSize = cl.shardGroupSize;
        options.reshardAfterForward = cl.reshardAfterForward;
        options.bucketCapMb = cl.bucketCapMb;
        options.reduceDtype = cl.reduceDtype;
        options.reduceEvery = cl.reduceEvery;
        options.paramGroups.assign(cl.paramGroups.begin(),
                                   cl.paramGroups.end());
        options.persistenceThreshold = cl.persistenceThreshold;
        options.keepGathered.assign(cl.keepGathered.begin(),
                                    cl.keepGathered.end());
        options.overlap = cl.overlap;
        options.prefetchDepth = cl.prefetchDepth;
        options.activationCheckpointing = cl.activationCheckpointing;
        options.memoryBudget = cl.memoryBudget;
        options.offload = cl.offload;
        options.offloadParams = cl.offloadParams;
        options.device = cl.device;
        options.nodes = cl.nodes;
        options.ranksPerNode = cl.ranksPerNode;
        options.costReport = cl.costReport;
        options.costReportFile = cl.costReportFile;
        buildStrategyPipeline(pm, options);
      });
  PassPipelineRegistration<>(
      "autoshard-lower-to-llvm",
      "Lower a per-rank training step to runtime calls in the LLVM dialect",
      [](OpPassManager &pm) { buildLowerToLLVMPipeline(pm); });
}
