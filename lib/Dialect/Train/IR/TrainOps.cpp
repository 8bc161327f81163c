//===- TrainOps.cpp - shape rules, verifiers and gradients of train ops ---===//

#include "ShapeRules.h"

#include "autoshard/Dialect/Train/IR/TrainDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <cstdio>
#include <limits>

using namespace mlir;
using namespace autoshard::train;
using namespace autoshard::train::detail;

// The types of a broadcasting binary op: `T` when both operands and the
// result have type T, else `T1, T2 -> T3`.
static ParseResult parseBinaryTypes(OpAsmParser &parser, Type &lhs, Type &rhs,
                                    Type &result) {
  if (parser.parseType(lhs))
    return failure();
  if (failed(parser.parseOptionalComma())) {
    rhs = result = lhs;
    return success();
  }
  return failure(parser.parseType(rhs) || parser.parseArrow() ||
                 parser.parseType(result));
}

static void printBinaryTypes(OpAsmPrinter &printer, Operation *, Type lhs,
                             Type rhs, Type result) {
  printer << lhs;
  if (lhs != rhs || lhs != result)
    printer << ", " << rhs << " -> " << result;
}

#define GET_OP_CLASSES
#include "autoshard/Dialect/Train/IR/TrainOps.cpp.inc"

#include "autoshard/Dialect/Train/IR/TrainInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// Shape-rule helpers
//===----------------------------------------------------------------------===//

namespace {

/// `type` with its last dimension replaced by `size`.
RankedTensorType withLastDim(RankedTensorType type, int64_t size) {
  SmallVector<int64_t> shape(type.getShape());
  shape.back() = size;
  return type.clone(shape);
}

/// Leading (batch) dimensions: all but the last.
ArrayRef<int64_t> leadingDims(RankedTensorType type) {
  return type.getShape().drop_back();
}

LogicalResult checkRankAtLeast(std::optional<Location> loc, StringRef op,
                               StringRef what, RankedTensorType type,
                               int64_t rank) {
  if (type.getRank() >= rank)
    return success();
  return emitOptionalError(loc, "'", op, "' ", what, " must have rank >= ",
                           rank, ", got ", type);
}

LogicalResult checkRank(std::optional<Location> loc, StringRef op,
                        StringRef what, RankedTensorType type, int64_t rank,
                        StringRef layout) {
  if (type.getRank() == rank)
    return success();
  return emitOptionalError(loc, "'", op, "' ", what, " must be ", rank, "-D ",
                           layout, ", got ", type);
}

/// Checks that a 1-D parameter (a norm's gain or bias) matches `features`.
LogicalResult checkFeatureVector(std::optional<Location> loc, StringRef op,
                                 StringRef what, RankedTensorType type,
                                 int64_t features) {
  if (type.getRank() == 1 && type.getDimSize(0) == features)
    return success();
  return emitOptionalError(loc, "'", op, "' ", what, " must be 1-D with ",
                           features, " elements (the last dimension of the "
                           "input), got ",
                           type);
}

/// Checks that a weight is a 2-D [out_features, in_features] matrix.
LogicalResult checkWeight(std::optional<Location> loc, StringRef op,
                          RankedTensorType weight) {
  return checkRank(loc, op, "weight", weight, 2,
                   "[out_features, in_features]");
}

/// Hands the gradients a grad op computed (one per forward operand, in
/// order) to the operands that need them.
void assignNeeded(ValueRange computed, ArrayRef<bool> needed,
                  MutableArrayRef<Value> operandGrads) {
  for (auto [i, grad] : llvm::enumerate(computed))
    if (needed[i])
      operandGrads[i] = grad;
}

/// The shape rule shared by the norms and their gradients: the input has a
/// last dimension of features, every operand its element type, and each
/// named parameter (gain, bias) is a vector of the features.
LogicalResult checkNormOperands(std::optional<Location> loc, StringRef op,
                                ValueRange operands, Value input,
                                ArrayRef<std::pair<StringRef, Value>> params) {
  auto inputType = tensorOf(input);
  if (failed(checkRankAtLeast(loc, op, "input", inputType, 1)) ||
      failed(checkSameElementType(loc, op, operands)))
    return failure();
  for (auto [name, param] : params)
    if (failed(checkFeatureVector(loc, op, name, tensorOf(param),
                                  inputType.getShape().back())))
      return failure();
  return success();
}

/// The norm gradients' rule: grad_output has the input's type, and the
/// norm's rule on the input and the gain.
LogicalResult checkNormGrad(std::optional<Location> loc, StringRef op,
                            ValueRange operands, Value gradOutput, Value input,
                            StringRef gainName, Value gain) {
  auto inputType = tensorOf(input);
  if (tensorOf(gradOutput) != inputType)
    return emitOptionalError(loc, "'", op, "' grad_output ",
                             gradOutput.getType(),
                             " must have the input's type ", inputType);
  return checkNormOperands(loc, op, operands, input, {{gainName, gain}});
}

/// A float as a person writes it: 0.9, not 9.000000e-01.
std::string formatFloat(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

} // namespace

//===----------------------------------------------------------------------===//
// Dense layers
//===----------------------------------------------------------------------===//

/// train.linear's shape rule, as op `op` (train.linear, or a fused op that
/// computes one): the result type.
static FailureOr<RankedTensorType> inferLinear(std::optional<Location> loc,
                                               StringRef op, Value inputValue,
                                               Value weightValue, Value bias) {
  auto input = tensorOf(inputValue);
  auto weight = tensorOf(weightValue);
  SmallVector<Value, 3> operands{inputValue, weightValue};
  if (bias)
    operands.push_back(bias);
  if (failed(checkRankAtLeast(loc, op, "input", input, 1)) ||
      failed(checkWeight(loc, op, weight)) ||
      failed(checkSameElementType(loc, op, operands)))
    return failure();
  int64_t outFeatures = weight.getDimSize(0), inFeatures = weight.getDimSize(1);
  if (input.getShape().back() != inFeatures)
    return emitOptionalError(
        loc, "'", op, "' input feature dimension (", input.getShape().back(),
        ") must equal the weight's in_features (dimension 1 of ", weight, ")");
  if (bias) {
    auto biasType = tensorOf(bias);
    if (biasType.getRank() != 1 || biasType.getDimSize(0) != outFeatures)
      return emitOptionalError(loc, "'", op, "' bias must be 1-D with ",
                               outFeatures, " (out_features) elements, got ",
                               biasType);
  }
  return withLastDim(input, outFeatures);
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> type =
      inferLinear(loc, "train.linear", adaptor.getInput(),
                  adaptor.getWeight(), adaptor.getBias());
  if (failed(type))
    return failure();
  results.push_back(*type);
  return success();
}

LogicalResult LinearOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                      bool seed, ArrayRef<bool> needed,
                                      MutableArrayRef<Value> operandGrads) {
  Value dy = grads[0];
  if (!dy)
    return success();
  if (needed[0])
    operandGrads[0] = LinearGradInputOp::create(b, getLoc(), dy, getWeight());
  if (needed[1])
    operandGrads[1] = LinearGradWeightOp::create(b, getLoc(), dy, getInput());
  if (getBias() && needed[2])
    operandGrads[2] = BiasGradOp::create(b, getLoc(), dy);
  return success();
}

