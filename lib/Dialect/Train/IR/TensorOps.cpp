//===- TensorOps.cpp - shape rules and gradients of the generic ops -------===//
//
// The generic tensor ops of TrainTensorOps.td: their shape rules,
// verifiers and gradient rules. A gradient rule builds generic ops again
// (a matmul's gradients are matmuls, a broadcast's a reduce_sum), so that
// every backward pass runs on the same kernels as the forward.
//
//===----------------------------------------------------------------------===//

#include "ShapeRules.h"

#include "autoshard/Dialect/Train/IR/TrainDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace autoshard::train;
using namespace autoshard::train::detail;

namespace {

/// Emits `message` at `loc` (when there is one), prefixed with the op name.
template <typename... Args>
LogicalResult opError(std::optional<Location> loc, StringRef op,
                      Args &&...args) {
  return emitOptionalError(loc, "'", op, "' ", std::forward<Args>(args)...);
}

/// A dimension index in [0, rank), or failure.
LogicalResult checkDim(std::optional<Location> loc, StringRef op, int64_t dim,
                       int64_t rank) {
  if (dim >= 0 && dim < rank)
    return success();
  return opError(loc, op, "dim ", dim, " is outside [0, ", rank,
                 ") (negative dimensions are normalised by the front end)");
}

/// The broadcast result shape of `values`, or an error naming them.
FailureOr<SmallVector<int64_t>> broadcastOf(std::optional<Location> loc,
                                            StringRef op,
                                            ArrayRef<Value> values) {
  SmallVector<int64_t> shape(tensorOf(values.front()).getShape());
  for (Value v : values.drop_front()) {
    FailureOr<SmallVector<int64_t>> next =
        broadcastShapes(shape, tensorOf(v).getShape());
    if (failed(next)) {
      (void)opError(loc, op, "operand shapes do not broadcast: ",
                    tensorOf(values.front()), " and ", v.getType(),
                    " (aligned at the right, each pair of dimensions must be "
                    "equal or one of them 1)");
      return failure();
    }
    shape = std::move(*next);
  }
  return shape;
}

Value reshapeTo(OpBuilder &b, Location loc, Value value,
                RankedTensorType type) {
  if (value.getType() == type)
    return value;
  return ReshapeOp::create(b, loc, type, value);
}

/// `grad` (of a broadcast result) summed down to `target`, the type of the
/// operand that was broadcast: over the leading dimensions the operand
/// lacks and the ones where it has size 1.
Value sumToType(OpBuilder &b, Location loc, Value grad,
                RankedTensorType target) {
  RankedTensorType type = tensorOf(grad);
  if (type == target)
    return grad;
  int64_t lead = type.getRank() - target.getRank();
  SmallVector<int64_t> dims;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (i < lead ||
        (target.getDimSize(i - lead) == 1 && type.getDimSize(i) != 1))
      dims.push_back(i);
  Value summed = grad;
  if (!dims.empty())
    summed = ReduceSumOp::create(b, loc, grad, dims, /*keepdim=*/false);
  return reshapeTo(b, loc, summed, target);
}

/// The gradient of a broadcast operand whose value is `grad` at the
/// result's shape.
void setBroadcastGrad(OpBuilder &b, Location loc, Value grad, Value operand,
                      MutableArrayRef<Value> operandGrads, unsigned index) {
  operandGrads[index] = sumToType(b, loc, grad, tensorOf(operand));
}

/// A 0-D constant of `elementType`.
Value scalar(OpBuilder &b, Location loc, Type elementType, float value) {
  return FullOp::create(b, loc, RankedTensorType::get({}, elementType),
                        APFloat(value));
}

/// Reduced `dims` of an operand of `rank`: distinct, ascending, in range,
/// at least one.
LogicalResult checkReduceDims(std::optional<Location> loc, StringRef op,
                              ArrayRef<int64_t> dims, int64_t rank) {
  if (dims.empty())
    return opError(loc, op, "reduces no dimension; list them in dims");
  for (auto [i, dim] : llvm::enumerate(dims)) {
    if (failed(checkDim(loc, op, dim, rank)))
      return failure();
    if (i > 0 && dims[i - 1] >= dim)
      return opError(loc, op, "dims must be distinct and ascending, got [",
                     llvm::make_range(dims.begin(), dims.end()), "]");
  }
  return success();
}

SmallVector<int64_t> reducedShape(ArrayRef<int64_t> shape,
                                  ArrayRef<int64_t> dims, bool keepdim) {
  SmallVector<int64_t> result;
  for (auto [i, size] : llvm::enumerate(shape)) {
    if (!llvm::is_contained(dims, static_cast<int64_t>(i)))
      result.push_back(size);
    else if (keepdim)
      result.push_back(1);
  }
  return result;
}

LogicalResult inferReduce(std::optional<Location> loc, StringRef op,
                          Value input, ArrayRef<int64_t> dims, bool keepdim,
                          SmallVectorImpl<Type> &results) {
  RankedTensorType type = tensorOf(input);
  if (failed(checkReduceDims(loc, op, dims, type.getRank())))
    return failure();
  results.push_back(type.clone(reducedShape(type.getShape(), dims, keepdim)));
  return success();
}

/// A gradient at the reduced shape `grad`, repeated over the reduced
/// dimensions of `input`.
Value expandReduced(OpBuilder &b, Location loc, Value grad, Value input,
                    ArrayRef<int64_t> dims) {
  RankedTensorType in = tensorOf(input);
  auto kept = in.clone(reducedShape(in.getShape(), dims, /*keepdim=*/true));
  return BroadcastToOp::create(b, loc, in, reshapeTo(b, loc, grad, kept));
}

} // namespace

