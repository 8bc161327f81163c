//===- AutoStrategy.cpp - --strategy=auto ---------------------------------===//

#include "autoshard/Pipelines/AutoStrategy.h"

#include "autoshard/Conversion/MemoryPlan.h"
#include "autoshard/CostModel/DeviceCatalog.h"
#include "autoshard/Dialect/Train/IR/Flops.h"
#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "autoshard/Dialect/Train/Transforms/Passes.h"
#include "autoshard/Pipelines/PlanReport.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

using namespace mlir;
using namespace autoshard;
using namespace autoshard::train;
namespace strategy = autoshard::strategy;

namespace {

int64_t elementsOf(Type type) {
  return cast<RankedTensorType>(type).getNumElements();
}

/// Adds `op`'s FLOPs (opFlops) to `total` and, for a forward op that reads
/// a block's parameter or attends, to `forwardBlocks` (what `blocks`
/// checkpointing computes twice).
void countFlops(Operation *op, double &total, double &forwardBlocks,
                const StepSignature &sig) {
  auto isBlockParam = [&](Value v) {
    if (auto cast = v.getDefiningOp<CastOp>())
      v = cast.getInput();
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && sig.getUnitIndex(arg.getArgNumber()) >= 0;
  };
  double flops = opFlops(op);
  total += flops;
  if (auto linear = dyn_cast<LinearOp>(op);
      (linear && isBlockParam(linear.getWeight())) ||
      isa<CausalAttentionOp>(op))
    forwardBlocks += flops;
}

/// Runs `pipeline` on a copy of `module`; the copy, or failure.
///
/// A trial build (`verify` false) runs without the verifier after each
/// pass: its copy is measured, and the one auto chooses is verified once
/// before it becomes the output. The verifier was a fifth of auto's time
/// on llama2-70b.
FailureOr<OwningOpRef<ModuleOp>>
runOnCopy(ModuleOp module, function_ref<void(OpPassManager &)> pipeline,
          bool verify = true) {
  OwningOpRef<ModuleOp> copy(module.clone());
  PassManager pm(module.getContext());
  pm.enableVerifier(verify);
  pipeline(pm);
  if (failed(pm.run(*copy)))
    return failure();
  return copy;
}

int shardingRank(StringRef name) {
  const strategy::StrategyPreset *preset = strategy::lookupStrategy(name);
  return preset ? preset->shardingRank : std::numeric_limits<int>::max();
}

double ms(double seconds) { return seconds * 1e3; }

/// How far a candidate offloads: its tiers summed (none 0, cpu 1, nvme 2
/// for the optimizer states and for the parameters); 0 keeps everything
/// on the device.
int offloadedTiers(const Candidate &c) {
  return static_cast<int>(c.estimate.plan.optimizerOffload) +
         static_cast<int>(c.estimate.plan.parameterOffload);
}

} // namespace

FailureOr<cost::ModelDescription>
autoshard::describeStep(ModuleOp module, int64_t worldSize,
                        const StrategyOptions &accept) {
  // The backward pass and the optimizer, as the strategy pipeline derives
  // them (from the raised forward pass, whose fused ops are what the FLOP
  // count below knows); diagnostics of a bad step come out here.
  AutodiffPassOptions autodiff;
  autodiff.allowNoOptimizer = accept.allowNoOptimizer;
  autodiff.allowUnusedParams = accept.allowUnusedParams;
  FailureOr<OwningOpRef<ModuleOp>> derived = runOnCopy(
      module,
      [&](OpPassManager &pm) {
        if (accept.raise)
          pm.addPass(createRaisePass());
        pm.addPass(createAutodiffPass(autodiff));
      },
      /*verify=*/false);
  if (failed(derived))
    return failure();
  FailureOr<FunctionOpInterface> step = findStepFunction(**derived);
  if (failed(step))
    return failure();
  StepSignature sig(*step);
  Block &body = step->getFunctionBody().front();

  // Backward values: results of gradient ops and everything computed from
  // them (the checkpointing pass's rule).
  DenseSet<Value> backward;
  for (Operation &op : body)
    if (op.getName().getStringRef().ends_with("_grad") ||
        llvm::any_of(op.getOperands(),
                     [&](Value v) { return backward.contains(v); }))
      backward.insert(op.result_begin(), op.result_end());
  auto isBackwardOp = [&](Operation *op) {
    return !isa<OptimizerOpInterface>(op) &&
           llvm::any_of(op->getResults(),
                        [&](Value v) { return backward.contains(v); });
  };

  cost::ModelDescription model;
  model.name = (*step).getName().str();
  bool bf16 = false;
  for (const StepValue &arg : sig.getArgs()) {
    if (arg.role != Role::Param)
      continue;
    Value value = body.getArgument(arg.index);
    SmallVector<Value> reads{value};
    for (Operation *user : value.getUsers())
      if (auto cast = dyn_cast<CastOp>(user)) {
        reads.push_back(cast.getResult());
        bf16 |= cast.getType().getElementType().isBF16();
      }
    bool readByBackward = llvm::any_of(reads, [&](Value v) {
      return llvm::any_of(v.getUsers(), isBackwardOp);
    });
    cost::ParameterTensor parameter;
    parameter.name = arg.name;
    parameter.elements = elementsOf(arg.type);
    parameter.readByBackward = readByBackward;
    parameter.block = sig.getUnitIndex(arg.index);
    model.parameters.push_back(parameter);
  }
  model.precision = bf16 ? cost::Precision::BF16 : cost::Precision::F32;
  model.optimizer = cost::Optimizer::SGD;
  int64_t losses = 0;
  double forwardBlocks = 0;
  for (Operation &op : body) {
    if (isa<AdamwOp>(op))
      model.optimizer = cost::Optimizer::AdamW;
    else if (auto sgd = dyn_cast<SgdOp>(op); sgd && sgd.getMomentumBuffer())
      model.optimizer = cost::Optimizer::SGDMomentum;
    model.clipGradients |= isa<ClipCoefficientOp>(op);
    losses += op.hasTrait<LossTrait>();
    countFlops(&op, model.stepFlops, forwardBlocks, sig);
  }
  model.blockRecomputeFlops = forwardBlocks;
  model.microBatches = std::max<int64_t>(losses, 1);
  for (const StepValue &arg : sig.getArgs())
    if (arg.role == Role::Input) {
      model.batchRows = arg.type.getDimSize(0);
      model.sequenceLength = arg.type.getRank() > 1 ? arg.type.getDimSize(1) : 1;
      break;
    }

  // Activations per rank (the most the step holds at once) from the memory
  // plan of each checkpointing mode,
  // under data parallelism at this world size (what the plan would hold
  // besides its model states); a mode that does not build is left to the
  // cost model's estimate.
  for (cost::ActivationCheckpointing mode :
       {cost::ActivationCheckpointing::None,
        cost::ActivationCheckpointing::Selective,
        cost::ActivationCheckpointing::Blocks}) {
    StrategyOptions options;
    options.strategy = strategy::kStrategyPresets[0].name;
    options.worldSize = worldSize;
    options.activationCheckpointing = mode;
    // Collectives overlapped as the plans are: a reduction's packed buffer
    // lives beside the backward pass's computation.
    options.overlap = true;
    options.allowNoOptimizer = accept.allowNoOptimizer;
    options.allowUnusedParams = accept.allowUnusedParams;
    // From the step derived above: raised already, and autodiff leaves a
    // step that updates its parameters itself as it is.
    options.raise = false;
    // Diagnostics of a configuration that does not build (a batch the
    // ranks cannot split) belong to the choice, not to the user.
    ScopedDiagnosticHandler quiet(module.getContext(),
                                  [](Diagnostic &) { return success(); });
    FailureOr<OwningOpRef<ModuleOp>> planned =
        runOnCopy(
            **derived,
            [&](OpPassManager &pm) { buildStrategyPipeline(pm, options); },
            /*verify=*/false);
    if (failed(planned))
      continue;
    FailureOr<StepPlan> plan = planStepInPlace(**planned);
    if (failed(plan))
      continue;
    cost::ActivationMeasurement measured;
    measured.worldSize = worldSize;
    measured.checkpointing = mode;
    measured.bytesPerRank =
        plan->memory.stepMaxBy[static_cast<int>(MemoryCategory::Activations)];
    measured.stepBytesPerRank = plan->memory.stepPeak;
    measured.stepMoments = plan->memory.stepMoments;
    model.activationMeasurements.push_back(measured);
  }
  return model;
}