/// train.linear_grad_input's shape rule, as op `op`: the result type.
static FailureOr<RankedTensorType>
inferLinearGradInput(std::optional<Location> loc, StringRef op,
                     Value gradOutputValue, Value weightValue) {
  auto gradOutput = tensorOf(gradOutputValue);
  auto weight = tensorOf(weightValue);
  if (failed(checkRankAtLeast(loc, op, "grad_output", gradOutput, 1)) ||
      failed(checkWeight(loc, op, weight)) ||
      failed(checkSameElementType(loc, op, {gradOutputValue, weightValue})))
    return failure();
  if (gradOutput.getShape().back() != weight.getDimSize(0))
    return emitOptionalError(
        loc, "'", op, "' grad_output feature dimension (",
        gradOutput.getShape().back(),
        ") must equal the weight's out_features (dimension 0 of ", weight, ")");
  return withLastDim(gradOutput, weight.getDimSize(1));
}

LogicalResult LinearGradInputOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> type =
      inferLinearGradInput(loc, "train.linear_grad_input",
                           adaptor.getGradOutput(), adaptor.getWeight());
  if (failed(type))
    return failure();
  results.push_back(*type);
  return success();
}

/// train.linear_grad_weight's shape rule, as op `op`: the result type.
static FailureOr<RankedTensorType>
inferLinearGradWeight(std::optional<Location> loc, StringRef op,
                      Value gradOutputValue, Value inputValue) {
  auto gradOutput = tensorOf(gradOutputValue);
  auto input = tensorOf(inputValue);
  if (failed(checkRankAtLeast(loc, op, "grad_output", gradOutput, 1)) ||
      failed(checkRankAtLeast(loc, op, "input", input, 1)) ||
      failed(checkSameElementType(loc, op, {gradOutputValue, inputValue})))
    return failure();
  if (leadingDims(gradOutput) != leadingDims(input))
    return emitOptionalError(loc, "'", op, "' grad_output ", gradOutput,
                             " and input ", input,
                             " must have the same batch dimensions");
  return RankedTensorType::get(
      {gradOutput.getShape().back(), input.getShape().back()},
      gradOutput.getElementType());
}

LogicalResult LinearGradWeightOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> type =
      inferLinearGradWeight(loc, "train.linear_grad_weight",
                            adaptor.getGradOutput(), adaptor.getInput());
  if (failed(type))
    return failure();
  results.push_back(*type);
  return success();
}

LogicalResult BiasGradOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &results) {
  auto gradOutput = tensorOf(adaptor.getGradOutput());
  if (failed(checkRankAtLeast(loc, "train.bias_grad", "grad_output",
                              gradOutput, 1)))
    return failure();
  results.push_back(RankedTensorType::get({gradOutput.getShape().back()},
                                          gradOutput.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult ReluOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                    bool seed, ArrayRef<bool> needed,
                                    MutableArrayRef<Value> operandGrads) {
  if (grads[0] && needed[0])
    operandGrads[0] = ReluGradOp::create(b, getLoc(), grads[0], getInput());
  return success();
}

LogicalResult GeluOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                    bool seed, ArrayRef<bool> needed,
                                    MutableArrayRef<Value> operandGrads) {
  if (grads[0] && needed[0])
    operandGrads[0] = GeluGradOp::create(b, getLoc(), grads[0], getInput());
  return success();
}

LogicalResult SwigluOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                      bool seed, ArrayRef<bool> needed,
                                      MutableArrayRef<Value> operandGrads) {
  if (!grads[0] || (!needed[0] && !needed[1]))
    return success();
  auto grad = SwigluGradOp::create(b, getLoc(), grads[0], getGate(), getUp());
  assignNeeded(grad.getResults(), needed, operandGrads);
  return success();
}

LogicalResult CastOp::verify() {
  if (getInput().getType().getElementType() ==
      getResult().getType().getElementType())
    return emitOpError() << "casts " << getInput().getType().getElementType()
                         << " to itself; drop the cast";
  return success();
}

LogicalResult CastOp::resizeBatch(int64_t factor,
                                  SmallVectorImpl<Type> &resultTypes) {
  resultTypes.push_back(
      getInput().getType().clone(getResult().getType().getElementType()));
  return success();
}

LogicalResult CastOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                    bool seed, ArrayRef<bool> needed,
                                    MutableArrayRef<Value> operandGrads) {
  if (grads[0] && needed[0])
    operandGrads[0] = CastOp::create(b, getLoc(), getInput().getType(),
                                     grads[0]);
  return success();
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType in = getInput().getType(), out = getResult().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "changes the element type from "
                         << in.getElementType() << " to "
                         << out.getElementType() << "; use train.cast";
  if (in.getNumElements() != out.getNumElements())
    return emitOpError() << "cannot view " << in.getNumElements()
                         << " elements (" << in << ") as "
                         << out.getNumElements() << " (" << out << ")";
  return success();
}

LogicalResult ReshapeOp::resizeBatch(int64_t factor,
                                     SmallVectorImpl<Type> &resultTypes) {
  // Row-major views split by contiguous blocks of elements: the view's
  // leading dimension shrinks by the same factor as the input's.
  RankedTensorType result = getResult().getType();
  if (result.getDimSize(0) % factor != 0)
    return emitOpError() << "cannot give each of " << factor
                         << " ranks an equal block of the view " << result;
  SmallVector<int64_t> shape(result.getShape());
  shape[0] /= factor;
  resultTypes.push_back(result.clone(shape));
  return success();
}

LogicalResult ReshapeOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                       bool seed, ArrayRef<bool> needed,
                                       MutableArrayRef<Value> operandGrads) {
  if (grads[0] && needed[0])
    operandGrads[0] = ReshapeOp::create(b, getLoc(), getInput().getType(),
                                        grads[0]);
  return success();
}

LogicalResult ScaleOp::verify() {
  return verifyFloatAttr(*this, "factor", getFactor().convertToFloat(),
                         FloatRule::Finite);
}

