//===- AutodiffPass.cpp - reverse-mode gradients and the optimizer --------===//

#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "autoshard/Dialect/Train/Transforms/BatchResize.h"
#include "autoshard/Dialect/Train/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/Support/Format.h"

#include <cmath>

namespace autoshard::train {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "autoshard/Dialect/Train/Transforms/Passes.h.inc"
} // namespace autoshard::train

using namespace mlir;
using namespace autoshard::train;

namespace {

/// Values that depend on a parameter: the operands whose gradients a rule
/// must build. (Usefulness needs no analysis: only ops the backward sweep
/// reaches from the loss receive gradients.)
DenseSet<Value> findVariedValues(Block &body, const StepSignature &sig) {
  DenseSet<Value> varied;
  for (const StepValue &arg : sig.getArgs())
    if (arg.role == Role::Param)
      varied.insert(body.getArgument(arg.index));
  for (Operation &op : body.without_terminator())
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return varied.contains(v); }))
      varied.insert(op.result_begin(), op.result_end());
  return varied;
}

/// Whether `value` can have a gradient: a float tensor.
bool isDifferentiable(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && isa<FloatType>(type.getElementType());
}

/// The step's arguments and results after autodiff, built up in order.
struct NewSignature {
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
};

DictionaryAttr valueAttrs(MLIRContext *ctx, Role role, StringRef name,
                          InitAttr init = {}) {
  Builder b(ctx);
  SmallVector<NamedAttribute> attrs = {
      b.getNamedAttr(TrainDialect::kRoleAttrName, RoleAttr::get(ctx, role)),
      b.getNamedAttr(TrainDialect::kNameAttrName, b.getStringAttr(name))};
  if (init)
    attrs.push_back(b.getNamedAttr(TrainDialect::kInitAttrName, init));
  return b.getDictionaryAttr(attrs);
}

class Autodiff {
public:
  Autodiff(func::FuncOp step, bool exposeGradients,
           bool allowUnusedParams = false)
      : step(step), ctx(step.getContext()), sig(step),
        body(step.getBody().front()), b(ctx),
        exposeGradients(exposeGradients),
        allowUnusedParams(allowUnusedParams) {}

  LogicalResult run();
  /// An evaluation step's micro-batches: the forward pass on each block of
  /// the batch, no backward pass; the step returns the mean loss.
  LogicalResult splitForwardPass(int64_t count);

private:
  /// Builds the backward pass of `ops` (in program order) at the end of the
  /// step; `loss` is seeded when one of them computes it.
  LogicalResult differentiate(ArrayRef<Operation *> ops, Value loss);
  /// Replaces the forward pass by `count` copies on blocks of the batch
  /// (micro-batches), each followed by its backward pass unless
  /// `forwardOnly`; returns the mean loss.
  FailureOr<Value> accumulate(int64_t count, Value loss,
                              bool forwardOnly = false);
  void addGradient(Value value, Value contribution, Location loc);
  /// A new argument at the end of the step.
  Value addArgument(Type type, Role role, StringRef name, InitAttr init);
  Value gradientForOptimizer(Value param);
  /// Fails naming the parameters that received no gradient, unless
  /// `allowUnusedParams`.
  LogicalResult checkUnusedParams();
  LogicalResult applyOptimizer(Attribute config, Value loss);

  func::FuncOp step;
  MLIRContext *ctx;
  StepSignature sig;
  Block &body;
  OpBuilder b;
  bool exposeGradients;
  bool allowUnusedParams;
  DenseSet<Value> varied;
  DenseMap<Value, Value> grads;
  NewSignature out;
};

void Autodiff::addGradient(Value value, Value contribution, Location loc) {
  Value &total = grads[value];
  total = total ? AddOp::create(b, loc, total, contribution).getResult()
                : contribution;
}