Choice autoshard::chooseStrategy(const cost::ModelDescription &model,
                                 const cost::ClusterSpec &cluster,
                                 const StrategyOptions &base) {
  Choice choice;
  choice.cluster = cluster;
  choice.model = model.name;
  int64_t budget = 0;
  if (!base.memoryBudget.empty())
    budget = parseByteSize(base.memoryBudget).value_or(0);

  // What the compiler builds: every preset and checkpointing mode, both
  // reshard points, and offload of the optimizer (and of sharded
  // parameters) to host memory or NVMe where the device has a host link.
  cost::CandidateSpace space;
  space.reduceDtype = base.reduceDtype;
  // Under gradient accumulation, plans that shard gradients are tried both
  // ways: reduced once per step (fewer bytes) and every micro-batch (no
  // full gradient kept); --reduce-every=micro-batch pins the second, which
  // leaves only plans that shard gradients.
  if (base.reduceEvery == cost::ReduceEvery::MicroBatch &&
      model.microBatches > 1)
    space.reduceEvery = {cost::ReduceEvery::MicroBatch};
  else if (base.reduceEvery == cost::ReduceEvery::Step && base.searchSchedule)
    space.reduceEvery = {cost::ReduceEvery::Step,
                         cost::ReduceEvery::MicroBatch};
  // The schedule's settings are searched too, from their defaults (PyTorch's
  // 25 MiB buckets, one gather ahead) to larger buckets and a deeper
  // prefetch; a value other than the default pins its setting.
  StrategyOptions defaults;
  space.prefetchDepths = {base.prefetchDepth};
  if (base.searchSchedule && base.prefetchDepth == defaults.prefetchDepth)
    space.prefetchDepths.push_back(2 * defaults.prefetchDepth);
  space.bucketCapsBytes = {base.bucketCapMb << 20};
  if (base.searchSchedule && base.bucketCapMb == defaults.bucketCapMb)
    space.bucketCapsBytes.push_back((4 * defaults.bucketCapMb) << 20);
  // Per-layer mixes: plans that shard parameters also keep those of at most
  // 100,000 elements whole (DeepSpeed's default persistence threshold:
  // norms and biases, gathered every use for little memory).
  space.persistenceThresholds = {base.persistenceThreshold};
  if (base.searchSchedule &&
      base.persistenceThreshold == defaults.persistenceThreshold)
    space.persistenceThresholds.push_back(100000);
  // The user's reshard point, checkpointing mode and offload tiers pin
  // their dimension of the search where they differ from the default.
  if (!base.reshardAfterForward)
    space.reshards = {cost::Reshard::AfterBackward};
  if (base.activationCheckpointing != cost::ActivationCheckpointing::None)
    space.checkpointing = {base.activationCheckpointing};
  if (base.offload != cost::Offload::None)
    space.optimizerOffloads = {base.offload};
  if (base.offloadParams != cost::Offload::None)
    space.parameterOffloads = {base.offloadParams};
  // The collectives of each schedule, planned once for the candidates that
  // differ only in what they do not depend on (checkpointing, offload,
  // prefetch depth). The candidates' parameter layouts are their base
  // preset's, named with it in the key.
  // Each call's time alone is shared with them too.
  struct Collectives {
    std::vector<cost::CollectiveCall> calls;
    std::vector<double> seconds;
  };
  std::map<std::string, Collectives> collectives;
  for (const cost::Plan &plan :
       cost::enumerateCandidatePlans(model, cluster, space)) {
    if (!strategy::lookupStrategy(plan.name) ||
        !cost::verifyPlan(plan, model, cluster).empty())
      continue;
    const cost::Plan schedule = cost::collectivesOnly(plan);
    std::string key = cost::describePlan(schedule);
    for (const auto &[name, layout] : schedule.parameterLayouts)
      key += llvm::formatv(" {0}={1}/{2}/{3}/{4}/{5}", name,
                           static_cast<int>(layout.optimizerStates),
                           static_cast<int>(layout.gradients),
                           static_cast<int>(layout.parameters),
                           layout.shardGroupSize, static_cast<int>(layout.unit))
                 .str();
    auto [calls, added] = collectives.try_emplace(key);
    if (added) {
      calls->second.calls =
          cost::planCollectives(model, schedule, cluster.worldSize());
      calls->second.seconds =
          cost::collectiveSeconds(calls->second.calls, cluster);
    }
    Candidate candidate;
    candidate.estimate =
        cost::estimateCost(model, plan, cluster, calls->second.calls,
                           calls->second.seconds);
    candidate.fits = candidate.estimate.fits(budget);
    candidate.overflows = candidate.estimate.overflows(budget);
    StrategyOptions &options = candidate.options;
    options = base;
    options.strategy = plan.name;
    options.worldSize = cluster.worldSize();
    options.shardGroupSize = strategy::lookupStrategy(plan.name)->hybrid
                                 ? plan.layout.shardGroupSize
                                 : 0;
    options.reshardAfterForward = plan.reshard == cost::Reshard::AfterForward;
    options.bucketCapMb = plan.bucketCapBytes >> 20;
    options.prefetchDepth = plan.prefetchDepth;
    options.activationCheckpointing = plan.checkpointing;
    options.persistenceThreshold = plan.persistenceThreshold;
    options.offload = plan.optimizerOffload;
    options.offloadParams = plan.parameterOffload;
    options.reduceEvery = plan.reduceEvery;
    choice.candidates.push_back(std::move(candidate));
  }

  selectCandidate(choice);
  return choice;
}

