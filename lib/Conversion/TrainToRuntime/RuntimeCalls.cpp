//===- RuntimeCalls.cpp - the asrt_* call of each op, one rule per op -----===//
//
// Each call names its function in runtime/include/autoshard/rt/abi.h
// (ABI_FUNCTION), which fixes the symbol, the argument count and types; the
// end-to-end tests check what the arguments mean.
//
//===----------------------------------------------------------------------===//

#include "StepEmitter.h"

#include "autoshard/Dialect/Train/IR/TrainDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace autoshard;
namespace train = autoshard::train;

//===----------------------------------------------------------------------===//
// StepEmitter helpers
//===----------------------------------------------------------------------===//

Value StepEmitter::placeholder(Type type) {
  Value &value = placeholders[type];
  if (!value) {
    // Before everything, so that it dominates each use.
    OpBuilder::InsertionGuard guard(builder());
    Block *block = builder().getInsertionBlock();
    builder().setInsertionPointToStart(block);
    value = LLVM::UndefOp::create(builder(), loc(), type);
  }
  return value;
}

Value StepEmitter::i64(int64_t value) {
  if (placementOnly)
    return placeholder(builder().getI64Type());
  return arith::ConstantIntOp::create(builder(), loc(), value, 64);
}

Value StepEmitter::i32(int32_t value) {
  if (placementOnly)
    return placeholder(builder().getI32Type());
  return arith::ConstantIntOp::create(builder(), loc(), value, 32);
}

Value StepEmitter::f32(float value) {
  if (placementOnly)
    return placeholder(builder().getF32Type());
  return arith::ConstantFloatOp::create(builder(), loc(),
                                        builder().getF32Type(),
                                        APFloat(value));
}

Value StepEmitter::nullPtr() {
  auto ptr = LLVM::LLVMPointerType::get(builder().getContext());
  if (placementOnly)
    return placeholder(ptr);
  return LLVM::ZeroOp::create(builder(), loc(), ptr);
}

func::FuncOp StepEmitter::declare(StringRef callee, FunctionType type) {
  ModuleOp mod = module();
  if (auto existing = mod.lookupSymbol<func::FuncOp>(callee)) {
    if (existing.getFunctionType() != type)
      llvm::report_fatal_error(llvm::Twine("the module declares ") + callee +
                               " with a type other than abi.h's");
    return existing;
  }
  OpBuilder::InsertionGuard guard(builder());
  builder().setInsertionPointToStart(mod.getBody());
  auto decl = func::FuncOp::create(builder(), mod.getLoc(), callee, type);
  decl.setPrivate();
  return decl;
}

Value StepEmitter::emitCall(StringRef callee, FunctionType type,
                            ArrayRef<Value> args) {
  SmallVector<Value> operands{context()};
  operands.append(args.begin(), args.end());
  // The count is checked at compile time; a type only here, where the
  // operands exist. A mismatch is a bug of the rule that built them, which
  // the generated code would turn into a wrong call: stop.
  for (auto [i, operand] : llvm::enumerate(operands)) {
    if (operand.getType() == type.getInput(i))
      continue;
    std::string message;
    llvm::raw_string_ostream os(message);
    os << "the call of " << callee << " passes " << operand.getType()
       << " as argument " << i << ", which abi.h declares as "
       << type.getInput(i);
    llvm::report_fatal_error(llvm::Twine(message));
  }
  if (placementOnly)
    return type.getNumResults() ? placeholder(type.getResult(0)) : Value();
  func::FuncOp decl = declare(callee, type);
  auto call = func::CallOp::create(builder(), loc(), decl, operands);
  return call.getNumResults() ? call.getResult(0) : Value();
}

Value autoshard::dtypeOf(StepEmitter &e, Value tensor) {
  return e.i32(*getRuntimeDType(tensorType(tensor).getElementType()));
}