LogicalResult Autodiff::differentiate(ArrayRef<Operation *> ops, Value loss) {
  Operation *lossOp = loss ? loss.getDefiningOp() : nullptr;
  if (loss && (!lossOp || !isa<DifferentiableOpInterface>(lossOp)))
    return step.emitOpError()
           << "returns a loss that no differentiable loss op computes; "
              "autoshard-autodiff seeds the gradient at "
              "train.softmax_cross_entropy or train.nll_loss";
  // The backward ops go before the terminator, behind every op in `ops`.
  b.setInsertionPoint(body.getTerminator());
  for (Operation *opPtr : llvm::reverse(ops)) {
    Operation &op = *opPtr;
    bool seed = &op == lossOp;
    SmallVector<Value> resultGrads;
    for (Value result : op.getResults())
      resultGrads.push_back(grads.lookup(result));
    if (!seed && llvm::all_of(resultGrads, [](Value g) { return !g; }))
      continue;
    auto differentiable = dyn_cast<DifferentiableOpInterface>(op);
    if (!differentiable)
      return op.emitOpError()
             << "is on the path from a parameter to the loss but has no "
                "gradient rule (DifferentiableOpInterface)";
    // Integer values (labels, ids, their views, masks) have no gradient,
    // whatever they were computed from.
    SmallVector<bool> needed;
    for (Value operand : op.getOperands())
      needed.push_back(varied.contains(operand) && isDifferentiable(operand));
    SmallVector<Value> operandGrads(op.getNumOperands());
    if (failed(differentiable.buildGradient(b, resultGrads, seed, needed,
                                            operandGrads)))
      return failure();
    for (auto [operand, grad] : llvm::zip(op.getOperands(), operandGrads))
      if (grad)
        addGradient(operand, grad, op.getLoc());
  }
  return success();
}

FailureOr<Value> Autodiff::accumulate(int64_t count, Value loss,
                                      bool forwardOnly) {
  Location loc = step.getLoc();
  // Ops that read the batch run once per micro-batch; the others (casts of
  // the master weights) run once and receive the summed gradients.
  DenseSet<Value> perBatch;
  SmallVector<BlockArgument> batchArgs;
  for (const StepValue &arg : sig.getArgs())
    if (arg.role == Role::Input || arg.role == Role::Label) {
      if (arg.type.getDimSize(0) % count != 0)
        return step.emitOpError()
               << "cannot cut the batch of " << stringifyRole(arg.role)
               << " argument \"" << arg.name << "\" ("
               << arg.type.getDimSize(0) << " rows) into " << count
               << " equal micro-batches";
      batchArgs.push_back(body.getArgument(arg.index));
      perBatch.insert(batchArgs.back());
    }
  // Batch-independent tensors with the batch's rows that a batch-dependent
  // op pairs with the batch (batchShapedFill) are cut per micro-batch too;
  // every reader of one must read the batch.
  DenseSet<Value> readsOfBatch(perBatch.begin(), perBatch.end());
  for (Operation &op : body.without_terminator())
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return readsOfBatch.contains(v); }))
      readsOfBatch.insert(op.result_begin(), op.result_end());
  DenseSet<Operation *> fills;
  for (Operation &op : body.without_terminator()) {
    for (Value operand : op.getOperands()) {
      auto type = dyn_cast<RankedTensorType>(operand.getType());
      if (readsOfBatch.contains(operand) || !type || type.getRank() == 0)
        continue;
      for (Value other : op.getOperands()) {
        auto batchType = dyn_cast<RankedTensorType>(other.getType());
        if (!readsOfBatch.contains(other) || !batchType ||
            batchType.getRank() != type.getRank())
          continue;
        if (Operation *fill =
                batchShapedFill(operand, batchType.getDimSize(0)))
          fills.insert(fill);
        break;
      }
    }
  }
  for (Operation *fill : fills)
    for (Operation *user : fill->getUsers())
      if (llvm::none_of(user->getOperands(), [&](Value v) {
            return readsOfBatch.contains(v);
          }))
        return user->emitOpError()
               << "reads " << fill->getName() << " of "
               << fill->getResult(0).getType()
               << " without the batch, while other ops pair it with the "
                  "batch's rows, which micro-batches divide; give each "
                  "reader its own tensor";

  SmallVector<Operation *> shared, perMicroBatch;
  for (Operation &op : body.without_terminator()) {
    bool readsBatch =
        fills.contains(&op) || llvm::any_of(op.getOperands(), [&](Value v) {
          return perBatch.contains(v);
        });
    if (readsBatch)
      perBatch.insert(op.result_begin(), op.result_end());
    (readsBatch ? perMicroBatch : shared).push_back(&op);
  }
  if (!perBatch.contains(loss))
    return step.emitOpError() << "has a loss that does not depend on the "
                                 "batch, so micro-batches cannot divide it";

  SmallVector<Value> losses;
  for (int64_t k = 0; k < count; ++k) {
    b.setInsertionPoint(body.getTerminator());
    IRMapping mapping;
    for (BlockArgument arg : batchArgs) {
      auto type = cast<RankedTensorType>(arg.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[0] /= count;
      mapping.map(arg, SliceRowsOp::create(b, loc, type.clone(shape), arg,
                                           b.getI64IntegerAttr(k * shape[0])));
    }
    SmallVector<Operation *> clones;
    for (Operation *op : perMicroBatch) {
      Operation *clone = b.clone(*op, mapping);
      clones.push_back(clone);
      if (failed(fills.contains(op)
                     ? resizeBatchShapedFill(clone, clone, count)
                     : rederiveResultTypes(clone, count)))
        return failure();
      if (auto resizable = dyn_cast<BatchResizableOpInterface>(clone))
        resizable.placeMicroBatch(k, count);
      perBatch.insert(clone->result_begin(), clone->result_end());
      if (llvm::any_of(clone->getOperands(),
                       [&](Value v) { return varied.contains(v); }))
        varied.insert(clone->result_begin(), clone->result_end());
    }
    losses.push_back(mapping.lookup(loss));
    if (!forwardOnly && failed(differentiate(clones, losses.back())))
      return failure();
  }

  // Sums over micro-batches become means: the loss, and the gradients that
  // reach the shared ops and the parameters.
  b.setInsertionPoint(body.getTerminator());
  FloatAttr inverse = b.getF32FloatAttr(1.0 / static_cast<double>(count));
  // In program order (arguments, then the shared ops' results), not in the
  // order of `grads`, a map keyed by pointers: the scales' order decides the
  // order of the gradient buckets and of the arena, which must not change
  // from one compilation to the next.
  auto scaleGradient = [&](Value value) {
    auto it = grads.find(value);
    if (it != grads.end() && !perBatch.contains(value))
      it->second = ScaleOp::create(b, loc, it->second, inverse);
  };
  for (BlockArgument arg : body.getArguments())
    scaleGradient(arg);
  for (Operation *op : shared)
    for (Value result : op->getResults())
      scaleGradient(result);
  if (!forwardOnly && failed(differentiate(shared, Value())))
    return failure();
  Value total = losses.front();
  for (Value l : ArrayRef(losses).drop_front())
    total = AddOp::create(b, loc, total, l);
  Value mean = ScaleOp::create(b, loc, total, inverse);

  // The full-batch forward pass has no readers left.
  body.getTerminator()->setOperand(0, mean);
  for (Operation *op : llvm::reverse(perMicroBatch))
    op->erase();
  return mean;
}