LogicalResult ScaleOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                     bool seed, ArrayRef<bool> needed,
                                     MutableArrayRef<Value> operandGrads) {
  if (grads[0] && needed[0])
    operandGrads[0] =
        ScaleOp::create(b, getLoc(), grads[0], getFactorAttr());
  return success();
}

LogicalResult SliceRowsOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (input.getRank() == 0 || result.getRank() != input.getRank() ||
      input.getShape().drop_front() != result.getShape().drop_front() ||
      input.getElementType() != result.getElementType())
    return emitOpError() << "result " << result
                         << " must be a block of whole rows of " << input;
  int64_t rows = input.getDimSize(0), taken = result.getDimSize(0);
  if (ShapedType::isDynamic(rows) || ShapedType::isDynamic(taken))
    return emitOpError() << "takes a static number of rows of a static "
                            "batch, got "
                         << result << " of " << input;
  // offset and taken are both in [0, 2^63): their sum is exact in uint64,
  // and the comparison is written so as not to overflow int64.
  uint64_t offset = getOffset();
  if (taken > rows || offset > static_cast<uint64_t>(rows - taken))
    return emitOpError() << "rows [" << offset << ", "
                         << offset + static_cast<uint64_t>(taken)
                         << ") lie outside the input's " << rows << " rows";
  return success();
}

LogicalResult SliceRowsOp::resizeBatch(int64_t factor,
                                       SmallVectorImpl<Type> &resultTypes) {
  // Each rank takes its share of every micro-batch: the block and its
  // offset shrink with the input.
  auto result = cast<RankedTensorType>(getResult().getType());
  if (getOffset() % factor != 0 || result.getDimSize(0) % factor != 0)
    return emitOpError() << "the micro-batch of rows [" << getOffset() << ", "
                         << getOffset() + result.getDimSize(0)
                         << ") does not split evenly over " << factor
                         << " ranks, each of which takes its share of every "
                            "micro-batch; use a micro-batch of a multiple of "
                         << factor << " rows";
  setOffset(getOffset() / factor);
  SmallVector<int64_t> shape(result.getShape());
  shape[0] /= factor;
  resultTypes.push_back(result.clone(shape));
  return success();
}

//===----------------------------------------------------------------------===//
// Embeddings
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto ids = tensorOf(adaptor.getIds());
  auto table = tensorOf(adaptor.getTable());
  if (failed(checkRank(loc, "train.embedding", "table", table, 2,
                       "[num_embeddings, dim]")))
    return failure();
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getDimSize(1));
  results.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

LogicalResult EmbeddingOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                         bool seed, ArrayRef<bool> needed,
                                         MutableArrayRef<Value> operandGrads) {
  if (grads[0] && needed[1])
    operandGrads[1] = EmbeddingGradOp::create(
        b, getLoc(), grads[0], getIds(), getTable().getType().getDimSize(0));
  return success();
}

LogicalResult EmbeddingGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  auto gradOutput = tensorOf(adaptor.getGradOutput());
  auto ids = tensorOf(adaptor.getIds());
  if (gradOutput.getRank() != ids.getRank() + 1 ||
      leadingDims(gradOutput) != ids.getShape())
    return emitOptionalError(loc, "'train.embedding_grad' grad_output ",
                             gradOutput, " must have the shape of the ids ",
                             ids, " with one more (feature) dimension");
  results.push_back(RankedTensorType::get(
      {static_cast<int64_t>(adaptor.getNumEmbeddings()),
       gradOutput.getShape().back()},
      gradOutput.getElementType()));
  return success();
}

LogicalResult AddPositionEmbeddingOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  StringRef op = "train.add_position_embedding";
  auto input = tensorOf(adaptor.getInput());
  auto table = tensorOf(adaptor.getTable());
  if (failed(checkRank(loc, op, "input", input, 3, "[batch, seq, dim]")) ||
      failed(checkRank(loc, op, "table", table, 2, "[max_positions, dim]")) ||
      failed(checkSameElementType(loc, op, adaptor.getOperands())))
    return failure();
  if (table.getDimSize(1) != input.getDimSize(2))
    return emitOptionalError(loc, "'", op, "' table ", table,
                             " must have the input's dimension ",
                             input.getDimSize(2));
  if (input.getDimSize(1) > table.getDimSize(0))
    return emitOptionalError(loc, "'", op, "' sequence length ",
                             input.getDimSize(1), " exceeds the table's ",
                             table.getDimSize(0), " positions");
  results.push_back(input);
  return success();
}

LogicalResult AddPositionEmbeddingOp::buildGradient(
    OpBuilder &b, ArrayRef<Value> grads, bool seed, ArrayRef<bool> needed,
    MutableArrayRef<Value> operandGrads) {
  if (!grads[0])
    return success();
  if (needed[0])
    operandGrads[0] = grads[0];
  if (needed[1])
    operandGrads[1] = AddPositionEmbeddingGradOp::create(
        b, getLoc(), grads[0], getTable().getType().getDimSize(0));
  return success();
}

LogicalResult AddPositionEmbeddingGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  StringRef op = "train.add_position_embedding_grad";
  auto gradOutput = tensorOf(adaptor.getGradOutput());
  if (failed(checkRank(loc, op, "grad_output", gradOutput, 3,
                       "[batch, seq, dim]")))
    return failure();
  int64_t positions = adaptor.getMaxPositions();
  if (gradOutput.getDimSize(1) > positions)
    return emitOptionalError(loc, "'", op, "' sequence length ",
                             gradOutput.getDimSize(1), " exceeds ", positions,
                             " positions");
  results.push_back(RankedTensorType::get(
      {positions, gradOutput.getDimSize(2)}, gradOutput.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  if (failed(checkNormOperands(loc, "train.layer_norm", adaptor.getOperands(),
                               adaptor.getInput(),
                               {{"gamma", adaptor.getGamma()},
                                {"beta", adaptor.getBeta()}})))
    return failure();
  results.push_back(adaptor.getInput().getType());
  return success();
}

/// A norm's gradient: one grad op over the output gradient, the input and
/// the gain, whose results are the gradients of the norm's operands in
/// order.
template <typename GradOpT, typename NormOpT>
static LogicalResult buildNormGradient(NormOpT norm, Value gain, OpBuilder &b,
                                       ArrayRef<Value> grads,
                                       ArrayRef<bool> needed,
                                       MutableArrayRef<Value> operandGrads) {
  if (!grads[0])
    return success();
  auto grad = GradOpT::create(b, norm.getLoc(), grads[0], norm.getInput(),
                              gain, norm.getEpsilonAttr());
  assignNeeded(grad.getResults(), needed, operandGrads);
  return success();
}

LogicalResult LayerNormOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                         bool seed, ArrayRef<bool> needed,
                                         MutableArrayRef<Value> operandGrads) {
  return buildNormGradient<LayerNormGradOp>(*this, getGamma(), b, grads,
                                            needed, operandGrads);
}