std::optional<asrt_dtype> autoshard::getRuntimeDType(Type type) {
  if (type.isF32())
    return ASRT_DTYPE_F32;
  if (type.isSignlessInteger(32))
    return ASRT_DTYPE_I32;
  if (type.isBF16())
    return ASRT_DTYPE_BF16;
  if (type.isF16())
    return ASRT_DTYPE_F16;
  if (type.isSignlessInteger(64))
    return ASRT_DTYPE_I64;
  if (type.isUnsignedInteger(16))
    return ASRT_DTYPE_U16;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Rules
//===----------------------------------------------------------------------===//

namespace {

int64_t byteSize(Value v) {
  return numElements(v) *
         llvm::divideCeil(tensorType(v).getElementTypeBitWidth(), 8);
}
int64_t lastDim(Value v) { return tensorType(v).getShape().back(); }
/// Rows of a [..., features] tensor: the product of its leading dims.
int64_t rows(Value v) { return numElements(v) / lastDim(v); }


/// The buffer of an optional operand, or null.
Value bufferOrNull(StepEmitter &e, Value tensor) {
  return tensor ? e.buffer(tensor) : e.nullPtr();
}

LogicalResult emitLinear(Operation *op, StepEmitter &e) {
  auto linear = cast<train::LinearOp>(op);
  Value out = e.output(linear.getResult());
  e.call(ABI_FUNCTION(asrt_linear_fwd),
         {dtypeOf(e, linear.getInput()), e.buffer(linear.getInput()),
          e.buffer(linear.getWeight()), bufferOrNull(e, linear.getBias()), out,
          e.i64(rows(linear.getInput())), e.i64(lastDim(linear.getInput())),
          e.i64(lastDim(linear.getResult()))});
  return success();
}

// Fused ops (autoshard-fuse): one call each.
LogicalResult emitLinearGelu(train::LinearGeluOp op, StepEmitter &e) {
  Value x = e.buffer(op.getInput()), w = e.buffer(op.getWeight()),
        b = e.buffer(op.getBias());
  Value pre = e.output(op.getPreActivation());
  Value y = e.output(op.getResult());
  e.call(ABI_FUNCTION(asrt_linear_gelu_fwd),
         {dtypeOf(e, op.getInput()), x, w, b, pre, y,
          e.i64(rows(op.getInput())), e.i64(lastDim(op.getInput())),
          e.i64(lastDim(op.getPreActivation()))});
  return success();
}

LogicalResult emitLinearGradGelu(train::LinearGradGeluOp op, StepEmitter &e) {
  Value dy = e.buffer(op.getGradOutput()), w = e.buffer(op.getWeight()),
        pre = e.buffer(op.getPreActivation());
  Value dpre = e.output(op.getGradPreActivation());
  Value db = op.getBiasGrad() ? e.output(op.getBiasGrad()) : e.nullPtr();
  e.call(ABI_FUNCTION(asrt_linear_grad_gelu),
         {dtypeOf(e, op.getGradOutput()), dy, w, pre, dpre, db,
          e.i64(rows(op.getGradOutput())),
          e.i64(lastDim(op.getPreActivation())),
          e.i64(lastDim(op.getGradOutput()))});
  return success();
}

LogicalResult emitLinearGradWeightBias(train::LinearGradWeightBiasOp op,
                                       StepEmitter &e) {
  Value dy = op.getGradOutput();
  Value dw = e.output(op.getWeightGrad());
  Value db = e.output(op.getBiasGrad());
  e.call(ABI_FUNCTION(asrt_linear_grad_weight_bias),
         {dtypeOf(e, dy), e.buffer(dy), e.buffer(op.getInput()), dw, db,
          e.i64(rows(dy)), e.i64(lastDim(op.getInput())), e.i64(lastDim(dy))});
  return success();
}

LogicalResult emitLinearGradInput(Operation *op, StepEmitter &e) {
  auto grad = cast<train::LinearGradInputOp>(op);
  Value out = e.output(grad.getResult());
  e.call(ABI_FUNCTION(asrt_linear_grad_input),
         {dtypeOf(e, grad.getGradOutput()), e.buffer(grad.getGradOutput()),
          e.buffer(grad.getWeight()), out, e.i64(rows(grad.getGradOutput())),
          e.i64(lastDim(grad.getResult())),
          e.i64(lastDim(grad.getGradOutput()))});
  return success();
}

LogicalResult emitLinearGradWeight(Operation *op, StepEmitter &e) {
  auto grad = cast<train::LinearGradWeightOp>(op);
  Value out = e.output(grad.getResult());
  e.call(ABI_FUNCTION(asrt_linear_grad_weight),
         {dtypeOf(e, grad.getGradOutput()), e.buffer(grad.getGradOutput()),
          e.buffer(grad.getInput()), out, e.i64(rows(grad.getGradOutput())),
          e.i64(lastDim(grad.getInput())),
          e.i64(lastDim(grad.getGradOutput()))});
  return success();
}

LogicalResult emitBiasGrad(Operation *op, StepEmitter &e) {
  auto grad = cast<train::BiasGradOp>(op);
  Value out = e.output(grad.getResult());
  e.call(ABI_FUNCTION(asrt_bias_grad),
         {dtypeOf(e, grad.getGradOutput()), e.buffer(grad.getGradOutput()), out,
          e.i64(rows(grad.getGradOutput())),
          e.i64(lastDim(grad.getGradOutput()))});
  return success();
}

/// Elementwise y = f(x).
template <typename OpT, typename Fn>
LogicalResult emitActivation(Operation *op, StepEmitter &e,
                             rtabi::Function<Fn> callee) {
  auto act = cast<OpT>(op);
  Value out = e.output(act.getResult());
  e.call(callee, {dtypeOf(e, act.getInput()), e.buffer(act.getInput()), out,
                  e.i64(numElements(act.getInput()))});
  return success();
}

/// Elementwise dx = dy * f'(x).
template <typename OpT, typename Fn>
LogicalResult emitActivationGrad(Operation *op, StepEmitter &e,
                                 rtabi::Function<Fn> callee) {
  auto grad = cast<OpT>(op);
  Value out = e.output(grad.getResult());
  e.call(callee, {dtypeOf(e, grad.getInput()), e.buffer(grad.getGradOutput()),
                  e.buffer(grad.getInput()), out,
                  e.i64(numElements(grad.getInput()))});
  return success();
}

LogicalResult emitSwiglu(Operation *op, StepEmitter &e) {
  auto swiglu = cast<train::SwigluOp>(op);
  Value out = e.output(swiglu.getResult());
  e.call(ABI_FUNCTION(asrt_swiglu_fwd),
         {dtypeOf(e, swiglu.getGate()), e.buffer(swiglu.getGate()),
          e.buffer(swiglu.getUp()), out, e.i64(numElements(swiglu.getGate()))});
  return success();
}

LogicalResult emitSwigluGrad(Operation *op, StepEmitter &e) {
  auto grad = cast<train::SwigluGradOp>(op);
  Value dgate = e.output(grad.getGradGate());
  Value dup = e.output(grad.getGradUp());
  e.call(ABI_FUNCTION(asrt_swiglu_grad),
         {dtypeOf(e, grad.getGate()), e.buffer(grad.getGradOutput()),
          e.buffer(grad.getGate()), e.buffer(grad.getUp()), dgate, dup,
          e.i64(numElements(grad.getGate()))});
  return success();
}

LogicalResult emitCast(Operation *op, StepEmitter &e) {
  auto castOp = cast<train::CastOp>(op);
  Value out = e.output(castOp.getResult());
  e.call(ABI_FUNCTION(asrt_cast),
         {dtypeOf(e, castOp.getInput()), e.buffer(castOp.getInput()),
          dtypeOf(e, castOp.getResult()), out,
          e.i64(numElements(castOp.getInput()))});
  return success();
}

LogicalResult emitReshape(Operation *op, StepEmitter &e) {
  // Row-major elements do not move: the result is the input's buffer.
  auto reshape = cast<train::ReshapeOp>(op);
  e.alias(reshape.getResult(), reshape.getInput());
  return success();
}

LogicalResult emitSliceRows(Operation *op, StepEmitter &e) {
  // A block of whole rows starts `offset` rows into the input's buffer.
  auto slice = cast<train::SliceRowsOp>(op);
  auto type = tensorType(slice.getInput());
  int64_t rowBytes = type.getNumElements() / type.getDimSize(0) *
                     llvm::divideCeil(type.getElementTypeBitWidth(), 8);
  e.alias(slice.getResult(), slice.getInput(),
          static_cast<int64_t>(slice.getOffset()) * rowBytes);
  return success();
}

LogicalResult emitScale(Operation *op, StepEmitter &e) {
  auto scale = cast<train::ScaleOp>(op);
  Value out = e.output(scale.getResult());
  e.call(ABI_FUNCTION(asrt_scale),
         {dtypeOf(e, scale.getInput()), e.buffer(scale.getInput()), out,
          e.i64(numElements(scale.getInput())),
          e.f32(scale.getFactor().convertToFloat())});
  return success();
}

LogicalResult emitEmbedding(Operation *op, StepEmitter &e) {
  auto embedding = cast<train::EmbeddingOp>(op);
  auto table = tensorType(embedding.getTable());
  Value out = e.output(embedding.getResult());
  e.call(ABI_FUNCTION(asrt_embedding_fwd),
         {dtypeOf(e, embedding.getTable()), e.buffer(embedding.getIds()),
          e.buffer(embedding.getTable()), out,
          e.i64(numElements(embedding.getIds())), e.i64(table.getDimSize(0)),
          e.i64(table.getDimSize(1))});
  return success();
}

LogicalResult emitEmbeddingGrad(Operation *op, StepEmitter &e) {
  auto grad = cast<train::EmbeddingGradOp>(op);
  auto table = tensorType(grad.getResult());
  Value out = e.output(grad.getResult());
  e.call(ABI_FUNCTION(asrt_embedding_grad),
         {dtypeOf(e, grad.getGradOutput()), e.buffer(grad.getGradOutput()),
          e.buffer(grad.getIds()), out, e.i64(numElements(grad.getIds())),
          e.i64(table.getDimSize(0)), e.i64(table.getDimSize(1))});
  return success();
}

LogicalResult emitAddPositionEmbedding(Operation *op, StepEmitter &e) {
  auto add = cast<train::AddPositionEmbeddingOp>(op);
  auto input = tensorType(add.getInput());
  Value out = e.output(add.getResult());
  e.call(ABI_FUNCTION(asrt_add_position_embedding_fwd),
         {dtypeOf(e, add.getInput()), e.buffer(add.getInput()),
          e.buffer(add.getTable()), out, e.i64(input.getDimSize(0)),
          e.i64(input.getDimSize(1)), e.i64(input.getDimSize(2))});
  return success();
}

LogicalResult emitAddPositionEmbeddingGrad(Operation *op, StepEmitter &e) {
  auto grad = cast<train::AddPositionEmbeddingGradOp>(op);
  auto dy = tensorType(grad.getGradOutput());
  Value out = e.output(grad.getResult());
  e.call(ABI_FUNCTION(asrt_add_position_embedding_grad),
         {dtypeOf(e, grad.getGradOutput()), e.buffer(grad.getGradOutput()), out,
          e.i64(dy.getDimSize(0)), e.i64(dy.getDimSize(1)),
          e.i64(grad.getMaxPositions()), e.i64(dy.getDimSize(2))});
  return success();
}

LogicalResult emitLayerNorm(Operation *op, StepEmitter &e) {
  auto norm = cast<train::LayerNormOp>(op);
  Value out = e.output(norm.getResult());
  e.call(ABI_FUNCTION(asrt_layer_norm_fwd),
         {dtypeOf(e, norm.getInput()), e.buffer(norm.getInput()),
          e.buffer(norm.getGamma()), e.buffer(norm.getBeta()), out,
          e.i64(rows(norm.getInput())), e.i64(lastDim(norm.getInput())),
          e.f32(norm.getEpsilon().convertToFloat())});
  return success();
}

LogicalResult emitLayerNormGrad(Operation *op, StepEmitter &e) {
  auto grad = cast<train::LayerNormGradOp>(op);
  Value dx = e.output(grad.getGradInput());
  Value dgamma = e.output(grad.getGradGamma());
  Value dbeta = e.output(grad.getGradBeta());
  e.call(ABI_FUNCTION(asrt_layer_norm_grad),
         {dtypeOf(e, grad.getInput()), e.buffer(grad.getGradOutput()),
          e.buffer(grad.getInput()), e.buffer(grad.getGamma()), dx, dgamma,
          dbeta, e.i64(rows(grad.getInput())), e.i64(lastDim(grad.getInput())),
          e.f32(grad.getEpsilon().convertToFloat())});
  return success();
}

LogicalResult emitRmsNorm(Operation *op, StepEmitter &e) {
  auto norm = cast<train::RmsNormOp>(op);
  Value out = e.output(norm.getResult());
  e.call(ABI_FUNCTION(asrt_rms_norm_fwd),
         {dtypeOf(e, norm.getInput()), e.buffer(norm.getInput()),
          e.buffer(norm.getWeight()), out, e.i64(rows(norm.getInput())),
          e.i64(lastDim(norm.getInput())),
          e.f32(norm.getEpsilon().convertToFloat())});
  return success();
}

LogicalResult emitRmsNormGrad(Operation *op, StepEmitter &e) {
  auto grad = cast<train::RmsNormGradOp>(op);
  Value dx = e.output(grad.getGradInput());
  Value dweight = e.output(grad.getGradWeight());
  e.call(ABI_FUNCTION(asrt_rms_norm_grad),
         {dtypeOf(e, grad.getInput()), e.buffer(grad.getGradOutput()),
          e.buffer(grad.getInput()), e.buffer(grad.getWeight()), dx, dweight,
          e.i64(rows(grad.getInput())), e.i64(lastDim(grad.getInput())),
          e.f32(grad.getEpsilon().convertToFloat())});
  return success();
}

/// batch, seq, heads, head_dim of a [B, T, H, D] tensor.
std::array<Value, 4> bthd(StepEmitter &e, Value tensor) {
  auto type = tensorType(tensor);
  return {e.i64(type.getDimSize(0)), e.i64(type.getDimSize(1)),
          e.i64(type.getDimSize(2)), e.i64(type.getDimSize(3))};
}

LogicalResult emitRope(Operation *op, StepEmitter &e) {
  auto rope = cast<train::RopeOp>(op);
  Value out = e.output(rope.getResult());
  Value dtype = dtypeOf(e, rope.getInput()), x = e.buffer(rope.getInput());
  auto [batch, seq, heads, headDim] = bthd(e, rope.getInput());
  e.call(ABI_FUNCTION(asrt_rope_fwd),
         {dtype, x, out, batch, seq, heads, headDim,
          e.f32(rope.getTheta().convertToFloat())});
  return success();
}

LogicalResult emitRopeGrad(Operation *op, StepEmitter &e) {
  auto grad = cast<train::RopeGradOp>(op);
  Value out = e.output(grad.getResult());
  Value dtype = dtypeOf(e, grad.getGradOutput()),
        dy = e.buffer(grad.getGradOutput());
  auto [batch, seq, heads, headDim] = bthd(e, grad.getGradOutput());
  e.call(ABI_FUNCTION(asrt_rope_grad),
         {dtype, dy, out, batch, seq, heads, headDim,
          e.f32(grad.getTheta().convertToFloat())});
  return success();
}

/// batch, seq, heads, kv_heads, head_dim of an attention.
std::array<Value, 5> attentionDims(StepEmitter &e, Value query, Value key) {
  auto q = tensorType(query);
  return {e.i64(q.getDimSize(0)), e.i64(q.getDimSize(1)),
          e.i64(q.getDimSize(2)), e.i64(tensorType(key).getDimSize(2)),
          e.i64(q.getDimSize(3))};
}

LogicalResult emitCausalAttention(Operation *op, StepEmitter &e) {
  auto attention = cast<train::CausalAttentionOp>(op);
  Value out = e.output(attention.getResult());
  Value lse = e.output(attention.getLogsumexp());
  Value dtype = dtypeOf(e, attention.getQuery());
  auto [batch, seq, heads, kvHeads, headDim] =
      attentionDims(e, attention.getQuery(), attention.getKey());
  e.call(ABI_FUNCTION(asrt_causal_attention_fwd),
         {dtype, e.buffer(attention.getQuery()), e.buffer(attention.getKey()),
          e.buffer(attention.getValue()), out, lse, batch, seq, heads, kvHeads,
          headDim, e.f32(attention.getScaleOrDefault())});
  return success();
}

LogicalResult emitCausalAttentionGrad(Operation *op, StepEmitter &e) {
  auto grad = cast<train::CausalAttentionGradOp>(op);
  Value dq = e.output(grad.getGradQuery());
  Value dk = e.output(grad.getGradKey());
  Value dv = e.output(grad.getGradValue());
  Value dtype = dtypeOf(e, grad.getQuery());
  auto [batch, seq, heads, kvHeads, headDim] =
      attentionDims(e, grad.getQuery(), grad.getKey());
  e.call(ABI_FUNCTION(asrt_causal_attention_grad),
         {dtype, e.buffer(grad.getGradOutput()), e.buffer(grad.getQuery()),
          e.buffer(grad.getKey()), e.buffer(grad.getValue()),
          e.buffer(grad.getResult()), e.buffer(grad.getLogsumexp()), dq, dk, dv,
          batch, seq, heads, kvHeads, headDim,
          e.f32(grad.getScaleOrDefault())});
  return success();
}

/// The loss's ignore index, or the runtime's "none" (abi.h).
Value ignoreIndex(StepEmitter &e, IntegerAttr index) {
  return e.i64(index ? index.getInt() : ASRT_NO_IGNORE_INDEX);
}

LogicalResult emitSoftmaxCrossEntropy(Operation *op, StepEmitter &e) {
  auto loss = cast<train::SoftmaxCrossEntropyOp>(op);
  Value out = e.output(loss.getResult());
  e.call(ABI_FUNCTION(asrt_softmax_xent_fwd),
         {dtypeOf(e, loss.getLogits()), e.buffer(loss.getLogits()),
          e.buffer(loss.getLabels()), out, e.i64(rows(loss.getLogits())),
          e.i64(lastDim(loss.getLogits())),
          ignoreIndex(e, loss.getIgnoreIndexAttr())});
  return success();
}

LogicalResult emitSoftmaxCrossEntropyGrad(Operation *op, StepEmitter &e) {
  auto grad = cast<train::SoftmaxCrossEntropyGradOp>(op);
  Value out = e.output(grad.getResult());
  e.call(ABI_FUNCTION(asrt_softmax_xent_grad),
         {dtypeOf(e, grad.getLogits()), e.buffer(grad.getLogits()),
          e.buffer(grad.getLabels()), bufferOrNull(e, grad.getGradLoss()), out,
          e.i64(rows(grad.getLogits())), e.i64(lastDim(grad.getLogits())),
          ignoreIndex(e, grad.getIgnoreIndexAttr())});
  return success();
}

LogicalResult emitNllLoss(Operation *op, StepEmitter &e) {
  auto loss = cast<train::NllLossOp>(op);
  Value out = e.output(loss.getResult());
  e.call(ABI_FUNCTION(asrt_nll_loss_fwd),
         {dtypeOf(e, loss.getInput()), e.buffer(loss.getInput()),
          e.buffer(loss.getLabels()), out, e.i64(rows(loss.getInput())),
          e.i64(lastDim(loss.getInput())),
          ignoreIndex(e, loss.getIgnoreIndexAttr())});
  return success();
}

LogicalResult emitNllLossGrad(Operation *op, StepEmitter &e) {
  auto grad = cast<train::NllLossGradOp>(op);
  Value out = e.output(grad.getResult());
  // The input gives the shape and dtype only (abi.h: not passed).
  e.call(ABI_FUNCTION(asrt_nll_loss_grad),
         {dtypeOf(e, grad.getInput()), e.buffer(grad.getLabels()),
          bufferOrNull(e, grad.getGradLoss()), out,
          e.i64(rows(grad.getInput())), e.i64(lastDim(grad.getInput())),
          ignoreIndex(e, grad.getIgnoreIndexAttr())});
  return success();
}

LogicalResult emitSgd(Operation *op, StepEmitter &e) {
  auto sgd = cast<train::SgdOp>(op);
  // param_out may overwrite param, buf_out may overwrite buf (abi.h).
  Value newParam =
      e.output(sgd.getNewParam(), sgd.getParamMutable().getOperandNumber());
  Value newBuffer =
      sgd.getNewMomentumBuffer()
          ? e.output(sgd.getNewMomentumBuffer(),
                     sgd.getMomentumBufferMutable()[0].getOperandNumber())
          : e.nullPtr();
  e.call(ABI_FUNCTION(asrt_sgd_update),
         {dtypeOf(e, sgd.getGrad()), e.buffer(sgd.getParam()),
          e.buffer(sgd.getGrad()), e.buffer(sgd.getLr()),
          bufferOrNull(e, sgd.getMomentumBuffer()),
          bufferOrNull(e, sgd.getGradScale()), newParam, newBuffer,
          e.i64(numElements(sgd.getParam())),
          e.f32(sgd.getMomentum().convertToFloat()),
          e.f32(sgd.getWeightDecay().convertToFloat()),
          e.i32(sgd.getNesterov() ? 1 : 0)});
  return success();
}

LogicalResult emitIncrement(Operation *op, StepEmitter &e) {
  auto increment = cast<train::IncrementOp>(op);
  Value out = e.output(increment.getResult(),
                       increment.getInputMutable().getOperandNumber());
  e.call(ABI_FUNCTION(asrt_increment_i32),
         {e.buffer(increment.getInput()), out});
  return success();
}

LogicalResult emitSumOfSquares(Operation *op, StepEmitter &e) {
  auto sum = cast<train::SumOfSquaresOp>(op);
  Value out = e.output(sum.getResult());
  for (auto [i, input] : llvm::enumerate(sum.getInputs()))
    e.call(ABI_FUNCTION(asrt_sum_of_squares),
           {dtypeOf(e, input), e.buffer(input), e.i64(numElements(input)), out,
            e.i32(i == 0 ? 0 : 1)});
  return success();
}

LogicalResult emitClipCoefficient(Operation *op, StepEmitter &e) {
  auto clip = cast<train::ClipCoefficientOp>(op);
  Value out = e.output(clip.getResult());
  e.call(ABI_FUNCTION(asrt_clip_coefficient),
         {e.buffer(clip.getSumOfSquares()), out,
          e.f32(clip.getMaxNorm().convertToFloat())});
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

std::optional<asrt_reduce_op> runtimeReduction(shard::ReductionKind kind) {
  switch (kind) {
  case shard::ReductionKind::Sum:
    return ASRT_REDUCE_SUM;
  case shard::ReductionKind::Average:
    return ASRT_REDUCE_AVG;
  case shard::ReductionKind::Max:
    return ASRT_REDUCE_MAX;
  case shard::ReductionKind::Min:
    return ASRT_REDUCE_MIN;
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
  std::optional<asrt_reduce_op> reduction =
      runtimeReduction(allReduce.getReduction());
  if (!reduction)
    return op->emitOpError() << "reduction '"
                             << shard::stringifyReductionKind(
                                    allReduce.getReduction())
                             << "' is not supported by the runtime; use sum, "
                                "average, max or min";
  std::optional<asrt_dtype> dtype =
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
  e.countCollective(cost::CollectiveKind::AllReduce, group->size,
                    allReduce.getInput());
  e.call(ABI_FUNCTION(asrt_all_reduce),
         {e.buffer(allReduce.getInput()), recv,
          e.i64(numElements(allReduce.getInput())), e.i32(*dtype),
          e.i32(*reduction), e.i32(group->axesMask)});
  return success();
}

/// The grid-axes mask of a flat-shard collective, and its group size.
template <typename OpT>
FailureOr<Group> shardGroup(OpT op) {
  return resolveGroup(op, op.getGridAttr(), op.getGridAxes());
}

LogicalResult emitShardOf(Operation *op, StepEmitter &e) {
  auto shardOf = cast<train::ShardOfOp>(op);
  FailureOr<Group> group = shardGroup(shardOf);
  if (failed(group))
    return failure();
  // One rank's shard of a tensor is all of it, flattened.
  if (group->size == 1) {
    e.alias(shardOf.getResult(), shardOf.getInput());
    return success();
  }
  Value out = e.output(shardOf.getResult());
  e.call(ABI_FUNCTION(asrt_shard_of),
         {dtypeOf(e, shardOf.getInput()), e.buffer(shardOf.getInput()), out,
          e.i64(numElements(shardOf.getInput())), e.i32(group->axesMask)});
  return success();
}

} // namespace

int64_t autoshard::packedBucketBytes(int64_t n, ValueRange fulls) {
  int64_t bytes = 0;
  for (Value full : fulls) {
    auto type = cast<RankedTensorType>(full.getType());
    bytes += n * llvm::divideCeil(type.getNumElements(), n) *
             llvm::divideCeil(type.getElementTypeBitWidth(), 8);
  }
  return bytes;
}

namespace {

/// The kind the runtime counts a bucket kind's bytes under.
cost::CollectiveKind trafficKind(asrt_bucket_kind bucketKind) {
  switch (bucketKind) {
  case ASRT_BUCKET_ALL_REDUCE:
    return cost::CollectiveKind::AllReduce;
  case ASRT_BUCKET_ALL_GATHER_SHARDS:
    return cost::CollectiveKind::AllGather;
  case ASRT_BUCKET_REDUCE_SCATTER_SHARDS:
    return cost::CollectiveKind::ReduceScatter;
  }
  llvm_unreachable("not an asrt_bucket_kind");
}

/// The bucket's pack buffer in the step's arena, alive until `until` (the
/// wait of a started bucket; this op when null), so that the memory plan
/// counts it and the runtime allocates nothing.
void emitPackBuffer(StepEmitter &e, int64_t bytes, Operation *until) {
  e.call(ABI_FUNCTION(asrt_bucket_pack_buffer),
         {e.packBuffer(bytes, until), e.i64(bytes)});
}

/// A collective over the members (send, result) of a group: one call for a
/// single member, one bucket for several, aliases for a group of one rank
/// (every such collective is then the identity). `fullOf(i)` is the tensor
/// whose element count the runtime needs for member i.
LogicalResult emitMembers(Operation *op, StepEmitter &e, const Group &group,
                          ValueRange sends, ValueRange results,
                          function_ref<Value(unsigned)> fullOf,
                          function_ref<void(Value send, Value out)> single,
                          asrt_bucket_kind bucketKind,
                          std::optional<asrt_reduce_op> reduction) {
  if (group.size == 1) {
    for (auto [send, result] : llvm::zip(sends, results))
      e.alias(result, send);
    return success();
  }
  SmallVector<Value> fulls;
  for (unsigned i = 0, n = sends.size(); i < n; ++i)
    fulls.push_back(fullOf(i));
  e.countCollective(trafficKind(bucketKind), group.size, fulls);
  Value dtype = dtypeOf(e, sends.front());
  for (Value send : sends.drop_front())
    if (tensorType(send).getElementType() !=
        tensorType(sends.front()).getElementType())
      return op->emitOpError() << "mixes element types in one bucket; the "
                                  "runtime packs one type per bucket";
  // An all-reduce writes a result over its input when the input dies here.
  auto outputOf = [&](Value send, Value result) {
    if (bucketKind == ASRT_BUCKET_ALL_REDUCE && e.canReuse(send, result)) {
      e.reuse(result, send);
      return e.buffer(send);
    }
    return e.output(result);
  };
  if (sends.size() == 1) {
    single(sends.front(), outputOf(sends.front(), results.front()));
    return success();
  }
  e.call(ABI_FUNCTION(asrt_bucket_begin),
         {e.i32(bucketKind), dtype, e.i32(reduction.value_or(ASRT_REDUCE_SUM)),
          e.i32(group.axesMask)});
  for (auto [send, result, full] : llvm::zip(sends, results, fulls)) {
    Value out = outputOf(send, result);
    e.call(ABI_FUNCTION(asrt_bucket_add),
           {e.buffer(send), out, e.i64(numElements(full))});
  }
  emitPackBuffer(e, packedBucketBytes(group.size, fulls), nullptr);
  e.call(ABI_FUNCTION(asrt_bucket_end));
  return success();
}

asrt_reduce_op runtimeReduction(train::Reduction reduction) {
  return reduction == train::Reduction::Average ? ASRT_REDUCE_AVG
                                                : ASRT_REDUCE_SUM;
}

LogicalResult emitAllGatherShards(Operation *op, StepEmitter &e) {
  auto gather = cast<train::AllGatherShardsOp>(op);
  FailureOr<Group> group = shardGroup(gather);
  if (failed(group))
    return failure();
  auto fullOf = [&](unsigned i) { return gather.getResult(i); };
  auto single = [&](Value send, Value out) {
    e.call(ABI_FUNCTION(asrt_all_gather_shards),
           {dtypeOf(e, send), e.buffer(send), out,
            e.i64(numElements(fullOf(0))), e.i32(group->axesMask)});
  };
  return emitMembers(op, e, *group, gather.getInputs(), gather.getResults(),
                     fullOf, single, ASRT_BUCKET_ALL_GATHER_SHARDS,
                     std::nullopt);
}

LogicalResult emitReduceScatterShards(Operation *op, StepEmitter &e) {
  auto scatter = cast<train::ReduceScatterShardsOp>(op);
  FailureOr<Group> group = shardGroup(scatter);
  if (failed(group))
    return failure();
  asrt_reduce_op reduction = runtimeReduction(scatter.getReduction());
  auto fullOf = [&](unsigned i) { return scatter.getInputs()[i]; };
  auto single = [&](Value send, Value out) {
    e.call(ABI_FUNCTION(asrt_reduce_scatter_shards),
           {dtypeOf(e, send), e.buffer(send), out, e.i64(numElements(send)),
            e.i32(reduction), e.i32(group->axesMask)});
  };
  return emitMembers(op, e, *group, scatter.getInputs(), scatter.getResults(),
                     fullOf, single, ASRT_BUCKET_REDUCE_SCATTER_SHARDS,
                     reduction);
}

LogicalResult emitAllReduceBucket(Operation *op, StepEmitter &e) {
  auto bucket = cast<train::AllReduceBucketOp>(op);
  FailureOr<Group> group = shardGroup(bucket);
  if (failed(group))
    return failure();
  asrt_reduce_op reduction = runtimeReduction(bucket.getReduction());
  auto fullOf = [&](unsigned i) { return bucket.getInputs()[i]; };
  auto single = [&](Value send, Value out) {
    e.call(ABI_FUNCTION(asrt_all_reduce),
           {e.buffer(send), out, e.i64(numElements(send)), dtypeOf(e, send),
            e.i32(reduction), e.i32(group->axesMask)});
  };
  return emitMembers(op, e, *group, bucket.getInputs(), bucket.getResults(),
                     fullOf, single, ASRT_BUCKET_ALL_REDUCE, reduction);
}

/// A started collective: the bucket of its members, issued with
/// asrt_bucket_start; the wait's results get their buffers here, where the
/// runtime is told to write them. A group of one rank needs no call: the
/// results alias the inputs and the handle is 0.
LogicalResult emitCollectiveStart(Operation *op, StepEmitter &e) {
  auto start = cast<train::CollectiveStartOp>(op);
  FailureOr<Group> group = shardGroup(start);
  if (failed(group))
    return failure();
  auto wait = cast<train::CollectiveWaitOp>(*start.getHandle().user_begin());
  ValueRange sends = start.getInputs();
  ValueRange results = wait.getResults();
  if (group->size == 1) {
    for (auto [send, result] : llvm::zip(sends, results))
      e.alias(result, send);
    e.bindHandle(start.getHandle(), e.i64(0));
    return success();
  }
  asrt_bucket_kind kind = ASRT_BUCKET_ALL_REDUCE;
  auto fullOf = [&](unsigned i) { return sends[i]; };
  std::function<Value(unsigned)> full = fullOf;
  if (start.getKind() == train::CollectiveKind::AllGatherShards) {
    kind = ASRT_BUCKET_ALL_GATHER_SHARDS;
    full = [&](unsigned i) { return results[i]; };
  } else if (start.getKind() == train::CollectiveKind::ReduceScatterShards) {
    kind = ASRT_BUCKET_REDUCE_SCATTER_SHARDS;
  }
  asrt_reduce_op reduction = start.getReduction()
                                 ? runtimeReduction(*start.getReduction())
                                 : ASRT_REDUCE_SUM;
  e.call(ABI_FUNCTION(asrt_bucket_begin),
         {e.i32(kind), dtypeOf(e, sends.front()), e.i32(reduction),
          e.i32(group->axesMask)});
  for (auto [i, pair] : llvm::enumerate(llvm::zip(sends, results))) {
    auto [send, result] = pair;
    // An all-reduce writes its result over its input when nothing else
    // reads the input (the runtime packs every send before it unpacks a
    // recv): a gradient and its reduced value share one buffer, as with
    // PyTorch DDP's gradient_as_bucket_view.
    Value out;
    if (kind == ASRT_BUCKET_ALL_REDUCE && e.canReuseUntil(send, result, wait)) {
      e.reuse(result, send);
      out = e.buffer(send);
    } else {
      out = e.output(result);
    }
    e.call(ABI_FUNCTION(asrt_bucket_add),
           {e.buffer(send), out, e.i64(numElements(full(i)))});
  }
  SmallVector<Value> fulls;
  for (unsigned i = 0, n = sends.size(); i < n; ++i)
    fulls.push_back(full(i));
  e.countCollective(trafficKind(kind), group->size, fulls);
  emitPackBuffer(e, packedBucketBytes(group->size, fulls), wait);
  e.bindHandle(start.getHandle(), e.call(ABI_FUNCTION(asrt_bucket_start)));
  return success();
}

/// Its results already have buffers (the start chose them); the runtime
/// writes them by the time asrt_wait returns.
LogicalResult emitCollectiveWait(Operation *op, StepEmitter &e) {
  auto wait = cast<train::CollectiveWaitOp>(op);
  auto start = wait.getHandle().getDefiningOp<train::CollectiveStartOp>();
  FailureOr<Group> group = shardGroup(start);
  if (failed(group))
    return failure();
  if (group->size > 1)
    e.call(ABI_FUNCTION(asrt_wait), {e.handle(wait.getHandle())});
  return success();
}

// Offload: copies between device and host memory, and the NVMe files of
// offloaded arguments. A copy never reuses its input's buffer: the two live
// in different arenas.
template <typename OpT, typename Fn>
LogicalResult emitCopy(Operation *op, StepEmitter &e, train::TransferKind kind,
                       rtabi::Function<Fn> callee) {
  auto copy = cast<OpT>(op);
  Value out = e.output(copy.getResult());
  e.countTransfer(static_cast<int>(kind), byteSize(copy.getInput()));
  e.call(callee,
         {out, e.buffer(copy.getInput()), e.i64(byteSize(copy.getInput()))});
  return success();
}

LogicalResult emitToHost(Operation *op, StepEmitter &e) {
  return emitCopy<train::ToHostOp>(op, e, train::TransferKind::ToHost,
                                   ABI_FUNCTION(asrt_copy_to_host));
}

LogicalResult emitToDevice(Operation *op, StepEmitter &e) {
  return emitCopy<train::ToDeviceOp>(op, e, train::TransferKind::ToDevice,
                                     ABI_FUNCTION(asrt_copy_to_device));
}

LogicalResult emitNvmeRead(Operation *op, StepEmitter &e) {
  auto read = cast<train::NvmeReadOp>(op);
  Value out = e.output(read.getResult());
  auto arg = cast<BlockArgument>(read.getSource());
  e.countTransfer(static_cast<int>(train::TransferKind::NvmeRead),
                  byteSize(read.getSource()));
  e.call(ABI_FUNCTION(asrt_nvme_read),
         {e.i32(static_cast<int32_t>(arg.getArgNumber())), out,
          e.i64(byteSize(read.getSource()))});
  return success();
}

LogicalResult emitNvmeWrite(Operation *op, StepEmitter &e) {
  auto write = cast<train::NvmeWriteOp>(op);
  auto arg = cast<BlockArgument>(write.getTarget());
  e.countTransfer(static_cast<int>(train::TransferKind::NvmeWrite),
                  byteSize(write.getValue()));
  e.call(ABI_FUNCTION(asrt_nvme_write),
         {e.i32(static_cast<int32_t>(arg.getArgNumber())),
          e.buffer(write.getValue()), e.i64(byteSize(write.getValue()))});
  // The step returns the result only to say where the new value went: the
  // return copies nothing for it, so it has no buffer, and the value's
  // host buffer is free after the write.
  return success();
}

// Asynchronous offload transfers (asrt_transfer_start's kinds are
// TransferKind's values). The start gives the wait's result its buffer and
// keeps its input alive until the wait, as a started collective does.
static_assert(static_cast<int>(train::TransferKind::ToHost) ==
                      ASRT_TRANSFER_TO_HOST &&
                  static_cast<int>(train::TransferKind::ToDevice) ==
                      ASRT_TRANSFER_TO_DEVICE &&
                  static_cast<int>(train::TransferKind::NvmeRead) ==
                      ASRT_TRANSFER_NVME_READ &&
                  static_cast<int>(train::TransferKind::NvmeWrite) ==
                      ASRT_TRANSFER_NVME_WRITE,
              "train::TransferKind's values are asrt_transfer_start's kinds");
LogicalResult emitTransferStart(Operation *op, StepEmitter &e) {
  auto start = cast<train::TransferStartOp>(op);
  auto wait = cast<train::TransferWaitOp>(*start.getHandle().user_begin());
  Value input = start.getInput();
  Value dst = e.nullPtr(), src = e.nullPtr();
  int32_t argIndex = -1;
  switch (start.getKind()) {
  case train::TransferKind::ToHost:
  case train::TransferKind::ToDevice:
    dst = e.output(wait.getResult());
    src = e.buffer(input);
    break;
  case train::TransferKind::NvmeRead:
    dst = e.output(wait.getResult());
    argIndex = static_cast<int32_t>(cast<BlockArgument>(input).getArgNumber());
    break;
  case train::TransferKind::NvmeWrite:
    src = e.buffer(input);
    argIndex = static_cast<int32_t>(
        cast<BlockArgument>(start.getTarget()).getArgNumber());
    break;
  }
  e.countTransfer(static_cast<int>(start.getKind()), byteSize(input));
  e.bindHandle(start.getHandle(),
               e.call(ABI_FUNCTION(asrt_transfer_start),
                      {e.i32(static_cast<int32_t>(start.getKind())),
                       e.i32(argIndex), dst, src, e.i64(byteSize(input))}));
  return success();
}

/// Its result already has a buffer (the start chose it), or none for an
/// NVMe write, whose result only says where the value went.
LogicalResult emitTransferWait(Operation *op, StepEmitter &e) {
  auto wait = cast<train::TransferWaitOp>(op);
  e.call(ABI_FUNCTION(asrt_transfer_wait), {e.handle(wait.getHandle())});
  return success();
}


} // namespace

//===----------------------------------------------------------------------===//
// Multi-tensor AdamW
//===----------------------------------------------------------------------===//

namespace {

/// One tensor of an AdamW update: the operands it reads, its results and
/// its weight decay.
struct AdamwTensor {
  OpOperand &param, &grad, &expAvg, &expAvgSq;
  Value newParam, newExpAvg, newExpAvgSq;
  float weightDecay;
};

/// The asrt_adamw_tensor fields of `t`, in the struct's order: its buffers,
/// its outputs' (placed at the emitter's position), the element count and
/// the weight decay. `reads` are the operands of the op that this tensor's
/// update reads (all of them when empty).
SmallVector<Value> adamwTensorFields(const AdamwTensor &t,
                                     ArrayRef<unsigned> reads, StepEmitter &e) {
  // Each output may overwrite the input it replaces (abi.h).
  Value newParam = e.output(t.newParam, t.param.getOperandNumber(), reads);
  Value newExpAvg = e.output(t.newExpAvg, t.expAvg.getOperandNumber(), reads);
  Value newExpAvgSq =
      e.output(t.newExpAvgSq, t.expAvgSq.getOperandNumber(), reads);
  return {e.buffer(t.param.get()),
          e.buffer(t.grad.get()),
          e.buffer(t.expAvg.get()),
          e.buffer(t.expAvgSq.get()),
          newParam,
          newExpAvg,
          newExpAvgSq,
          e.i64(numElements(t.param.get())),
          e.f32(t.weightDecay)};
}

SmallVector<Value> adamwTensorFields(train::AdamwOp adamw, StepEmitter &e) {
  return adamwTensorFields({adamw.getParamMutable(), adamw.getGradMutable(),
                            adamw.getExpAvgMutable(),
                            adamw.getExpAvgSqMutable(), adamw.getNewParam(),
                            adamw.getNewExpAvg(), adamw.getNewExpAvgSq(),
                            adamw.getWeightDecay().convertToFloat()},
                           /*reads=*/{}, e);
}

LogicalResult emitAdamw(Operation *op, StepEmitter &e) {
  auto adamw = cast<train::AdamwOp>(op);
  SmallVector<Value> x = adamwTensorFields(adamw, e);
  e.call(ABI_FUNCTION(asrt_adamw_update),
         {dtypeOf(e, adamw.getGrad()), x[0], x[1], x[2], x[3],
          e.buffer(adamw.getLr()), e.buffer(adamw.getStep()),
          bufferOrNull(e, adamw.getGradScale()), x[4], x[5], x[6], x[7],
          e.f32(adamw.getBeta1().convertToFloat()),
          e.f32(adamw.getBeta2().convertToFloat()),
          e.f32(adamw.getEps().convertToFloat()), x[8]});
  return success();
}

} // namespace

/// asrt_adamw_tensor's fields, in the order abi.h declares them, which
/// adamwTensorFields follows.
#define ADAMW_TENSOR_FIELDS(X)                                                 \
  X(param)                                                                     \
  X(grad) X(exp_avg) X(exp_avg_sq) X(param_out) X(exp_avg_out)                 \
      X(exp_avg_sq_out) X(n) X(weight_decay)

namespace {
struct FieldLayout {
  size_t offset, size, align;
};
/// Whether `fields` follow one another as C lays them out and end the
/// struct: a field of abi.h missing from the list before the last one, or
/// listed out of order, makes a gap or a step back.
constexpr bool laidOutInOrder(std::initializer_list<FieldLayout> fields,
                              size_t structSize, size_t structAlign) {
  size_t end = 0;
  for (const FieldLayout &field : fields) {
    if (field.offset != llvm::alignTo(end, field.align))
      return false;
    end = field.offset + field.size;
  }
  return structSize == llvm::alignTo(end, structAlign);
}
} // namespace

#define ADAMW_FIELD_LAYOUT(field)                                              \
  FieldLayout{offsetof(asrt_adamw_tensor, field),                              \
              sizeof(asrt_adamw_tensor::field),                                \
              alignof(decltype(asrt_adamw_tensor::field))},
static_assert(laidOutInOrder({ADAMW_TENSOR_FIELDS(ADAMW_FIELD_LAYOUT)},
                             sizeof(asrt_adamw_tensor),
                             alignof(asrt_adamw_tensor)),
              "ADAMW_TENSOR_FIELDS lists asrt_adamw_tensor's fields in order");
#undef ADAMW_FIELD_LAYOUT

namespace {

LogicalResult emitAdamwMulti(train::AdamwMultiOp op, StepEmitter &e) {
  unsigned n = op.getNumTensors();
  // The scalars every tensor's update reads; then each its own operands, so
  // that writing a result into the buffer of the argument it updates is
  // judged on what that tensor reads, as for a single train.adamw.
  SmallVector<unsigned> shared{op.getLrMutable().getOperandNumber(),
                               op.getStepMutable().getOperandNumber()};
  if (op.getGradScale())
    shared.push_back(op.getGradScaleMutable()[0].getOperandNumber());
  SmallVector<SmallVector<Value>> fields;
  for (unsigned i = 0; i < n; ++i) {
    AdamwTensor t{op.getParamOperands()[i],
                  op.getGradientOperands()[i],
                  op.getExpAvgsMutable()[i],
                  op.getExpAvgSqsMutable()[i],
                  op.getNewParam(i),
                  op.getNewExpAvg(i),
                  op.getNewExpAvgSq(i),
                  op.getWeightDecays()[i]};
    SmallVector<unsigned> reads(shared);
    for (OpOperand *operand : {&t.param, &t.grad, &t.expAvg, &t.expAvgSq})
      reads.push_back(operand->getOperandNumber());
    fields.push_back(adamwTensorFields(t, reads, e));
  }

  OpBuilder &b = e.builder();
  Location loc = e.loc();
  MLIRContext *context = b.getContext();
  Type ptr = LLVM::LLVMPointerType::get(context);
#define ADAMW_FIELD_TYPE(field)                                                \
  rtabi::getType<decltype(asrt_adamw_tensor::field)>(context),
  auto tensorStruct = LLVM::LLVMStructType::getLiteral(
      context, {ADAMW_TENSOR_FIELDS(ADAMW_FIELD_TYPE)});
#undef ADAMW_FIELD_TYPE
  auto array = LLVM::LLVMArrayType::get(tensorStruct, fields.size());
  // A buffer assignment reads no stored field: the list is a placeholder
  // then, not an alloca and a store per field (nine per tensor, thousands
  // per step).
  Value list = e.isPlacementOnly()
                   ? e.nullPtr()
                   : LLVM::AllocaOp::create(b, loc, ptr, array, e.i64(1),
                                            alignof(asrt_adamw_tensor))
                         .getResult();
  for (auto [i, tensor] : llvm::enumerate(fields)) {
    // A store takes any type: only this check keeps a field that abi.h adds
    // or retypes from being written with the old layout.
    if (!llvm::equal(ValueRange(tensor).getTypes(), tensorStruct.getBody()))
      llvm::report_fatal_error("adamwTensorFields does not give "
                               "asrt_adamw_tensor's fields abi.h's types");
    if (e.isPlacementOnly())
      continue;
    for (auto [field, value] : llvm::enumerate(tensor)) {
      Value slot = LLVM::GEPOp::create(
          b, loc, ptr, array, list,
          ArrayRef<LLVM::GEPArg>{0, int32_t(i), int32_t(field)});
      LLVM::StoreOp::create(b, loc, value, slot);
    }
  }
  e.call(ABI_FUNCTION(asrt_adamw_update_multi),
         {dtypeOf(e, op.getGrads()[0]), list, e.i64(int64_t(fields.size())),
          e.buffer(op.getLr()), e.buffer(op.getStep()),
          bufferOrNull(e, op.getGradScale()),
          e.f32(op.getBeta1().convertToFloat()),
          e.f32(op.getBeta2().convertToFloat()),
          e.f32(op.getEps().convertToFloat())});
  return success();
}

} // namespace

LogicalResult autoshard::emitRuntimeCall(Operation *op, StepEmitter &e) {
  // Most rules take the op as an Operation * and cast it themselves.
  auto rule = [&](LogicalResult (*emit)(Operation *, StepEmitter &)) {
    return [&e, emit](Operation *op) { return emit(op, e); };
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<train::LinearOp>(rule(emitLinear))
      .Case<train::LinearGradInputOp>(rule(emitLinearGradInput))
      .Case<train::LinearGradWeightOp>(rule(emitLinearGradWeight))
      .Case<train::BiasGradOp>(rule(emitBiasGrad))
      .Case<train::SwigluOp>(rule(emitSwiglu))
      .Case<train::SwigluGradOp>(rule(emitSwigluGrad))
      .Case<train::CastOp>(rule(emitCast))
      .Case<train::ReshapeOp>(rule(emitReshape))
      .Case<train::SliceRowsOp>(rule(emitSliceRows))
      .Case<train::ScaleOp>(rule(emitScale))
      .Case<train::EmbeddingOp>(rule(emitEmbedding))
      .Case<train::EmbeddingGradOp>(rule(emitEmbeddingGrad))
      .Case<train::AddPositionEmbeddingOp>(rule(emitAddPositionEmbedding))
      .Case<train::AddPositionEmbeddingGradOp>(
          rule(emitAddPositionEmbeddingGrad))
      .Case<train::LayerNormOp>(rule(emitLayerNorm))
      .Case<train::LayerNormGradOp>(rule(emitLayerNormGrad))
      .Case<train::RmsNormOp>(rule(emitRmsNorm))
      .Case<train::RmsNormGradOp>(rule(emitRmsNormGrad))
      .Case<train::RopeOp>(rule(emitRope))
      .Case<train::RopeGradOp>(rule(emitRopeGrad))
      .Case<train::CausalAttentionOp>(rule(emitCausalAttention))
      .Case<train::CausalAttentionGradOp>(rule(emitCausalAttentionGrad))
      .Case<train::SoftmaxCrossEntropyOp>(rule(emitSoftmaxCrossEntropy))
      .Case<train::SoftmaxCrossEntropyGradOp>(rule(emitSoftmaxCrossEntropyGrad))
      .Case<train::NllLossOp>(rule(emitNllLoss))
      .Case<train::NllLossGradOp>(rule(emitNllLossGrad))
      .Case<train::SgdOp>(rule(emitSgd))
      .Case<train::AdamwOp>(rule(emitAdamw))
      .Case<train::IncrementOp>(rule(emitIncrement))
      .Case<train::SumOfSquaresOp>(rule(emitSumOfSquares))
      .Case<train::ClipCoefficientOp>(rule(emitClipCoefficient))
      .Case<shard::AllReduceOp>(rule(emitAllReduce))
      .Case<train::ShardOfOp>(rule(emitShardOf))
      .Case<train::AllGatherShardsOp>(rule(emitAllGatherShards))
      .Case<train::ReduceScatterShardsOp>(rule(emitReduceScatterShards))
      .Case<train::AllReduceBucketOp>(rule(emitAllReduceBucket))
      .Case<train::CollectiveStartOp>(rule(emitCollectiveStart))
      .Case<train::CollectiveWaitOp>(rule(emitCollectiveWait))
      .Case<train::ToHostOp>(rule(emitToHost))
      .Case<train::ToDeviceOp>(rule(emitToDevice))
      .Case<train::NvmeReadOp>(rule(emitNvmeRead))
      .Case<train::NvmeWriteOp>(rule(emitNvmeWrite))
      .Case<train::TransferStartOp>(rule(emitTransferStart))
      .Case<train::TransferWaitOp>(rule(emitTransferWait))
      .Case<train::ReluOp>([&](auto op) {
        return emitActivation<train::ReluOp>(op, e,
                                             ABI_FUNCTION(asrt_relu_fwd));
      })
      .Case<train::ReluGradOp>([&](auto op) {
        return emitActivationGrad<train::ReluGradOp>(
            op, e, ABI_FUNCTION(asrt_relu_grad));
      })
      .Case<train::GeluOp>([&](auto op) {
        return emitActivation<train::GeluOp>(op, e,
                                             ABI_FUNCTION(asrt_gelu_fwd));
      })
      .Case<train::GeluGradOp>([&](auto op) {
        return emitActivationGrad<train::GeluGradOp>(
            op, e, ABI_FUNCTION(asrt_gelu_grad));
      })
      // Fused ops (autoshard-fuse).
      .Case<train::LinearGeluOp>([&](auto op) { return emitLinearGelu(op, e); })
      .Case<train::LinearGradGeluOp>(
          [&](auto op) { return emitLinearGradGelu(op, e); })
      .Case<train::LinearGradWeightBiasOp>(
          [&](auto op) { return emitLinearGradWeightBias(op, e); })
      .Case<train::AdamwMultiOp>(
          [&](auto op) { return emitAdamwMulti(op, e); })
      // The generic tensor ops (TensorCalls.cpp).
      .Default([&](Operation *op) { return emitTensorOpCall(op, e); });
}

void StepEmitter::countCollective(cost::CollectiveKind kind, int64_t groupSize,
                                  ValueRange fulls) {
  SmallVector<int64_t> elements;
  for (Value full : fulls)
    elements.push_back(numElements(full));
  traffic.addCollective(
      kind, groupSize, elements,
      llvm::divideCeil(tensorType(fulls.front()).getElementTypeBitWidth(), 8));
}

void StepEmitter::countTransfer(int kind, int64_t bytes) {
  StepTraffic::Count &count = traffic.transfers[kind];
  ++count.calls;
  count.bytes += bytes;
}