FailureOr<SmallVector<int64_t>>
autoshard::train::broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return failure();
    shape[i] = da == 1 ? db : da;
  }
  return shape;
}

//===----------------------------------------------------------------------===//
// Elementwise functions of one tensor
//===----------------------------------------------------------------------===//

LogicalResult autoshard::train::buildUnaryGradient(
    OpBuilder &b, Operation *op, UnaryFn fn, float alpha,
    ArrayRef<Value> grads, ArrayRef<bool> needed,
    MutableArrayRef<Value> operandGrads) {
  if (!grads[0] || !needed[0])
    return success();
  if (fn == UnaryFn::Add) {
    operandGrads[0] = grads[0];
    return success();
  }
  operandGrads[0] = UnaryGradOp::create(b, op->getLoc(), fn, grads[0],
                                        op->getOperand(0), APFloat(alpha));
  return success();
}

LogicalResult PowScalarOp::verify() {
  return verifyFloatAttr(*this, "exponent",
                     getExponent().convertToFloat(), FloatRule::Finite);
}

LogicalResult AddScalarOp::verify() {
  return verifyFloatAttr(*this, "value",
                     getValue().convertToFloat(), FloatRule::Finite);
}

LogicalResult DropoutOp::verify() {
  if (failed(verifyFloatAttr(*this, "p",
                         getP().convertToFloat(), FloatRule::UnitInterval)))
    return failure();
  for (auto [name, value] :
       {std::pair<StringRef, int64_t>{"stream", getStream()},
        {"row_offset", getRowOffset()},
        {"rank_rows", getRankRows()}})
    if (value < 0)
      return emitOpError() << "has " << name << " = " << value
                           << "; it must be >= 0";
  if (getInput().getType().getRank() == 0)
    return emitOpError() << "needs a tensor of rank >= 1 (dimension 0 is the "
                            "batch), got "
                         << getInput().getType();
  return success();
}

LogicalResult DropoutOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                       bool, ArrayRef<bool> needed,
                                       MutableArrayRef<Value> operandGrads) {
  if (!grads[0] || !needed[0])
    return success();
  // The same attributes draw the same mask: dy * mask / (1 - p).
  operandGrads[0] = DropoutOp::create(
      b, getLoc(), grads[0].getType(), grads[0], getPAttr(), getStreamAttr(),
      getRowOffsetAttr(), getRankRowsAttr());
  return success();
}

