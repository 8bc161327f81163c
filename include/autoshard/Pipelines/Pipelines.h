//===- Pipelines.h - the strategy and compile pipelines ---------*- C++ -*-===//

#ifndef AUTOSHARD_PIPELINES_PIPELINES_H
#define AUTOSHARD_PIPELINES_PIPELINES_H

#include "autoshard/Strategy/CommandLine.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <string>
#include <vector>

namespace autoshard {

/// The help of the strategy option, which names every preset.
const char *strategyOptionHelp();

/// What `shard-opt --strategy`, `shard-compile` and the `autoshard-strategy`
/// pipeline take: one field per entry of StrategyOptions.def, with its
/// default.
struct StrategyOptions {
#define STRATEGY_OPTION(TYPE, FIELD, NAME, DEFAULT, HELP) TYPE FIELD = DEFAULT;
#define STRATEGY_LIST_OPTION(FIELD, NAME, VALUE_NAME, HELP)                    \
  std::vector<std::string> FIELD;
#include "autoshard/Pipelines/StrategyOptions.def"

  /// For strategy "auto": also search bucket caps, prefetch depths and the
  /// persistence-threshold mix where their options are at their defaults
  /// (tests turn it off to see one plan per preset; not an option).
  bool searchSchedule = true;
};

/// The options of StrategyOptions.def as a pass pipeline's options:
/// `autoshard-strategy{strategy=zero3 world-size=8}`.
struct StrategyPipelineOptions
    : public mlir::PassPipelineOptions<StrategyPipelineOptions> {
#define STRATEGY_OPTION(TYPE, FIELD, NAME, DEFAULT, HELP)                      \
  Option<TYPE> FIELD{*this, NAME, llvm::cl::desc(HELP), llvm::cl::init(DEFAULT)};
#define STRATEGY_LIST_OPTION(FIELD, NAME, VALUE_NAME, HELP)                    \
  ListOption<std::string> FIELD{*this, NAME, llvm::cl::desc(HELP)};
#include "autoshard/Pipelines/StrategyOptions.def"

  /// The values as a plain, copyable struct.
  StrategyOptions getOptions() const;
};

/// The options as the textual `autoshard-strategy{...}` pipeline, which
/// StrategyPipelineOptions parses back to the same values.
std::string strategyPipelineText(const StrategyOptions &options);

/// "" when the options' values can make a plan, else what is wrong with
/// them and what would be right: ranges, spellings, the options that only
/// one kind of strategy takes. (Whether an option was given at all is the
/// tools' concern.)
std::string verifyStrategyOptions(const StrategyOptions &options);

/// Derives the backward pass and optimizer when the step has only a forward
/// pass, then plans and partitions it: the output is the per-rank program
/// with its collectives, verified after each phase. `built`, when not null,
/// receives the options the step is built with: `options` themselves, or,
/// for strategy "auto", the chosen plan's once the pipeline has run.
void buildStrategyPipeline(mlir::OpPassManager &pm,
                           const StrategyOptions &options,
                           StrategyOptions *built = nullptr);

/// The passes buildStrategyPipeline ends with under a memory budget (none
/// without one): the step's memory plan as an attribute, and the check of
/// its peak against `options.memoryBudget`.
void addMemoryBudgetPasses(mlir::OpPassManager &pm,
                           const StrategyOptions &options);

/// Lowers a per-rank step to the LLVM dialect: the cleanup
/// (addLoweringCleanupPasses), runtime calls and the manifest
/// (`autoshard-lower-to-runtime`), then func/arith to LLVM. With
/// `evaluationEntry` the step becomes a training binary's evaluation step
/// (`autoshard_eval_step`, `autoshard_eval_manifest`); `cleanedUp` leaves
/// the cleanup out for a step that had it already (shard-compile's, whose
/// plan report and memory checks read the cleaned step before lowering).
void buildLowerToLLVMPipeline(mlir::OpPassManager &pm,
                              bool evaluationEntry = false,
                              bool cleanedUp = false);

/// The dialects and interfaces the tools load: train, shard, func, arith,
/// llvm, and the convert-to-llvm interfaces of the dialects the lowering
/// emits.
void registerAutoshardDialects(mlir::DialectRegistry &registry);

/// Registers the project's passes and the `autoshard-strategy` and
/// `autoshard-lower-to-llvm` pipelines with the global registry.
void registerAutoshardPasses();

} // namespace autoshard

#endif // AUTOSHARD_PIPELINES_PIPELINES_H