void autoshard::selectCandidate(Choice &choice) {
  // DDP when it fits on the device: whole states, the fewest collectives,
  // no gathers and no offload; what sharding would save shows in the
  // report. Otherwise the fastest plan that fits without offload, and only
  // when none does, with it; within 5% of the fastest, the least sharded,
  // the least offloaded, the least recomputation, the fewest bytes on the
  // wire.
  const auto offloaded = offloadedTiers;
  bool fitsOnDevice = llvm::any_of(choice.candidates, [&](const Candidate &c) {
    return c.fits && offloaded(c) == 0;
  });
  auto considered = [&](const Candidate &c) {
    return c.fits && (!fitsOnDevice || offloaded(c) == 0);
  };
  choice.chosen = -1;
  double best = -1;
  for (const Candidate &c : choice.candidates)
    if (considered(c) && (best < 0 || c.estimate.time.total() < best))
      best = c.estimate.time.total();
  if (best < 0) {
    choice.reason = "no plan fits";
    return;
  }
  auto key = [&](const Candidate &c) {
    return std::make_tuple(shardingRank(c.options.strategy), offloaded(c),
                           static_cast<int>(c.estimate.plan.checkpointing),
                           c.estimate.traffic.total(),
                           c.estimate.time.total());
  };
  auto isDdp = [](const Candidate &c) {
    return shardingRank(c.options.strategy) == 0;
  };
  auto plainDdp = [&](const Candidate &c) {
    return isDdp(c) && offloaded(c) == 0;
  };
  bool ddpFits = llvm::any_of(choice.candidates, [&](const Candidate &c) {
    return c.fits && plainDdp(c);
  });
  for (auto [i, c] : llvm::enumerate(choice.candidates)) {
    bool eligible = ddpFits ? plainDdp(c)
                            : c.estimate.time.total() <= best * 1.05;
    if (!considered(c) || !eligible)
      continue;
    if (choice.chosen < 0 || key(c) < key(choice.candidates[choice.chosen]))
      choice.chosen = static_cast<int>(i);
  }
  const Candidate &chosen = choice.candidates[choice.chosen];
  // --reduce-every=micro-batch leaves only plans that shard gradients, and
  // --offload only plans that offload.
  const char *ddp = llvm::any_of(choice.candidates, plainDdp)
                        ? "DDP does not fit"
                    : llvm::any_of(choice.candidates, isDdp)
                        ? "DDP without offload is not among the candidates"
                        : "DDP is not among the candidates";
  bool anyOnDevice = llvm::any_of(
      choice.candidates, [&](const Candidate &c) { return offloaded(c) == 0; });
  choice.reason =
      ddpFits ? llvm::formatv("{0}: DDP fits, estimated {1:f1} ms per step "
                              "(the fastest plan that fits: {2:f1} ms)",
                              cost::describePlan(chosen.estimate.plan),
                              ms(chosen.estimate.time.total()), ms(best))
                    .str()
              : llvm::formatv("{0}: estimated {1:f1} ms per step, the least "
                              "sharded of the plans that fit within 5% of "
                              "the fastest ({2:f1} ms); {3}{4}",
                              cost::describePlan(chosen.estimate.plan),
                              ms(chosen.estimate.time.total()), ms(best), ddp,
                              fitsOnDevice || !anyOnDevice
                                  ? ""
                                  : ", and no plan fits without offload")
                    .str();
}