LogicalResult Autodiff::splitForwardPass(int64_t count) {
  Value loss = body.getTerminator()->getOperand(0);
  if (failed(accumulate(count, loss, /*forwardOnly=*/true)))
    return failure();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
  return success();
}

Value Autodiff::addArgument(Type type, Role role, StringRef name,
                            InitAttr init) {
  out.argTypes.push_back(type);
  out.argAttrs.push_back(valueAttrs(ctx, role, name, init));
  return body.addArgument(type, step.getLoc());
}

/// The gradient an optimizer reads: the bf16 gradient itself when the f32
/// master parameter was cast to bf16 for compute (the kernel upcasts it).
Value Autodiff::gradientForOptimizer(Value param) {
  Value grad = grads.lookup(param);
  if (auto cast = grad.getDefiningOp<CastOp>())
    if (cast.getInput().getType().getElementType().isBF16())
      return cast.getInput();
  return grad;
}

LogicalResult Autodiff::checkUnusedParams() {
  // The backward sweep is the activity analysis: a parameter it did not
  // reach is on no path to the loss. Such a parameter is nearly always a
  // bug (a layer built but not wired in), which training would hide by
  // leaving it at its initial value; PyTorch DDP refuses it too.
  if (allowUnusedParams)
    return success();
  SmallVector<StringRef> unused;
  int64_t params = 0;
  for (const StepValue &arg : sig.getArgs())
    if (arg.role == Role::Param) {
      ++params;
      if (!grads.lookup(body.getArgument(arg.index)))
        unused.push_back(arg.name);
    }
  // None used at all is applyOptimizer's "nothing to train", which no flag
  // accepts.
  if (unused.empty() || static_cast<int64_t>(unused.size()) == params)
    return success();
  InFlightDiagnostic diag =
      step.emitOpError() << "has " << unused.size()
                         << (unused.size() == 1 ? " parameter" : " parameters")
                         << " the loss does not depend on: ";
  for (auto [i, name] : llvm::enumerate(unused))
    diag << (i ? ", " : "") << "\"" << name << "\"";
  diag << "; remove " << (unused.size() == 1 ? "it" : "them")
       << " from the step, or accept " << (unused.size() == 1 ? "it" : "them")
       << " unchanged with --allow-unused-params (autoshard-autodiff's "
          "allow-unused-params; PyTorch DDP's find_unused_parameters=True)";
  return diag;
}

