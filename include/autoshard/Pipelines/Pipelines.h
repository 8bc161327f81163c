//===- Pipelines.h - the strategy and compile pipelines ---------*- C++ -*-===//

#ifndef AUTOSHARD_PIPELINES_PIPELINES_H
#define AUTOSHARD_PIPELINES_PIPELINES_H

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"

#include <string>
#include <vector>

namespace autoshard {

/// What `shard-opt --strategy` and the `autoshard-strategy` pipeline take.
struct StrategyOptions {
  /// A named strategy (Strategies.h).
  std::string strategy = "ddp";
  /// Ranks the step runs on.
  int64_t worldSize = 1;
  /// Return each parameter's gradient as a `grad` result (autodiff).
  bool exposeGradients = false;
  /// An evaluation step: the forward pass and the loss only (autodiff's
  /// forward-only).
  bool forwardOnly = false;
  /// Ranks per shard group of the hybrid strategy; 0 for the others.
  int64_t shardGroupSize = 0;
  /// Release gathered parameters after the forward pass.
  bool reshardAfterForward = true;
  /// Largest bucket grouping merges, in MiB.
  int64_t bucketCapMb = 25;
  /// Element type gradients are reduced in: "gradient" or "f32".
  std::string reduceDtype = "gradient";
  /// When sharded gradients are reduced under gradient accumulation:
  /// "step" or "micro-batch".
  std::string reduceEvery = "step";
  /// Parameter groups, PRESET=REGEX, first match first.
  std::vector<std::string> paramGroups;
  /// Parameters of at most this many elements stay whole (0: none).
  int64_t persistenceThreshold = 0;
  /// Sharded parameters kept gathered from the forward pass to the
  /// backward pass: whole-name regular expressions, any match.
  std::vector<std::string> keepGathered;
  /// Split collectives into start/wait pairs that overlap with compute.
  bool overlap = true;
  /// Parameter gathers in flight ahead of the one in use.
  int64_t prefetchDepth = 1;
  /// Activation checkpointing: "none", "blocks" or "selective".
  std::string activationCheckpointing = "none";
  /// For strategy "auto": the device of data/devices the ranks are, nodes
  /// and ranks per node (0: from the world size and the device), and the
  /// cost report ("", "text", "json") and its file (empty: stderr).
  std::string device = "cpu-node";
  int64_t nodes = 0;
  int64_t ranksPerNode = 0;
  std::string costReport;
  std::string costReportFile;
  /// For strategy "auto": also search bucket caps, prefetch depths and the
  /// persistence-threshold mix where their options are at their defaults.
  bool searchSchedule = true;
  /// Offload (autoshard-offload): where optimizer states and fp32 master
  /// weights, and sharded parameters, live: "none" (device), "cpu" (host
  /// memory) or "nvme" (files of the binary's --offload-dir).
  std::string offload = "none";
  std::string offloadParams = "none";
  /// Plan memory and fail above this budget ("80GiB"); empty: no check.
  std::string memoryBudget;
};

/// Derives the backward pass and optimizer when the step has only a forward
/// pass, then plans and partitions it: the output is the per-rank program
/// with its collectives, verified after each phase. `built`, when not null,
/// receives the options the step is built with: `options` themselves, or,
/// for strategy "auto", the chosen plan's once the pipeline has run.
void buildStrategyPipeline(mlir::OpPassManager &pm,
                           const StrategyOptions &options,
                           StrategyOptions *built = nullptr);

/// Lowers a per-rank step to the LLVM dialect: runtime calls and the
/// manifest (`autoshard-lower-to-runtime`), then func/arith to LLVM. With
/// `evaluationEntry` the step becomes a training binary's evaluation step
/// (`autoshard_eval_step`, `autoshard_eval_manifest`).
void buildLowerToLLVMPipeline(mlir::OpPassManager &pm,
                              bool evaluationEntry = false);

/// The dialects and interfaces the tools load: train, shard, func, arith,
/// llvm, and the convert-to-llvm interfaces of the dialects the lowering
/// emits.
void registerAutoshardDialects(mlir::DialectRegistry &registry);

/// Registers the project's passes and the `autoshard-strategy` and
/// `autoshard-lower-to-llvm` pipelines with the global registry.
void registerAutoshardPasses();

} // namespace autoshard

#endif // AUTOSHARD_PIPELINES_PIPELINES_H
