//===- RuntimeCalls.cpp - the asrt_* call of each op, one rule per op -----===//
//
// The symbols and argument orders here are those of
// runtime/include/autoshard/rt/abi.h; the end-to-end tests run them.
//
//===----------------------------------------------------------------------===//

#include "StepEmitter.h"

#include "autoshard/Dialect/Train/IR/TrainDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace autoshard;
namespace train = autoshard::train;

//===----------------------------------------------------------------------===//
// StepEmitter helpers
//===----------------------------------------------------------------------===//

Value StepEmitter::i64(int64_t value) {
  return arith::ConstantIntOp::create(builder(), loc(), value, 64);
}

Value StepEmitter::i32(int32_t value) {
  return arith::ConstantIntOp::create(builder(), loc(), value, 32);
}

Value StepEmitter::f32(float value) {
  return arith::ConstantFloatOp::create(builder(), loc(),
                                        builder().getF32Type(),
                                        APFloat(value));
}

Value StepEmitter::nullPtr() {
  return LLVM::ZeroOp::create(builder(), loc(),
                              LLVM::LLVMPointerType::get(builder().getContext()));
}

func::FuncOp StepEmitter::declare(StringRef callee, TypeRange args,
                                  TypeRange results) {
  ModuleOp mod = module();
  if (auto existing = mod.lookupSymbol<func::FuncOp>(callee))
    return existing;
  OpBuilder::InsertionGuard guard(builder());
  builder().setInsertionPointToStart(mod.getBody());
  auto decl = func::FuncOp::create(
      builder(), mod.getLoc(), callee,
      builder().getFunctionType(args, results));
  decl.setPrivate();
  return decl;
}

void StepEmitter::call(StringRef callee, ValueRange args) {
  SmallVector<Value> operands{context()};
  operands.append(args.begin(), args.end());
  func::FuncOp decl = declare(callee, ValueRange(operands).getTypes(), {});
  func::CallOp::create(builder(), loc(), decl, operands);
}

Value StepEmitter::callReturningPtr(StringRef callee, ValueRange args) {
  SmallVector<Value> operands{context()};
  operands.append(args.begin(), args.end());
  Type ptr = LLVM::LLVMPointerType::get(builder().getContext());
  func::FuncOp decl = declare(callee, ValueRange(operands).getTypes(), ptr);
  return func::CallOp::create(builder(), loc(), decl, operands).getResult(0);
}

