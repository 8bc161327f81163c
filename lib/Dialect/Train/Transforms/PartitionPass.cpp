//===- PartitionPass.cpp - apply a plan: the per-rank training step -------===//
//
// One mechanism for every strategy: the plan says, for optimizer states,
// gradients and parameters, replicated or sharded (flat, padded blocks over
// the plan's shard axes), and this pass rewrites the global step into the
// program each rank runs.
//
//===----------------------------------------------------------------------===//

#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "autoshard/Dialect/Train/Transforms/BatchResize.h"
#include "autoshard/Dialect/Train/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"

#include <limits>
#include <map>

namespace autoshard::train {
#define GEN_PASS_DEF_PARTITIONPASS
#include "autoshard/Dialect/Train/Transforms/Passes.h.inc"
} // namespace autoshard::train

using namespace mlir;
using namespace autoshard::train;

namespace {

/// The ranks a class of state is sharded over: the grid axes its shards
/// live on, the group they form, and the axes across which the group is
/// replicated.
struct Layout {
  SmallVector<shard::GridAxis> shardAxes;
  SmallVector<shard::GridAxis> replicateAxes;
  /// Ranks in one shard group.
  int64_t groupSize = 1;
};

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

Layout layoutOf(Grid grid, ArrayRef<int16_t> shardAxes) {
  Layout layout;
  for (auto [axis, dim] : llvm::enumerate(grid.op.getShape())) {
    if (llvm::is_contained(shardAxes, axis)) {
      layout.shardAxes.push_back(static_cast<shard::GridAxis>(axis));
      layout.groupSize *= dim;
    } else {
      layout.replicateAxes.push_back(static_cast<shard::GridAxis>(axis));
    }
  }
  return layout;
}

/// Where one parameter, its gradient and its optimizer states live: the
/// plan's placements, or those of the first group that selects it.
struct Policy {
  Placement states = Placement::Replicated;
  Placement grads = Placement::Replicated;
  Placement params = Placement::Replicated;
  Unit unit = Unit::Param;
  const Layout *layout = nullptr;
};

bool sharded(Placement placement) { return placement == Placement::Sharded; }

/// The compute copy of a mixed-precision master weight: the one cast that,
/// besides optimizer updates, reads an f32 parameter, to a narrower float
/// type; null when `param` is read otherwise.
CastOp computeCopyOf(BlockArgument param) {
  if (!getElementTypeOrSelf(param.getType()).isF32())
    return {};
  CastOp copy;
  for (OpOperand &use : param.getUses()) {
    if (isa<OptimizerOpInterface>(use.getOwner()))
      continue;
    auto cast = dyn_cast<CastOp>(use.getOwner());
    if (copy || !cast ||
        getElementTypeOrSelf(cast.getResult().getType())
                .getIntOrFloatBitWidth() >= 32)
      return {};
    copy = cast;
  }
  return copy;
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

/// The ops the step's loss depends on: its forward pass.
DenseSet<Operation *> forwardOps(Block &body, const StepSignature &sig) {
  DenseSet<Operation *> forward;
  SmallVector<Value> worklist;
  for (const StepValue &result : sig.getResults())
    if (result.role == Role::Loss)
      worklist.push_back(body.getTerminator()->getOperand(result.index));
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val().getDefiningOp();
    if (!op || !forward.insert(op).second)
      continue;
    llvm::append_range(worklist, op->getOperands());
  }
  return forward;
}

/// Whether a batch-dependent result of type `before` (global batch) kept
/// the batch as its leading dimension at type `after` (a rank's share).
bool keepsBatchLeading(Type before, Type after, int64_t factor) {
  auto b = dyn_cast<RankedTensorType>(before);
  auto a = dyn_cast<RankedTensorType>(after);
  if (!b || !a)
    return true;
  return b.getRank() > 0 && a.getRank() == b.getRank() &&
         a.getDimSize(0) * factor == b.getDimSize(0) &&
         a.getShape().drop_front() == b.getShape().drop_front();
}

/// A batch-independent operand of `op` (which reads the batch) that has as
/// many rows as the batch it is paired with, a class token expanded to the
/// batch, takes the rank's rows too (batchShapedFill): resized here, before
/// `op`'s shape rule sees it, and batch-dependent from then on.
LogicalResult resizeFillsPairedWithBatch(Operation &op,
                                         DenseSet<Value> &batched,
                                         DenseSet<Value> &changed,
                                         int64_t factor) {
  for (Value operand : op.getOperands()) {
    if (batched.contains(operand))
      continue;
    auto type = dyn_cast<RankedTensorType>(operand.getType());
    if (!type || type.getRank() == 0)
      continue;
    // The rows of the global batch: those of an operand of the same rank
    // that already took its share.
    for (Value other : op.getOperands()) {
      auto shared = dyn_cast<RankedTensorType>(other.getType());
      if (!batched.contains(other) || !changed.contains(other) || !shared ||
          shared.getRank() != type.getRank())
        continue;
      if (Operation *fill = batchShapedFill(
              operand, shared.getDimSize(0) * factor)) {
        if (failed(resizeBatchShapedFill(fill, &op, factor)))
          return failure();
        batched.insert(operand);
        changed.insert(operand);
      }
      break;
    }
  }
  return success();
}

/// Re-derives result types after the batch arguments shrank by `factor`, in
/// program order. A forward op that would combine rows of different
/// batch elements (a reduction over the batch, a transpose that moves it)
/// computes, on each rank's share, something other than on the global
/// batch: refused, naming the op. The loss is the one exception (every rank
/// reports the mean over the global batch), and the backward pass sums over
/// the batch by design (its gradients are reduced across ranks).
LogicalResult reinferTypes(Block &body, const StepSignature &sig,
                           int64_t factor) {
  DenseSet<Operation *> forward = forwardOps(body, sig);
  // Only the batch arguments changed: an op on parameters alone (a view of
  // a weight) keeps its types.
  DenseSet<Value> changed, batched;
  for (const StepValue &arg : sig.getArgs())
    if (arg.role == Role::Input || arg.role == Role::Label)
      batched.insert(body.getArgument(arg.index));
  changed = batched;
  // The step's scalar results: the loss, and what is computed with it.
  DenseSet<Value> scalarResults;
  for (Value result : body.getTerminator()->getOperands())
    if (auto type = dyn_cast<RankedTensorType>(result.getType());
        type && type.getRank() == 0)
      scalarResults.insert(result);
  for (Operation &op : body.without_terminator()) {
    if (llvm::none_of(op.getOperands(),
                      [&](Value v) { return changed.contains(v); }))
      continue;
    bool readsBatch = llvm::any_of(
        op.getOperands(), [&](Value v) { return batched.contains(v); });
    if (readsBatch) {
      batched.insert(op.result_begin(), op.result_end());
      if (failed(resizeFillsPairedWithBatch(op, batched, changed, factor)))
        return failure();
    }
    SmallVector<Type> before(op.getResultTypes());
    if (failed(rederiveResultTypes(&op, factor)))
      return failure();
    bool isLoss = op.hasTrait<LossTrait>() ||
                  llvm::any_of(op.getResults(), [&](Value result) {
                    return scalarResults.contains(result);
                  });
    for (auto [result, type] : llvm::zip(op.getResults(), before)) {
      if (factor > 1 && readsBatch && forward.contains(&op) && !isLoss &&
          !keepsBatchLeading(type, result.getType(), factor))
        return op.emitOpError()
               << "combines rows of different batch elements ("
               << type << " on the global batch, " << result.getType()
               << " on each rank's share): a rank holds only its share of "
                  "the batch, so a data-parallel plan cannot split it; keep "
                  "the batch as the leading dimension and reduce over it "
                  "only in the loss";
      if (result.getType() != type)
        changed.insert(result);
    }
  }
  return success();
}

/// The flat shard type of `type` over a group of `n` ranks.
RankedTensorType shardType(Type type, int64_t n) {
  auto tensor = cast<RankedTensorType>(type);
  return RankedTensorType::get(
      {static_cast<int64_t>(llvm::divideCeil(tensor.getNumElements(), n))},
      tensor.getElementType());
}

/// Where the micro-batches of a step begin: its train.slice_rows in
/// program order, and for every op the number of them at or before it (the
/// micro-batch an op belongs to, block arguments and the shared ops before
/// the first micro-batch counting 0).
struct MicroBatches {
  SmallVector<Operation *> slices;
  DenseMap<Operation *, int64_t> phase;