std::string autoshard::formatCostReport(const Choice &choice,
                                        CostReportForm form) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (form == CostReportForm::Json) {
    llvm::json::Array candidates;
    for (auto [i, c] : llvm::enumerate(choice.candidates)) {
      const cost::MemoryBreakdown &m = c.estimate.memory.device;
      const cost::StepTime &t = c.estimate.time;
      auto [atPeak, buffersAtPeak] = peakJson(m.atPeak);
      llvm::json::Object candidate{
          {"plan", cost::describePlan(c.estimate.plan)},
          {"strategy", c.options.strategy},
          {"activation_checkpointing",
           strategy::stringify(c.options.activationCheckpointing)},
          {"chosen", static_cast<int>(i) == choice.chosen},
          {"fits", c.fits},
          {"planned_bytes", c.plannedBytes},
          {"overflows", llvm::json::Array(c.overflows)},
          {"memory_bytes",
           llvm::json::Object{
               {"total", m.total()},
               {"parameters", m.parameters},
               {"gradients", m.gradients},
               {"optimizer_states", m.optimizerStates},
               {"master_weights", m.masterWeights},
               {"activations", m.activations},
               {"gathered_parameters", m.gatheredParameters},
               {"pending_gradients", m.pendingGradients},
               {"communication_buffers", m.communicationBuffers},
               {"offload_staging", m.offloadStaging},
               {"step_buffers", m.stepBuffers},
               {"prefetched_gather_buffers", m.prefetchedGatherBuffers},
               {"step_peak", m.stepPeak},
               {"at_peak", std::move(atPeak)},
               {"buffers_at_peak", std::move(buffersAtPeak)},
               {"activations_estimated",
                c.estimate.memory.activationsEstimated}}},
          {"bytes_per_step",
           llvm::json::Object{
               {"all_reduce", c.estimate.traffic.allReduce},
               {"all_gather", c.estimate.traffic.allGather},
               {"reduce_scatter", c.estimate.traffic.reduceScatter}}},
          {"step_ms", llvm::json::Object{
                          {"compute", ms(t.compute())},
                          {"communication", ms(t.communication)},
                          {"exposed_communication", ms(t.exposedCommunication)},
                          {"exposed_offload", ms(t.exposedOffload)},
                          {"total", ms(t.total())}}}};
      // The exact plan's peak in the same categories.
      if (c.plannedBytes >= 0) {
        auto [planned, plannedBuffers] = peakJson(c.plannedAtPeak);
        candidate["planned_at_peak"] = std::move(planned);
        candidate["planned_buffers_at_peak"] = std::move(plannedBuffers);
      }
      candidates.push_back(std::move(candidate));
    }
    os << llvm::formatv(
        "{0:2}\n",
        llvm::json::Value(llvm::json::Object{
            {"model", choice.model},
            {"device", choice.cluster.device.name},
            {"nodes", choice.cluster.nodes},
            {"ranks_per_node", choice.cluster.ranksPerNode},
            {"chosen", choice.chosen},
            {"reason", choice.reason},
            {"candidates", std::move(candidates)}}));
    return text;
  }
  os << llvm::formatv("cost report: {0} on {1} x {2} {3} ({4} ranks)\n",
                      choice.model, choice.cluster.nodes,
                      choice.cluster.ranksPerNode, choice.cluster.device.name,
                      choice.cluster.worldSize());
  os << llvm::formatv("  {0,-58} {1,10} {2,10} {3,10} {4,12} {5,9} {6,9} "
                      "{7,9}\n",
                      "plan", "memory", "states", "activ.", "bytes/step",
                      "compute", "exposed", "step ms");
  // The summary: of each strategy, the candidates that fit, fastest
  // first, then those that do not, smallest first; and the chosen one.
  std::vector<bool> shown(choice.candidates.size(),
                          form == CostReportForm::All);
  if (form == CostReportForm::Summary) {
    std::map<std::string, std::vector<size_t>> byStrategy;
    for (auto [i, c] : llvm::enumerate(choice.candidates))
      byStrategy[c.options.strategy].push_back(i);
    for (auto &[name, indices] : byStrategy) {
      auto rank = [&](size_t i) {
        const Candidate &c = choice.candidates[i];
        return std::make_tuple(!c.fits,
                               c.fits ? c.estimate.time.total() : 0.0,
                               c.estimate.memory.device.total(), i);
      };
      llvm::sort(indices,
                 [&](size_t x, size_t y) { return rank(x) < rank(y); });
      for (size_t i : ArrayRef(indices).take_front(kReportedPerStrategy))
        shown[i] = true;
    }
    if (choice.chosen >= 0)
      shown[choice.chosen] = true;
  }
  auto gib = [](int64_t bytes) {
    const char *units[] = {"B", "K", "M", "G", "T"};
    double value = static_cast<double>(bytes);
    int unit = 0;
    while (value >= 1024 && unit < 4) {
      value /= 1024;
      ++unit;
    }
    return llvm::formatv("{0:f1}{1}", value, units[unit]).str();
  };
  for (auto [i, c] : llvm::enumerate(choice.candidates)) {
    if (!shown[i])
      continue;
    const cost::MemoryBreakdown &m = c.estimate.memory.device;
    const cost::StepTime &t = c.estimate.time;
    // The chosen plan's memory is one figure: its exact plan's when the
    // compiler built one, which the row says, else the estimate.
    bool chosen = static_cast<int>(i) == choice.chosen;
    std::string memory = gib(m.total()), note;
    if (chosen) {
      bool planned = c.plannedBytes >= 0;
      if (planned)
        memory = gib(c.plannedBytes);
      note = planned ? "  planned" : "  estimated";
    } else if (c.plannedBytes >= 0) {
      note = "  planned " + gib(c.plannedBytes);
    }
    os << llvm::formatv(
        "{0} {1,-58} {2,10} {3,10} {4,10} {5,12} {6,9:f1} {7,9:f1} "
        "{8,9:f1}{9}{10}\n",
        chosen ? "*" : " ", cost::describePlan(c.estimate.plan), memory,
        gib(m.modelStates()), gib(m.activations),
        c.estimate.traffic.total(), ms(t.compute()),
        ms(t.exposedCommunication + t.exposedOffload), ms(t.total()), note,
        c.fits ? "" : "  does not fit");
  }
  size_t count = llvm::count(shown, true);
  if (count < choice.candidates.size())
    os << llvm::formatv("  ({0} of {1} candidates: the chosen plan and the "
                        "best {2} of each strategy; --cost-report=all lists "
                        "every one)\n",
                        count, choice.candidates.size(),
                        kReportedPerStrategy);
  os << "chosen: " << choice.reason << "\n";
  // Its memory at the peak, in the plan report's categories.
  if (choice.chosen >= 0) {
    const Candidate &c = choice.candidates[choice.chosen];
    os << "chosen at the peak, estimated: "
       << c.estimate.memory.device.atPeak.str() << "\n";
    if (c.plannedBytes >= 0)
      os << "chosen at the peak, planned: " << c.plannedAtPeak.str() << "\n";
  }
  return text;
}