std::optional<int32_t> autoshard::getRuntimeDType(Type type) {
  // asrt_dtype values.
  if (type.isF32())
    return 0;
  if (type.isSignlessInteger(32))
    return 1;
  if (type.isBF16())
    return 2;
  if (type.isF16())
    return 3;
  if (type.isSignlessInteger(64))
    return 4;
  if (type.isUnsignedInteger(16))
    return 5;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Rules
//===----------------------------------------------------------------------===//

namespace {

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}
int64_t numElements(Value v) { return tensorType(v).getNumElements(); }
int64_t lastDim(Value v) { return tensorType(v).getShape().back(); }
/// Rows of a [..., features] tensor: the product of its leading dims.
int64_t rows(Value v) { return numElements(v) / lastDim(v); }

LogicalResult emitLinear(Operation *op, StepEmitter &e) {
  auto linear = cast<train::LinearOp>(op);
  Value bias = linear.getBias() ? e.buffer(linear.getBias()) : e.nullPtr();
  Value out = e.output(linear.getResult());
  e.call("asrt_linear_fwd_f32",
         {e.buffer(linear.getInput()), e.buffer(linear.getWeight()), bias, out,
          e.i64(rows(linear.getInput())), e.i64(lastDim(linear.getInput())),
          e.i64(lastDim(linear.getResult()))});
  return success();
}

LogicalResult emitLinearGradInput(Operation *op, StepEmitter &e) {
  auto grad = cast<train::LinearGradInputOp>(op);
  Value out = e.output(grad.getResult());
  e.call("asrt_linear_grad_input_f32",
         {e.buffer(grad.getGradOutput()), e.buffer(grad.getWeight()), out,
          e.i64(rows(grad.getGradOutput())), e.i64(lastDim(grad.getResult())),
          e.i64(lastDim(grad.getGradOutput()))});
  return success();
}

LogicalResult emitLinearGradWeight(Operation *op, StepEmitter &e) {
  auto grad = cast<train::LinearGradWeightOp>(op);
  Value out = e.output(grad.getResult());
  e.call("asrt_linear_grad_weight_f32",
         {e.buffer(grad.getGradOutput()), e.buffer(grad.getInput()), out,
          e.i64(rows(grad.getGradOutput())), e.i64(lastDim(grad.getInput())),
          e.i64(lastDim(grad.getGradOutput()))});
  return success();
}

LogicalResult emitBiasGrad(Operation *op, StepEmitter &e) {
  auto grad = cast<train::BiasGradOp>(op);
  Value out = e.output(grad.getResult());
  e.call("asrt_bias_grad_f32",
         {e.buffer(grad.getGradOutput()), out,
          e.i64(rows(grad.getGradOutput())),
          e.i64(lastDim(grad.getGradOutput()))});
  return success();
}

/// Elementwise y = f(x).
template <typename OpT>
LogicalResult emitActivation(Operation *op, StepEmitter &e,
                             StringRef callee) {
  auto act = cast<OpT>(op);
  Value out = e.output(act.getResult());
  e.call(callee, {e.buffer(act.getInput()), out,
                  e.i64(numElements(act.getInput()))});
  return success();
}

/// Elementwise dx = dy * f'(x).
template <typename OpT>
LogicalResult emitActivationGrad(Operation *op, StepEmitter &e,
                                 StringRef callee) {
  auto grad = cast<OpT>(op);
  Value out = e.output(grad.getResult());
  e.call(callee, {e.buffer(grad.getGradOutput()), e.buffer(grad.getInput()),
                  out, e.i64(numElements(grad.getInput()))});
  return success();
}

LogicalResult emitSoftmaxCrossEntropy(Operation *op, StepEmitter &e) {
  auto loss = cast<train::SoftmaxCrossEntropyOp>(op);
  Value out = e.output(loss.getResult());
  e.call("asrt_softmax_xent_fwd_f32",
         {e.buffer(loss.getLogits()), e.buffer(loss.getLabels()), out,
          e.i64(rows(loss.getLogits())), e.i64(lastDim(loss.getLogits()))});
  return success();
}

LogicalResult emitSoftmaxCrossEntropyGrad(Operation *op, StepEmitter &e) {
  auto grad = cast<train::SoftmaxCrossEntropyGradOp>(op);
  Value dloss =
      grad.getGradLoss() ? e.buffer(grad.getGradLoss()) : e.nullPtr();
  Value out = e.output(grad.getResult());
  e.call("asrt_softmax_xent_grad_f32",
         {e.buffer(grad.getLogits()), e.buffer(grad.getLabels()), dloss, out,
          e.i64(rows(grad.getLogits())), e.i64(lastDim(grad.getLogits()))});
  return success();
}

LogicalResult emitSgd(Operation *op, StepEmitter &e) {
  auto sgd = cast<train::SgdOp>(op);
  // param_out may overwrite param, buf_out may overwrite buf (abi.h).
  Value buffer = sgd.getMomentumBuffer() ? e.buffer(sgd.getMomentumBuffer())
                                         : e.nullPtr();
  Value newParam = e.output(sgd.getNewParam(),
                            sgd.getParamMutable().getOperandNumber());
  Value newBuffer =
      sgd.getNewMomentumBuffer()
          ? e.output(sgd.getNewMomentumBuffer(),
                     sgd.getMomentumBufferMutable()[0].getOperandNumber())
          : e.nullPtr();
  e.call("asrt_sgd_update_f32",
         {e.buffer(sgd.getParam()), e.buffer(sgd.getGrad()),
          e.buffer(sgd.getLr()), buffer, newParam, newBuffer,
          e.i64(numElements(sgd.getParam())),
          e.f32(sgd.getMomentum().convertToFloat()),
          e.f32(sgd.getWeightDecay().convertToFloat()),
          e.i32(sgd.getNesterov() ? 1 : 0)});
  return success();
}

/// The ranks a collective spans: bit i of the mask is grid axis i.
struct Group {
  int64_t size = 1;
  int32_t axesMask = 0;
};

FailureOr<Group> resolveGroup(Operation *op, FlatSymbolRefAttr gridName,
                              ArrayRef<shard::GridAxis> axes) {
  auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, gridName);
  if (!grid)
    return op->emitOpError() << "refers to " << gridName
                             << ", which is not a shard.grid";
  Group group;
  for (shard::GridAxis axis : axes) {
    int64_t dim = grid.getShape()[axis];
    if (ShapedType::isDynamic(dim) || axis >= 31)
      return op->emitOpError()
             << "spans grid axis " << axis
             << ", which the runtime cannot address (a static axis < 31 is "
                "needed)";
    group.size *= dim;
    group.axesMask |= 1 << axis;
  }
  return group;
}