LogicalResult DropoutOp::resizeBatch(int64_t factor,
                                     SmallVectorImpl<Type> &resultTypes) {
  // Each of `factor` ranks takes a contiguous block of the rows this op
  // held: rank i's starts `i * rank_rows` rows further into the whole
  // tensor, and an offset within the block (a micro-batch's) shrinks with
  // it.
  int64_t rows = getInput().getType().getDimSize(0) * factor;
  int64_t stride = getRankRows() ? getRankRows() : rows;
  if (getRowOffset() % factor != 0 || stride % factor != 0)
    return emitOpError() << "holds rows from " << getRowOffset()
                         << " of blocks of " << stride
                         << ", which do not split evenly over " << factor
                         << " ranks";
  setRowOffset(getRowOffset() / factor);
  setRankRows(stride / factor);
  resultTypes.push_back(getInput().getType());
  return success();
}

void DropoutOp::placeMicroBatch(int64_t index, int64_t count) {
  // resizeBatch(count) divided the block as if over ranks; a micro-batch is
  // a block of the same rank instead.
  int64_t rows = getInput().getType().getDimSize(0);
  setRowOffset(getRowOffset() * count + index * rows);
  setRankRows(getRankRows() * count);
}

LogicalResult UnaryGradOp::verify() {
  return verifyFloatAttr(*this, "alpha",
                     getAlpha().convertToFloat(), FloatRule::Finite);
}

//===----------------------------------------------------------------------===//
// Broadcasting arithmetic
//===----------------------------------------------------------------------===//

namespace {

template <typename Adaptor>
LogicalResult inferBinary(std::optional<Location> loc, StringRef op,
                          Adaptor adaptor, SmallVectorImpl<Type> &results) {
  SmallVector<Value> operands{adaptor.getLhs(), adaptor.getRhs()};
  if (failed(checkSameElementType(loc, op, operands)))
    return failure();
  FailureOr<SmallVector<int64_t>> shape = broadcastOf(loc, op, operands);
  if (failed(shape))
    return failure();
  results.push_back(tensorOf(operands[0]).clone(*shape));
  return success();
}

} // namespace

#define TRAIN_BINARY_INFER(Op, name)                                          \
  LogicalResult Op::inferReturnTypes(MLIRContext *,                           \
                                     std::optional<Location> loc,             \
                                     Adaptor adaptor,                         \
                                     SmallVectorImpl<Type> &results) {        \
    return inferBinary(loc, name, adaptor, results);                          \
  }
TRAIN_BINARY_INFER(AddOp, "train.add")
TRAIN_BINARY_INFER(SubOp, "train.sub")
TRAIN_BINARY_INFER(MulOp, "train.mul")
TRAIN_BINARY_INFER(DivOp, "train.div")
TRAIN_BINARY_INFER(MaximumOp, "train.maximum")
TRAIN_BINARY_INFER(MinimumOp, "train.minimum")
TRAIN_BINARY_INFER(PowOp, "train.pow")
#undef TRAIN_BINARY_INFER

LogicalResult AddOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                   bool seed, ArrayRef<bool> needed,
                                   MutableArrayRef<Value> operandGrads) {
  // The sum passes its gradient to both terms, summed over what each
  // repeated.
  if (!grads[0])
    return success();
  for (unsigned i = 0; i < 2; ++i)
    if (needed[i])
      setBroadcastGrad(b, getLoc(), grads[0], getOperand(i), operandGrads, i);
  return success();
}

LogicalResult SubOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                   bool seed, ArrayRef<bool> needed,
                                   MutableArrayRef<Value> operandGrads) {
  if (!grads[0])
    return success();
  if (needed[0])
    setBroadcastGrad(b, getLoc(), grads[0], getLhs(), operandGrads, 0);
  if (needed[1])
    setBroadcastGrad(b, getLoc(), NegOp::create(b, getLoc(), grads[0]),
                     getRhs(), operandGrads, 1);
  return success();
}

LogicalResult MulOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                   bool seed, ArrayRef<bool> needed,
                                   MutableArrayRef<Value> operandGrads) {
  if (!grads[0])
    return success();
  Location loc = getLoc();
  if (needed[0])
    setBroadcastGrad(b, loc, MulOp::create(b, loc, grads[0], getRhs()),
                     getLhs(), operandGrads, 0);
  if (needed[1])
    setBroadcastGrad(b, loc, MulOp::create(b, loc, grads[0], getLhs()),
                     getRhs(), operandGrads, 1);
  return success();
}