namespace autoshard {
#define GEN_PASS_DEF_AUTOSTRATEGYPASS
#include "autoshard/Pipelines/Passes.h.inc"
} // namespace autoshard

namespace {

struct AutoStrategyPass
    : public autoshard::impl::AutoStrategyPassBase<AutoStrategyPass> {
  AutoStrategyPass() { options.strategy = strategy::kAutoStrategy; }
  AutoStrategyPass(const StrategyOptions &options, StrategyOptions *chosenOut)
      : options(options), chosenOut(chosenOut) {}

  void getDependentDialects(DialectRegistry &registry) const override {
    registerAutoshardDialects(registry);
  }

  /// The textual pass takes the options of the strategy pipeline.
  LogicalResult initializeOptions(
      StringRef text,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    StrategyPipelineOptions parsed;
    if (failed(parsed.parseFromString(text)))
      return errorHandler("invalid options for autoshard-auto-strategy: " +
                          text);
    options = parsed.getOptions();
    options.strategy = strategy::kAutoStrategy;
    return success();
  }

  void runOnOperation() override;

  StrategyOptions options;
  /// Where the chosen candidate's options go (buildAutoStrategyPipeline).
  StrategyOptions *chosenOut = nullptr;
};

/// What would fit when no plan does, as concretely as the smallest plan's
/// estimate allows: more ranks of the same GPU (its sharded model states
/// shrink as 1/ranks; the rest of its memory does not), a shipped device
/// with more memory per rank, and offload where the device has a host link
/// and the search was held to given tiers; more host memory or NVMe where
/// the smallest plan fits the device. A CPU node's ranks share its memory:
/// more of them add none, so none are suggested.
/// Whether two plans place and offload every state alike and checkpoint
/// alike, differing at most in their schedule (bucket size, prefetch
/// depth).
static bool sameLayout(const cost::Plan &a, const cost::Plan &b) {
  cost::Plan x = a, y = b;
  x.bucketCapBytes = y.bucketCapBytes;
  x.prefetchDepth = y.prefetchDepth;
  return cost::describePlan(x) == cost::describePlan(y);
}

static std::string describeWhatWouldFit(const Candidate *smallest,
                                        const cost::ClusterSpec &cluster,
                                        int64_t worldSize, int64_t capacity,
                                        StringRef memoryBudget,
                                        bool offloadPinned) {
  const cost::DeviceSpec &device = cluster.device;
  bool gpu = device.kind == cost::DeviceKind::GPU;
  std::vector<std::string> ways;
  if (!smallest) {
    ways.push_back(gpu ? "more ranks" : "more nodes");
    ways.push_back("a smaller micro-batch");
    ways.push_back(memoryBudget.empty() ? "a device with more memory"
                                        : "a larger --memory-budget");
  } else if (smallest->estimate.memory.device.total() <= capacity) {
    // The smallest plan fits the device: its host memory or NVMe does not,
    // which no more device memory mends.
    ways.push_back("a node with more host memory or NVMe per rank");
    if (device.canOffload() && offloadPinned)
      ways.push_back("offload to other tiers (--offload, --offload-params)");
  } else {
    const cost::MemoryEstimate &memory = smallest->estimate.memory;
    const cost::MemoryBreakdown &need = memory.device;
    int64_t total = need.total();
    const cost::Layout &layout = smallest->estimate.plan.layout;
    bool sharded = layout.parameters == cost::Placement::Sharded &&
                   layout.optimizerStates == cost::Placement::Sharded;
    if (gpu && memoryBudget.empty() && sharded) {
      // The states the peak counts (gradients only without measured step
      // buffers, which hold them: then the gradients at the step's peak),
      // sharded over every rank.
      int64_t states = need.keptStates() +
                       (need.stepPeak > 0     ? need.stepGradients
                        : need.stepBuffers > 0 ? 0
                                               : need.gradients);
      int64_t rest = total - states;
      if (states > 0 && rest < capacity) {
        double ranks = std::ceil(double(states) * double(worldSize) /
                                 double(capacity - rest));
        int64_t perNode = std::max<int64_t>(1, device.devicesPerNode);
        if (ranks > double(perNode))
          ranks = std::ceil(ranks / double(perNode)) * double(perNode);
        if (ranks > double(worldSize) && ranks <= 1e6)
          ways.push_back(
              "about " + std::to_string(int64_t(ranks)) + " ranks of '" +
              device.name + "' (an estimate: the smallest plan's model "
              "states, " + formatBytes(states) + " per rank at " +
              std::to_string(worldSize) + ", shrink as 1/ranks; its other " +
              formatBytes(rest) + " do not)");
      } else if (states > 0) {
        ways.push_back("no number of '" + device.name +
                       "' ranks by the estimate: the smallest plan's memory "
                       "besides its sharded model states, " +
                       formatBytes(rest) + ", exceeds a rank's " +
                       formatBytes(capacity));
      }
    } else if (gpu && memoryBudget.empty()) {
      ways.push_back("more ranks");
    }
    if (!gpu && device.hasNetwork())
      ways.push_back("more nodes");
    ways.push_back("a smaller micro-batch");
    if (!memoryBudget.empty()) {
      ways.push_back("a larger --memory-budget");
    } else {
      // The shipped GPU with the least memory per rank that holds the
      // smallest plan at this world size.
      std::optional<cost::DeviceSpec> larger;
      llvm::Expected<std::vector<cost::DeviceSpec>> shipped =
          cost::loadDeviceDirectory(cost::getDefaultDeviceDirectory());
      if (shipped) {
        for (const cost::DeviceSpec &other : *shipped) {
          if (other.kind != cost::DeviceKind::GPU ||
              other.name == device.name)
            continue;
          cost::ClusterSpec cluster = cost::makeCluster(other, worldSize);
          if (!cost::verifyCluster(cluster).empty() ||
              cost::rankMemoryBytes(cluster) < total)
            continue;
          if (!larger || other.memoryBytes < larger->memoryBytes)
            larger = other;
        }
      } else {
        llvm::consumeError(shipped.takeError());
      }
      if (larger)
        ways.push_back("a device with more memory per rank ('" +
                       larger->name + "', " +
                       formatBytes(larger->memoryBytes) +
                       ", holds the smallest plan's " + formatBytes(total) +
                       " by the estimate)");
      else
        ways.push_back("a device with more memory");
    }
    if (device.canOffload() && offloadPinned)
      ways.push_back("offload to other tiers (--offload, --offload-params)");
  }
  std::string text;
  for (size_t i = 0; i < ways.size(); ++i)
    text += (i == 0 ? "" : i + 1 == ways.size() ? " or " : ", ") + ways[i];
  if (!gpu)
    text += " (more ranks on one '" + device.name +
            "' share its memory and add none)";
  return text;
}

void AutoStrategyPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (std::string problem = verifyStrategyOptions(options); !problem.empty()) {
    module.emitError() << problem;
    return signalPassFailure();
  }
  const int64_t worldSize = options.worldSize;
  llvm::Expected<cost::DeviceSpec> spec = cost::lookupDevice(options.device);
  if (!spec) {
    module.emitError() << llvm::toString(spec.takeError());
    return signalPassFailure();
  }
  cost::ClusterSpec cluster = cost::makeCluster(*spec, worldSize);
  const int64_t nodes = options.nodes, ranksPerNode = options.ranksPerNode;
  for (auto [count, flag] : {std::pair<int64_t, const char *>{nodes, "nodes"},
                             {ranksPerNode, "ranks per node"}})
    if (count > 0 && worldSize % count != 0) {
      module.emitError() << count << " " << flag
                         << " do not divide the world size " << worldSize;
      return signalPassFailure();
    }
  if (nodes > 0 || ranksPerNode > 0) {
    cluster.nodes = nodes > 0 ? nodes : worldSize / std::max<int64_t>(
                                                        ranksPerNode, 1);
    cluster.ranksPerNode =
        ranksPerNode > 0 ? ranksPerNode : worldSize / std::max<int64_t>(
                                                          nodes, 1);
  }
  if (cluster.worldSize() != worldSize) {
    module.emitError() << cluster.nodes << " nodes of " << cluster.ranksPerNode
                       << " ranks are " << cluster.worldSize()
                       << " ranks, not the world size " << worldSize;
    return signalPassFailure();
  }
  if (std::string problem = cost::verifyCluster(cluster); !problem.empty()) {
    module.emitError() << problem;
    return signalPassFailure();
  }
  // A pinned offload tier on a device that has nothing to offload to would
  // leave no candidate at all.
  for (auto [tier, flag] :
       {std::pair{options.offload, "offload"},
        std::pair{options.offloadParams, "offload-params"}})
    if (tier != strategy::Offload::None && !cluster.device.canOffload()) {
      module.emitError() << flag << "=" << strategy::stringify(tier) << ": '"
                         << cluster.device.name
                         << "' cannot offload: offload moves state from a "
                            "GPU to its host's memory or NVMe (give a GPU "
                            "device, such as --device=h100-80gb, or no "
                            "offload)";
      return signalPassFailure();
    }