  explicit MicroBatches(Block &body) {
    for (Operation &op : body) {
      if (isa<SliceRowsOp>(op))
        slices.push_back(&op);
      phase[&op] = static_cast<int64_t>(slices.size());
    }
  }
  int64_t phaseOf(Value v) const {
    Operation *def = v.getDefiningOp();
    return def ? phase.lookup(def) : 0;
  }
  /// The first op of the micro-batch after phase `p`, or null.
  Operation *after(int64_t p) const {
    return p < static_cast<int64_t>(slices.size()) ? slices[p] : nullptr;
  }
};

/// A gradient as autodiff builds it under gradient accumulation: the mean
/// `scale(sum, 1/K)`, `sum` a tree of train.add whose leaves are the
/// micro-batches' contributions, grouped here by micro-batch.
struct MicroBatchParts {
  ScaleOp mean;
  /// Each micro-batch's contributions and the phase they belong to,
  /// micro-batches in program order.
  SmallVector<std::pair<int64_t, SmallVector<Value>>> parts;
  /// The tree's adds, each before the adds it reads.
  SmallVector<Operation *> adds;
};

std::optional<MicroBatchParts> splitByMicroBatch(Value grad,
                                                 const MicroBatches &batches) {
  auto mean = grad.getDefiningOp<ScaleOp>();
  if (!mean)
    return std::nullopt;
  MicroBatchParts split;
  split.mean = mean;
  // The leaves, left to right: adds read by nothing else are the tree.
  std::map<int64_t, SmallVector<Value>> byPhase;
  SmallVector<Value> stack{mean.getInput()};
  while (!stack.empty()) {
    Value value = stack.pop_back_val();
    auto add = value.getDefiningOp<AddOp>();
    if (add && value.hasOneUse()) {
      split.adds.push_back(add);
      stack.push_back(add.getRhs());
      stack.push_back(add.getLhs());
      continue;
    }
    byPhase[batches.phaseOf(value)].push_back(value);
  }
  if (byPhase.size() < 2)
    return std::nullopt;
  for (auto &[phase, values] : byPhase)
    split.parts.push_back({phase, std::move(values)});
  return split;
}

class Partitioner {
public:
  Partitioner(FunctionOpInterface step, PlanAttr plan, const Grid &grid)
      : step(step), plan(plan), grid(grid), body(step.getFunctionBody().front()),
        b(step.getContext()), sig(step) {}