LogicalResult Autodiff::applyOptimizer(Attribute config, Value loss) {
  InitAttr zeros = InitAttr::get(ctx, InitKind::Zeros, APFloat(0.0));
  // Parameters with a gradient, in argument order.
  SmallVector<std::pair<const StepValue *, Value>> updated;
  for (const StepValue &arg : sig.getArgs())
    if (arg.role == Role::Param && grads.lookup(body.getArgument(arg.index)))
      updated.push_back({&arg, gradientForOptimizer(
                                   body.getArgument(arg.index))});
  if (updated.empty())
    return step.emitOpError()
           << "has no parameter on which the loss depends, so there is "
              "nothing to train";

  double lrInit = 0;
  if (auto adamw = dyn_cast<AdamwConfigAttr>(config))
    lrInit = adamw.getLr().getValueAsDouble();
  else
    lrInit = cast<SgdConfigAttr>(config).getLr().getValueAsDouble();
  Value lr;
  if (std::optional<unsigned> index = sig.getArgIndex("lr")) {
    const StepValue &arg = sig.getArgs()[*index];
    if (arg.role != Role::Hyper)
      return step.emitOpError()
             << "has an argument named \"lr\" that is not a hyper; the "
                "optimizer's learning rate needs that name";
    // The hyper's init is the learning rate the binary starts with.
    double start = arg.init && arg.init.getKind() == InitKind::Constant
                       ? arg.init.getValueAsDouble()
                       : 0.0;
    if (!(start >= 0 && std::isfinite(start))) {
      std::string text;
      llvm::raw_string_ostream(text) << llvm::format("%g", start);
      return step.emitOpError()
             << "starts its learning rate, hyper \"lr\", at " << text
             << "; a learning rate is a finite number >= 0";
    }
    lr = body.getArgument(*index);
  } else {
    lr = addArgument(RankedTensorType::get({}, b.getF32Type()), Role::Hyper,
                     "lr",
                     InitAttr::get(ctx, InitKind::Constant, APFloat(lrInit)));
  }

  Location loc = step.getLoc();
  b.setInsertionPoint(body.getTerminator());
  Value gradScale, sumsq;
  if (auto maxNorm = step->getAttrOfType<FloatAttr>(
          TrainDialect::kMaxGradNormAttrName)) {
    SmallVector<Value> all;
    for (auto &[param, grad] : updated)
      all.push_back(grad);
    sumsq = SumOfSquaresOp::create(b, loc, all);
    gradScale = ClipCoefficientOp::create(
        b, loc, sumsq, b.getF32FloatAttr(maxNorm.getValueAsDouble()));
  }

  SmallVector<Value> newParams, newStates;
  SmallVector<DictionaryAttr> paramAttrs, stateAttrs;
  auto decayOf = [](const StepValue &param, double weightDecay) {
    // The parameter's own (PyTorch's parameter groups), else biases and
    // norm gains are not decayed (nanoGPT, Megatron).
    if (param.weightDecay)
      return param.weightDecay.getValueAsDouble();
    return param.type.getRank() >= 2 ? weightDecay : 0.0;
  };

  if (auto adamw = dyn_cast<AdamwConfigAttr>(config)) {
    auto counterType = RankedTensorType::get({}, b.getI32Type());
    Value counter =
        addArgument(counterType, Role::OptState, "optimizer.step", zeros);
    Value stepNumber = IncrementOp::create(b, loc, counter);
    for (auto &[param, grad] : updated) {
      std::string name = param->name.str();
      Value m = addArgument(param->type, Role::OptState, name + ".exp_avg",
                            zeros);
      Value v = addArgument(param->type, Role::OptState, name + ".exp_avg_sq",
                            zeros);
      auto update = AdamwOp::create(
          b, loc, body.getArgument(param->index), grad, m, v, lr, stepNumber,
          gradScale,
          b.getF32FloatAttr(adamw.getBeta1().getValueAsDouble()),
          b.getF32FloatAttr(adamw.getBeta2().getValueAsDouble()),
          b.getF32FloatAttr(adamw.getEps().getValueAsDouble()),
          b.getF32FloatAttr(
              decayOf(*param, adamw.getWeightDecay().getValueAsDouble())));
      newParams.push_back(update.getNewParam());
      paramAttrs.push_back(valueAttrs(ctx, Role::Param, name));
      newStates.append({update.getNewExpAvg(), update.getNewExpAvgSq()});
      stateAttrs.append({valueAttrs(ctx, Role::OptState, name + ".exp_avg"),
                         valueAttrs(ctx, Role::OptState, name + ".exp_avg_sq")});
    }
    newStates.push_back(stepNumber);
    stateAttrs.push_back(valueAttrs(ctx, Role::OptState, "optimizer.step"));
  } else {
    auto sgd = cast<SgdConfigAttr>(config);
    double momentum = sgd.getMomentum().getValueAsDouble();
    for (auto &[param, grad] : updated) {
      std::string name = param->name.str();
      Value buffer;
      if (momentum != 0.0)
        buffer = addArgument(param->type, Role::OptState,
                             name + ".momentum_buffer", zeros);
      auto update = SgdOp::create(
          b, loc, body.getArgument(param->index), grad, lr, buffer, gradScale,
          b.getF32FloatAttr(momentum),
          b.getF32FloatAttr(
              decayOf(*param, sgd.getWeightDecay().getValueAsDouble())),
          b.getBoolAttr(false));
      newParams.push_back(update.getNewParam());
      paramAttrs.push_back(valueAttrs(ctx, Role::Param, name));
      if (buffer) {
        newStates.push_back(update.getNewMomentumBuffer());
        stateAttrs.push_back(
            valueAttrs(ctx, Role::OptState, name + ".momentum_buffer"));
      }
    }
  }

  out.results.append(newParams);
  out.resultAttrs.append(paramAttrs);
  out.results.append(newStates);
  out.resultAttrs.append(stateAttrs);
  if (exposeGradients)
    for (auto &[param, grad] : updated) {
      out.results.push_back(grad);
      out.resultAttrs.push_back(
          valueAttrs(ctx, Role::Grad, (param->name + ".grad").str()));
    }
  out.results.push_back(loss);
  out.resultAttrs.push_back(step.getResultAttrDict(0));
  // The norm clip_grad_norm_ returns, squared: the driver logs its root.
  if (sumsq) {
    out.results.push_back(sumsq);
    out.resultAttrs.push_back(
        valueAttrs(ctx, Role::GradNormSq, "grad_norm_sq"));
  }
  return success();
}

