//===- PartitionPass.cpp - apply a plan: the per-rank training step -------===//

#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "autoshard/Dialect/Train/Transforms/BatchResize.h"
#include "autoshard/Dialect/Train/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace autoshard::train {
#define GEN_PASS_DEF_PARTITIONPASS
#include "autoshard/Dialect/Train/Transforms/Passes.h.inc"
} // namespace autoshard::train

using namespace mlir;
using namespace autoshard::train;

namespace {

/// The plan's grid, resolved: its symbol and static shape.
struct Grid {
  shard::GridOp op;
  int64_t size = 1;
  SmallVector<shard::GridAxis> allAxes;
};

FailureOr<Grid> resolveGrid(FunctionOpInterface step, PlanAttr plan) {
  auto gridOp = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
      step, plan.getGrid());
  if (!gridOp) {
    step.emitOpError() << "plan refers to " << plan.getGrid()
                       << ", which is not a shard.grid";
    return failure();
  }
  Grid grid;
  grid.op = gridOp;
  for (auto [axis, dim] : llvm::enumerate(gridOp.getShape())) {
    if (ShapedType::isDynamic(dim)) {
      gridOp.emitOpError() << "has a dynamic axis " << axis
                           << "; a training plan needs a static grid";
      return failure();
    }
    grid.size *= dim;
    grid.allAxes.push_back(static_cast<shard::GridAxis>(axis));
  }
  return grid;
}

/// Checks that the plan asks only for what this partitioner implements.
LogicalResult checkSupported(FunctionOpInterface step, PlanAttr plan) {
  auto check = [&](Placement placement, StringRef what) -> LogicalResult {
    if (placement == Placement::Replicated)
      return success();
    return step.emitOpError()
           << "plan '" << plan.getStrategy().getValue() << "' shards " << what
           << ", which autoshard-partition does not implement yet; "
              "replicated "
           << what << " are supported";
  };
  return success(succeeded(check(plan.getOptimizerStates(),
                                 "optimizer states")) &&
                 succeeded(check(plan.getGradients(), "gradients")) &&
                 succeeded(check(plan.getParameters(), "parameters")));
}

/// Splits every batch argument along dimension 0 into `grid.size` rows each.
LogicalResult splitBatch(FunctionOpInterface step, const Grid &grid) {
  StepSignature sig(step);
  Block &body = step.getFunctionBody().front();
  for (const StepValue &arg : sig.getArgs()) {
    if (arg.role != Role::Input && arg.role != Role::Label)
      continue;
    int64_t rows = arg.type.getDimSize(0);
    if (rows % grid.size != 0)
      return step.emitOpError()
             << "the global batch of " << stringifyRole(arg.role)
             << " argument \"" << arg.name << "\" has " << rows
             << " rows, which " << grid.size
             << " ranks cannot split evenly; use a multiple of " << grid.size;
    SmallVector<int64_t> shape(arg.type.getShape());
    shape[0] = rows / grid.size;
    body.getArgument(arg.index).setType(arg.type.clone(shape));
  }
  return success();
}

/// Re-derives result types after the batch arguments shrank by `factor`, in
/// program order.
LogicalResult reinferTypes(FunctionOpInterface step, int64_t factor) {
  Block &body = step.getFunctionBody().front();
  DenseSet<Value> changed;
  for (BlockArgument arg : body.getArguments())
    changed.insert(arg);
  for (Operation &op : body.without_terminator()) {
    if (llvm::none_of(op.getOperands(),
                      [&](Value v) { return changed.contains(v); }))
      continue;
    SmallVector<Type> before(op.getResultTypes());
    if (failed(rederiveResultTypes(&op, factor)))
      return failure();
    for (auto [result, type] : llvm::zip(op.getResults(), before))
      if (result.getType() != type)
        changed.insert(result);
  }
  Operation *terminator = body.getTerminator();
  SmallVector<Type> argTypes(body.getArgumentTypes());
  SmallVector<Type> resultTypes(terminator->getOperandTypes());
  if (TypeRange(resultTypes) != step.getResultTypes())
    return terminator->emitOpError()
           << "the per-rank step would return " << TypeRange(resultTypes)
           << " instead of " << step.getResultTypes()
           << "; a step returns only parameters, optimizer states and the "
              "loss, whose types do not depend on the batch";
  step.setType(FunctionType::get(step.getContext(), argTypes, resultTypes));
  return success();
}

/// Averages `value` over the grid right after it is defined.
Value averageOverGrid(OpBuilder &builder, Value value, Grid grid) {
  builder.setInsertionPointAfterValue(value);
  auto avg = shard::AllReduceOp::create(
      builder, value.getLoc(), value.getType(), grid.op.getSymName(),
      grid.allAxes, value, shard::ReductionKind::Average);
  return avg.getResult();
}

struct PartitionPass
    : autoshard::train::impl::PartitionPassBase<PartitionPass> {
  void runOnOperation() override {
    FailureOr<FunctionOpInterface> found = findStepFunction(getOperation());
    if (failed(found))
      return signalPassFailure();
    FunctionOpInterface step = *found;
    auto plan = step->getAttrOfType<PlanAttr>(TrainDialect::kPlanAttrName);
    if (!plan) {
      step.emitOpError() << "has no '" << TrainDialect::kPlanAttrName
                         << "'; run autoshard-plan first";
      return signalPassFailure();
    }
    if (step->hasAttr(TrainDialect::kPartitionedAttrName)) {
      step.emitOpError() << "is already partitioned";
      return signalPassFailure();
    }
    FailureOr<Grid> grid = resolveGrid(step, plan);
    if (failed(grid) || failed(checkSupported(step, plan)) ||
        failed(splitBatch(step, *grid)) ||
        failed(reinferTypes(step, grid->size)))
      return signalPassFailure();

    // Each optimizer gradient is a partial over this rank's rows: average it
    // as soon as it exists (where DDP's reducer would start its bucket), and
    // let every reader (the optimizer, clipping, exposed gradients) see the
    // average.
    OpBuilder builder(&getContext());
    llvm::SetVector<Value> gradients;
    step.walk([&](OptimizerOpInterface optimizer) {
      for (OpOperand &grad : optimizer.getGradientOperands())
        gradients.insert(grad.get());
    });
    for (Value grad : gradients) {
      Value avg = averageOverGrid(builder, grad, *grid);
      grad.replaceAllUsesExcept(avg, avg.getDefiningOp());
    }

    // Every rank reports the loss of the global batch.
    StepSignature sig(step);
    Operation *terminator = step.getFunctionBody().front().getTerminator();
    for (const StepValue &result : sig.getResults())
      if (result.role == Role::Loss)
        terminator->setOperand(
            result.index,
            averageOverGrid(builder, terminator->getOperand(result.index),
                            *grid));

    step->setAttr(TrainDialect::kPartitionedAttrName,
                  UnitAttr::get(&getContext()));
  }
};

} // namespace