LogicalResult DivOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                   bool seed, ArrayRef<bool> needed,
                                   MutableArrayRef<Value> operandGrads) {
  if (!grads[0])
    return success();
  Location loc = getLoc();
  if (needed[0])
    setBroadcastGrad(b, loc, DivOp::create(b, loc, grads[0], getRhs()),
                     getLhs(), operandGrads, 0);
  if (needed[1]) {
    // d(a/b)/db = -(a/b) / b.
    Value quotient = DivOp::create(b, loc, getResult(), getRhs());
    Value grad = NegOp::create(b, loc, MulOp::create(b, loc, grads[0], quotient));
    setBroadcastGrad(b, loc, grad, getRhs(), operandGrads, 1);
  }
  return success();
}

namespace {

/// The gradient of maximum (`greater` = gt) or minimum (lt): to the
/// operand that was chosen, shared equally on ties (as torch's).
LogicalResult extremumGradient(OpBuilder &b, Operation *op,
                               ComparePredicate strict, ArrayRef<Value> grads,
                               ArrayRef<bool> needed,
                               MutableArrayRef<Value> operandGrads) {
  if (!grads[0])
    return success();
  Location loc = op->getLoc();
  Value lhs = op->getOperand(0), rhs = op->getOperand(1), dy = grads[0];
  Type element = tensorOf(dy).getElementType();
  Value zero = scalar(b, loc, element, 0.0f);
  Value half = ScaleOp::create(b, loc, dy, APFloat(0.5f));
  Value tie = CompareOp::create(b, loc, ComparePredicate::EQ, lhs, rhs);
  Value onTie = SelectOp::create(b, loc, tie, half, zero);
  for (unsigned i = 0; i < 2; ++i) {
    if (!needed[i])
      continue;
    Value wins = CompareOp::create(b, loc, strict, op->getOperand(i),
                                   op->getOperand(1 - i));
    Value grad = SelectOp::create(b, loc, wins, dy, onTie);
    setBroadcastGrad(b, loc, grad, op->getOperand(i), operandGrads, i);
  }
  return success();
}

} // namespace

LogicalResult MaximumOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                       bool seed, ArrayRef<bool> needed,
                                       MutableArrayRef<Value> operandGrads) {
  return extremumGradient(b, getOperation(), ComparePredicate::GT, grads,
                          needed, operandGrads);
}

LogicalResult MinimumOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                       bool seed, ArrayRef<bool> needed,
                                       MutableArrayRef<Value> operandGrads) {
  return extremumGradient(b, getOperation(), ComparePredicate::LT, grads,
                          needed, operandGrads);
}

LogicalResult PowOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                   bool seed, ArrayRef<bool> needed,
                                   MutableArrayRef<Value> operandGrads) {
  if (!grads[0])
    return success();
  Location loc = getLoc();
  Value base = getLhs(), exponent = getRhs(), dy = grads[0];
  if (needed[0]) {
    // d(a^b)/da = b * a^(b-1).
    Value lowered = AddScalarOp::create(b, loc, exponent,
                                        APFloat(-1.0f));
    Value slope = MulOp::create(b, loc, exponent,
                                PowOp::create(b, loc, base, lowered));
    setBroadcastGrad(b, loc, MulOp::create(b, loc, dy, slope), base,
                     operandGrads, 0);
  }
  if (needed[1]) {
    // d(a^b)/db = a^b * log(a).
    Value slope = MulOp::create(b, loc, getResult(), LogOp::create(b, loc, base));
    setBroadcastGrad(b, loc, MulOp::create(b, loc, dy, slope), exponent,
                     operandGrads, 1);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Comparisons, selection, constants
//===----------------------------------------------------------------------===//

LogicalResult CompareOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  SmallVector<Value> operands{adaptor.getLhs(), adaptor.getRhs()};
  if (failed(checkSameElementType(loc, "train.compare", operands)))
    return failure();
  FailureOr<SmallVector<int64_t>> shape =
      broadcastOf(loc, "train.compare", operands);
  if (failed(shape))
    return failure();
  results.push_back(RankedTensorType::get(*shape, IntegerType::get(context, 1)));
  return success();
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  SmallVector<Value> values{adaptor.getTrueValue(), adaptor.getFalseValue()};
  if (failed(checkSameElementType(loc, "train.select", values)))
    return failure();
  FailureOr<SmallVector<int64_t>> shape = broadcastOf(
      loc, "train.select",
      {adaptor.getCondition(), adaptor.getTrueValue(), adaptor.getFalseValue()});
  if (failed(shape))
    return failure();
  results.push_back(tensorOf(values[0]).clone(*shape));
  return success();
}

LogicalResult SelectOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                      bool seed, ArrayRef<bool> needed,
                                      MutableArrayRef<Value> operandGrads) {
  if (!grads[0])
    return success();
  Location loc = getLoc();
  Value zero = scalar(b, loc, tensorOf(grads[0]).getElementType(), 0.0f);
  if (needed[1])
    setBroadcastGrad(b, loc,
                     SelectOp::create(b, loc, getCondition(), grads[0], zero),
                     getTrueValue(), operandGrads, 1);
  if (needed[2])
    setBroadcastGrad(b, loc,
                     SelectOp::create(b, loc, getCondition(), zero, grads[0]),
                     getFalseValue(), operandGrads, 2);
  return success();
}