LogicalResult LayerNormGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  if (failed(checkNormGrad(loc, "train.layer_norm_grad", adaptor.getOperands(),
                           adaptor.getGradOutput(), adaptor.getInput(),
                           "gamma", adaptor.getGamma())))
    return failure();
  Type gamma = adaptor.getGamma().getType();
  results.append({adaptor.getInput().getType(), gamma, gamma});
  return success();
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  if (failed(checkNormOperands(loc, "train.rms_norm", adaptor.getOperands(),
                               adaptor.getInput(),
                               {{"weight", adaptor.getWeight()}})))
    return failure();
  results.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult RmsNormOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                       bool seed, ArrayRef<bool> needed,
                                       MutableArrayRef<Value> operandGrads) {
  return buildNormGradient<RmsNormGradOp>(*this, getWeight(), b, grads, needed,
                                          operandGrads);
}

LogicalResult RmsNormGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  if (failed(checkNormGrad(loc, "train.rms_norm_grad", adaptor.getOperands(),
                           adaptor.getGradOutput(), adaptor.getInput(),
                           "weight", adaptor.getWeight())))
    return failure();
  results.append({adaptor.getInput().getType(), adaptor.getWeight().getType()});
  return success();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// [batch, seq, heads, head_dim] with an even head_dim.
static LogicalResult verifyRopeInput(Operation *op, RankedTensorType type) {
  if (type.getRank() != 4)
    return op->emitOpError() << "input must be 4-D [batch, seq, heads, "
                                "head_dim], got "
                             << type;
  if (type.getDimSize(3) % 2 != 0)
    return op->emitOpError() << "head_dim " << type.getDimSize(3)
                             << " must be even: rope rotates pairs";
  return success();
}

LogicalResult RopeOp::verify() {
  if (failed(verifyFloatAttr(*this, "theta", getTheta().convertToFloat(),
                             FloatRule::Positive)))
    return failure();
  return verifyRopeInput(*this, getInput().getType());
}

LogicalResult RopeGradOp::verify() {
  if (failed(verifyFloatAttr(*this, "theta", getTheta().convertToFloat(),
                             FloatRule::Positive)))
    return failure();
  return verifyRopeInput(*this, getGradOutput().getType());
}

LogicalResult LayerNormOp::verify() {
  return verifyFloatAttr(*this, "epsilon", getEpsilon().convertToFloat(),
                         FloatRule::Positive);
}

LogicalResult LayerNormGradOp::verify() {
  return verifyFloatAttr(*this, "epsilon", getEpsilon().convertToFloat(),
                         FloatRule::Positive);
}

LogicalResult RmsNormOp::verify() {
  return verifyFloatAttr(*this, "epsilon", getEpsilon().convertToFloat(),
                         FloatRule::Positive);
}

LogicalResult RmsNormGradOp::verify() {
  return verifyFloatAttr(*this, "epsilon", getEpsilon().convertToFloat(),
                         FloatRule::Positive);
}

LogicalResult RopeOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                    bool seed, ArrayRef<bool> needed,
                                    MutableArrayRef<Value> operandGrads) {
  if (grads[0] && needed[0])
    operandGrads[0] =
        RopeGradOp::create(b, getLoc(), grads[0], getThetaAttr());
  return success();
}

/// Checks q [B, T, H, D] and k, v [B, T, Hkv, D]; returns the logsumexp type
/// [B, H, T] f32.
static FailureOr<RankedTensorType>
checkAttentionOperands(std::optional<Location> loc, StringRef op, Value q,
                       Value k, Value v) {
  auto query = tensorOf(q), key = tensorOf(k), value = tensorOf(v);
  if (failed(checkRank(loc, op, "query", query, 4,
                       "[batch, seq, heads, head_dim]")) ||
      failed(checkRank(loc, op, "key", key, 4,
                       "[batch, seq, kv_heads, head_dim]")))
    return failure();
  if (key != value) {
    return emitOptionalError(loc, "'", op, "' key ", key, " and value ",
                             value, " must have the same type");
  }
  if (query.getDimSize(0) != key.getDimSize(0) ||
      query.getDimSize(1) != key.getDimSize(1) ||
      query.getDimSize(3) != key.getDimSize(3) ||
      query.getElementType() != key.getElementType()) {
    return emitOptionalError(loc, "'", op, "' query ", query, " and key ",
                             key,
                             " must agree on batch, sequence, head_dim and "
                             "element type");
  }
  int64_t heads = query.getDimSize(2), kvHeads = key.getDimSize(2);
  if (kvHeads < 1)
    return emitOptionalError(loc, "'", op, "' key ", key,
                             " has no heads; attention needs at least one "
                             "key/value head");
  if (heads % kvHeads != 0) {
    return emitOptionalError(loc, "'", op, "' ", heads,
                             " query heads cannot share ", kvHeads,
                             " key/value heads evenly");
  }
  Builder b(query.getContext());
  return RankedTensorType::get(
      {query.getDimSize(0), heads, query.getDimSize(1)}, b.getF32Type());
}

static float defaultScale(Value query, std::optional<APFloat> scale) {
  if (scale)
    return scale->convertToFloat();
  return 1.0f / std::sqrt(static_cast<float>(tensorOf(query).getDimSize(3)));
}

/// A given scale is finite; the default 1/sqrt(D) always is.
static LogicalResult verifyAttentionScale(Operation *op,
                                          std::optional<APFloat> scale) {
  if (!scale)
    return success();
  return verifyFloatAttr(op, "scale", scale->convertToFloat(),
                         FloatRule::Finite);
}

LogicalResult CausalAttentionOp::verify() {
  return verifyAttentionScale(*this, getScale());
}

LogicalResult CausalAttentionGradOp::verify() {
  return verifyAttentionScale(*this, getScale());
}

float CausalAttentionOp::getScaleOrDefault() {
  return defaultScale(getQuery(), getScale());
}

float CausalAttentionGradOp::getScaleOrDefault() {
  return defaultScale(getQuery(), getScale());
}

LogicalResult CausalAttentionOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> lse =
      checkAttentionOperands(loc, "train.causal_attention", adaptor.getQuery(),
                             adaptor.getKey(), adaptor.getValue());
  if (failed(lse))
    return failure();
  results.append({adaptor.getQuery().getType(), *lse});
  return success();
}