  FailureOr<cost::ModelDescription> model =
      describeStep(module, worldSize, options);
  if (failed(model))
    return signalPassFailure();

  // What every candidate shares: the options, less those of the report.
  StrategyOptions base = options;
  base.costReport.clear();
  base.costReportFile.clear();
  Choice choice = chooseStrategy(*model, cluster, base);

  // The estimate chose; the compiler's exact memory plan of the choice
  // decides whether it fits. A choice that does not gives way to the next.
  int64_t capacity = cost::rankMemoryBytes(cluster);
  if (!base.memoryBudget.empty())
    capacity = parseByteSize(base.memoryBudget).value_or(capacity);
  const std::string &report = options.costReport;
  const std::string &reportFile = options.costReportFile;
  // The trial builds of the candidates whose exact plans fit, by candidate:
  // the chosen one's is the compiled step (its pipeline is not run again),
  // with the warnings and remarks it gave, which are then the user's.
  struct TrialBuild {
    OwningOpRef<ModuleOp> module;
    std::vector<Diagnostic> diagnostics;
  };
  std::map<size_t, TrialBuild> fittingBuilds;
  auto plannedBytes = [&](Candidate &candidate) -> FailureOr<int64_t> {
    if (candidate.plannedBytes >= 0)
      return candidate.plannedBytes;
    StrategyOptions options = candidate.options;
    options.memoryBudget.clear();
    // A trial build's warnings are about a plan the user did not ask for
    // (a checkpointing mode on a step without blocks) until it is chosen:
    // kept until then. Its errors still come out.
    TrialBuild trial;
    ScopedDiagnosticHandler quiet(module.getContext(), [&](Diagnostic &d) {
      if (d.getSeverity() != DiagnosticSeverity::Warning &&
          d.getSeverity() != DiagnosticSeverity::Remark)
        return failure();
      trial.diagnostics.push_back(std::move(d));
      return success();
    });
    FailureOr<OwningOpRef<ModuleOp>> built =
        runOnCopy(
            module,
            [&](OpPassManager &copyPm) {
              buildStrategyPipeline(copyPm, options);
            },
            /*verify=*/false);
    if (failed(built))
      return failure();
    // The plan cleans up and lowers its module: a copy of the build, which
    // may become this pass's output as the strategy pipeline left it. The
    // cleanup is not a no-op on it (autoshard-fuse groups the AdamW
    // updates into one train.adamw_multi), so it cannot run on the build.
    OwningOpRef<ModuleOp> lowered((**built).clone());
    FailureOr<StepPlan> exact = planStepInPlace(*lowered);
    if (failed(exact))
      return failure();
    candidate.plannedBytes = exact->memory.peak();
    candidate.plannedAtPeak = peakBreakdown(exact->memory);
    if (candidate.plannedBytes <= capacity) {
      trial.module = std::move(*built);
      fittingBuilds[&candidate - choice.candidates.data()] = std::move(trial);
    }
    return candidate.plannedBytes;
  };
  // Each exact plan compiles the step once: at most kMaxExactPlans of them
  // in the search. The choice is always one whose exact plan fits; when the
  // search runs out before one does, the plans it did not build are not
  // taken on their estimate alone.
  constexpr int kMaxExactPlans = 12;
  int exactPlans = 0;
  bool exhausted = false;
  while (choice.chosen >= 0) {
    Candidate &candidate = choice.candidates[choice.chosen];
    if (candidate.plannedBytes < 0 && exactPlans++ == kMaxExactPlans) {
      exhausted = true;
      for (Candidate &c : choice.candidates)
        if (c.fits && c.plannedBytes < 0) {
          c.fits = false;
          c.overflows.push_back(
              "not confirmed: the estimate fits, but the exact memory "
              "plans of " +
              std::to_string(kMaxExactPlans) +
              " plans that fit by their estimates did not, and no more "
              "were built");
        }
      choice.chosen = -1;
      break;
    }
    FailureOr<int64_t> planned = plannedBytes(candidate);
    if (failed(planned))
      return signalPassFailure();
    if (*planned <= capacity)
      break;
    candidate.fits = false;
    candidate.overflows.push_back("the memory plan of the compiled step "
                                  "needs " +
                                  formatBytes(*planned) + " per rank, has " +
                                  formatBytes(capacity));
    // The plans that differ from it only in their schedule (bucket size,
    // prefetch depth) and hold no less by the estimate are not built one
    // by one: the search's builds go to other layouts.
    for (Candidate &other : choice.candidates)
      if (other.fits && other.plannedBytes < 0 &&
          sameLayout(other.estimate.plan, candidate.estimate.plan) &&
          other.estimate.memory.device.total() >=
              candidate.estimate.memory.device.total()) {
        other.fits = false;
        other.overflows.push_back(
            "not built: " + cost::describePlan(candidate.estimate.plan) +
            ", which differs only in its schedule and needs no more by the "
            "estimate, needs " + formatBytes(*planned) +
            " per rank by the memory plan of its compiled step");
      }
    selectCandidate(choice);
  }
  // The estimate is not the exact plan (docs/CostModel.md gives how far
  // off it is where): when it rejects every plan, or every plan without
  // offload, the exact plans of the smallest such estimates may still fit.
  auto offloads = [](const Candidate &c) { return offloadedTiers(c) != 0; };
  auto confirmSmallest = [&](function_ref<bool(const Candidate &)> among)
      -> LogicalResult {
    // The exact plan is of device memory only: a plan whose host memory or
    // NVMe the estimate does not fit stays rejected.
    auto hostAndNvmeFit = [](const Candidate &c) {
      return c.estimate.fits(std::numeric_limits<int64_t>::max());
    };
    SmallVector<Candidate *> bySize;
    for (Candidate &c : choice.candidates)
      if (c.plannedBytes < 0 && !c.fits && among(c) && hostAndNvmeFit(c))
        bySize.push_back(&c);
    llvm::stable_sort(bySize, [](const Candidate *x, const Candidate *y) {
      return x->estimate.memory.device.total() <
             y->estimate.memory.device.total();
    });
    // Eight builds, of eight layouts: a schedule variant of a layout
    // already built here (bucket size, prefetch depth) holds about what it
    // holds. While none fits, up to eight more of the layouts whose
    // estimates exceed the device by less than the estimate's worst
    // measured error (13%: docs/CostModel.md, "Step peak"; 7% on the tiny
    // models outside its grid).
    SmallVector<Candidate *> built;
    bool anyFits = false;
    for (Candidate *c : bySize) {
      if (built.size() == 16 ||
          (built.size() >= 8 &&
           (anyFits || double(c->estimate.memory.device.total()) >
                           1.15 * double(capacity))))
        break;
      if (llvm::any_of(built, [&](const Candidate *b) {
            return sameLayout(b->estimate.plan, c->estimate.plan);
          }))
        continue;
      built.push_back(c);
      FailureOr<int64_t> planned = plannedBytes(*c);
      if (failed(planned))
        return failure();
      if (*planned <= capacity) {
        c->fits = true;
        anyFits = true;
        c->overflows.clear();
      } else {
        c->overflows.push_back("the memory plan of the compiled step "
                               "needs " +
                               formatBytes(*planned) + " per rank, has " +
                               formatBytes(capacity));
      }
    }
    selectCandidate(choice);
    return success();
  };
  if (choice.chosen >= 0 && offloads(choice.candidates[choice.chosen])) {
    if (failed(confirmSmallest(
            [&](const Candidate &c) { return !offloads(c); })))
      return signalPassFailure();
    if (!offloads(choice.candidates[choice.chosen]))
      choice.reason += " (by the compiler's memory plan: the estimates fit "
                       "no plan without offload)";
  }
  if (choice.chosen < 0) {
    if (failed(confirmSmallest([](const Candidate &) { return true; })))
      return signalPassFailure();
    if (choice.chosen >= 0)
      choice.reason += exhausted ? " (by the compiler's memory plan, among the "
                                   "smallest estimates: the plans that fit by "
                                   "their estimates did not)"
                                 : " (by the compiler's memory plan: the "
                                   "estimates fit no plan)";
  }

