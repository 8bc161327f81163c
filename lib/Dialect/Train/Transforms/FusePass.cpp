//===- FusePass.cpp - groups of train ops as the runtime's fused kernels --===//
//
// Which groups the runtime runs as one kernel is a decision about the
// step's IR; making it here, as ops, lets a test read it and leaves the
// lowering one call per op.
//
//===----------------------------------------------------------------------===//

#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "autoshard/Dialect/Train/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <array>

namespace autoshard::train {
#define GEN_PASS_DEF_FUSEPASS
#include "autoshard/Dialect/Train/Transforms/Passes.h.inc"
} // namespace autoshard::train

using namespace mlir;
using namespace autoshard::train;

namespace {

/// A train.gelu_grad whose gradient operand is a train.linear_grad_input
/// read by nothing else, and the first train.bias_grad of its result, if
/// any.
struct LinearGradGelu {
  Operation *gradInput = nullptr;
  Operation *geluGrad = nullptr;
  Operation *biasGrad = nullptr; // or null
};

/// A train.linear_grad_weight and a train.bias_grad of the same output
/// gradient, and the later of the two, where the fused op goes.
struct LinearGradWeightBias {
  Operation *weightGrad = nullptr;
  Operation *biasGrad = nullptr;
  Operation *later = nullptr; // one of the two
};

/// Whether `b` can join a multi-tensor call with `a`: the same gradient
/// dtype, scalars and hyperparameters (weight decay aside, which each
/// tensor carries), and neither reads what the other updates, since a GPU
/// runs the tensors of one call at once.
/// Whether `a` and `b` take the same call arguments besides their tensors:
/// the same gradient dtype, step, learning rate and hyperparameters, both on
/// the host or both on the device. An equivalence, so a run of ops is
/// checked against its first member only.
bool sameAdamwCall(AdamwOp a, AdamwOp b) {
  return a.getGrad().getType().getElementType() ==
             b.getGrad().getType().getElementType() &&
         a.getLr() == b.getLr() && a.getStep() == b.getStep() &&
         a.getGradScale() == b.getGradScale() &&
         a.getBeta1() == b.getBeta1() && a.getBeta2() == b.getBeta2() &&
         a.getEps() == b.getEps() &&
         a->hasAttr(TrainDialect::kOnHostAttrName) ==
             b->hasAttr(TrainDialect::kOnHostAttrName);
}

/// The tensors an AdamW op updates.
std::array<Value, 3> adamwUpdated(AdamwOp op) {
  return {op.getParam(), op.getExpAvg(), op.getExpAvgSq()};
}

SmallVector<std::pair<Operation *, Operation *>>
linearGeluPairs(Block &body) {
  SmallVector<std::pair<Operation *, Operation *>> pairs;
  for (auto linear : body.getOps<LinearOp>()) {
    if (!linear.getBias())
      continue;
    Value result = linear.getResult();
    // The first GELU of the result, in program order.
    GeluOp gelu;
    for (Operation *user : result.getUsers())
      if (auto candidate = dyn_cast<GeluOp>(user))
        if (!gelu || candidate->isBeforeInBlock(gelu))
          gelu = candidate;
    if (!gelu || gelu->getBlock() != linear->getBlock())
      continue;
    // The call produces the result at the GELU: nothing may read it before.
    bool readEarlier = llvm::any_of(result.getUsers(), [&](Operation *user) {
      return user != gelu.getOperation() && user->isBeforeInBlock(gelu);
    });
    if (!readEarlier)
      pairs.push_back({linear.getOperation(), gelu.getOperation()});
  }
  return pairs;
}

SmallVector<LinearGradGelu> linearGradGeluGroups(Block &body) {
  SmallVector<LinearGradGelu> groups;
  for (auto geluGrad : body.getOps<GeluGradOp>()) {
    Value dx = geluGrad.getGradOutput();
    auto gradInput = dx.getDefiningOp<LinearGradInputOp>();
    // The input gradient is the call's intermediate: GELU's gradient must
    // be its only reader.
    if (!gradInput || gradInput->getBlock() != geluGrad->getBlock() ||
        !dx.hasOneUse())
      continue;
    LinearGradGelu group{gradInput.getOperation(), geluGrad.getOperation(),
                         nullptr};
    for (Operation *user : geluGrad.getResult().getUsers())
      if (isa<BiasGradOp>(user) &&
          (!group.biasGrad || user->isBeforeInBlock(group.biasGrad)))
        group.biasGrad = user;
    groups.push_back(group);
  }
  return groups;
}

SmallVector<LinearGradWeightBias> linearGradWeightBiasPairs(
    Block &body, const llvm::SmallPtrSetImpl<Operation *> &taken) {
  SmallVector<LinearGradWeightBias> pairs;
  llvm::SmallPtrSet<Operation *, 32> paired;
  // Whether the result of `op` is read before, or by, `at`.
  auto readBy = [](Operation *op, Operation *at) {
    return llvm::any_of(op->getResult(0).getUsers(), [&](Operation *user) {
      return user == at || user->isBeforeInBlock(at);
    });
  };
  for (auto biasGrad : body.getOps<BiasGradOp>()) {
    if (taken.contains(biasGrad))
      continue;
    Value dy = biasGrad.getGradOutput();
    // The first weight gradient of dy that can go with it.
    LinearGradWeightBias best;
    for (Operation *user : dy.getUsers()) {
      auto weightGrad = dyn_cast<LinearGradWeightOp>(user);
      if (!weightGrad || weightGrad.getGradOutput() != dy ||
          weightGrad->getBlock() != biasGrad->getBlock() ||
          paired.contains(weightGrad) || taken.contains(weightGrad) ||
          weightGrad->hasAttr(TrainDialect::kOnHostAttrName) !=
              biasGrad->hasAttr(TrainDialect::kOnHostAttrName))
        continue;
      bool weightFirst = weightGrad->isBeforeInBlock(biasGrad);
      Operation *earlier = weightFirst ? weightGrad.getOperation()
                                       : biasGrad.getOperation();
      Operation *later = weightFirst ? biasGrad.getOperation()
                                     : weightGrad.getOperation();
      // The call produces both results at the later op, and reads the
      // weight gradient's input there.
      if (readBy(earlier, later))
        continue;
      if (!best.weightGrad || weightGrad->isBeforeInBlock(best.weightGrad))
        best = {weightGrad.getOperation(), biasGrad.getOperation(), later};
    }
    if (!best.weightGrad)
      continue;
    paired.insert(best.weightGrad);
    pairs.push_back(best);
  }
  llvm::sort(pairs, [](const LinearGradWeightBias &a,
                       const LinearGradWeightBias &b) {
    return a.later->isBeforeInBlock(b.later);
  });
  return pairs;
}

SmallVector<SmallVector<Operation *>> adamwGroups(Block &body) {
  SmallVector<SmallVector<Operation *>> groups;
  SmallVector<Operation *> run;
  // The results of the run's members, which the call produces only at the
  // run's last member; the tensors they update and everything they read:
  // one call cannot hold two members of which one reads what the other
  // updates.
  llvm::SmallDenseSet<Value, 32> produced, updated, read;
  auto close = [&] {
    if (run.size() >= 2)
      groups.push_back(run);
    run.clear();
    produced.clear();
    updated.clear();
    read.clear();
  };
  auto usesRun = [&](Operation &op) {
    return llvm::any_of(op.getOperands(),
                        [&](Value v) { return produced.contains(v); });
  };
  for (Operation &op : body) {
    // Ops between the members that do not read their results (ZeRO-1/2's
    // shards of the next parameters) run before the call, which takes place
    // at the last member; the first op that does read one (a gather of
    // updated shards, a copy back to the device, the return) ends the run.
    if (usesRun(op))
      close();
    auto adamw = dyn_cast<AdamwOp>(op);
    if (!adamw)
      continue;
    std::array<Value, 3> writes = adamwUpdated(adamw);
    bool joins =
        run.empty() ||
        (sameAdamwCall(cast<AdamwOp>(run.front()), adamw) &&
         llvm::none_of(op.getOperands(),
                       [&](Value v) { return updated.contains(v); }) &&
         llvm::none_of(writes, [&](Value v) { return read.contains(v); }));
    if (!joins)
      close();
    run.push_back(&op);
    produced.insert(op.result_begin(), op.result_end());
    updated.insert(writes.begin(), writes.end());
    read.insert(op.operand_begin(), op.operand_end());
  }
  close();
  return groups;
}

/// The fused op takes the place of `anchor`, the group's op that runs last;
/// an offloaded group stays on the host.
void placeLike(Operation *fused, Operation *anchor) {
  if (Attribute onHost = anchor->getAttr(TrainDialect::kOnHostAttrName))
    fused->setAttr(TrainDialect::kOnHostAttrName, onHost);
}

void fuseLinearGelu(Operation *linearOp, Operation *geluOp) {
  auto linear = cast<LinearOp>(linearOp);
  auto gelu = cast<GeluOp>(geluOp);
  OpBuilder b(gelu);
  auto fused = LinearGeluOp::create(
      b, gelu.getLoc(), linear.getType(), gelu.getType(), linear.getInput(),
      linear.getWeight(), linear.getBias());
  placeLike(fused, gelu);
  linear.getResult().replaceAllUsesWith(fused.getPreActivation());
  gelu.getResult().replaceAllUsesWith(fused.getResult());
  gelu.erase();
  linear.erase();
}

void fuseLinearGradGelu(const LinearGradGelu &group) {
  auto gradInput = cast<LinearGradInputOp>(group.gradInput);
  auto geluGrad = cast<GeluGradOp>(group.geluGrad);
  auto biasGrad = cast_or_null<BiasGradOp>(group.biasGrad);
  OpBuilder b(geluGrad);
  SmallVector<Type, 2> types{geluGrad.getType()};
  if (biasGrad)
    types.push_back(biasGrad.getType());
  auto fused = LinearGradGeluOp::create(
      b, geluGrad.getLoc(), types,
      ValueRange{gradInput.getGradOutput(), gradInput.getWeight(),
                 geluGrad.getInput()});
  placeLike(fused, geluGrad);
  geluGrad.getResult().replaceAllUsesWith(fused.getGradPreActivation());
  geluGrad.erase();
  gradInput.erase();
  if (biasGrad) {
    biasGrad.getResult().replaceAllUsesWith(fused.getBiasGrad());
    biasGrad.erase();
  }
}

void fuseLinearGradWeightBias(const LinearGradWeightBias &pair) {
  auto weightGrad = cast<LinearGradWeightOp>(pair.weightGrad);
  auto biasGrad = cast<BiasGradOp>(pair.biasGrad);
  OpBuilder b(pair.later);
  auto fused = LinearGradWeightBiasOp::create(
      b, pair.later->getLoc(), weightGrad.getType(), biasGrad.getType(),
      weightGrad.getGradOutput(), weightGrad.getInput());
  placeLike(fused, pair.later);
  weightGrad.getResult().replaceAllUsesWith(fused.getWeightGrad());
  biasGrad.getResult().replaceAllUsesWith(fused.getBiasGrad());
  weightGrad.erase();
  biasGrad.erase();
}

void fuseAdamw(ArrayRef<Operation *> group) {
  SmallVector<Value> params, grads, expAvgs, expAvgSqs;
  SmallVector<float> weightDecays;
  SmallVector<Type> types;
  for (Operation *member : group) {
    auto adamw = cast<AdamwOp>(member);
    params.push_back(adamw.getParam());
    grads.push_back(adamw.getGrad());
    expAvgs.push_back(adamw.getExpAvg());
    expAvgSqs.push_back(adamw.getExpAvgSq());
    weightDecays.push_back(adamw.getWeightDecay().convertToFloat());
  }
  for (unsigned result = 0; result < 3; ++result)
    for (Operation *member : group)
      types.push_back(member->getResult(result).getType());
  auto last = cast<AdamwOp>(group.back());
  OpBuilder b(last);
  auto fused = AdamwMultiOp::create(
      b, last.getLoc(), types, params, grads, expAvgs, expAvgSqs,
      last.getLr(), last.getStep(), last.getGradScale(), last.getBeta1Attr(),
      last.getBeta2Attr(), last.getEpsAttr(),
      b.getDenseF32ArrayAttr(weightDecays));
  placeLike(fused, last);
  for (auto [i, member] : llvm::enumerate(group)) {
    auto adamw = cast<AdamwOp>(member);
    adamw.getNewParam().replaceAllUsesWith(fused.getNewParam(i));
    adamw.getNewExpAvg().replaceAllUsesWith(fused.getNewExpAvg(i));
    adamw.getNewExpAvgSq().replaceAllUsesWith(fused.getNewExpAvgSq(i));
    adamw.erase();
  }
}

struct FusePass : autoshard::train::impl::FusePassBase<FusePass> {
  void runOnOperation() override {
    FailureOr<FunctionOpInterface> step = findStepFunction(getOperation());
    if (failed(step))
      return signalPassFailure();
    Block &body = (*step).getFunctionBody().front();
    // Every group is chosen on the unfused step, as one set: the weight and
    // bias gradient pairs leave out the ops that GELU's gradient takes.
    auto linearGelu = linearGeluPairs(body);
    auto gradGelu = linearGradGeluGroups(body);
    llvm::SmallPtrSet<Operation *, 32> taken;
    for (const LinearGradGelu &group : gradGelu) {
      taken.insert(group.gradInput);
      if (group.biasGrad)
        taken.insert(group.biasGrad);
    }
    auto weightBias = linearGradWeightBiasPairs(body, taken);
    auto adamw = adamwGroups(body);

    for (auto [linear, gelu] : linearGelu)
      fuseLinearGelu(linear, gelu);
    for (const LinearGradGelu &group : gradGelu)
      fuseLinearGradGelu(group);
    for (const LinearGradWeightBias &pair : weightBias)
      fuseLinearGradWeightBias(pair);
    for (ArrayRef<Operation *> group : adamw)
      fuseAdamw(group);
  }
};

} // namespace
