//===- PlanPass.cpp - attach the plan of a named strategy -----------------===//

#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "autoshard/Dialect/Train/Transforms/Passes.h"
#include "autoshard/Dialect/Train/Transforms/Strategies.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"


namespace autoshard::train {
#define GEN_PASS_DEF_PLANPASS
#include "autoshard/Dialect/Train/Transforms/Passes.h.inc"
} // namespace autoshard::train

using namespace mlir;
using namespace autoshard::train;
namespace strategy = autoshard::strategy;

namespace {
struct PlanPass : autoshard::train::impl::PlanPassBase<PlanPass> {
  using PlanPassBase::PlanPassBase;

  /// The groups of --param-group (PRESET=REGEX, in order) and then of
  /// --persistence-threshold. A group takes its preset's placements and
  /// unit; on a hybrid plan, a group of a non-hybrid sharded preset shards
  /// over every grid axis.
  FailureOr<SmallVector<ParamGroupAttr>>
  buildGroups(ModuleOp module, const strategy::StrategyPreset &plan,
              ArrayRef<int16_t> planAxes, int64_t gridRank) {
    MLIRContext *ctx = &getContext();
    auto emitError = [&] { return module.emitError(); };
    SmallVector<ParamGroupAttr> groups;
    for (const std::string &entry : paramGroups) {
      auto [name, regex] = StringRef(entry).split('=');
      const strategy::StrategyPreset *preset = strategy::lookupStrategy(name);
      if (!preset || regex.empty()) {
        module.emitError()
            << "parameter group '" << entry
            << "' must be PRESET=REGEX with PRESET one of "
            << strategy::listStrategyNames();
        return failure();
      }
      SmallVector<int16_t> axes;
      if (preset->hybrid && !plan.hybrid) {
        module.emitError() << "parameter group '" << entry
                           << "': a hybrid group needs the hybrid strategy's "
                              "2-D grid";
        return failure();
      }
      if (plan.hybrid && !preset->hybrid)
        for (int64_t axis = 0; axis < gridRank; ++axis)
          axes.push_back(static_cast<int16_t>(axis));
      ParamGroupAttr group = ParamGroupAttr::getChecked(
          emitError, ctx, StringAttr::get(ctx, regex), /*maxElements=*/int64_t{0},
          toAttr(preset->optimizerStates), toAttr(preset->gradients),
          toAttr(preset->parameters), toAttr(preset->unit),
          ArrayRef<int16_t>(axes));
      if (!group)
        return failure();
      groups.push_back(group);
    }
    if (persistenceThreshold > 0) {
      if (plan.parameters != strategy::Placement::Sharded) {
        module.emitError()
            << "a persistence threshold keeps small parameters whole under "
               "a strategy that shards parameters (zero3, fsdp, hybrid); '"
            << plan.name << "' does not shard them";
        return failure();
      }
      // Small parameters stay whole; their gradients and states stay
      // sharded (DeepSpeed's persistent parameters).
      groups.push_back(ParamGroupAttr::get(
          ctx, StringAttr(), static_cast<int64_t>(persistenceThreshold),
          toAttr(plan.optimizerStates), toAttr(plan.gradients),
          Placement::Replicated, toAttr(plan.unit), planAxes));
    }
    return groups;
  }

