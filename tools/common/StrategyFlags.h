//===- StrategyFlags.h - the strategy flags shard-opt and shard-compile share -===//
//
// Included once by each tool's main file: command-line flags belong to
// tools, not to the libraries (which take StrategyOptions).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_TOOLS_COMMON_STRATEGYFLAGS_H
#define AUTOSHARD_TOOLS_COMMON_STRATEGYFLAGS_H

#include "autoshard/Conversion/MemoryPlan.h"
#include "autoshard/Dialect/Train/Transforms/Strategies.h"
#include "autoshard/Pipelines/Pipelines.h"

#include "llvm/Support/CommandLine.h"

#include <limits>
#include <optional>
#include <string>

namespace autoshard::tools {

inline llvm::cl::OptionCategory &strategyCategory() {
  static llvm::cl::OptionCategory category("autoshard strategy options");
  return category;
}

/// The help text of --strategy; cl::desc keeps only a pointer to it.
inline const std::string &strategyHelp() {
  static const std::string help =
      "Distribution strategy (" + autoshard::train::listStrategyNames() +
      "), or auto: the cost model chooses one for --device (docs/"
      "CostModel.md)";
  return help;
}

inline llvm::cl::opt<std::string> strategyFlag(
    "strategy", llvm::cl::desc(strategyHelp()),
    llvm::cl::value_desc("name"), llvm::cl::cat(strategyCategory()));
inline llvm::cl::opt<int64_t>
    worldSizeFlag("world-size", llvm::cl::desc("Number of ranks (default 1)"),
                  llvm::cl::init(1), llvm::cl::cat(strategyCategory()));
inline llvm::cl::opt<int64_t> shardGroupSizeFlag(
    "shard-group-size",
    llvm::cl::desc("Ranks per shard group of the hybrid strategy; it divides "
                   "the world size"),
    llvm::cl::init(0), llvm::cl::cat(strategyCategory()));
inline llvm::cl::opt<bool> reshardAfterForwardFlag(
    "reshard-after-forward",
    llvm::cl::desc("Release gathered parameters after the forward pass and "
                   "gather them again for the backward pass (default true; "
                   "false is FSDP's SHARD_GRAD_OP)"),
    llvm::cl::init(true), llvm::cl::cat(strategyCategory()));
inline llvm::cl::opt<int64_t> bucketCapMbFlag(
    "bucket-cap-mb",
    llvm::cl::desc("Largest bucket of merged collectives, in MiB (default "
                   "25, as PyTorch DDP)"),
    llvm::cl::init(25), llvm::cl::cat(strategyCategory()));

inline llvm::cl::opt<std::string> reduceDtypeFlag(
    "reduce-dtype",
    llvm::cl::desc("Element type gradients are reduced in: gradient (their "
                   "own, the default) or f32 (bf16 gradients cast up before "
                   "the reduction; parameters still gathered in bf16)"),
    llvm::cl::init("gradient"), llvm::cl::cat(strategyCategory()));
inline llvm::cl::opt<std::string> reduceEveryFlag(
    "reduce-every",
    llvm::cl::desc("When sharded gradients are reduce-scattered under "
                   "gradient accumulation: step (once, after the last "
                   "micro-batch; the default) or micro-batch (each "
                   "micro-batch's gradient when complete, summed into the "
                   "shard, as DeepSpeed's ZeRO-2: K times the bytes, no "
                   "full gradient kept across micro-batches)"),
    llvm::cl::init("step"), llvm::cl::cat(strategyCategory()));

inline llvm::cl::list<std::string> paramGroupFlag(
    "param-group",
    llvm::cl::desc("Give the parameters whose whole name matches REGEX the "
                   "placements of PRESET (e.g. ddp='wte|wpe' keeps the "
                   "embeddings replicated under zero3); repeatable, the "
                   "first match decides"),
    llvm::cl::value_desc("PRESET=REGEX"), llvm::cl::cat(strategyCategory()));
inline llvm::cl::list<std::string> keepGatheredFlag(
    "keep-gathered",
    llvm::cl::desc("Keep the sharded parameters whose whole name matches "
                   "REGEX gathered from the forward pass to the backward pass "
                   "instead of gathering them again (FSDP2's "
                   "reshard_after_forward=False on their modules, e.g. the "
                   "last block's); repeatable"),
    llvm::cl::value_desc("REGEX"), llvm::cl::cat(strategyCategory()));
inline llvm::cl::opt<int64_t> persistenceThresholdFlag(
    "persistence-threshold",
    llvm::cl::desc("Keep parameters of at most this many elements whole, "
                   "with sharded gradients and states (DeepSpeed's "
                   "stage3_param_persistence_threshold; default 0: none)"),
    llvm::cl::init(0), llvm::cl::cat(strategyCategory()));

inline llvm::cl::opt<bool> forwardOnlyFlag(
    "forward-only",
    llvm::cl::desc("Compile an evaluation step: the forward pass and the "
                   "loss of the whole batch, no backward pass and no "
                   "optimizer (the binary's --load-params gives it trained "
                   "parameters)"),
    llvm::cl::init(false), llvm::cl::cat(strategyCategory()));

inline llvm::cl::opt<bool> overlapFlag(
    "overlap",
    llvm::cl::desc("Run collectives asynchronously, overlapped with compute: "
                   "reductions start as soon as their inputs exist, "
                   "parameter gathers are prefetched (default true)"),
    llvm::cl::init(true), llvm::cl::cat(strategyCategory()));
inline llvm::cl::opt<int64_t> prefetchDepthFlag(
    "prefetch-depth",
    llvm::cl::desc("Parameter gathers in flight ahead of the one in use: "
                   "the rate limit on gathered units (default 1; 0: none)"),
    llvm::cl::init(1), llvm::cl::cat(strategyCategory()));

inline llvm::cl::opt<std::string> activationCheckpointingFlag(
    "activation-checkpointing",
    llvm::cl::desc("Recompute activations in the backward pass: none (the "
                   "default), blocks (every op of each transformer block) "
                   "or selective (all but matrix products and attention)"),
    llvm::cl::init("none"), llvm::cl::cat(strategyCategory()));
inline llvm::cl::opt<std::string> memoryBudgetFlag(
    "memory-budget",
    llvm::cl::desc("Plan each rank's memory and fail at compile time if it "
                   "exceeds this size (bytes, or 80GiB, 1.5GB, ...)"),
    llvm::cl::value_desc("size"), llvm::cl::cat(strategyCategory()));

inline llvm::cl::opt<std::string> offloadFlag(
    "offload",
    llvm::cl::desc("Where optimizer states and fp32 master weights live, "
                   "with the optimizer step on the host for cpu and nvme: "
                   "none (device, the default), cpu (host memory; "
                   "ZeRO-Offload) or nvme (files of the binary's "
                   "--offload-dir; ZeRO-Infinity)"),
    llvm::cl::init("none"), llvm::cl::cat(strategyCategory()));
inline llvm::cl::opt<std::string> offloadParamsFlag(
    "offload-params",
    llvm::cl::desc("Where sharded parameters live (zero3, fsdp, hybrid): "
                   "none (the default), cpu or nvme"),
    llvm::cl::init("none"), llvm::cl::cat(strategyCategory()));

inline llvm::cl::opt<std::string> deviceFlag(
    "device",
    llvm::cl::desc("--strategy=auto: the device the ranks are, a file of "
                   "data/devices (a100-80gb, h100-80gb, h200-141gb, "
                   "cpu-node; default cpu-node) or the path of a device "
                   "file of your own (NAME.json in the same format)"),
    llvm::cl::init("cpu-node"), llvm::cl::cat(strategyCategory()));
inline llvm::cl::opt<int64_t> nodesFlag(
    "nodes",
    llvm::cl::desc("--strategy=auto: nodes (default: from the world size "
                   "and the device's devices per node)"),
    llvm::cl::init(0), llvm::cl::cat(strategyCategory()));
inline llvm::cl::opt<int64_t> gpusPerNodeFlag(
    "gpus-per-node",
    llvm::cl::desc("--strategy=auto: ranks per node (default: from the "
                   "world size and the device)"),
    llvm::cl::init(0), llvm::cl::cat(strategyCategory()));
inline llvm::cl::opt<std::string> costReportFlag(
    "cost-report",
    llvm::cl::desc("--strategy=auto: print every candidate plan's memory, "
                   "traffic and estimated step time, and the choice "
                   "(text, or json for tools)"),
    llvm::cl::ValueOptional, llvm::cl::cat(strategyCategory()));
inline llvm::cl::opt<std::string> costReportFileFlag(
    "cost-report-file",
    llvm::cl::desc("--strategy=auto: write the cost report here (default "
                   "stderr)"),
    llvm::cl::cat(strategyCategory()));

/// An error message for flags that make no valid plan, naming the bad value
/// and the valid ones.
inline std::optional<std::string> validateStrategyFlags() {
  bool automatic = strategyFlag == "auto";
  if (!automatic && !autoshard::train::lookupStrategy(strategyFlag))
    return "unknown strategy '" + strategyFlag.getValue() +
           "'; valid strategies: " + autoshard::train::listStrategyNames() +
           ", auto";
  if (!automatic && (deviceFlag.getNumOccurrences() ||
                     nodesFlag.getNumOccurrences() ||
                     gpusPerNodeFlag.getNumOccurrences() ||
                     costReportFlag.getNumOccurrences() ||
                     costReportFileFlag.getNumOccurrences()))
    return "--device, --nodes, --gpus-per-node, --cost-report and "
           "--cost-report-file are for --strategy=auto";
  if (costReportFlag.getNumOccurrences() && !costReportFlag.empty() &&
      costReportFlag != "text" && costReportFlag != "json")
    return "unknown --cost-report '" + costReportFlag.getValue() +
           "'; valid: text, json";
  if (nodesFlag < 0 || gpusPerNodeFlag < 0)
    return "--nodes and --gpus-per-node must be at least 1";
  if (worldSizeFlag < 1)
    return "--world-size must be at least 1, got " +
           std::to_string(worldSizeFlag.getValue());
  if (bucketCapMbFlag < 1)
    return "--bucket-cap-mb must be at least 1, got " +
           std::to_string(bucketCapMbFlag.getValue());
  // The passes count the cap in bytes, as an int64.
  if (bucketCapMbFlag > std::numeric_limits<int64_t>::max() >> 20)
    return "--bucket-cap-mb must be at most " +
           std::to_string(std::numeric_limits<int64_t>::max() >> 20) +
           " (8 EiB in bytes), got " +
           std::to_string(bucketCapMbFlag.getValue());
  // Given but empty is an error too, not "no budget".
  if (memoryBudgetFlag.getNumOccurrences() > 0) {
    mlir::FailureOr<int64_t> budget =
        autoshard::parseByteSize(memoryBudgetFlag.getValue());
    if (mlir::failed(budget) || *budget <= 0)
      return "--memory-budget '" + memoryBudgetFlag.getValue() +
             "' is not a positive size; write bytes or a size with a unit, "
             "such as 80GiB or 1.5GB";
  }
  if (activationCheckpointingFlag != "none" &&
      activationCheckpointingFlag != "blocks" &&
      activationCheckpointingFlag != "selective")
    return "unknown --activation-checkpointing '" +
           activationCheckpointingFlag.getValue() +
           "'; valid: none, blocks, selective";
  for (auto *flag : {&offloadFlag, &offloadParamsFlag})
    if (*flag != "none" && *flag != "cpu" && *flag != "nvme")
      return "unknown --" + flag->ArgStr.str() + " '" + flag->getValue() +
             "'; valid: none, cpu, nvme";
  if (prefetchDepthFlag < 0)
    return "--prefetch-depth must be at least 0, got " +
           std::to_string(prefetchDepthFlag.getValue());
  if (reduceDtypeFlag != "gradient" && reduceDtypeFlag != "f32")
    return "unknown --reduce-dtype '" + reduceDtypeFlag.getValue() +
           "'; valid: gradient, f32";
  if (reduceEveryFlag != "step" && reduceEveryFlag != "micro-batch")
    return "unknown --reduce-every '" + reduceEveryFlag.getValue() +
           "'; valid: step, micro-batch";
  // auto chooses the placements and reshard points itself.
  if (strategyFlag == "auto" && (paramGroupFlag.getNumOccurrences() ||
                                 keepGatheredFlag.getNumOccurrences()))
    return std::string(paramGroupFlag.getNumOccurrences() ? "--param-group"
                                                          : "--keep-gathered") +
           " refines a preset's plan; --strategy=auto chooses the plan "
           "itself (give a preset: ddp, zero1, zero2, zero3, fsdp or "
           "hybrid)";
  // An evaluation step has no optimizer, backward pass or micro-batches.
  if (forwardOnlyFlag) {
    if (automatic)
      return "--forward-only compiles an evaluation step; --strategy=auto "
             "prices training steps (give a preset: ddp, zero1, zero2, "
             "zero3, fsdp or hybrid)";
    if (offloadFlag != "none")
      return "--offload keeps optimizer states off the device; a "
             "--forward-only step has none";
    if (activationCheckpointingFlag != "none")
      return "--activation-checkpointing recomputes what the backward pass "
             "reads; a --forward-only step has none";
    if (reduceEveryFlag.getNumOccurrences() ||
        reduceDtypeFlag.getNumOccurrences())
      return "--reduce-every and --reduce-dtype set how gradients are "
             "reduced; a --forward-only step has none";
  }
  bool hybrid = strategyFlag == "hybrid";
  if (hybrid && (shardGroupSizeFlag < 1 ||
                 worldSizeFlag % shardGroupSizeFlag != 0))
    return "--strategy=hybrid needs --shard-group-size dividing the world "
           "size " +
           std::to_string(worldSizeFlag.getValue()) + ", got " +
           std::to_string(shardGroupSizeFlag.getValue());
  if (!hybrid && shardGroupSizeFlag.getNumOccurrences() > 0)
    return "--shard-group-size is for --strategy=hybrid; '" +
           strategyFlag.getValue() + "' shards over the whole world";
  return std::nullopt;
}

inline StrategyOptions strategyOptionsFromFlags(bool exposeGradients) {
  StrategyOptions options;
  options.strategy = strategyFlag;
  options.worldSize = worldSizeFlag;
  options.exposeGradients = exposeGradients;
  options.forwardOnly = forwardOnlyFlag;
  options.shardGroupSize = shardGroupSizeFlag;
  options.reshardAfterForward = reshardAfterForwardFlag;
  options.bucketCapMb = bucketCapMbFlag;
  options.reduceDtype = reduceDtypeFlag;
  options.reduceEvery = reduceEveryFlag;
  options.paramGroups.assign(paramGroupFlag.begin(), paramGroupFlag.end());
  options.persistenceThreshold = persistenceThresholdFlag;
  options.keepGathered.assign(keepGatheredFlag.begin(), keepGatheredFlag.end());
  options.overlap = overlapFlag;
  options.prefetchDepth = prefetchDepthFlag;
  options.memoryBudget = memoryBudgetFlag;
  options.activationCheckpointing = activationCheckpointingFlag;
  options.offload = offloadFlag;
  options.offloadParams = offloadParamsFlag;
  options.device = deviceFlag;
  options.nodes = nodesFlag;
  options.ranksPerNode = gpusPerNodeFlag;
  if (costReportFlag.getNumOccurrences())
    options.costReport =
        costReportFlag.empty() ? "text" : costReportFlag.getValue();
  options.costReportFile = costReportFileFlag;
  return options;
}

/// ` NAME={"a","b"}` (each value quoted in braces: a regular expression
/// may hold the pipeline syntax's commas), or nothing.
inline std::string regexListText(const char *name,
                                 const std::vector<std::string> &values) {
  if (values.empty())
    return "";
  std::string text = std::string(" ") + name + "={";
  for (size_t i = 0; i < values.size(); ++i)
    text += (i ? ",\"" : "\"") + values[i] + "\"";
  return text + "}";
}

/// The options as the textual `autoshard-strategy{...}` pipeline.
inline std::string strategyPipelineText(const StrategyOptions &options) {
  return "autoshard-strategy{strategy=" + options.strategy +
         " world-size=" + std::to_string(options.worldSize) +
         " shard-group-size=" + std::to_string(options.shardGroupSize) +
         " reshard-after-forward=" +
         (options.reshardAfterForward ? "true" : "false") +
         " bucket-cap-mb=" + std::to_string(options.bucketCapMb) +
         " reduce-dtype=" + options.reduceDtype +
         " reduce-every=" + options.reduceEvery +
         regexListText("param-groups", options.paramGroups) +
         regexListText("keep-gathered", options.keepGathered) +
         " persistence-threshold=" +
         std::to_string(options.persistenceThreshold) +
         " overlap=" + (options.overlap ? "true" : "false") +
         " prefetch-depth=" + std::to_string(options.prefetchDepth) +
         " activation-checkpointing=" + options.activationCheckpointing +
         " offload=" + options.offload +
         " offload-params=" + options.offloadParams +
         (options.memoryBudget.empty()
              ? std::string()
              : " memory-budget=" + options.memoryBudget) +
         " expose-gradients=" + (options.exposeGradients ? "true" : "false") +
         " forward-only=" + (options.forwardOnly ? "true" : "false") +
         (options.strategy == "auto"
              ? " device=" + options.device +
                    " nodes=" + std::to_string(options.nodes) +
                    " ranks-per-node=" + std::to_string(options.ranksPerNode) +
                    (options.costReport.empty()
                         ? std::string()
                         : " cost-report=" + options.costReport) +
                    (options.costReportFile.empty()
                         ? std::string()
                         : " cost-report-file=" + options.costReportFile)
              : std::string()) +
         "}";
}

} // namespace autoshard::tools

#endif // AUTOSHARD_TOOLS_COMMON_STRATEGYFLAGS_H