LogicalResult FullOp::verify() {
  float value = getValue().convertToFloat();
  if (std::isnan(value))
    return emitOpError() << "value is NaN; a constant must be a number or an "
                            "infinity";
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and softmax
//===----------------------------------------------------------------------===//

#define TRAIN_REDUCE_INFER(Op, name)                                          \
  LogicalResult Op::inferReturnTypes(MLIRContext *,                           \
                                     std::optional<Location> loc,             \
                                     Adaptor adaptor,                         \
                                     SmallVectorImpl<Type> &results) {        \
    return inferReduce(loc, name, adaptor.getInput(), adaptor.getDims(),      \
                       adaptor.getKeepdim(), results);                        \
  }
TRAIN_REDUCE_INFER(ReduceSumOp, "train.reduce_sum")
TRAIN_REDUCE_INFER(ReduceMeanOp, "train.reduce_mean")
TRAIN_REDUCE_INFER(ReduceMaxOp, "train.reduce_max")
#undef TRAIN_REDUCE_INFER

LogicalResult ReduceSumOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                         bool seed, ArrayRef<bool> needed,
                                         MutableArrayRef<Value> operandGrads) {
  if (grads[0] && needed[0])
    operandGrads[0] = expandReduced(b, getLoc(), grads[0], getInput(), getDims());
  return success();
}

LogicalResult ReduceMeanOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                          bool seed, ArrayRef<bool> needed,
                                          MutableArrayRef<Value> operandGrads) {
  if (!grads[0] || !needed[0])
    return success();
  int64_t count = 1;
  for (int64_t dim : getDims())
    count *= tensorOf(getInput()).getDimSize(dim);
  Value scaled = ScaleOp::create(b, getLoc(), grads[0],
                                 APFloat(1.0f / float(count)));
  operandGrads[0] = expandReduced(b, getLoc(), scaled, getInput(), getDims());
  return success();
}

LogicalResult ReduceMaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                         bool seed, ArrayRef<bool> needed,
                                         MutableArrayRef<Value> operandGrads) {
  if (!grads[0] || !needed[0])
    return success();
  // dx = dy / count where x is a maximum of its group, else 0; count the
  // maxima of the group.
  Location loc = getLoc();
  Value input = getInput();
  Type element = tensorOf(input).getElementType();
  Value maxima = expandReduced(b, loc, getResult(), input, getDims());
  Value isMax = CompareOp::create(b, loc, ComparePredicate::EQ, input, maxima);
  Value indicator = SelectOp::create(b, loc, isMax, scalar(b, loc, element, 1),
                                     scalar(b, loc, element, 0));
  Value count = ReduceSumOp::create(b, loc, indicator, getDims(), getKeepdim());
  Value share = DivOp::create(b, loc, grads[0], count);
  Value spread = expandReduced(b, loc, share, input, getDims());
  operandGrads[0] = MulOp::create(b, loc, spread, indicator);
  return success();
}

