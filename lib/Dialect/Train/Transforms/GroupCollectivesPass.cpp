//===- GroupCollectivesPass.cpp - merge neighbouring collectives ----------===//

#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "autoshard/Dialect/Train/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

#include <map>

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

/// Keys are compared field by field; a short string names them in a map.
std::string keyString(const Key &key) {
  std::string text = key.kind.str() + "/" + std::to_string(key.reduction) + "/";
  for (int16_t axis : key.axes)
    text += std::to_string(axis) + ",";
  llvm::raw_string_ostream os(text);
  os << "/" << key.elementType;
  return text;
}

/// One open bucket per key: collectives of other kinds in between do not
/// close it (they do not depend on it), a reader of one of its members
/// does, and so does the start of a micro-batch (its train.slice_rows).
class Grouper {
public:
  Grouper(StringRef grid, int64_t capBytes) : grid(grid), capBytes(capBytes) {}

  void run(Block &body) {
    for (Operation &op : llvm::make_early_inc_range(body)) {
      // A reader of a member's result (in this op or a region nested in
      // it) needs that bucket done before it.
      for (std::string &name : bucketsReadBy(&op))
        flush(name);
      // A micro-batch begins: what the last one issued is not held back
      // for this one's collectives.
      if (isa<SliceRowsOp>(op))
        while (!open.empty())
          flush(open.begin()->first);
      std::optional<std::pair<Key, int64_t>> described = describe(&op);
      if (!described)
        continue;
      auto &[key, bytes] = *described;
      std::string name = keyString(key);
      Bucket &bucket = open[name];
      bucket.key = key;
      bucket.members.push_back(&op);
      for (Value result : op.getResults())
        owner[result] = name;
      bucket.bytes += bytes;
      if (bucket.bytes >= capBytes)
        flush(name);
    }
    while (!open.empty())
      flush(open.begin()->first);
  }

private:
  struct Bucket {
    Key key;
    SmallVector<Operation *> members;
    int64_t bytes = 0;
  };

  /// The open buckets a member of which `op` reads.
  SmallVector<std::string> bucketsReadBy(Operation *op) const {
    SmallVector<std::string> names;
    if (owner.empty())
      return names;
    op->walk([&](Operation *nested) {
      for (Value v : nested->getOperands()) {
        auto it = owner.find(v);
        if (it != owner.end() && !llvm::is_contained(names, it->second))
          names.push_back(it->second);
      }
    });
    return names;
  }

  void flush(const std::string &name) {
    auto it = open.find(name);
    if (it == open.end())
      return;
    Bucket bucket = std::move(it->second);
    open.erase(it);
    for (Operation *member : bucket.members)
      for (Value result : member->getResults())
        owner.erase(result);
    if (bucket.members.size() > 1)
      merge(bucket);
  }

  /// One op for every member, where the last member was.
  void merge(const Bucket &bucket) {
    ArrayRef<Operation *> members = bucket.members;
    const Key &key = bucket.key;
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
    Operation *merged;
    if (key.kind == "all_reduce")
      merged = AllReduceBucketOp::create(
          b, loc, inputs, grid, key.axes,
          key.reduction == 1 ? Reduction::Average : Reduction::Sum);
    else if (key.kind == "reduce_scatter")
      merged = ReduceScatterShardsOp::create(
          b, loc, resultTypes, inputs, grid, key.axes,
          static_cast<Reduction>(key.reduction));
    else
      merged = AllGatherShardsOp::create(b, loc, resultTypes, inputs, grid,
                                         key.axes);
    unsigned next = 0;
    for (Operation *member : members) {
      for (Value result : member->getResults())
        result.replaceAllUsesWith(merged->getResult(next++));
      member->erase();
    }
  }

  StringRef grid;
  int64_t capBytes;
  /// Open buckets by key, in the order they opened.
  llvm::MapVector<std::string, Bucket, std::map<std::string, unsigned>> open;
  /// The open bucket each member result belongs to.
  DenseMap<Value, std::string> owner;
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