LogicalResult
CausalAttentionOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                 bool seed, ArrayRef<bool> needed,
                                 MutableArrayRef<Value> operandGrads) {
  if (grads[1])
    return emitOpError() << "cannot differentiate through its logsumexp "
                            "result, which only its gradient may use";
  if (!grads[0])
    return success();
  auto grad = CausalAttentionGradOp::create(
      b, getLoc(), grads[0], getQuery(), getKey(), getValue(), getResult(),
      getLogsumexp(), getScaleAttr());
  assignNeeded(grad.getResults(), needed, operandGrads);
  return success();
}

LogicalResult CausalAttentionGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  StringRef op = "train.causal_attention_grad";
  FailureOr<RankedTensorType> lse = checkAttentionOperands(
      loc, op, adaptor.getQuery(), adaptor.getKey(), adaptor.getValue());
  if (failed(lse))
    return failure();
  Type query = adaptor.getQuery().getType();
  if (adaptor.getGradOutput().getType() != query ||
      adaptor.getResult().getType() != query)
    return emitOptionalError(loc, "'", op,
                             "' grad_output and result must have the query's "
                             "type ",
                             query);
  if (adaptor.getLogsumexp().getType() != *lse)
    return emitOptionalError(loc, "'", op, "' logsumexp must be ", *lse,
                             ", got ", adaptor.getLogsumexp().getType());
  results.append(
      {query, adaptor.getKey().getType(), adaptor.getValue().getType()});
  return success();
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

/// The rule of every loss and loss gradient: `scores` (the logits, or the
/// log-probabilities named `scoresName`) has a class dimension last and
/// `labels` the shape of the others.
static LogicalResult checkLabels(std::optional<Location> loc, StringRef op,
                                 RankedTensorType scores,
                                 RankedTensorType labels,
                                 StringRef scoresName = "logits") {
  if (failed(checkRankAtLeast(loc, op, scoresName, scores, 1)))
    return failure();
  if (labels.getShape() != leadingDims(scores))
    return emitOptionalError(loc, "'", op, "' labels ", labels,
                             " must have the shape of the ", scoresName, " ",
                             scores, " without its last (class) dimension");
  return success();
}

/// An ignore index must be able to equal an i32 label.
static LogicalResult verifyIgnoreIndex(Operation *op, IntegerAttr index) {
  if (!index)
    return success();
  int64_t value = index.getInt();
  if (value < std::numeric_limits<int32_t>::min() ||
      value > std::numeric_limits<int32_t>::max())
    return op->emitOpError()
           << "has ignore_index = " << value
           << ", which no i32 label can equal; it must lie in ["
           << std::numeric_limits<int32_t>::min() << ", "
           << std::numeric_limits<int32_t>::max() << "] (torch's is -100)";
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::verify() {
  return verifyIgnoreIndex(*this, getIgnoreIndexAttr());
}

LogicalResult SoftmaxCrossEntropyGradOp::verify() {
  return verifyIgnoreIndex(*this, getIgnoreIndexAttr());
}

LogicalResult SoftmaxCrossEntropyOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  if (failed(checkLabels(loc, "train.softmax_cross_entropy",
                         tensorOf(adaptor.getLogits()),
                         tensorOf(adaptor.getLabels()))))
    return failure();
  results.push_back(RankedTensorType::get({}, Float32Type::get(context)));
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::buildGradient(
    OpBuilder &b, ArrayRef<Value> grads, bool seed, ArrayRef<bool> needed,
    MutableArrayRef<Value> operandGrads) {
  if (!needed[0] || (!seed && !grads[0]))
    return success();
  // At the seed the loss's gradient is one, which the op's default means.
  // The ignored positions are the forward's: the attribute goes along.
  operandGrads[0] = SoftmaxCrossEntropyGradOp::create(
      b, getLoc(), getLogits(), getLabels(), seed ? Value() : grads[0],
      getIgnoreIndexAttr());
  return success();
}

LogicalResult SoftmaxCrossEntropyGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  auto logits = tensorOf(adaptor.getLogits());
  if (failed(checkLabels(loc, "train.softmax_cross_entropy_grad", logits,
                         tensorOf(adaptor.getLabels()))))
    return failure();
  results.push_back(logits);
  return success();
}

LogicalResult NllLossOp::verify() {
  return verifyIgnoreIndex(*this, getIgnoreIndexAttr());
}

LogicalResult NllLossGradOp::verify() {
  return verifyIgnoreIndex(*this, getIgnoreIndexAttr());
}

LogicalResult NllLossOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  if (failed(checkLabels(loc, "train.nll_loss", tensorOf(adaptor.getInput()),
                         tensorOf(adaptor.getLabels()), "input")))
    return failure();
  results.push_back(RankedTensorType::get({}, Float32Type::get(context)));
  return success();
}

LogicalResult NllLossOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                       bool seed, ArrayRef<bool> needed,
                                       MutableArrayRef<Value> operandGrads) {
  if (!needed[0] || (!seed && !grads[0]))
    return success();
  // As softmax_cross_entropy's: no grad_loss at the seed (one), and the
  // forward's ignored positions.
  operandGrads[0] =
      NllLossGradOp::create(b, getLoc(), getInput(), getLabels(),
                            seed ? Value() : grads[0], getIgnoreIndexAttr());
  return success();
}

LogicalResult NllLossGradOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &results) {
  auto input = tensorOf(adaptor.getInput());
  if (failed(checkLabels(loc, "train.nll_loss_grad", input,
                         tensorOf(adaptor.getLabels()), "input")))
    return failure();
  results.push_back(input);
  return success();
}

//===----------------------------------------------------------------------===//
// Flat shards
//===----------------------------------------------------------------------===//

/// The static size of the group of `axes` on `grid`, or failure with a
/// diagnostic on `op`.
static FailureOr<int64_t> groupSize(Operation *op, shard::GridOp grid,
                                    ArrayRef<int16_t> axes) {
  if (axes.empty())
    return op->emitOpError() << "needs at least one grid axis";
  int64_t size = 1;
  for (int16_t axis : axes) {
    if (axis < 0 || axis >= grid.getRank())
      return op->emitOpError() << "grid axis " << axis << " is not an axis of "
                               << grid.getSymName() << " (rank "
                               << grid.getRank() << ")";
    int64_t dim = grid.getShape()[axis];
    if (ShapedType::isDynamic(dim))
      return op->emitOpError() << "grid axis " << axis << " of "
                               << grid.getSymName() << " is dynamic";
    if (dim < 1)
      return op->emitOpError() << "grid axis " << axis << " of "
                               << grid.getSymName() << " has size " << dim
                               << "; a group has at least one rank";
    if (llvm::MulOverflow(size, dim, size))
      return op->emitOpError() << "grid axes of " << grid.getSymName()
                               << " span more than 2^63 ranks";
  }
  return size;
}

