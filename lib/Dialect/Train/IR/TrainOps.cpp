//===- TrainOps.cpp - shape rules and verifiers of training-graph ops -----===//

#include "autoshard/Dialect/Train/IR/TrainDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include <cstdio>

using namespace mlir;
using namespace autoshard::train;

#define GET_OP_CLASSES
#include "autoshard/Dialect/Train/IR/TrainOps.cpp.inc"

#include "autoshard/Dialect/Train/IR/TrainInterfaces.cpp.inc"

/// `type` with its last dimension replaced by `size`.
static RankedTensorType withLastDim(RankedTensorType type, int64_t size) {
  SmallVector<int64_t> shape(type.getShape());
  shape.back() = size;
  return type.clone(shape);
}

/// Leading (batch) dimensions: all but the last.
static ArrayRef<int64_t> leadingDims(RankedTensorType type) {
  return type.getShape().drop_back();
}

static LogicalResult checkRankAtLeast(std::optional<Location> loc,
                                      StringRef op, StringRef what,
                                      RankedTensorType type, int64_t rank) {
  if (type.getRank() >= rank)
    return success();
  return emitOptionalError(loc, "'", op, "' ", what, " must have rank >= ",
                           rank, ", got ", type);
}

/// Checks that a weight is a 2-D [out_features, in_features] matrix.
static LogicalResult checkWeight(std::optional<Location> loc, StringRef op,
                                 RankedTensorType weight) {
  if (weight.getRank() == 2)
    return success();
  return emitOptionalError(loc, "'", op,
                           "' weight must be 2-D [out_features, "
                           "in_features], got ",
                           weight);
}

//===----------------------------------------------------------------------===//
// Dense layers
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  auto weight = cast<RankedTensorType>(adaptor.getWeight().getType());
  if (failed(checkRankAtLeast(loc, "train.linear", "input", input, 1)) ||
      failed(checkWeight(loc, "train.linear", weight)))
    return failure();
  int64_t outFeatures = weight.getDimSize(0), inFeatures = weight.getDimSize(1);
  if (input.getShape().back() != inFeatures)
    return emitOptionalError(
        loc, "'train.linear' input feature dimension (", input.getShape().back(),
        ") must equal the weight's in_features (dimension 1 of ", weight, ")");
  if (Value bias = adaptor.getBias()) {
    auto biasType = cast<RankedTensorType>(bias.getType());
    if (biasType.getRank() != 1 || biasType.getDimSize(0) != outFeatures)
      return emitOptionalError(loc, "'train.linear' bias must be 1-D with ",
                               outFeatures, " (out_features) elements, got ",
                               biasType);
  }
  results.push_back(withLastDim(input, outFeatures));
  return success();
}

LogicalResult LinearGradInputOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  auto gradOutput = cast<RankedTensorType>(adaptor.getGradOutput().getType());
  auto weight = cast<RankedTensorType>(adaptor.getWeight().getType());
  if (failed(checkRankAtLeast(loc, "train.linear_grad_input", "grad_output",
                              gradOutput, 1)) ||
      failed(checkWeight(loc, "train.linear_grad_input", weight)))
    return failure();
  if (gradOutput.getShape().back() != weight.getDimSize(0))
    return emitOptionalError(
        loc, "'train.linear_grad_input' grad_output feature dimension (",
        gradOutput.getShape().back(),
        ") must equal the weight's out_features (dimension 0 of ", weight, ")");
  results.push_back(withLastDim(gradOutput, weight.getDimSize(1)));
  return success();
}

LogicalResult LinearGradWeightOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  auto gradOutput = cast<RankedTensorType>(adaptor.getGradOutput().getType());
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  if (failed(checkRankAtLeast(loc, "train.linear_grad_weight", "grad_output",
                              gradOutput, 1)) ||
      failed(checkRankAtLeast(loc, "train.linear_grad_weight", "input", input,
                              1)))
    return failure();
  if (leadingDims(gradOutput) != leadingDims(input))
    return emitOptionalError(loc,
                             "'train.linear_grad_weight' grad_output ",
                             gradOutput, " and input ", input,
                             " must have the same batch dimensions");
  results.push_back(RankedTensorType::get(
      {gradOutput.getShape().back(), input.getShape().back()},
      gradOutput.getElementType()));
  return success();
}

LogicalResult BiasGradOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &results) {
  auto gradOutput = cast<RankedTensorType>(adaptor.getGradOutput().getType());
  if (failed(checkRankAtLeast(loc, "train.bias_grad", "grad_output",
                              gradOutput, 1)))
    return failure();
  results.push_back(RankedTensorType::get({gradOutput.getShape().back()},
                                          gradOutput.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

static LogicalResult checkLabels(std::optional<Location> loc, StringRef op,
                                 RankedTensorType logits,
                                 RankedTensorType labels) {
  if (failed(checkRankAtLeast(loc, op, "logits", logits, 1)))
    return failure();
  if (labels.getShape() != leadingDims(logits))
    return emitOptionalError(loc, "'", op, "' labels ", labels,
                             " must have the shape of the logits ", logits,
                             " without its last (class) dimension");
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  auto logits = cast<RankedTensorType>(adaptor.getLogits().getType());
  auto labels = cast<RankedTensorType>(adaptor.getLabels().getType());
  if (failed(checkLabels(loc, "train.softmax_cross_entropy", logits, labels)))
    return failure();
  results.push_back(RankedTensorType::get({}, logits.getElementType()));
  return success();
}

LogicalResult SoftmaxCrossEntropyGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  auto logits = cast<RankedTensorType>(adaptor.getLogits().getType());
  auto labels = cast<RankedTensorType>(adaptor.getLabels().getType());
  if (failed(checkLabels(loc, "train.softmax_cross_entropy_grad", logits,
                         labels)))
    return failure();
  results.push_back(logits);
  return success();
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

LogicalResult SgdOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &results) {
  Type param = adaptor.getParam().getType();
  if (adaptor.getGrad().getType() != param)
    return emitOptionalError(loc, "'train.sgd' grad type ",
                             adaptor.getGrad().getType(),
                             " must equal the param type ", param);
  results.push_back(param);
  if (Value buffer = adaptor.getMomentumBuffer()) {
    if (buffer.getType() != param)
      return emitOptionalError(loc, "'train.sgd' momentum buffer type ",
                               buffer.getType(), " must equal the param type ",
                               param);
    results.push_back(param);
  }
  return success();
}

/// A float as a person writes it: 0.9, not 9.000000e-01.
static std::string formatFloat(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

LogicalResult SgdOp::verify() {
  float momentum = getMomentum().convertToFloat();
  float weightDecay = getWeightDecay().convertToFloat();
  if (!std::isfinite(momentum) || momentum < 0.0f)
    return emitOpError() << "momentum must be finite and >= 0, got "
                         << formatFloat(momentum);
  if (!std::isfinite(weightDecay) || weightDecay < 0.0f)
    return emitOpError() << "weight_decay must be finite and >= 0, got "
                         << formatFloat(weightDecay);
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