  LogicalResult run();

private:
  Value allReduce(Value value, ArrayRef<shard::GridAxis> axes,
                  shard::ReductionKind kind) {
    return shard::AllReduceOp::create(b, value.getLoc(), value.getType(),
                                      gridName(), axes, value, kind)
        .getResult();
  }
  StringRef gridName() { return grid.op.getSymName(); }
  DenseI16ArrayAttr axesAttr(const Layout &layout) {
    return b.getDenseI16ArrayAttr(layout.shardAxes);
  }
  const Layout &layoutFor(ArrayRef<int16_t> axes);
  void assignPolicies();
  /// The policy of the parameter an optimizer updates (all its parameters
  /// share one), or an error.
  FailureOr<const Policy *> policyOf(OptimizerOpInterface optimizer);
  void markSharded(BlockArgument arg, Type fullType, const Layout &layout);
  /// `policies[i]` is optimizers[i]'s policyOf, taken before any rewrite.
  LogicalResult reduceGradients(ArrayRef<OptimizerOpInterface> optimizers,
                                ArrayRef<const Policy *> policies);
  void reduceClippingNorms();
  /// Each micro-batch's contributions to a split gradient summed in the
  /// gradient's type, just after the last of them, micro-batches in order.
  SmallVector<Value> sumEachMicroBatch(const MicroBatchParts &split);
  /// Under reduce_every = step and reduce_dtype = f32, a bf16 gradient's
  /// micro-batch sums cast up and accumulated in f32 as each is complete
  /// (FSDP2 accumulates unsharded gradients in its reduce dtype); returns
  /// the f32 mean, what the reduction reads.
  Value accumulateInF32(const MicroBatchParts &split);
  /// ZeRO-2/3 under reduce_every = micro_batch: each micro-batch's part of
  /// a gradient reduce-scattered when it is complete and summed into an f32
  /// shard; returns the mean shard.
  Value reduceEachMicroBatch(const MicroBatchParts &split,
                             const MicroBatches &batches,
                             const Layout &layout, Operation *firstReader);
  /// Every reader of `grad` reads `reduced` instead (`reduction`, which
  /// reads `input`, excepted); where `reduced` is f32 and `grad` is not,
  /// the optimizer and clipping read it as it is and other readers a cast
  /// back.
  void replaceGradient(Value grad, Value input, Value reduced,
                       Operation *reduction);
  /// What a reduction of `grad` reads: `grad`, or with reduce_dtype = f32
  /// a bf16 gradient cast up (at the builder's insertion point).
  Value reductionInput(Value grad) {
    auto type = cast<RankedTensorType>(grad.getType());
    if (plan.getReduceDtype() != ReduceDtype::F32 ||
        type.getElementType().isF32())
      return grad;
    return CastOp::create(b, grad.getLoc(), type.clone(b.getF32Type()), grad);
  }
  LogicalResult shardOptimizer(OptimizerOpInterface optimizer,
                               const Policy &policy);
  LogicalResult gatherParameters();
  LogicalResult finishSignature();

