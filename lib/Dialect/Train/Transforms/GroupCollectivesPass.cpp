//===- GroupCollectivesPass.cpp - merge neighbouring collectives ----------===//

#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "autoshard/Dialect/Train/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace autoshard::train {
#define GEN_PASS_DEF_GROUPCOLLECTIVESPASS
#include "autoshard/Dialect/Train/Transforms/Passes.h.inc"
} // namespace autoshard::train

using namespace mlir;
using namespace autoshard::train;

namespace {

int64_t byteSize(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return tensor.getNumElements() *
         static_cast<int64_t>(
             llvm::divideCeil(tensor.getElementTypeBitWidth(), 8));
}

/// What a collective is, for merging: ops with equal keys can share a
/// bucket.
struct Key {
  StringRef kind;
  SmallVector<int16_t> axes;
  int32_t reduction = -1;
  Type elementType;
  bool operator==(const Key &other) const {
    return kind == other.kind && axes == other.axes &&
           reduction == other.reduction && elementType == other.elementType;
  }
};

/// The bucket key of a groupable collective, and the bytes it moves (of the
/// full tensors); nullopt for anything else.
std::optional<std::pair<Key, int64_t>> describe(Operation *op) {
  auto elementType = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType();
  };
  if (auto allReduce = dyn_cast<shard::AllReduceOp>(op)) {
    shard::ReductionKind kind = allReduce.getReduction();
    if (kind != shard::ReductionKind::Sum &&
        kind != shard::ReductionKind::Average)
      return std::nullopt;
    if (allReduce.getInput().getType() != allReduce.getResult().getType())
      return std::nullopt;
    Key key{"all_reduce",
            SmallVector<int16_t>(allReduce.getGridAxes().begin(),
                                 allReduce.getGridAxes().end()),
            kind == shard::ReductionKind::Average ? 1 : 0,
            elementType(allReduce.getInput())};
    return std::make_pair(key, byteSize(allReduce.getInput().getType()));
  }
  if (auto scatter = dyn_cast<ReduceScatterShardsOp>(op)) {
    Key key{"reduce_scatter",
            SmallVector<int16_t>(scatter.getGridAxes()),
            static_cast<int32_t>(scatter.getReduction()),
            elementType(scatter.getInputs().front())};
    int64_t bytes = 0;
    for (Type t : scatter.getInputs().getTypes())
      bytes += byteSize(t);
    return std::make_pair(key, bytes);
  }
  if (auto gather = dyn_cast<AllGatherShardsOp>(op)) {
    Key key{"all_gather", SmallVector<int16_t>(gather.getGridAxes()), -1,
            elementType(gather.getInputs().front())};
    int64_t bytes = 0;
    for (Type t : gather.getResultTypes())
      bytes += byteSize(t);
    return std::make_pair(key, bytes);
  }
  return std::nullopt;
}

class Grouper {
public:
  Grouper(StringRef grid, int64_t capBytes) : grid(grid), capBytes(capBytes) {}

  void run(Block &body) {
    for (Operation &op : llvm::make_early_inc_range(body)) {
      std::optional<std::pair<Key, int64_t>> described = describe(&op);
      if (!described) {
        // A reader of a member's result (in this op or a region nested in
        // it) needs the bucket done before it.
        if (!members.empty() && readsMember(&op))
          flush();
        continue;
      }
      auto &[key, bytes] = *described;
      if (!members.empty() && !(key == bucketKey))
        flush();
      bucketKey = key;
      members.push_back(&op);
      memberResults.insert(op.result_begin(), op.result_end());
      bucketBytes += bytes;
      if (bucketBytes >= capBytes)
        flush();
    }
    flush();
  }

private:
  bool readsMember(Operation *op) const {
    WalkResult result = op->walk([&](Operation *nested) {
      for (Value v : nested->getOperands())
        if (memberResults.contains(v))
          return WalkResult::interrupt();
      return WalkResult::advance();
    });
    return result.wasInterrupted();
  }

  void flush() {
    if (members.size() > 1)
      merge();
    members.clear();
    memberResults.clear();
    bucketBytes = 0;
  }

  /// One op for every member, where the last member was.
  void merge() {
    Operation *last = members.back();
    OpBuilder b(last->getContext());
    b.setInsertionPointAfter(last);
    SmallVector<Value> inputs;
    SmallVector<Type> resultTypes;
    for (Operation *member : members) {
      inputs.append(member->operand_begin(), member->operand_end());
      resultTypes.append(member->result_type_begin(),
                         member->result_type_end());
    }
    Location loc = b.getFusedLoc(llvm::to_vector(
        llvm::map_range(members, [](Operation *op) { return op->getLoc(); })));
    Operation *bucket;
    if (bucketKey.kind == "all_reduce")
      bucket = AllReduceBucketOp::create(
          b, loc, inputs, grid, bucketKey.axes,
          bucketKey.reduction == 1 ? Reduction::Average : Reduction::Sum);
    else if (bucketKey.kind == "reduce_scatter")
      bucket = ReduceScatterShardsOp::create(
          b, loc, resultTypes, inputs, grid, bucketKey.axes,
          static_cast<Reduction>(bucketKey.reduction));
    else
      bucket = AllGatherShardsOp::create(b, loc, resultTypes, inputs, grid,
                                         bucketKey.axes);
    unsigned next = 0;
    for (Operation *member : members) {
      for (Value result : member->getResults())
        result.replaceAllUsesWith(bucket->getResult(next++));
      member->erase();
    }
  }

  StringRef grid;
  int64_t capBytes;
  SmallVector<Operation *> members;
  DenseSet<Value> memberResults;
  Key bucketKey;
  int64_t bucketBytes = 0;
};

struct GroupCollectivesPass
    : autoshard::train::impl::GroupCollectivesPassBase<GroupCollectivesPass> {
  void runOnOperation() override {
    FailureOr<FunctionOpInterface> step = findStepFunction(getOperation());
    if (failed(step))
      return signalPassFailure();
    auto plan = (*step)->getAttrOfType<PlanAttr>(TrainDialect::kPlanAttrName);
    if (!plan)
      return;
    Grouper(plan.getGrid().getValue(), plan.getBucketCapMb() << 20)
        .run(step->getFunctionBody().front());
  }
};

} // namespace