  /// The plan's keep_gathered from --keep-gathered (one alternative per
  /// expression), or null. Each expression must be valid and select a
  /// parameter the plan shards, under reshard after the forward pass.
  FailureOr<StringAttr> buildKeepGathered(ModuleOp module,
                                          const StepSignature &sig,
                                          const strategy::StrategyPreset &plan,
                                          ArrayRef<ParamGroupAttr> groups) {
    if (keepGathered.empty())
      return StringAttr();
    if (!reshardAfterForward) {
      module.emitError() << "--keep-gathered keeps some parameters gathered "
                            "through the backward pass; with "
                            "--reshard-after-forward=false every parameter "
                            "already is";
      return failure();
    }
    std::string joined;
    for (const std::string &regex : keepGathered) {
      std::string error;
      llvm::Regex anchored = wholeNameRegex(regex);
      if (regex.empty() || !anchored.isValid(error)) {
        module.emitError() << "--keep-gathered '" << regex
                           << "' is not a valid regular expression"
                           << (error.empty() ? "" : ": " + error);
        return failure();
      }
      StringRef whole, sharded;
      bool matches = false;
      for (const StepValue &arg : sig.getArgs()) {
        if (arg.role != Role::Param)
          continue;
        ParamGroupAttr group =
            firstSelectingGroup(groups, arg.name, arg.type.getNumElements());
        Placement params =
            group ? group.getParameters() : toAttr(plan.parameters);
        bool selected = anchored.match(arg.name);
        if (params == Placement::Sharded) {
          matches |= selected;
          if (sharded.empty())
            sharded = arg.name;
        } else if (selected && whole.empty()) {
          whole = arg.name;
        }
      }
      if (!matches) {
        InFlightDiagnostic diag = module.emitError();
        diag << "--keep-gathered '" << regex
             << "' selects no parameter that the plan shards";
        if (!whole.empty())
          diag << " ('" << whole << "' is kept whole anyway)";
        diag << "; it applies to the sharded parameters of zero3, fsdp and "
                "hybrid, named whole";
        if (!sharded.empty())
          diag << ", such as '" << sharded << "'";
        return failure();
      }
      joined += (joined.empty() ? "(" : "|(") + regex + ")";
    }
    return StringAttr::get(&getContext(), joined);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    const strategy::StrategyPreset *preset = strategy::lookupStrategy(strategy);
    if (!preset) {
      module.emitError() << "unknown strategy '" << strategy
                         << "'; valid strategies: "
                         << strategy::listStrategyNames();
      return signalPassFailure();
    }
    std::string numbers = strategy::verifyPlanNumbers(
        preset, worldSize, shardGroupSize, bucketCapMb, persistenceThreshold);
    if (!numbers.empty()) {
      module.emitError() << numbers;
      return signalPassFailure();
    }
    if (reduceEvery == strategy::ReduceEvery::MicroBatch &&
        preset->gradients != strategy::Placement::Sharded &&
        llvm::none_of(paramGroups, [](const std::string &entry) {
          const strategy::StrategyPreset *group =
              strategy::lookupStrategy(StringRef(entry).split('=').first);
          return group && group->gradients == strategy::Placement::Sharded;
        })) {
      module.emitError()
          << "--reduce-every=micro-batch reduce-scatters sharded gradients "
             "every micro-batch; '"
          << strategy
          << "' keeps gradients whole (use zero2, zero3, fsdp or hybrid, or "
             "a parameter group of one of them)";
      return signalPassFailure();
    }
    SmallVector<int64_t> gridShape{worldSize};
    SmallVector<int16_t> shardAxes{0};
    if (preset->hybrid) {
      gridShape = {worldSize / shardGroupSize, shardGroupSize};
      shardAxes = {1};
    }
    FailureOr<FunctionOpInterface> step = findStepFunction(module);
    if (failed(step))
      return signalPassFailure();
    if (auto existing = (*step)->getAttr(TrainDialect::kPlanAttrName)) {
      step->emitOpError() << "already has a plan " << existing
                          << "; a step is planned once (shard-opt --strategy "
                             "and shard-compile plan the step themselves: "
                             "give them the step before any plan, such as "
                             "shard-gen's output)";
      return signalPassFailure();
    }

    // The grid is built detached so the symbol table can rename it if the
    // module already defines a @world.
    // It goes into the module that holds the step (a nested one, too),
    // where the step's symbol lookups find it.
    ModuleOp scope = (*step)->getParentOfType<ModuleOp>();
    SymbolTable symbols(scope);
    OpBuilder builder(&getContext());
    auto grid = shard::GridOp::create(builder, scope.getLoc(), "world",
                                      gridShape);
    symbols.insert(grid, scope.getBody()->begin());

    FailureOr<SmallVector<ParamGroupAttr>> groups =
        buildGroups(module, *preset, shardAxes,
                    static_cast<int64_t>(gridShape.size()));
    if (failed(groups))
      return signalPassFailure();
    // A --param-group whose expression matches no parameter of a step that
    // has some is a typo, not a plan (the first groups are those of
    // --param-group, in order).
    StepSignature sig(*step);
    for (auto [entry, group] : llvm::zip(paramGroups, *groups)) {
      StringRef example;
      bool matches = false;
      for (const StepValue &arg : sig.getArgs()) {
        if (arg.role != Role::Param)
          continue;
        if (example.empty())
          example = arg.name;
        matches |= group.selects(arg.name, arg.type.getNumElements());
      }
      if (!matches && !example.empty()) {
        module.emitError()
            << "parameter group '" << entry
            << "' matches no parameter of the step; its regular expression "
               "must match a whole parameter name, such as '"
            << example << "'";
        return signalPassFailure();
      }
    }

    FailureOr<StringAttr> keep =
        buildKeepGathered(module, sig, *preset, *groups);
    if (failed(keep))
      return signalPassFailure();

    auto plan = PlanAttr::get(
        &getContext(), StringAttr::get(&getContext(), preset->name),
        FlatSymbolRefAttr::get(grid.getSymNameAttr()),
        toAttr(preset->optimizerStates), toAttr(preset->gradients),
        toAttr(preset->parameters), shardAxes, toAttr(preset->unit),
        reshardAfterForward ? Reshard::AfterForward : Reshard::AfterBackward,
        bucketCapMb, toAttr(reduceDtype), toAttr(reduceEvery), *groups,
        *keep);
    (*step)->setAttr(TrainDialect::kPlanAttrName, plan);
  }
};
} // namespace