/// Checks a full tensor against its flat shard over a group of `n` ranks.
static LogicalResult checkShardPair(Operation *op, RankedTensorType full,
                                    RankedTensorType shard, int64_t n) {
  int64_t k = llvm::divideCeil(full.getNumElements(), n);
  if (shard.getRank() != 1 || shard.getDimSize(0) != k ||
      shard.getElementType() != full.getElementType())
    return op->emitOpError()
           << "a flat shard of " << full << " over " << n << " ranks is "
           << RankedTensorType::get({k}, full.getElementType()) << ", got "
           << shard;
  return success();
}

/// The group a flat-shard collective spans, checked against its grid.
template <typename OpT>
static FailureOr<int64_t> verifyGroup(OpT op, SymbolTableCollection &symbols) {
  auto grid = symbols.lookupNearestSymbolFrom<shard::GridOp>(
      op, op.getGridAttr());
  if (!grid)
    return op.emitOpError() << "refers to " << op.getGridAttr()
                            << ", which is not a shard.grid";
  return groupSize(op, grid, op.getGridAxes());
}

/// Checks each (full, shard) pair of a bucket: `fulls[i]` against
/// `shards[i]`.
/// A bucket is one collective of one element type.
static LogicalResult checkOneElementType(Operation *op, TypeRange types) {
  Type first = cast<RankedTensorType>(types.front()).getElementType();
  for (auto [i, type] : llvm::enumerate(types))
    if (cast<RankedTensorType>(type).getElementType() != first)
      return op->emitOpError()
             << "operand #" << i << " has element type "
             << cast<RankedTensorType>(type).getElementType()
             << " but operand #0 has " << first
             << "; one collective moves one element type";
  return success();
}

static LogicalResult checkShardPairs(Operation *op, TypeRange fulls,
                                     TypeRange shards, int64_t n) {
  if (fulls.empty() || fulls.size() != shards.size())
    return op->emitOpError() << "needs one result per operand, and at least "
                                "one of each; got "
                             << op->getNumOperands() << " and "
                             << op->getNumResults();
  for (auto [full, shard] : llvm::zip(fulls, shards))
    if (failed(checkShardPair(op, cast<RankedTensorType>(full),
                              cast<RankedTensorType>(shard), n)))
      return failure();
  return checkOneElementType(op, shards);
}

template <typename OpT>
static int64_t groupSizeOf(OpT op) {
  auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
      op, op.getGridAttr());
  int64_t size = 1;
  for (int16_t axis : op.getGridAxes())
    size *= grid.getShape()[axis];
  return size;
}

LogicalResult ShardOfOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<int64_t> n = verifyGroup(*this, symbols);
  if (failed(n))
    return failure();
  return checkShardPair(*this, getInput().getType(), getResult().getType(),
                        *n);
}
int64_t ShardOfOp::getGroupSize() { return groupSizeOf(*this); }

LogicalResult
AllGatherShardsOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<int64_t> n = verifyGroup(*this, symbols);
  if (failed(n))
    return failure();
  return checkShardPairs(*this, getResultTypes(), getInputs().getTypes(), *n);
}
int64_t AllGatherShardsOp::getGroupSize() { return groupSizeOf(*this); }

LogicalResult
ReduceScatterShardsOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<int64_t> n = verifyGroup(*this, symbols);
  if (failed(n))
    return failure();
  return checkShardPairs(*this, getInputs().getTypes(), getResultTypes(), *n);
}
int64_t ReduceScatterShardsOp::getGroupSize() { return groupSizeOf(*this); }

void AllReduceBucketOp::build(OpBuilder &b, OperationState &state,
                              ValueRange inputs, StringRef grid,
                              ArrayRef<int16_t> gridAxes,
                              Reduction reduction) {
  build(b, state, inputs.getTypes(), inputs, grid, gridAxes, reduction);
}

LogicalResult
AllReduceBucketOp::verifySymbolUses(SymbolTableCollection &symbols) {
  if (failed(verifyGroup(*this, symbols)))
    return failure();
  if (getInputs().empty() || getInputs().getTypes() != getResultTypes())
    return emitOpError() << "needs at least one operand and a result of each "
                            "operand's type";
  return checkOneElementType(*this, getInputs().getTypes());
}
int64_t AllReduceBucketOp::getGroupSize() { return groupSizeOf(*this); }

LogicalResult CollectiveStartOp::verify() {
  ArrayRef<Type> pending = getHandle().getType().getTypes();
  if (getInputs().empty() || pending.size() != getInputs().size())
    return emitOpError() << "needs at least one operand and one pending "
                            "result per operand; got "
                         << getInputs().size() << " and " << pending.size();
  bool reduces = getKind() != CollectiveKind::AllGatherShards;
  if (reduces != getReduction().has_value())
    return emitOpError() << stringifyCollectiveKind(getKind())
                         << (reduces ? " needs a reduction"
                                     : " takes no reduction");
  if (!getHandle().hasOneUse() ||
      !isa<CollectiveWaitOp>(*getHandle().getUsers().begin()))
    return emitOpError() << "needs exactly one train.collective_wait of its "
                            "handle";
  return checkOneElementType(*this, getInputs().getTypes());
}

LogicalResult
CollectiveStartOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<int64_t> n = verifyGroup(*this, symbols);
  if (failed(n))
    return failure();
  TypeRange inputs = getInputs().getTypes();
  TypeRange pending(getHandle().getType().getTypes());
  switch (getKind()) {
  case CollectiveKind::AllReduce:
    if (inputs != pending)
      return emitOpError() << "all_reduce yields its operands' types; got "
                           << pending << " for " << inputs;
    return success();
  case CollectiveKind::AllGatherShards:
    return checkShardPairs(*this, pending, inputs, *n);
  case CollectiveKind::ReduceScatterShards:
    return checkShardPairs(*this, inputs, pending, *n);
  }
  llvm_unreachable("unknown collective kind");
}
int64_t CollectiveStartOp::getGroupSize() { return groupSizeOf(*this); }

LogicalResult CollectiveWaitOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr, OpaqueProperties, RegionRange,
    SmallVectorImpl<Type> &results) {
  auto pending = dyn_cast<PendingType>(operands[0].getType());
  if (!pending)
    return emitOptionalError(loc, "'train.collective_wait' needs a "
                                  "!train.pending handle");
  llvm::append_range(results, pending.getTypes());
  return success();
}