namespace {
LogicalResult verifySoftmaxInput(Operation *op) {
  if (tensorOf(op->getOperand(0)).getRank() == 0)
    return op->emitOpError() << "needs at least one dimension to normalise";
  return success();
}
} // namespace

LogicalResult SoftmaxOp::verify() { return verifySoftmaxInput(*this); }
LogicalResult LogSoftmaxOp::verify() { return verifySoftmaxInput(*this); }
LogicalResult SoftmaxGradOp::verify() { return verifySoftmaxInput(*this); }

LogicalResult SoftmaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                       bool seed, ArrayRef<bool> needed,
                                       MutableArrayRef<Value> operandGrads) {
  if (grads[0] && needed[0])
    operandGrads[0] = SoftmaxGradOp::create(b, getLoc(), grads[0], getResult(),
                                            /*log=*/false);
  return success();
}

LogicalResult LogSoftmaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                          bool seed, ArrayRef<bool> needed,
                                          MutableArrayRef<Value> operandGrads) {
  if (grads[0] && needed[0])
    operandGrads[0] = SoftmaxGradOp::create(b, getLoc(), grads[0], getResult(),
                                            /*log=*/true);
  return success();
}

//===----------------------------------------------------------------------===//
// Views and data movement
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  RankedTensorType type = tensorOf(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  SmallVector<bool> seen(type.getRank(), false);
  if (static_cast<int64_t>(perm.size()) != type.getRank())
    return opError(loc, "train.transpose", "permutation has ", perm.size(),
                   " entries for an input of rank ", type.getRank());
  SmallVector<int64_t> shape;
  for (int64_t dim : perm) {
    if (dim < 0 || dim >= type.getRank() || seen[dim])
      return opError(loc, "train.transpose", "permutation [",
                     llvm::make_range(perm.begin(), perm.end()),
                     "] is not a permutation of 0..", type.getRank() - 1);
    seen[dim] = true;
    shape.push_back(type.getDimSize(dim));
  }
  results.push_back(type.clone(shape));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  auto isIdentity = [](ArrayRef<int64_t> perm) {
    for (auto [i, dim] : llvm::enumerate(perm))
      if (dim != static_cast<int64_t>(i))
        return false;
    return true;
  };
  ArrayRef<int64_t> perm = getPermutation();
  if (isIdentity(perm))
    return getInput();
  auto inner = getInput().getDefiningOp<TransposeOp>();
  if (!inner)
    return {};
  // result dim i = inner's result dim perm[i] = inner's input dim
  // innerPerm[perm[i]].
  SmallVector<int64_t> composed;
  for (int64_t dim : perm)
    composed.push_back(inner.getPermutation()[dim]);
  if (isIdentity(composed))
    return inner.getInput();
  // One copy instead of two, in place.
  getInputMutable().assign(inner.getInput());
  setPermutation(composed);
  return getResult();
}

LogicalResult TransposeOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                         bool seed, ArrayRef<bool> needed,
                                         MutableArrayRef<Value> operandGrads) {
  if (!grads[0] || !needed[0])
    return success();
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, dim] : llvm::enumerate(perm))
    inverse[dim] = static_cast<int64_t>(i);
  operandGrads[0] = TransposeOp::create(b, getLoc(), grads[0], inverse);
  return success();
}

LogicalResult BroadcastToOp::verify() {
  RankedTensorType in = getInput().getType(), out = getResult().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "changes the element type from "
                         << in.getElementType() << " to "
                         << out.getElementType() << "; use train.cast";
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes(in.getShape(), out.getShape());
  if (in.getRank() > out.getRank() || failed(shape) ||
      ArrayRef<int64_t>(*shape) != out.getShape())
    return emitOpError() << "cannot broadcast " << in << " to " << out
                         << ": aligned at the right, each input dimension "
                            "must equal the result's or be 1";
  return success();
}