  if (!report.empty()) {
    std::string text = formatCostReport(
        choice, report == "json" ? CostReportForm::Json
                : report == "all" ? CostReportForm::All
                                  : CostReportForm::Summary);
    if (reportFile.empty()) {
      llvm::errs() << text;
    } else {
      std::error_code error;
      llvm::raw_fd_ostream out(reportFile, error);
      if (error) {
        module.emitError() << "cannot write the cost report to '"
                           << reportFile << "': " << error.message();
        return signalPassFailure();
      }
      out << text;
    }
  }

  if (choice.chosen < 0) {
    // The smallest estimate; among equal ones, the smallest exact plan
    // built, whose need the notes then give too.
    auto sizeKey = [](const Candidate &c) {
      return std::make_pair(c.estimate.memory.device.total(),
                            c.plannedBytes >= 0
                                ? c.plannedBytes
                                : std::numeric_limits<int64_t>::max());
    };
    const Candidate *smallest = nullptr;
    for (const Candidate &c : choice.candidates)
      if (!smallest || sizeKey(c) < sizeKey(*smallest))
        smallest = &c;
    InFlightDiagnostic diag = module.emitError()
                              << "no strategy fits " << worldSize << " "
                              << cluster.device.name << " ranks";
    if (smallest) {
      diag << ": the smallest plan by the estimate, "
           << cost::describePlan(smallest->estimate.plan) << ", needs "
           << formatBytes(smallest->estimate.memory.device.total())
           << " per rank";
      for (const std::string &line : smallest->overflows)
        diag.attachNote() << line;
    }
    // What the search already tried, so the note names only what is left.
    bool checkpointingPinned = options.activationCheckpointing !=
                               strategy::ActivationCheckpointing::None;
    bool offloadPinned = options.offload != strategy::Offload::None ||
                         options.offloadParams != strategy::Offload::None;
    diag.attachNote() << "to fit: "
                      << describeWhatWouldFit(smallest, cluster, worldSize,
                                              capacity, options.memoryBudget,
                                              offloadPinned)
                      << "; the search tried "
                      << (checkpointingPinned
                              ? std::string("only --activation-checkpointing=") +
                                    strategy::stringify(
                                        options.activationCheckpointing)
                              : std::string(
                                    "every activation checkpointing mode"))
                      << (!cluster.device.canOffload()
                              ? " and no offload ('" + cluster.device.name +
                                    "' has no host link to offload to)"
                          : offloadPinned
                              ? " and only the offload tiers given"
                              : " and offload to host memory and NVMe");
    return signalPassFailure();
  }

