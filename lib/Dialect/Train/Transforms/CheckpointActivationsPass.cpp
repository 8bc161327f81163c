//===- CheckpointActivationsPass.cpp - recompute activations in backward --===//
//
// Activation checkpointing on the whole step: a transformer block's forward
// values that its backward pass reads are recomputed right before that
// backward pass starts, from the block's input, instead of living from the
// forward pass to the backward pass.
//
//===----------------------------------------------------------------------===//

#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "autoshard/Dialect/Train/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"

#include <map>

namespace autoshard::train {
#define GEN_PASS_DEF_CHECKPOINTACTIVATIONSPASS
#include "autoshard/Dialect/Train/Transforms/Passes.h.inc"
} // namespace autoshard::train

using namespace mlir;
using namespace autoshard::train;

namespace {

/// Ops cheap to recompute and whose results are large: everything but the
/// matrix products and attention (Megatron's "selective" recomputation
/// keeps those and recomputes the rest).
bool isCheap(Operation *op) {
  return !isa<LinearOp, CausalAttentionOp, EmbeddingOp>(op);
}

class Checkpointer {
  /// A block of one micro-batch: all its forward ops, and those to
  /// recompute (all, or the cheap ones), in program order.
  struct Group {
    SmallVector<Operation *> all, recomputed;
  };

public:
  Checkpointer(Block &body, const StepSignature &sig, bool selective)
      : body(body), sig(sig), selective(selective) {}

  /// Recomputes each block's activations; returns how many ops it cloned,
  /// or -1 when the step has no transformer block.
  int64_t run() {
    markBackward();
    assignBlocks();
    if (groups.empty())
      return -1;
    int64_t recomputed = 0;
    for (auto &[key, group] : groups)
      recomputed += recompute(group);
    return recomputed;
  }

private:
  /// Backward values: results of gradient ops, and everything computed from
  /// one.
  void markBackward() {
    for (Operation &op : body) {
      StringRef name = op.getName().getStringRef();
      bool backward = name.ends_with("_grad") ||
                      isa<OptimizerOpInterface>(op) ||
                      llvm::any_of(op.getOperands(), [&](Value v) {
                        return backwardValues.contains(v);
                      });
      if (backward)
        backwardValues.insert(op.result_begin(), op.result_end());
      position[&op] = position.size();
    }
  }

  /// Forward ops by (micro-batch, block): an op that reads a parameter with
  /// a train.unit is in that unit's block, one that reads a parameter of the
  /// root unit (the embeddings, the final norm, the output projection) in
  /// none; one that reads no parameter is where the forward op before it
  /// is. The micro-batch is the number of losses before the op.
  void assignBlocks() {
    StringRef current;
    int64_t losses = 0;
    for (Operation &op : body) {
      if (op.hasTrait<LossTrait>()) {
        ++losses;
        current = "";
        continue;
      }
      if (op.getNumResults() == 0 ||
          llvm::any_of(op.getResults(),
                       [&](Value v) { return backwardValues.contains(v); }))
        continue;
      // Casts of parameters (bf16 compute copies) are computed once: the
      // partitioner casts a sharded parameter's shard before gathering it.
      // They may come anywhere before their readers, so they decide no
      // block either.
      bool paramCopy = op.getNumOperands() > 0 &&
                       llvm::all_of(op.getOperands(), [](Value v) {
                         return isa<BlockArgument>(v);
                       });
      if (paramCopy)
        continue;
      for (Value operand : op.getOperands()) {
        if (auto cast = operand.getDefiningOp<CastOp>())
          if (isa<BlockArgument>(cast.getInput()))
            operand = cast.getInput();
        if (auto arg = dyn_cast<BlockArgument>(operand)) {
          const StepValue &value = sig.getArgs()[arg.getArgNumber()];
          if (value.role == Role::Param)
            current = value.unit;
        }
      }
      if (current.empty() || isa<SliceRowsOp>(op))
        continue;
      Group &group = groups[{losses, current.str()}];
      group.all.push_back(&op);
      if (!selective || isCheap(&op))
        group.recomputed.push_back(&op);
    }
  }