/// Two dropouts of one stream would draw one mask: refused, naming both.
LogicalResult checkDropoutStreams(Block &body) {
  DenseMap<int64_t, DropoutOp> byStream;
  for (auto dropout : body.getOps<DropoutOp>()) {
    auto [it, inserted] = byStream.try_emplace(dropout.getStream(), dropout);
    if (!inserted)
      return dropout.emitOpError()
             << "has stream " << dropout.getStream()
             << ", as another train.dropout of the step has (at "
             << it->second.getLoc()
             << "): they would drop the same elements; give each dropout a "
                "stream of its own";
  }
  return success();
}

LogicalResult Autodiff::run() {
  Attribute config = step->getAttr(TrainDialect::kOptimizerAttrName);
  if (failed(checkDropoutStreams(body)))
    return failure();
  Value loss = body.getTerminator()->getOperand(0);
  for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i) {
    out.argTypes.push_back(step.getArgumentTypes()[i]);
    out.argAttrs.push_back(step.getArgAttrDict(i));
  }
  varied = findVariedValues(body, sig);
  int64_t microBatches = 1;
  if (auto attr = step->getAttrOfType<IntegerAttr>(
          TrainDialect::kMicroBatchesAttrName))
    microBatches = attr.getInt();
  if (microBatches == 1) {
    SmallVector<Operation *> forward = llvm::to_vector(llvm::map_range(
        body.without_terminator(), [](Operation &op) { return &op; }));
    if (failed(differentiate(forward, loss)))
      return failure();
  } else {
    FailureOr<Value> mean = accumulate(microBatches, loss);
    if (failed(mean))
      return failure();
    loss = *mean;
  }
  if (failed(checkUnusedParams()) || failed(applyOptimizer(config, loss)))
    return failure();

  Operation *terminator = body.getTerminator();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(terminator);
  func::ReturnOp::create(b, terminator->getLoc(), out.results);
  terminator->erase();
  // Gradients nobody reads (the f32 cast of a bf16 gradient the optimizer
  // reads directly) would otherwise reach later passes.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
  step.setType(FunctionType::get(ctx, out.argTypes,
                                 ValueRange(out.results).getTypes()));
  step.setAllArgAttrs(out.argAttrs);
  step.setAllResultAttrs(out.resultAttrs);
  step->removeAttr(TrainDialect::kOptimizerAttrName);
  step->removeAttr(TrainDialect::kMaxGradNormAttrName);
  step->removeAttr(TrainDialect::kMicroBatchesAttrName);
  return success();
}