  // Run the chosen strategy on the step.
  const StrategyOptions &chosen = choice.candidates[choice.chosen].options;
  if (chosenOut) {
    // The memory the choice was made to fit, for what is built beside it
    // (shard-compile --with-eval checks the evaluation step against it).
    *chosenOut = chosen;
    chosenOut->memoryBudget = std::to_string(capacity);
  }
  auto trial = fittingBuilds.find(choice.chosen);
  if (trial == fittingBuilds.end()) {
    OpPassManager pm(ModuleOp::getOperationName());
    buildStrategyPipeline(pm, chosen);
    if (failed(runPipeline(pm, module)))
      return signalPassFailure();
    return;
  }
  // The chosen plan's trial build is the strategy pipeline's output on a
  // copy of this module: it takes the module's place, verified once here
  // (a trial build skips the verifier after each pass), its diagnostics
  // given now as the pipeline would have given them.
  ModuleOp built = *trial->second.module;
  if (failed(verify(built)))
    return signalPassFailure();
  for (Diagnostic &diagnostic : trial->second.diagnostics)
    module.getContext()->getDiagEngine().emit(std::move(diagnostic));
  module->setAttrs(built->getAttrDictionary());
  Block *body = module.getBody();
  body->clear();
  body->getOperations().splice(body->end(), built.getBody()->getOperations());
  // The trial ran without the memory budget's passes.
  OpPassManager pm(ModuleOp::getOperationName());
  addMemoryBudgetPasses(pm, chosen);
  if (failed(runPipeline(pm, module)))
    return signalPassFailure();
}

} // namespace

void autoshard::buildAutoStrategyPipeline(OpPassManager &pm,
                                          const StrategyOptions &options,
                                          StrategyOptions *chosen) {
  pm.addPass(std::make_unique<AutoStrategyPass>(options, chosen));
}

void autoshard::registerAutoStrategyPass() {
  PassRegistration<AutoStrategyPass>();
}