  /// Clones the ops to recompute of `group` (one block of one micro-batch,
  /// in program order) right before the first backward op that reads one of
  /// their results internal to the block, and makes every backward reader
  /// of those read the clones. Forward readers keep the originals, which now
  /// die in the forward pass.
  int64_t recompute(const Group &group) {
    ArrayRef<Operation *> ops = group.recomputed;
    DenseSet<Operation *> inGroup(group.all.begin(), group.all.end());
    // The block's outputs, which forward ops after it read, are its
    // checkpoints: they live on to the backward pass and are not
    // recomputed.
    auto isOutput = [&](Value v) {
      return llvm::any_of(v.getUsers(), [&](Operation *user) {
        Operation *op = body.findAncestorOpInBlock(*user);
        return op && !inGroup.contains(op) && !isBackwardReader(op);
      });
    };
    DenseSet<Value> internal;
    for (Operation *op : ops)
      for (Value result : op->getResults())
        if (!isOutput(result))
          internal.insert(result);
    Operation *firstBackwardReader = nullptr;
    for (Operation *op : ops)
      for (Value result : op->getResults()) {
        if (!internal.contains(result))
          continue;
        for (Operation *user : result.getUsers())
          if (isBackwardReader(user) &&
              (!firstBackwardReader ||
               position[user] < position[firstBackwardReader]))
            firstBackwardReader = user;
      }
    if (!firstBackwardReader)
      return 0;
    OpBuilder b(firstBackwardReader);
    IRMapping map;
    SmallVector<Operation *> clones;
    for (Operation *op : ops) {
      clones.push_back(b.clone(*op, map));
      clones.back()->setAttr(TrainDialect::kRecomputeAttrName,
                             b.getUnitAttr());
    }
    for (Operation *op : ops)
      for (Value result : op->getResults())
        if (internal.contains(result))
          result.replaceUsesWithIf(map.lookup(result), [&](OpOperand &use) {
          return isBackwardReader(use.getOwner()) &&
                 !llvm::is_contained(clones, use.getOwner());
        });
    // Clones nothing reads (the block's output, read by the next block in
    // the forward pass) go again.
    int64_t kept = 0;
    for (Operation *clone : llvm::reverse(clones)) {
      if (clone->use_empty())
        clone->erase();
      else
        ++kept;
    }
    return kept;
  }

  bool isBackwardReader(Operation *user) {
    Operation *op = body.findAncestorOpInBlock(*user);
    return op && llvm::any_of(op->getResults(), [&](Value v) {
             return backwardValues.contains(v);
           });
  }

  Block &body;
  const StepSignature &sig;
  bool selective;
  DenseSet<Value> backwardValues;
  DenseMap<Operation *, int64_t> position;
  llvm::MapVector<std::pair<int64_t, std::string>, Group,
                  std::map<std::pair<int64_t, std::string>, unsigned>>
      groups;
};

struct CheckpointActivationsPass
    : autoshard::train::impl::CheckpointActivationsPassBase<
          CheckpointActivationsPass> {
  using CheckpointActivationsPassBase::CheckpointActivationsPassBase;

  void runOnOperation() override {
    using autoshard::strategy::ActivationCheckpointing;
    if (mode == ActivationCheckpointing::None)
      return;
    FailureOr<FunctionOpInterface> step = findStepFunction(getOperation());
    if (failed(step))
      return signalPassFailure();
    if ((*step)->hasAttr(TrainDialect::kPartitionedAttrName)) {
      step->emitOpError() << "is already partitioned; checkpoint "
                             "activations before autoshard-partition";
      return signalPassFailure();
    }
    StepSignature sig(*step);
    if (Checkpointer(step->getFunctionBody().front(), sig,
                     mode == ActivationCheckpointing::Selective)
            .run() < 0)
      step->emitWarning()
          << "activation checkpointing '"
          << autoshard::strategy::stringify(mode.getValue())
          << "' recomputes transformer blocks, and this step has none "
             "(no forward op reads a param with a '"
          << TrainDialect::kUnitAttrName << "'): nothing is recomputed";
  }
};

} // namespace