LogicalResult CollectiveWaitOp::verify() {
  if (!getHandle().getDefiningOp<CollectiveStartOp>())
    return emitOpError() << "waits a handle that no train.collective_start "
                            "returned";
  return success();
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

/// The gradient has the parameter's shape (its element type may be bf16).
static LogicalResult checkGradShape(std::optional<Location> loc, StringRef op,
                                    Value param, Value grad) {
  if (tensorOf(grad).getShape() == tensorOf(param).getShape())
    return success();
  return emitOptionalError(loc, "'", op, "' grad type ", grad.getType(),
                           " must have the param's shape ", param.getType());
}

static LogicalResult checkState(std::optional<Location> loc, StringRef op,
                                StringRef what, Value param, Value state) {
  if (state.getType() == param.getType())
    return success();
  return emitOptionalError(loc, "'", op, "' ", what, " type ",
                           state.getType(), " must equal the param type ",
                           param.getType());
}

LogicalResult SgdOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &results) {
  Value param = adaptor.getParam();
  if (failed(checkGradShape(loc, "train.sgd", param, adaptor.getGrad())))
    return failure();
  results.push_back(param.getType());
  if (Value buffer = adaptor.getMomentumBuffer()) {
    if (failed(checkState(loc, "train.sgd", "momentum buffer", param, buffer)))
      return failure();
    results.push_back(param.getType());
  }
  return success();
}

LogicalResult SgdOp::verify() {
  float momentum = getMomentum().convertToFloat();
  if (failed(verifyFloatAttr(*this, "momentum", momentum,
                             FloatRule::NonNegative)) ||
      failed(verifyFloatAttr(*this, "weight_decay",
                             getWeightDecay().convertToFloat(),
                             FloatRule::NonNegative)))
    return failure();
  bool hasBuffer = static_cast<bool>(getMomentumBuffer());
  if (momentum != 0.0f && !hasBuffer)
    return emitOpError() << "momentum " << formatFloat(momentum)
                         << " needs a momentum buffer operand";
  if (momentum == 0.0f && hasBuffer)
    return emitOpError() << "has a momentum buffer but momentum is 0; drop "
                            "the buffer or set a momentum";
  if (getNesterov() && momentum == 0.0f)
    return emitOpError() << "nesterov needs a non-zero momentum";
  return success();
}

MutableArrayRef<OpOperand> SgdOp::getParamOperands() {
  return getParamMutable();
}

MutableArrayRef<OpOperand> SgdOp::getGradientOperands() {
  return getGradMutable();
}

SmallVector<OpOperand *> SgdOp::getStateOperands() {
  SmallVector<OpOperand *> states;
  for (OpOperand &buffer : getMomentumBufferMutable())
    states.push_back(&buffer);
  return states;
}

LogicalResult AdamwOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  Value param = adaptor.getParam();
  if (failed(checkGradShape(loc, "train.adamw", param, adaptor.getGrad())) ||
      failed(checkState(loc, "train.adamw", "exp_avg", param,
                        adaptor.getExpAvg())) ||
      failed(checkState(loc, "train.adamw", "exp_avg_sq", param,
                        adaptor.getExpAvgSq())))
    return failure();
  results.append(3, param.getType());
  return success();
}

LogicalResult AdamwOp::verify() {
  return success(
      succeeded(verifyFloatAttr(*this, "beta1", getBeta1().convertToFloat(),
                                FloatRule::UnitInterval)) &&
      succeeded(verifyFloatAttr(*this, "beta2", getBeta2().convertToFloat(),
                                FloatRule::UnitInterval)) &&
      succeeded(verifyFloatAttr(*this, "eps", getEps().convertToFloat(),
                                FloatRule::Positive)) &&
      succeeded(verifyFloatAttr(*this, "weight_decay",
                                getWeightDecay().convertToFloat(),
                                FloatRule::NonNegative)));
}

MutableArrayRef<OpOperand> AdamwOp::getParamOperands() {
  return getParamMutable();
}

MutableArrayRef<OpOperand> AdamwOp::getGradientOperands() {
  return getGradMutable();
}

SmallVector<OpOperand *> AdamwOp::getStateOperands() {
  return {&getExpAvgMutable(), &getExpAvgSqMutable()};
}

LogicalResult SumOfSquaresOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "needs at least one input";
  return success();
}

LogicalResult ClipCoefficientOp::verify() {
  return verifyFloatAttr(*this, "max_norm", getMaxNorm().convertToFloat(),
                         FloatRule::Positive);
}

//===----------------------------------------------------------------------===//
// Offload
//===----------------------------------------------------------------------===//

/// The NVMe file of an nvme_read/nvme_write belongs to an argument of the
/// step; that the argument has train.memory = nvme is the step's rule
/// (verifyMemorySpaces), which sees the signature.
static LogicalResult verifyNvmeArgument(Operation *op, Value arg,
                                        StringRef operand) {
  auto blockArg = dyn_cast<BlockArgument>(arg);
  if (!blockArg || !isa_and_nonnull<FunctionOpInterface>(
                       blockArg.getOwner()->getParentOp()))
    return op->emitOpError() << operand
                             << " must be an argument of the function: an "
                                "NVMe file holds a step's argument";
  return success();
}

LogicalResult NvmeReadOp::verify() {
  return verifyNvmeArgument(*this, getSource(), "source");
}

LogicalResult NvmeWriteOp::verify() {
  return verifyNvmeArgument(*this, getTarget(), "target");
}

LogicalResult TransferStartOp::verify() {
  ArrayRef<Type> pending = getHandle().getType().getTypes();
  if (pending.size() != 1 || pending[0] != getInput().getType())
    return emitOpError() << "yields one tensor of its input's type "
                         << getInput().getType() << "; the handle has "
                         << getHandle().getType();
  bool write = getKind() == TransferKind::NvmeWrite;
  if (write != bool(getTarget()))
    return emitOpError() << stringifyTransferKind(getKind())
                         << (write ? " needs the NVMe argument it writes "
                                     "('to' TARGET)"
                                   : " takes no target");
  if (write && getTarget().getType() != getInput().getType())
    return emitOpError() << "writes " << getInput().getType()
                         << " to an argument of type "
                         << getTarget().getType();
  if (getKind() == TransferKind::NvmeRead &&
      failed(verifyNvmeArgument(*this, getInput(), "input")))
    return failure();
  if (write && failed(verifyNvmeArgument(*this, getTarget(), "target")))
    return failure();
  if (!getHandle().hasOneUse() ||
      !isa<TransferWaitOp>(*getHandle().getUsers().begin()))
    return emitOpError() << "needs exactly one train.transfer_wait of its "
                            "handle";
  return success();
}