  FunctionOpInterface step;
  PlanAttr plan;
  Grid grid;
  Block &body;
  OpBuilder b;
  StepSignature sig;
  /// One layout per distinct set of shard axes.
  std::map<SmallVector<int16_t>, Layout> layouts;
  /// The policy of every parameter argument.
  DenseMap<unsigned, Policy> policies;
  /// The arguments this pass turned into flat shards: full type and layout.
  DenseMap<unsigned, std::pair<Type, const Layout *>> shardedArgs;
  /// Sharded parameter arguments, in argument order.
  SmallVector<unsigned> shardedParams;
  /// Master weights of replicated parameters (ZeRO-1/2 under mixed
  /// precision): sharded with their optimizer states, their compute copy
  /// gathered once per step.
  DenseSet<unsigned> mastersWithStates;
  /// Reduced gradient shards, for clipping: the layout each is a shard of.
  DenseMap<Value, const Layout *> gradientShards;
};

const Layout &Partitioner::layoutFor(ArrayRef<int16_t> axes) {
  SmallVector<int16_t> key(axes);
  auto it = layouts.find(key);
  if (it == layouts.end())
    it = layouts.emplace(key, layoutOf(grid, axes)).first;
  return it->second;
}

void Partitioner::assignPolicies() {
  Policy base{plan.getOptimizerStates(), plan.getGradients(),
              plan.getParameters(), plan.getUnit(),
              &layoutFor(plan.getShardAxes())};
  for (const StepValue &arg : sig.getArgs()) {
    if (arg.role != Role::Param)
      continue;
    Policy policy = base;
    if (ParamGroupAttr group =
            plan.groupOf(arg.name, arg.type.getNumElements())) {
      policy = {group.getOptimizerStates(), group.getGradients(),
                group.getParameters(), group.getUnit(),
                group.getShardAxes().empty()
                    ? base.layout
                    : &layoutFor(group.getShardAxes())};
    }
    policies[arg.index] = policy;
  }
}

FailureOr<const Policy *>
Partitioner::policyOf(OptimizerOpInterface optimizer) {
  const Policy *found = nullptr;
  for (OpOperand &param : optimizer.getParamOperands()) {
    auto arg = dyn_cast<BlockArgument>(param.get());
    auto it = arg && arg.getOwner() == &body
                  ? policies.find(arg.getArgNumber())
                  : policies.end();
    if (it == policies.end())
      return optimizer->emitOpError()
             << "updates a value that is not a parameter argument of the "
                "step";
    if (found && (found->states != it->second.states ||
                  found->grads != it->second.grads ||
                  found->params != it->second.params ||
                  found->layout != it->second.layout))
      return optimizer->emitOpError()
             << "updates parameters that the plan places differently; put "
                "them in one parameter group";
    found = &it->second;
  }
  if (!found)
    return optimizer->emitOpError() << "updates no parameter";
  return found;
}

void Partitioner::markSharded(BlockArgument arg, Type fullType,
                              const Layout &layout) {
  shardedArgs[arg.getArgNumber()] = {fullType, &layout};
  arg.setType(shardType(fullType, layout.groupSize));
}

/// Gradients are partial sums over a rank's rows. Replicated states (DDP):
/// average them over the grid where they are computed. Otherwise reduce-
/// scatter them into this rank's shard: where they are computed when
/// gradients are sharded (ZeRO-2/3), at their first reader when they are
/// not (ZeRO-1); then average the shards across replicas (hybrid). Every
/// reader of a gradient reads the result. Each gradient follows the policy
/// of the parameter it updates.
LogicalResult
Partitioner::reduceGradients(ArrayRef<OptimizerOpInterface> optimizers,
                             ArrayRef<const Policy *> policies) {
  // The values optimizers update: reducing one of them as a gradient would
  // rewrite the parameter an optimizer reads.
  llvm::DenseSet<Value> updated;
  for (OptimizerOpInterface optimizer : optimizers)
    for (OpOperand &param : optimizer.getParamOperands())
      updated.insert(param.get());
  llvm::MapVector<Value, const Policy *> gradients;
  for (auto [index, op] : llvm::enumerate(optimizers)) {
    OptimizerOpInterface optimizer = op;
    const Policy *policy = policies[index];
    for (OpOperand &grad : optimizer.getGradientOperands()) {
      if (updated.contains(grad.get()))
        return optimizer->emitOpError()
               << "reads a parameter it or another optimizer updates as a "
                  "gradient; a gradient is a value the step computes from "
                  "the loss";
      auto [it, inserted] = gradients.try_emplace(grad.get(), policy);
      if (!inserted && it->second != policy &&
          (it->second->states != policy->states ||
           it->second->layout != policy->layout))
        return optimizer->emitOpError()
               << "reads a gradient that also updates a parameter the plan "
                  "places differently; put both in one parameter group";
    }
  }

  // Micro-batch boundaries, taken before any rewrite; ops this loop
  // inserts are never looked up.
  bool eachMicroBatch = plan.getReduceEvery() == ReduceEvery::MicroBatch;
  std::optional<MicroBatches> batches;
  if (eachMicroBatch || plan.getReduceDtype() == ReduceDtype::F32)
    batches.emplace(body);
  for (auto [grad, policy] : gradients) {
    bool toShards = sharded(policy->states);
    const Layout &layout = *policy->layout;
    Operation *firstReader = nullptr;
    for (Operation *user : grad.getUsers())
      if (!firstReader || user->isBeforeInBlock(firstReader))
        firstReader = user;
    // With reduce_dtype = f32, a bf16 gradient is cast up (its micro-
    // batches accumulated in f32) and reduced in f32; the optimizer and
    // clipping read the f32 result.
    Value input = grad;
    auto gradType = cast<RankedTensorType>(grad.getType());
    Value reduced;
    Operation *reduction = nullptr;
    // Split by micro-batch: a sharded gradient reduced every micro-batch,
    // and a bf16 gradient reduced in f32 (accumulated in f32).
    bool eachHere = eachMicroBatch && toShards && sharded(policy->grads);
    bool upcast = plan.getReduceDtype() == ReduceDtype::F32 &&
                  !gradType.getElementType().isF32();
    std::optional<MicroBatchParts> split;
    if (batches && (eachHere || upcast))
      split = splitByMicroBatch(grad, *batches);
    if (split && eachHere)
      reduced = reduceEachMicroBatch(*split, *batches, layout, firstReader);
    else if (split)
      input = accumulateInF32(*split);
    if (!reduced) {
      if (toShards && !sharded(policy->grads))
        b.setInsertionPoint(firstReader);
      else
        b.setInsertionPointAfterValue(input);
      if (input == grad)
        input = reductionInput(grad);
      if (!toShards) {
        reduced =
            allReduce(input, grid.allAxes, shard::ReductionKind::Average);
        reduction = reduced.getDefiningOp();
      } else {
        auto scatter = ReduceScatterShardsOp::create(
            b, grad.getLoc(),
            TypeRange{shardType(input.getType(), layout.groupSize)},
            ValueRange{input}, gridName(), axesAttr(layout),
            Reduction::Average);
        reduction = scatter;
        reduced = scatter.getResult(0);
        // Across replicas the shards are averaged just before they are
        // read, so grouping can bucket the reduce-scatters of the backward
        // pass and, separately, these averages.
        if (!layout.replicateAxes.empty()) {
          b.setInsertionPoint(firstReader);
          reduced = allReduce(reduced, layout.replicateAxes,
                              shard::ReductionKind::Average);
        }
      }
    }
    if (toShards)
      gradientShards[reduced] = &layout;
    replaceGradient(grad, input, reduced, reduction);
    if (split) {
      // The full mean and its sum have no readers left.
      split->mean->erase();
      for (Operation *add : split->adds)
        add->erase();
    }
  }
  reduceClippingNorms();
  return success();
}

void Partitioner::replaceGradient(Value grad, Value input, Value reduced,
                                  Operation *reduction) {
  auto gradType = cast<RankedTensorType>(grad.getType());
  if (getElementTypeOrSelf(reduced) == gradType.getElementType()) {
    grad.replaceAllUsesExcept(reduced, reduction);
    return;
  }
  // The optimizer and clipping take an f32 gradient; any other reader (an
  // exposed gradient result) keeps the gradient's type.
  Value castBack;
  for (OpOperand &use : llvm::make_early_inc_range(grad.getUses())) {
    Operation *user = use.getOwner();
    if (input != grad && user == input.getDefiningOp())
      continue;
    if (isa<OptimizerOpInterface, SumOfSquaresOp>(user)) {
      use.set(reduced);
      continue;
    }
    if (!castBack) {
      b.setInsertionPointAfterValue(reduced);
      castBack = CastOp::create(
          b, grad.getLoc(),
          cast<RankedTensorType>(reduced.getType())
              .clone(gradType.getElementType()),
          reduced);
    }
    use.set(castBack);
  }
}

SmallVector<Value>
Partitioner::sumEachMicroBatch(const MicroBatchParts &split) {
  Location loc = split.mean->getLoc();
  SmallVector<Value> sums;
  for (const auto &[phase, leaves] : split.parts) {
    // The micro-batch's gradient is complete at its last contribution.
    Operation *last = nullptr;
    for (Value leaf : leaves)
      if (Operation *def = leaf.getDefiningOp();
          def && (!last || last->isBeforeInBlock(def)))
        last = def;
    if (last)
      b.setInsertionPointAfter(last);
    else
      b.setInsertionPointToStart(&body);
    Value sum = leaves.front();
    for (Value leaf : ArrayRef(leaves).drop_front())
      sum = AddOp::create(b, loc, sum, leaf);
    sums.push_back(sum);
  }
  return sums;
}

Value Partitioner::accumulateInF32(const MicroBatchParts &split) {
  ScaleOp mean = split.mean; // op handles are not const-callable
  Location loc = mean.getLoc();
  Value total;
  for (Value part : sumEachMicroBatch(split)) {
    b.setInsertionPointAfterValue(part);
    auto type = cast<RankedTensorType>(part.getType());
    Value up = CastOp::create(b, loc, type.clone(b.getF32Type()), part);
    total = total ? AddOp::create(b, loc, total, up).getResult() : up;
  }
  b.setInsertionPointAfterValue(total);
  return ScaleOp::create(b, loc, total, mean.getFactorAttr());
}

Value Partitioner::reduceEachMicroBatch(const MicroBatchParts &split,
                                        const MicroBatches &batches,
                                        const Layout &layout,
                                        Operation *firstReader) {
  ScaleOp mean = split.mean; // op handles are not const-callable
  Location loc = mean.getLoc();
  Value sum;
  SmallVector<Value> sums = sumEachMicroBatch(split);
  for (auto [index, microBatch] : llvm::enumerate(split.parts)) {
    int64_t phase = microBatch.first;
    b.setInsertionPointAfterValue(sums[index]);
    Value part = reductionInput(sums[index]);
    Value shard =
        ReduceScatterShardsOp::create(
            b, loc, TypeRange{shardType(part.getType(), layout.groupSize)},
            ValueRange{part}, gridName(), axesAttr(layout), Reduction::Average)
            .getResult(0);
    // Averaged into the shard where the micro-batch ends (the next one's
    // first slice_rows), so that grouping closes the micro-batch's buckets
    // and scheduling waits for them there, before the next micro-batch
    // computes; after the last, before the gradient's first reader.
    Operation *end = index + 1 < split.parts.size() ? batches.after(phase)
                                                    : nullptr;
    b.setInsertionPoint(end ? end : firstReader);
    // The shard accumulates in f32 whatever the gradient's type, as FSDP's
    // sharded f32 gradients do: K bf16 roundings of a running sum would
    // lose the small late contributions.
    auto shardTensor = cast<RankedTensorType>(shard.getType());
    if (!shardTensor.getElementType().isF32())
      shard = CastOp::create(b, loc, shardTensor.clone(b.getF32Type()), shard);
    Value share = ScaleOp::create(b, loc, shard, mean.getFactorAttr());
    sum = sum ? AddOp::create(b, loc, sum, share).getResult() : share;
  }
  Value reduced = sum;
  if (!layout.replicateAxes.empty()) {
    b.setInsertionPoint(firstReader);
    reduced = allReduce(reduced, layout.replicateAxes,
                        shard::ReductionKind::Average);
  }
  return reduced;
}

/// Global-norm clipping sums the squares of every gradient. A whole
/// gradient is the same on every rank; the shards of a sharded one are
/// disjoint, so their squares are summed over the shard axes. A sum over
/// both kinds is split by layout and added back up.
void Partitioner::reduceClippingNorms() {
  SmallVector<SumOfSquaresOp> sums;
  step.walk([&](SumOfSquaresOp sum) { sums.push_back(sum); });
  for (SumOfSquaresOp sum : sums) {
    // Operands by the layout they are shards of (null: whole), in order.
    llvm::MapVector<const Layout *, SmallVector<Value>> parts;
    for (Value operand : sum->getOperands())
      parts[gradientShards.lookup(operand)].push_back(operand);
    if (parts.size() == 1 && parts.begin()->first == nullptr)
      continue;
    b.setInsertionPointAfter(sum);
    Value total;
    for (auto &[layout, operands] : parts) {
      Value part = parts.size() == 1
                       ? sum.getResult()
                       : SumOfSquaresOp::create(b, sum.getLoc(), operands)
                             .getResult();
      if (layout)
        part = allReduce(part, layout->shardAxes, shard::ReductionKind::Sum);
      total = total ? AddOp::create(b, sum.getLoc(), total, part).getResult()
                    : part;
    }
    if (parts.size() == 1) {
      sum.getResult().replaceAllUsesExcept(total, total.getDefiningOp());
      continue;
    }
    sum.getResult().replaceAllUsesWith(total);
    sum.erase();
  }
}

/// The optimizer updates this rank's shard: sharded states become flat shard
/// arguments; a replicated parameter is sliced for the update and its new
/// value gathered back (ZeRO-1/2), a sharded one, or the f32 master of a
/// replicated one, is a shard argument updated in place (ZeRO-3, FSDP;
/// ZeRO-1/2 under mixed precision).
LogicalResult Partitioner::shardOptimizer(OptimizerOpInterface optimizer,
                                          const Policy &policy) {
  Operation *op = optimizer.getOperation();
  const Layout &layout = *policy.layout;
  for (OpOperand *state : optimizer.getStateOperands()) {
    auto arg = dyn_cast<BlockArgument>(state->get());
    if (!arg || arg.getOwner() != &body)
      return op->emitOpError()
             << "has an optimizer state that is not an argument of the step; "
                "a plan shards states the step carries";
    if (!shardedArgs.contains(arg.getArgNumber()))
      markSharded(arg, arg.getType(), layout);
  }
  bool gatherUpdate = false;
  for (OpOperand &param : optimizer.getParamOperands()) {
    auto arg = cast<BlockArgument>(param.get());
    // A replicated parameter's f32 master (mixed precision) is kept with
    // the optimizer states, as DeepSpeed's ZeRO-1/2 keep it: this rank's
    // shard is the argument, and the replicated value is the bf16 compute
    // copy, gathered once per step.
    bool master = !sharded(policy.params) && computeCopyOf(arg);
    if (sharded(policy.params) || master) {
      if (!shardedArgs.contains(arg.getArgNumber())) {
        markSharded(arg, arg.getType(), layout);
        shardedParams.push_back(arg.getArgNumber());
        if (master)
          mastersWithStates.insert(arg.getArgNumber());
      }
      continue;
    }
    gatherUpdate = true;
    b.setInsertionPoint(op);
    param.set(ShardOfOp::create(b, op->getLoc(),
                                shardType(arg.getType(), layout.groupSize),
                                arg, gridName(), axesAttr(layout)));
  }
  SmallVector<Type> before(op->getResultTypes());
  if (failed(rederiveResultTypes(op, layout.groupSize)))
    return failure();
  if (gatherUpdate) {
    // The first result is the new parameter (OptimizerOpInterface order).
    Value newShard = op->getResult(0);
    b.setInsertionPointAfter(op);
    auto gather = AllGatherShardsOp::create(
        b, op->getLoc(), TypeRange{before[0]}, ValueRange{newShard},
        gridName(), axesAttr(layout));
    newShard.replaceAllUsesExcept(gather.getResult(0), gather);
  }
  return success();
}
/// Sharded parameters are gathered for their readers. A parameter read only
/// through a cast (mixed precision) is cast while sharded, so the gather
/// moves bf16. Readers are grouped into phases, separated by each micro-
/// batch's start and (when the parameter's gathered copy is released after
/// the forward pass: reshard = after_forward, keep_gathered not selecting
/// it) by its loss; each phase gathers once, before the first reader of its
/// unit (the parameter, or its transformer block), the parameters that
/// phase reads. The master of a replicated parameter has one phase, the
/// step: its compute copy is the replicated parameter.
LogicalResult Partitioner::gatherParameters() {
  DenseMap<Operation *, int64_t> position;
  int64_t next = 0;
  for (Operation &op : body)
    position[&op] = next++;
  // Phase of an op: the number of boundaries before it, with the losses
  // among them or not. Phases of the two kinds are numbered apart (the
  // second kind negative), so that a unit whose parameters are released
  // differently gathers each kind on its own.
  SmallVector<int64_t> batchStarts, withLosses;
  for (Operation &op : body) {
    if (isa<SliceRowsOp>(op))
      batchStarts.push_back(position[&op]);
    if (isa<SliceRowsOp>(op) || op.hasTrait<LossTrait>())
      withLosses.push_back(position[&op]);
  }
  // When a gathered copy is released.
  enum class Release { AfterForward, AfterMicroBatch, AfterStep };
  auto phaseOf = [&](Operation *op, Release release) -> int64_t {
    if (release == Release::AfterStep)
      return std::numeric_limits<int64_t>::min();
    bool kept = release == Release::AfterMicroBatch;
    ArrayRef<int64_t> boundaries = kept ? batchStarts : withLosses;
    int64_t phase =
        llvm::lower_bound(boundaries, position[op]) - boundaries.begin();
    return kept ? -1 - phase : phase;
  };

  struct Source {
    unsigned arg;
    Value shard;                      // what is gathered
    Type full;                        // the gathered type
    const Layout *layout;             // what it is a shard of
    SmallVector<OpOperand *> readers; // uses of the gathered value
    Release release;
  };
  SmallVector<Source> sources;
  SmallVector<Operation *> deadCasts;
  for (unsigned index : shardedParams) {
    BlockArgument arg = body.getArgument(index);
    const Layout &layout = *shardedArgs.lookup(index).second;
    Release release = mastersWithStates.contains(index) ? Release::AfterStep
                      : plan.keepsGathered(sig.getArgs()[index].name)
                          ? Release::AfterMicroBatch
                          : Release::AfterForward;
    Source source{index,   arg, shardedArgs.lookup(index).first,
                  &layout, {},  release};
    SmallVector<OpOperand *> computeUses;
    for (OpOperand &use : arg.getUses())
      if (!isa<OptimizerOpInterface>(use.getOwner()))
        computeUses.push_back(&use);
    auto castOp = computeUses.size() == 1
                      ? dyn_cast<CastOp>(computeUses.front()->getOwner())
                      : CastOp();
    if (castOp) {
      b.setInsertionPoint(castOp);
      source.full = castOp.getResult().getType();
      source.shard = CastOp::create(
          b, castOp.getLoc(), shardType(source.full, layout.groupSize),
          arg);
      for (OpOperand &use : castOp.getResult().getUses())
        source.readers.push_back(&use);
      deadCasts.push_back(castOp);
    } else {
      source.readers = computeUses;
    }
    sources.push_back(std::move(source));
  }

  // The first reader of each (unit, phase): where every gather of that unit
  // and phase goes.
  // The compute copies of ZeRO-1/2's masters form one unit, so that their
  // gathers sit together and bucket as DeepSpeed's gathers of the updated
  // bf16 parameters do: the copies live for the whole step anyway.
  auto unitKey = [&](const Source &source) -> std::string {
    if (source.release == Release::AfterStep)
      return "s";
    if (policies.lookup(source.arg).unit == Unit::Param)
      return "p" + std::to_string(source.arg);
    // The parameter's train.unit; all parameters without one share the
    // root unit "b".
    return "b" + sig.getArgs()[source.arg].unit.str();
  };
  std::map<std::pair<std::string, int64_t>, Operation *> firstReader;
  for (const Source &source : sources)
    for (OpOperand *use : source.readers) {
      Operation *&first = firstReader[{
          unitKey(source), phaseOf(use->getOwner(), source.release)}];
      if (!first || position[use->getOwner()] < position[first])
        first = use->getOwner();
    }

  // A parameter no reader of a phase needs is not gathered in that phase,
  // also under block units (a runtime's flat unit would move it anyway).
  for (const Source &source : sources) {
    std::string unit = unitKey(source);
    llvm::MapVector<int64_t, Value> gathered;
    for (OpOperand *use : source.readers) {
      int64_t phase = phaseOf(use->getOwner(), source.release);
      Value &full = gathered[phase];
      if (!full) {
        Operation *at = firstReader.at({unit, phase});
        b.setInsertionPoint(at);
        full = AllGatherShardsOp::create(b, at->getLoc(),
                                         TypeRange{source.full},
                                         ValueRange{source.shard}, gridName(),
                                         axesAttr(*source.layout))
                   .getResult(0);
      }
      use->set(full);
    }
  }
  for (Operation *cast : deadCasts)
    cast->erase();
  return success();
}

LogicalResult Partitioner::finishSignature() {
  Operation *terminator = body.getTerminator();
  SmallVector<Type> argTypes(body.getArgumentTypes());
  SmallVector<Type> resultTypes(terminator->getOperandTypes());
  // What a result may be a shard of: the new value of a sharded argument,
  // and the gradient of a parameter whose gradient is reduced into shards
  // (its optimizer states are sharded: ZeRO-1/2 as well as ZeRO-3/FSDP).
  auto shardLayoutOf = [&](const StepValue &result) -> const Layout * {
    if (std::optional<unsigned> of = sig.getUpdatedArg(result.index))
      return shardedArgs.contains(*of) ? shardedArgs.lookup(*of).second
                                       : nullptr;
    std::optional<unsigned> of = sig.getGradientOf(result.index);
    if (!of)
      return nullptr;
    if (shardedArgs.contains(*of))
      return shardedArgs.lookup(*of).second;
    auto policy = policies.find(*of);
    return policy != policies.end() && sharded(policy->second.states)
               ? policy->second.layout
               : nullptr;
  };
  // Only those may change type: a step returns parameters, optimizer
  // states, gradients and the loss, none of which depend on the batch.
  for (const StepValue &result : sig.getResults()) {
    bool shardedResult = shardLayoutOf(result) != nullptr;
    if (resultTypes[result.index] != result.type && !shardedResult)
      return terminator->emitOpError()
             << "the per-rank step would return "
             << TypeRange(resultTypes) << " instead of "
             << step.getResultTypes()
             << "; a step returns only parameters, optimizer states and the "
                "loss, whose types do not depend on the batch";
  }
  step.setType(FunctionType::get(step.getContext(), argTypes, resultTypes));
  // The attributes are set all at once: setting them one by one rebuilds
  // the function's attribute array each time, quadratic in the arguments.
  MLIRContext *ctx = step.getContext();
  auto withShard = [&](DictionaryAttr attrs, ArrayRef<int64_t> fullShape,
                       const Layout &layout) {
    SmallVector<int16_t> axes(layout.shardAxes.begin(),
                              layout.shardAxes.end());
    NamedAttrList list(attrs);
    list.set(TrainDialect::kShardAttrName,
             FlatShardAttr::get(ctx, fullShape, axes));
    return list.getDictionary(ctx);
  };
  SmallVector<DictionaryAttr> argAttrs;
  step.getAllArgAttrs(argAttrs);
  for (auto &[index, sharding] : shardedArgs)
    argAttrs[index] =
        withShard(argAttrs[index],
                  cast<RankedTensorType>(sharding.first).getShape(),
                  *sharding.second);
  step.setAllArgAttrs(argAttrs);
  // Results: the new value of a sharded argument, and exposed gradients of
  // sharded parameters, are shards of the same full shape.
  SmallVector<DictionaryAttr> resultAttrs;
  step.getAllResultAttrs(resultAttrs);
  for (const StepValue &result : sig.getResults()) {
    // A shard may have the full tensor's type (a 1-D tensor on one rank, or
    // of one element): what decides is that the result has the shard type.
    const Layout *layout = shardLayoutOf(result);
    if (!layout ||
        resultTypes[result.index] != shardType(result.type, layout->groupSize))
      continue;
    resultAttrs[result.index] =
        withShard(resultAttrs[result.index], result.type.getShape(), *layout);
  }
  step.setAllResultAttrs(resultAttrs);
  return success();
}

LogicalResult Partitioner::run() {
  if (failed(splitBatch(step, grid)) ||
      failed(reinferTypes(body, StepSignature(step), grid.size)))
    return failure();

  assignPolicies();
  SmallVector<OptimizerOpInterface> optimizers;
  step.walk([&](OptimizerOpInterface op) { optimizers.push_back(op); });
  // Each optimizer's policy, from its parameter arguments as they are
  // before reduceGradients rewrites readers.
  SmallVector<const Policy *> policies;
  for (OptimizerOpInterface optimizer : optimizers) {
    FailureOr<const Policy *> policy = policyOf(optimizer);
    if (failed(policy))
      return failure();
    policies.push_back(*policy);
  }
  if (failed(reduceGradients(optimizers, policies)))
    return failure();
  for (auto [optimizer, policy] : llvm::zip(optimizers, policies))
    if (sharded(policy->states) &&
        failed(shardOptimizer(optimizer, *policy)))
      return failure();
  // A parameter no optimizer updates (an evaluation step's, or a frozen
  // one) is placed as the plan says too: sharded, it is a shard argument
  // gathered for its readers. An evaluation step (no optimizer at all)
  // keeps a mixed-precision master where training keeps it, with the
  // states the plan shards (ZeRO-1/2): the two steps then hold the same
  // parameter layout, and a training binary's evaluation step (shard-compile
  // --with-eval) reads the training step's buffers.
  for (const StepValue &arg : sig.getArgs()) {
    if (arg.role != Role::Param || shardedArgs.contains(arg.index))
      continue;
    const Policy &policy = this->policies[arg.index];
    BlockArgument value = body.getArgument(arg.index);
    bool master = optimizers.empty() && sharded(policy.states) &&
                  !sharded(policy.params) && computeCopyOf(value);
    if (!sharded(policy.params) && !master)
      continue;
    markSharded(value, arg.type, *policy.layout);
    shardedParams.push_back(arg.index);
    if (master)
      mastersWithStates.insert(arg.index);
  }
  if (!shardedParams.empty() && failed(gatherParameters()))
    return failure();

  // Every rank reports the loss of the global batch.
  Operation *terminator = body.getTerminator();
  for (const StepValue &result : sig.getResults())
    if (result.role == Role::Loss) {
      Value loss = terminator->getOperand(result.index);
      b.setInsertionPointAfterValue(loss);
      terminator->setOperand(
          result.index,
          allReduce(loss, grid.allAxes, shard::ReductionKind::Average));
    }
  return finishSignature();
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
    if (failed(grid) || failed(Partitioner(step, plan, *grid).run()))
      return signalPassFailure();
    step->setAttr(TrainDialect::kPartitionedAttrName,
                  UnitAttr::get(&getContext()));
  }
};

} // namespace