LogicalResult BroadcastToOp::resizeBatch(int64_t factor,
                                         SmallVectorImpl<Type> &resultTypes) {
  // The result follows the input where the input is not repeated.
  RankedTensorType in = getInput().getType(), out = getResult().getType();
  SmallVector<int64_t> shape(out.getShape());
  int64_t lead = out.getRank() - in.getRank();
  for (int64_t i = 0; i < in.getRank(); ++i)
    if (in.getDimSize(i) != 1 || out.getDimSize(i + lead) == 1)
      shape[i + lead] = in.getDimSize(i);
  resultTypes.push_back(out.clone(shape));
  return success();
}

LogicalResult BroadcastToOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                           bool seed, ArrayRef<bool> needed,
                                           MutableArrayRef<Value> operandGrads) {
  if (grads[0] && needed[0])
    operandGrads[0] = sumToType(b, getLoc(), grads[0], getInput().getType());
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  RankedTensorType type = tensorOf(adaptor.getInput());
  int64_t dim = adaptor.getDim();
  if (failed(checkDim(loc, "train.slice", dim, type.getRank())))
    return failure();
  int64_t start = adaptor.getStart(), end = adaptor.getEnd(),
          size = type.getDimSize(dim);
  if (start < 0 || start > end || end > size)
    return opError(loc, "train.slice", "range [", start, ", ", end,
                   ") is not within [0, ", size, "] of dimension ", dim);
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = end - start;
  results.push_back(type.clone(shape));
  return success();
}

LogicalResult SliceOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                     bool seed, ArrayRef<bool> needed,
                                     MutableArrayRef<Value> operandGrads) {
  if (!grads[0] || !needed[0])
    return success();
  int64_t size = getInput().getType().getDimSize(getDim());
  operandGrads[0] = PadOp::create(b, getLoc(), grads[0], getDim(), getStart(),
                                  size - getEnd(), APFloat(0.0f));
  return success();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &results) {
  RankedTensorType type = tensorOf(adaptor.getInput());
  int64_t dim = adaptor.getDim();
  if (failed(checkDim(loc, "train.pad", dim, type.getRank())))
    return failure();
  // I64Attr reads back unsigned: take the signed values.
  int64_t low = adaptor.getLow(), high = adaptor.getHigh();
  if (low < 0 || high < 0)
    return opError(loc, "train.pad", "low (", low, ") and high (", high,
                   ") must be >= 0; a negative pad is a train.slice");
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] += low + high;
  results.push_back(type.clone(shape));
  return success();
}

LogicalResult PadOp::verify() {
  float value = getValue().convertToFloat();
  if (failed(verifyFloatAttr(*this, "value", value, FloatRule::Finite)))
    return failure();
  // An i32 tensor (labels padded with the loss's ignore index) holds the
  // value exactly or not at all.
  if (getInput().getType().getElementType().isInteger(32) &&
      !(value == std::trunc(value) && value >= -2147483648.0f &&
        value < 2147483648.0f))
    return emitOpError() << "pads an i32 tensor with value = " << value
                         << ", which is not an integer in the int32 range";
  return success();
}

LogicalResult PadOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                   bool seed, ArrayRef<bool> needed,
                                   MutableArrayRef<Value> operandGrads) {
  if (!grads[0] || !needed[0])
    return success();
  int64_t size = getInput().getType().getDimSize(getDim());
  operandGrads[0] = SliceOp::create(b, getLoc(), grads[0], getDim(), getLow(),
                                    getLow() + size);
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return opError(loc, "train.concat", "needs at least one input");
  SmallVector<Value> values(inputs.begin(), inputs.end());
  if (failed(checkSameElementType(loc, "train.concat", values)))
    return failure();
  RankedTensorType first = tensorOf(values.front());
  int64_t dim = adaptor.getDim();
  if (failed(checkDim(loc, "train.concat", dim, first.getRank())))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  for (Value v : ArrayRef<Value>(values).drop_front()) {
    RankedTensorType type = tensorOf(v);
    bool matches = type.getRank() == first.getRank();
    for (int64_t i = 0; matches && i < type.getRank(); ++i)
      matches = i == dim || type.getDimSize(i) == first.getDimSize(i);
    if (!matches)
      return opError(loc, "train.concat", "input ", type,
                     " does not match ", first,
                     " in every dimension but the joined one (", dim, ")");
    shape[dim] += type.getDimSize(dim);
  }
  results.push_back(first.clone(shape));
  return success();
}

