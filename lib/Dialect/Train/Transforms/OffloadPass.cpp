//===- OffloadPass.cpp - optimizer states and parameters off the device ---===//
//
// ZeRO-Offload and ZeRO-Infinity as IR: chosen arguments move to host
// memory or NVMe files (train.memory), the ops that update them run on the
// host (train.on_host), and every value that crosses between the two gets
// an explicit transfer. The step verifier checks the result.
//
//===----------------------------------------------------------------------===//

#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "autoshard/Dialect/Train/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace autoshard::train {
#define GEN_PASS_DEF_OFFLOADPASS
#include "autoshard/Dialect/Train/Transforms/Passes.h.inc"
} // namespace autoshard::train

using namespace mlir;
using namespace autoshard::train;

namespace {

/// The space an offload tier keeps state in.
MemorySpace spaceOf(autoshard::strategy::Offload tier) {
  switch (tier) {
  case autoshard::strategy::Offload::None:
    return MemorySpace::Device;
  case autoshard::strategy::Offload::Cpu:
    return MemorySpace::Host;
  case autoshard::strategy::Offload::Nvme:
    return MemorySpace::Nvme;
  }
  llvm_unreachable("unknown offload tier");
}

bool isOptimizerParamOperand(OpOperand &use) {
  auto optimizer = dyn_cast<OptimizerOpInterface>(use.getOwner());
  if (!optimizer)
    return false;
  for (OpOperand &param : optimizer.getParamOperands())
    if (&param == &use)
      return true;
  return false;
}

/// The f32 master weight of a mixed-precision step: read only by casts to
/// its compute copy, by the optimizer, and by shard_of ops whose shards
/// are read only by those. These readers move to the host with it
/// (`hostReaders`); the compute copies then cross to the device.
bool isMasterWeight(BlockArgument param,
                    SmallVectorImpl<Operation *> &hostReaders) {
  if (!cast<RankedTensorType>(param.getType()).getElementType().isF32())
    return false;
  bool cast = false;
  SmallVector<Operation *> readers;
  auto onlyHostReaders = [&](Value value, auto &self) -> bool {
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (isOptimizerParamOperand(use))
        continue;
      if (isa<CastOp>(user)) {
        cast = true;
        readers.push_back(user);
        continue;
      }
      if (auto shard = dyn_cast<ShardOfOp>(user);
          shard && value == param) {
        readers.push_back(user);
        if (!self(shard.getResult(), self))
          return false;
        continue;
      }
      return false;
    }
    return true;
  };
  if (!onlyHostReaders(param, onlyHostReaders) || !cast)
    return false;
  hostReaders.append(readers.begin(), readers.end());
  return true;
}

struct OffloadPass : autoshard::train::impl::OffloadPassBase<OffloadPass> {
  using OffloadPassBase::OffloadPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MemorySpace optimizerSpace = spaceOf(optimizer);
    MemorySpace paramSpace = spaceOf(params);
    if (optimizerSpace == MemorySpace::Device &&
        paramSpace == MemorySpace::Device)
      return;
    FailureOr<FunctionOpInterface> found = findStepFunction(module);
    if (failed(found))
      return signalPassFailure();
    FunctionOpInterface step = *found;
    if (failed(offload(step, optimizerSpace, paramSpace)))
      return signalPassFailure();
  }

  LogicalResult offload(FunctionOpInterface step, MemorySpace optimizerSpace,
                        MemorySpace paramSpace);
  /// `value` where `user` reads it: itself, or a transfer of it, inserted
  /// right after `value` is computed (a copy to the host of a computed
  /// value) or right before `user`.
  Value convert(Value value, MemorySpace want, Operation *user);
  /// Splits each clipping norm into partial sums next to the gradients'
  /// copies to the host.
  void sumSquaresWhereCopied(Block &body);

  DenseMap<Value, Value> hostCopy;
  /// The last host copy inserted after an op: the next copy of its results
  /// follows it, so that copies keep the order their readers need them in.
  DenseMap<Operation *, Operation *> lastCopyAfter;
};