LogicalResult TransferWaitOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr, OpaqueProperties, RegionRange,
    SmallVectorImpl<Type> &results) {
  auto pending = dyn_cast<PendingType>(operands[0].getType());
  if (!pending || pending.getTypes().size() != 1)
    return emitOptionalError(loc, "'train.transfer_wait' needs a "
                                  "!train.pending handle of one tensor");
  results.push_back(pending.getTypes()[0]);
  return success();
}

LogicalResult TransferWaitOp::verify() {
  if (!getHandle().getDefiningOp<TransferStartOp>())
    return emitOpError() << "waits a handle that no train.transfer_start "
                            "returned";
  return success();
}

//===----------------------------------------------------------------------===//
// Fused ops
//===----------------------------------------------------------------------===//

/// A fused op's result `index` must have the type `expected`, which the
/// shape rule of the op it stands for gives.
static LogicalResult checkResultType(Operation *op, unsigned index,
                                     StringRef what, Type expected) {
  Type actual = op->getResult(index).getType();
  if (actual == expected)
    return success();
  return op->emitOpError() << what << " type " << actual << " must be "
                           << expected;
}

LogicalResult LinearGeluOp::verify() {
  FailureOr<RankedTensorType> type = inferLinear(
      getLoc(), "train.linear_gelu", getInput(), getWeight(), getBias());
  if (failed(type))
    return failure();
  return success(
      succeeded(checkResultType(*this, 0, "pre_activation", *type)) &&
      succeeded(checkResultType(*this, 1, "result", *type)));
}

LogicalResult LinearGradGeluOp::verify() {
  FailureOr<RankedTensorType> type =
      inferLinearGradInput(getLoc(), "train.linear_grad_gelu",
                           getGradOutput(), getWeight());
  if (failed(type))
    return failure();
  if (getPreActivation().getType() != *type)
    return emitOpError() << "pre_activation type "
                         << getPreActivation().getType()
                         << " must be the input gradient's, " << *type;
  if (failed(checkResultType(*this, 0, "grad_pre_activation", *type)))
    return failure();
  if (!getBiasGrad())
    return success();
  return checkResultType(
      *this, 1, "bias_grad",
      RankedTensorType::get({type->getShape().back()}, type->getElementType()));
}

LogicalResult LinearGradWeightBiasOp::verify() {
  FailureOr<RankedTensorType> type =
      inferLinearGradWeight(getLoc(), "train.linear_grad_weight_bias",
                            getGradOutput(), getInput());
  if (failed(type))
    return failure();
  RankedTensorType gradOutput = tensorOf(getGradOutput());
  return success(
      succeeded(checkResultType(*this, 0, "weight_grad", *type)) &&
      succeeded(checkResultType(
          *this, 1, "bias_grad",
          RankedTensorType::get({gradOutput.getShape().back()},
                                gradOutput.getElementType()))));
}

LogicalResult AdamwMultiOp::verify() {
  unsigned n = getNumTensors();
  if (n < 2)
    return emitOpError() << "updates " << n
                         << " tensors; a multi-tensor update has at least 2 "
                            "(train.adamw updates one)";
  if (getGrads().size() != n || getExpAvgs().size() != n ||
      getExpAvgSqs().size() != n || getWeightDecays().size() != n)
    return emitOpError() << "has " << n << " params but "
                         << getGrads().size() << " grads, "
                         << getExpAvgs().size() << " exp_avgs, "
                         << getExpAvgSqs().size() << " exp_avg_sqs and "
                         << getWeightDecays().size()
                         << " weight_decays; every group needs one per param";
  if (getNumResults() != 3 * n)
    return emitOpError() << "has " << getNumResults() << " results; " << n
                         << " params need " << 3 * n
                         << " (new params, exp_avgs, exp_avg_sqs)";
  Type gradElement = tensorOf(getGrads()[0]).getElementType();
  for (unsigned i = 0; i < n; ++i) {
    Value param = getParams()[i];
    if (failed(checkGradShape(getLoc(), "train.adamw_multi", param,
                              getGrads()[i])) ||
        failed(checkState(getLoc(), "train.adamw_multi", "exp_avg", param,
                          getExpAvgs()[i])) ||
        failed(checkState(getLoc(), "train.adamw_multi", "exp_avg_sq", param,
                          getExpAvgSqs()[i])))
      return failure();
    if (tensorOf(getGrads()[i]).getElementType() != gradElement)
      return emitOpError() << "grads must share one element type, got "
                           << gradElement << " and "
                           << tensorOf(getGrads()[i]).getElementType();
    for (Value result :
         {getNewParam(i), getNewExpAvg(i), getNewExpAvgSq(i)})
      if (result.getType() != param.getType())
        return emitOpError() << "result type " << result.getType()
                             << " of tensor " << i
                             << " must be its param's type "
                             << param.getType();
    if (failed(verifyFloatAttr(*this, "weight_decays", getWeightDecays()[i],
                               FloatRule::NonNegative)))
      return failure();
  }
  // The tensors of one call are updated at once: none may read what
  // another one updates.
  for (unsigned i = 0; i < n; ++i)
    for (Value updated : {getParams()[i], getExpAvgs()[i], getExpAvgSqs()[i]})
      for (unsigned j = 0; j < n; ++j)
        if (j != i && llvm::is_contained(
                          ValueRange{getParams()[j], getGrads()[j],
                                     getExpAvgs()[j], getExpAvgSqs()[j]},
                          updated))
          return emitOpError() << "tensor " << j
                               << " reads a value that tensor " << i
                               << " updates";
  return success(
      succeeded(verifyFloatAttr(*this, "beta1", getBeta1().convertToFloat(),
                                FloatRule::UnitInterval)) &&
      succeeded(verifyFloatAttr(*this, "beta2", getBeta2().convertToFloat(),
                                FloatRule::UnitInterval)) &&
      succeeded(verifyFloatAttr(*this, "eps", getEps().convertToFloat(),
                                FloatRule::Positive)));
}

/// The operands of the `group`th operand group of `op` (its ODS segment).
static MutableArrayRef<OpOperand> operandGroup(AdamwMultiOp op,
                                               unsigned group) {
  auto [start, length] = op.getODSOperandIndexAndLength(group);
  return op->getOpOperands().slice(start, length);
}

MutableArrayRef<OpOperand> AdamwMultiOp::getParamOperands() {
  return operandGroup(*this, 0);
}

MutableArrayRef<OpOperand> AdamwMultiOp::getGradientOperands() {
  return operandGroup(*this, 1);
}

SmallVector<OpOperand *> AdamwMultiOp::getStateOperands() {
  SmallVector<OpOperand *> states;
  for (unsigned group : {2u, 3u})
    for (OpOperand &operand : operandGroup(*this, group))
      states.push_back(&operand);
  return states;
}