LogicalResult ConcatOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                      bool seed, ArrayRef<bool> needed,
                                      MutableArrayRef<Value> operandGrads) {
  if (!grads[0])
    return success();
  int64_t offset = 0, dim = getDim();
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    int64_t size = tensorOf(input).getDimSize(dim);
    if (needed[i])
      operandGrads[i] =
          SliceOp::create(b, getLoc(), grads[0], dim, offset, offset + size);
    offset += size;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  StringRef op = "train.matmul";
  SmallVector<Value> operands{adaptor.getLhs(), adaptor.getRhs()};
  if (failed(checkSameElementType(loc, op, operands)))
    return failure();
  RankedTensorType lhs = tensorOf(operands[0]), rhs = tensorOf(operands[1]);
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return opError(loc, op, "operands must have rank >= 2 (a vector is a "
                   "train.reshape to a matrix), got ", lhs, " and ", rhs);
  int64_t m = lhs.getShape().end()[adaptor.getTransposeLhs() ? -1 : -2];
  int64_t kl = lhs.getShape().end()[adaptor.getTransposeLhs() ? -2 : -1];
  int64_t kr = rhs.getShape().end()[adaptor.getTransposeRhs() ? -1 : -2];
  int64_t n = rhs.getShape().end()[adaptor.getTransposeRhs() ? -2 : -1];
  if (kl != kr)
    return opError(loc, op, "contracts ", kl, " columns of ", lhs, " with ",
                   kr, " rows of ", rhs, " (after transpose_lhs/rhs)");
  FailureOr<SmallVector<int64_t>> batch = broadcastShapes(
      lhs.getShape().drop_back(2), rhs.getShape().drop_back(2));
  if (failed(batch))
    return opError(loc, op, "batch dimensions of ", lhs, " and ", rhs,
                   " do not broadcast");
  SmallVector<int64_t> shape(*batch);
  shape.push_back(m);
  shape.push_back(n);
  results.push_back(lhs.clone(shape));
  return success();
}

namespace {

/// Flattens the leading dimensions of a rank > 2 `value` into one:
/// [..., r, c] -> [prod(...) * r, c].
Value flattenRows(OpBuilder &b, Location loc, Value value) {
  RankedTensorType type = tensorOf(value);
  if (type.getRank() == 2)
    return value;
  int64_t cols = type.getShape().back();
  return ReshapeOp::create(
      b, loc, type.clone({type.getNumElements() / cols, cols}), value);
}

} // namespace

LogicalResult MatmulOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                      bool seed, ArrayRef<bool> needed,
                                      MutableArrayRef<Value> operandGrads) {
  if (!grads[0])
    return success();
  Location loc = getLoc();
  Value a = getLhs(), w = getRhs(), dy = grads[0];
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  RankedTensorType aType = tensorOf(a), wType = tensorOf(w);
  // y = op(a) op(w): with A = op(a), B = op(w), dA = dy B^T and
  // dB = A^T dy; each is written as one matmul of the stored operands,
  // transposed back when the operand was stored transposed.
  auto product = [&](Value x, bool tx, Value y, bool ty) {
    return MatmulOp::create(b, loc, x, y, tx, ty).getResult();
  };
  if (needed[0]) {
    // A rank-2 a times a batched w: the batch is summed; flatten it so that
    // one matmul sums it instead of a reduce_sum over a stacked result.
    Value grad = ta ? product(w, tb, dy, true) : product(dy, false, w, !tb);
    operandGrads[0] = sumToType(b, loc, grad, aType);
  }
  if (needed[1]) {
    Value grad;
    if (wType.getRank() == 2 && aType.getRank() > 2 && !ta) {
      // A weight times a batch of activations (the usual layer): one
      // product over every row sums the batch.
      Value rows = flattenRows(b, loc, a), drows = flattenRows(b, loc, dy);
      grad = tb ? product(drows, true, rows, false)
                : product(rows, true, drows, false);
    } else {
      grad = tb ? product(dy, true, a, ta) : product(a, !ta, dy, false);
    }
    operandGrads[1] = sumToType(b, loc, grad, wType);
  }
  return success();
}