struct AutodiffPass : autoshard::train::impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;

  void runOnOperation() override {
    FailureOr<FunctionOpInterface> found = findStepFunction(getOperation());
    if (failed(found))
      return signalPassFailure();
    if (forwardOnly && exposeGradients) {
      (*found)->emitOpError()
          << "cannot expose gradients of a forward-only (evaluation) step, "
             "which computes none; drop expose-gradients or forward-only";
      return signalPassFailure();
    }
    if (forwardOnly) {
      // Evaluation: the forward pass and the loss as they are.
      WalkResult updates =
          (*found)->walk([](OptimizerOpInterface op) {
            op->emitOpError()
                << "updates a parameter, but the step is compiled forward-only "
                   "(evaluation), which takes a forward step: parameters and "
                   "batch in, the loss out, its backward pass and optimizer "
                   "left to autodiff";
            return WalkResult::interrupt();
          });
      if (updates.wasInterrupted())
        return signalPassFailure();
      // Evaluation mode (PyTorch's module.eval()): dropout passes its input
      // through.
      (*found)->walk([](DropoutOp dropout) {
        dropout.replaceAllUsesWith(dropout.getInput());
        dropout.erase();
      });
      // Micro-batches bound the step's activations as they do training's
      // (DeepSpeed evaluates train_micro_batch_size_per_gpu rows at once).
      if (auto micro = (*found)->getAttrOfType<IntegerAttr>(
              TrainDialect::kMicroBatchesAttrName);
          micro && micro.getInt() > 1) {
        // The verifier has seen to the rest: a step with micro-batches has
        // a train.optimizer, so it is one block that returns its loss alone.
        auto step = dyn_cast<func::FuncOp>(found->getOperation());
        if (!step) {
          found->emitOpError() << "autoshard-autodiff needs the step as a "
                                  "func.func";
          return signalPassFailure();
        }
        if (failed(Autodiff(step, false).splitForwardPass(micro.getInt())))
          return signalPassFailure();
      }
      (*found)->removeAttr(TrainDialect::kOptimizerAttrName);
      (*found)->removeAttr(TrainDialect::kMaxGradNormAttrName);
      (*found)->removeAttr(TrainDialect::kMicroBatchesAttrName);
      return;
    }
    // A step without an optimizer configuration carries its own backward,
    // or it would train nothing: a binary that runs its steps and leaves
    // every parameter as initialised, which nobody means by accident.
    if (!(*found)->hasAttr(TrainDialect::kOptimizerAttrName)) {
      StepSignature sig(*found);
      bool hasParams = llvm::any_of(sig.getArgs(), [](const StepValue &arg) {
        return arg.role == Role::Param;
      });
      bool updatesItself =
          llvm::any_of(sig.getResults(), [](const StepValue &result) {
            return result.role == Role::Param;
          });
      if (hasParams && !updatesItself && !allowNoOptimizer) {
        (*found)->emitOpError()
            << "has parameters but neither a train.optimizer nor updates of "
               "its own, so training would leave every parameter unchanged; "
               "add train.optimizer = #train.adamw<lr = ...> (or "
               "#train.sgd<...>), compile an evaluation step with "
               "--forward-only, or accept it with --allow-no-optimizer";
        return signalPassFailure();
      }
      return;
    }
    auto step = dyn_cast<func::FuncOp>(found->getOperation());
    if (!step) {
      found->emitOpError() << "autoshard-autodiff needs the step as a "
                              "func.func";
      return signalPassFailure();
    }
    if (!llvm::hasSingleElement(step.getBody())) {
      step.emitOpError() << "has " << step.getBody().getBlocks().size()
                         << " blocks; autodiff handles straight-line steps";
      return signalPassFailure();
    }
    if (failed(Autodiff(step, exposeGradients, allowUnusedParams).run()))
      return signalPassFailure();
  }
};

} // namespace
