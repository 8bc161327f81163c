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

namespace {
struct PlanPass : autoshard::train::impl::PlanPassBase<PlanPass> {
  using PlanPassBase::PlanPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<StrategyPreset> preset = lookupStrategy(strategy);
    if (!preset) {
      module.emitError() << "unknown strategy '" << strategy
                         << "'; valid strategies: " << listStrategyNames();
      return signalPassFailure();
    }
    if (worldSize < 1) {
      module.emitError() << "world size must be at least 1, got "
                         << static_cast<int64_t>(worldSize);
      return signalPassFailure();
    }
    if (bucketCapMb < 1) {
      module.emitError() << "bucket cap must be at least 1 MiB, got "
                         << static_cast<int64_t>(bucketCapMb);
      return signalPassFailure();
    }
    std::optional<ReduceDtype> reduce = symbolizeReduceDtype(reduceDtype);
    if (!reduce) {
      module.emitError() << "unknown reduce dtype '" << reduceDtype
                         << "'; valid: gradient, f32";
      return signalPassFailure();
    }
    SmallVector<int64_t> gridShape{worldSize};
    SmallVector<int16_t> shardAxes{0};
    if (preset->hybrid) {
      if (shardGroupSize < 1 || worldSize % shardGroupSize != 0) {
        module.emitError()
            << "the hybrid strategy needs a shard group size that divides "
               "the world size "
            << static_cast<int64_t>(worldSize) << ", got "
            << static_cast<int64_t>(shardGroupSize)
            << " (--shard-group-size)";
        return signalPassFailure();
      }
      gridShape = {worldSize / shardGroupSize, shardGroupSize};
      shardAxes = {1};
    } else if (shardGroupSize != 0) {
      module.emitError() << "a shard group size is for the hybrid strategy; '"
                         << strategy << "' shards over the whole world";
      return signalPassFailure();
    }
    FailureOr<FunctionOpInterface> step = findStepFunction(module);
    if (failed(step))
      return signalPassFailure();
    if (auto existing = (*step)->getAttr(TrainDialect::kPlanAttrName)) {
      step->emitOpError() << "already has a plan " << existing
                          << "; a step is planned once";
      return signalPassFailure();
    }

    // The grid is built detached so the symbol table can rename it if the
    // module already defines a @world.
    SymbolTable symbols(module);
    OpBuilder builder(&getContext());
    auto grid = shard::GridOp::create(builder, module.getLoc(), "world",
                                      gridShape);
    symbols.insert(grid, module.getBody()->begin());

    auto plan = PlanAttr::get(
        &getContext(), StringAttr::get(&getContext(), preset->name),
        FlatSymbolRefAttr::get(grid.getSymNameAttr()), preset->optimizerStates,
        preset->gradients, preset->parameters, shardAxes, preset->unit,
        reshardAfterForward ? Reshard::AfterForward : Reshard::AfterBackward,
        bucketCapMb, *reduce);
    (*step)->setAttr(TrainDialect::kPlanAttrName, plan);
  }
};
} // namespace