LogicalResult OffloadPass::offload(FunctionOpInterface step,
                                   MemorySpace optimizerSpace,
                                   MemorySpace paramSpace) {
  Block &body = step.getFunctionBody().front();
  StepSignature sig(step);
  for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i)
    if (step.getArgAttr(i, TrainDialect::kMemoryAttrName))
      return step.emitOpError()
             << "is already offloaded (argument #" << i << " has "
             << TrainDialect::kMemoryAttrName << "); offload a step once";

  SmallVector<MemorySpace> argSpace(step.getNumArguments(),
                                    MemorySpace::Device);
  llvm::SetVector<Operation *> onHost;
  if (optimizerSpace != MemorySpace::Device) {
    SmallVector<Operation *> optimizers;
    body.walk([&](OptimizerOpInterface op) { optimizers.push_back(op); });
    // A step without updates that asks for them has not been through
    // autodiff; one that does not (an evaluation step, a training binary's
    // --with-eval) has no states, and its mixed-precision masters go where
    // the training step keeps them.
    if (optimizers.empty() && step->hasAttr(TrainDialect::kOptimizerAttrName))
      return step.emitOpError()
             << "has no optimizer update to offload; offload applies to a "
                "whole training step (give the step a train.optimizer, or "
                "run autoshard-autodiff first)";
    onHost.insert(optimizers.begin(), optimizers.end());
    for (const StepValue &arg : sig.getArgs()) {
      if (arg.role == Role::OptState) {
        argSpace[arg.index] = optimizerSpace;
        continue;
      }
      SmallVector<Operation *> readers;
      if (arg.role == Role::Param &&
          isMasterWeight(body.getArgument(arg.index), readers)) {
        argSpace[arg.index] = optimizerSpace;
        onHost.insert(readers.begin(), readers.end());
      }
    }
    // The step counter is an optimizer state; its increment follows it.
    for (auto increment : body.getOps<IncrementOp>())
      if (auto arg = dyn_cast<BlockArgument>(increment.getInput());
          arg && argSpace[arg.getArgNumber()] != MemorySpace::Device)
        onHost.insert(increment);
  }
  if (paramSpace != MemorySpace::Device) {
    // Parameters the plan shards: not the f32 masters that ZeRO-1/2 shard
    // with the optimizer states (--offload moves those).
    auto plan = step->getAttrOfType<PlanAttr>(TrainDialect::kPlanAttrName);
    auto planShards = [&](const StepValue &arg, FlatShardAttr shard) {
      if (!plan)
        return true;
      ParamGroupAttr group =
          plan.groupOf(arg.name, ShapedType::getNumElements(shard.getShape()));
      return (group ? group.getParameters() : plan.getParameters()) ==
             Placement::Sharded;
    };
    bool sharded = false, moved = false;
    for (const StepValue &arg : sig.getArgs()) {
      auto shard = step.getArgAttrOfType<FlatShardAttr>(
          arg.index, TrainDialect::kShardAttrName);
      if (arg.role != Role::Param || !shard || !planShards(arg, shard))
        continue;
      sharded = true;
      if (argSpace[arg.index] == MemorySpace::Device) {
        argSpace[arg.index] = paramSpace;
        moved = true;
      }
    }
    if (!sharded) {
      return step.emitOpError()
             << "has no sharded parameters to offload (strategy '"
             << (plan ? plan.getStrategy().getValue() : StringRef("none"))
             << "'); parameter offload keeps each rank's shards off the "
                "device: use zero3, fsdp or hybrid";
    }
    // Under mixed precision the parameters are the f32 masters, which the
    // optimizer's offload has moved already; their bf16 compute copies are
    // cast where they are used. Saying nothing would let a user believe
    // params= put them on another tier.
    if (!moved)
      step.emitWarning()
          << "offload params=" << autoshard::strategy::stringify(params.getValue())
          << " moves nothing: every sharded parameter of this step is an "
             "f32 master weight, which lives with the optimizer states "
             "(optimizer="
          << autoshard::strategy::stringify(optimizer.getValue())
          << "); its bf16 compute copies are cast from it where they are "
             "used";
  }

  MLIRContext *ctx = step.getContext();
  for (auto [i, space] : llvm::enumerate(argSpace)) {
    if (space == MemorySpace::Device)
      continue;
    auto attr = MemorySpaceAttr::get(ctx, space);
    step.setArgAttr(i, TrainDialect::kMemoryAttrName, attr);
  }
  for (const StepValue &result : sig.getResults())
    if (std::optional<unsigned> updated = sig.getUpdatedArg(result.index);
        updated && argSpace[*updated] != MemorySpace::Device)
      step.setResultAttr(result.index, TrainDialect::kMemoryAttrName,
                         MemorySpaceAttr::get(ctx, argSpace[*updated]));
  for (Operation *op : onHost)
    op->setAttr(TrainDialect::kOnHostAttrName, UnitAttr::get(ctx));

  // Every reader gets its operands where it runs.
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : ops) {
    MemorySpace want = op->hasAttr(TrainDialect::kOnHostAttrName)
                           ? MemorySpace::Host
                           : MemorySpace::Device;
    for (OpOperand &operand : op->getOpOperands())
      if (isa<TensorType>(operand.get().getType()))
        operand.set(convert(operand.get(), want, op));
  }
  // Each result is returned from where the signature keeps it; an NVMe
  // argument's new value is written to its file.
  Operation *ret = body.getTerminator();
  OpBuilder b(ret);
  // A result crosses, or is written to its file, as soon as it is
  // computed: its buffer on the other side is then free for the next
  // optimizer update (ZeRO-Infinity's swap-out).
  for (OpOperand &operand : ret->getOpOperands()) {
    unsigned slot = operand.getOperandNumber();
    MemorySpace want = getResultMemorySpace(step, slot);
    Operation *at = ret;
    if (Operation *def = operand.get().getDefiningOp())
      at = def->getNextNode();
    if (want != MemorySpace::Nvme) {
      operand.set(convert(operand.get(), want, at));
      continue;
    }
    Value value = convert(operand.get(), MemorySpace::Host, at);
    if (Operation *def = value.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPoint(ret);
    Value target = body.getArgument(*sig.getUpdatedArg(slot));
    operand.set(NvmeWriteOp::create(b, value.getLoc(), value, target));
  }
  sumSquaresWhereCopied(body);
  return success();
}