std::optional<int32_t> runtimeReduction(shard::ReductionKind kind) {
  // asrt_reduce_op values.
  switch (kind) {
  case shard::ReductionKind::Sum:
    return 0;
  case shard::ReductionKind::Average:
    return 1;
  case shard::ReductionKind::Max:
    return 2;
  case shard::ReductionKind::Min:
    return 3;
  default:
    return std::nullopt;
  }
}

LogicalResult emitAllReduce(Operation *op, StepEmitter &e) {
  auto allReduce = cast<shard::AllReduceOp>(op);
  if (allReduce.getInput().getType() != allReduce.getResult().getType())
    return op->emitOpError()
           << "changes the element type; the runtime reduces in the input's "
              "type";
  std::optional<int32_t> reduction =
      runtimeReduction(allReduce.getReduction());
  if (!reduction)
    return op->emitOpError() << "reduction '"
                             << shard::stringifyReductionKind(
                                    allReduce.getReduction())
                             << "' is not supported by the runtime; use sum, "
                                "average, max or min";
  std::optional<int32_t> dtype =
      getRuntimeDType(tensorType(allReduce.getInput()).getElementType());
  if (!dtype)
    return op->emitOpError() << "element type "
                             << tensorType(allReduce.getInput()).getElementType()
                             << " has no runtime collective";
  FailureOr<Group> group =
      resolveGroup(op, allReduce.getGridAttr(), allReduce.getGridAxes());
  if (failed(group))
    return failure();
  Value result = allReduce.getResult();
  // Any reduction over one rank is the identity.
  if (group->size == 1) {
    e.alias(result, allReduce.getInput());
    return success();
  }
  Value recv;
  if (e.canReuse(allReduce.getInput(), result)) {
    e.reuse(result, allReduce.getInput());
    recv = e.buffer(allReduce.getInput());
  } else {
    recv = e.output(result);
  }
  e.call("asrt_all_reduce",
         {e.buffer(allReduce.getInput()), recv,
          e.i64(numElements(allReduce.getInput())), e.i32(*dtype),
          e.i32(*reduction), e.i32(group->axesMask)});
  return success();
}

using Rule = LogicalResult (*)(Operation *, StepEmitter &);

const llvm::StringMap<Rule> &rules() {
  static const llvm::StringMap<Rule> table = {
      {train::LinearOp::getOperationName(), emitLinear},
      {train::LinearGradInputOp::getOperationName(), emitLinearGradInput},
      {train::LinearGradWeightOp::getOperationName(), emitLinearGradWeight},
      {train::BiasGradOp::getOperationName(), emitBiasGrad},
      {train::ReluOp::getOperationName(),
       [](Operation *op, StepEmitter &e) {
         return emitActivation<train::ReluOp>(op, e, "asrt_relu_fwd_f32");
       }},
      {train::ReluGradOp::getOperationName(),
       [](Operation *op, StepEmitter &e) {
         return emitActivationGrad<train::ReluGradOp>(op, e,
                                                      "asrt_relu_grad_f32");
       }},
      {train::GeluOp::getOperationName(),
       [](Operation *op, StepEmitter &e) {
         return emitActivation<train::GeluOp>(op, e, "asrt_gelu_fwd_f32");
       }},
      {train::GeluGradOp::getOperationName(),
       [](Operation *op, StepEmitter &e) {
         return emitActivationGrad<train::GeluGradOp>(op, e,
                                                      "asrt_gelu_grad_f32");
       }},
      {train::SoftmaxCrossEntropyOp::getOperationName(),
       emitSoftmaxCrossEntropy},
      {train::SoftmaxCrossEntropyGradOp::getOperationName(),
       emitSoftmaxCrossEntropyGrad},
      {train::SgdOp::getOperationName(), emitSgd},
      {shard::AllReduceOp::getOperationName(), emitAllReduce},
  };
  return table;
}

} // namespace

bool autoshard::hasRuntimeCallRule(Operation *op) {
  return rules().contains(op->getName().getStringRef());
}

LogicalResult autoshard::emitRuntimeCall(Operation *op, StepEmitter &emitter) {
  auto it = rules().find(op->getName().getStringRef());
  if (it == rules().end())
    return op->emitOpError() << "has no runtime lowering; the runtime runs "
                                "train ops and shard.all_reduce";
  return it->second(op, emitter);
}