void OffloadPass::sumSquaresWhereCopied(Block &body) {
  // Clipping's global norm reads every reduced gradient on the device after
  // the last reduction; left whole, it would keep each gradient's device
  // buffer alive until then although the gradient crossed to the host long
  // before. Its squares are summed instead where the copies are,
  // one partial sum after the copies of each op's results (a reduction's
  // gradients), and the partial sums (scalars) are added up where the norm
  // was, in the order the reductions complete (ZeRO-Offload's norm over
  // the gradients as they are reduced). The sum over shard axes that
  // autoshard-partition put after the norm of gradient shards reads the
  // total: one scalar all-reduce, as before, instead of one per reduction.
  for (SumOfSquaresOp sum : llvm::make_early_inc_range(
           body.getOps<SumOfSquaresOp>())) {
    if (sum->hasAttr(TrainDialect::kOnHostAttrName))
      continue;
    llvm::MapVector<Operation *, SmallVector<Value>> parts;
    SmallVector<Value> onDevice;
    for (Value input : sum.getInputs()) {
      Operation *def = input.getDefiningOp();
      if (def && hostCopy.count(input))
        parts[def].push_back(input);
      else
        onDevice.push_back(input);
    }
    if (parts.empty())
      continue;
    SmallVector<std::pair<Operation *, SmallVector<Value>>> ordered =
        parts.takeVector();
    llvm::sort(ordered, [](const auto &a, const auto &b) {
      return a.first->isBeforeInBlock(b.first);
    });
    OpBuilder b(sum);
    Location loc = sum.getLoc();
    SmallVector<Value> partials;
    for (auto &[def, inputs] : ordered) {
      b.setInsertionPointAfter(lastCopyAfter.lookup(def));
      partials.push_back(SumOfSquaresOp::create(b, loc, inputs));
    }
    // Inputs that do not cross to the host are summed where the norm was.
    b.setInsertionPoint(sum);
    if (!onDevice.empty())
      partials.push_back(SumOfSquaresOp::create(b, loc, onDevice));
    Value total = partials.front();
    for (Value partial : ArrayRef(partials).drop_front())
      total = AddOp::create(b, loc, total, partial).getResult();
    sum.getResult().replaceAllUsesWith(total);
    sum.erase();
  }
}

Value OffloadPass::convert(Value value, MemorySpace want, Operation *user) {
  MemorySpace have = getMemorySpace(value);
  if (have == want)
    return value;
  OpBuilder b(user);
  Location loc = user->getLoc();
  if (have == MemorySpace::Nvme) {
    // A read per reader: each staging buffer lives only as long as it.
    Value host = NvmeReadOp::create(b, loc, value);
    return want == MemorySpace::Host ? host
                                     : Value(ToDeviceOp::create(b, loc, host));
  }
  // A copy to the host serves every host reader (the host has room). A
  // computed value is copied as soon as it is final, right after the op
  // that computes it (a gradient after its reduction), so that its device
  // buffer dies there, not at the host optimizer after the backward pass
  // (ZeRO-Offload's copy of each gradient as soon as it is reduced); a
  // device argument, which lives for the whole step anyway, right before
  // its first reader.
  if (want == MemorySpace::Host) {
    Value &copy = hostCopy[value];
    if (copy)
      return copy;
    if (Operation *def = value.getDefiningOp()) {
      Operation *&last = lastCopyAfter[def];
      b.setInsertionPointAfter(last ? last : def);
      copy = ToHostOp::create(b, value.getLoc(), value);
      last = copy.getDefiningOp();
    } else {
      copy = ToHostOp::create(b, loc, value);
    }
    return copy;
  }
  // A copy to the device is made for each reader: an offloaded parameter
  // shard is on the device only while a gather reads it (DeepSpeed's
  // offload_param fetches it per use too).
  return ToDeviceOp::create(b, loc, value);
}

} // namespace
