//===- BatchResize.cpp - result types of ops on a smaller batch -----------===//

#include "autoshard/Dialect/Train/Transforms/BatchResize.h"
#include "autoshard/Dialect/Train/IR/TrainDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

using namespace mlir;
using namespace autoshard::train;

LogicalResult autoshard::train::rederiveResultTypes(Operation *op,
                                                    int64_t factor) {
  SmallVector<Type> inferred;
  // An op's own rule first: it may have attributes to update as well
  // (train.dropout's rows).
  if (auto resizable = dyn_cast<BatchResizableOpInterface>(op)) {
    if (failed(resizable.resizeBatch(factor, inferred)))
      return failure();
  } else if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
    if (failed(infer.inferReturnTypes(
            op->getContext(), op->getLoc(), op->getOperands(),
            op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
            op->getRegions(), inferred)))
      return failure();
  } else if (op->hasTrait<OpTrait::SameOperandsAndResultType>()) {
    inferred.assign(op->getNumResults(), op->getOperand(0).getType());
  } else {
    return op->emitOpError()
           << "has no type-inference rule, so its result types cannot be "
              "re-derived for a smaller batch";
  }
  for (auto [result, type] : llvm::zip(op->getResults(), inferred))
    result.setType(type);
  return success();
}

Operation *autoshard::train::batchShapedFill(Value value, int64_t rows) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  Operation *op = value.getDefiningOp();
  if (!op || !type || type.getRank() == 0 || type.getDimSize(0) != rows ||
      rows <= 1)
    return nullptr;
  if (auto broadcast = dyn_cast<BroadcastToOp>(op)) {
    // The leading dimension must be one the broadcast makes, not its
    // input's: an input with the batch's rows would itself be the batch.
    RankedTensorType in = broadcast.getInput().getType();
    if (in.getRank() == type.getRank() && in.getDimSize(0) != 1)
      return nullptr;
    return op;
  }
  if (isa<FullOp>(op))
    return op;
  if (auto constant = dyn_cast<ConstantOp>(op))
    if (isa<SplatElementsAttr>(constant.getValue()))
      return op;
  return nullptr;
}

LogicalResult autoshard::train::resizeBatchShapedFill(Operation *fill,
                                                      Operation *user,
                                                      int64_t factor) {
  auto type = cast<RankedTensorType>(fill->getResult(0).getType());
  int64_t rows = type.getDimSize(0);
  if (rows % factor != 0)
    return user->emitOpError()
           << "pairs the batch with " << fill->getName() << " of " << type
           << ", whose " << rows << " rows do not divide into " << factor
           << " equal parts";
  for (Operation *other : fill->getUsers())
    if (other != user && other->getBlock() == user->getBlock() &&
        other->isBeforeInBlock(user))
      return user->emitOpError()
             << "pairs the batch with " << fill->getName() << " of " << type
             << ", which " << other->getName()
             << " reads before it without the batch; give each reader its "
                "own tensor";
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = rows / factor;
  RankedTensorType resized = type.clone(shape);
  if (auto constant = dyn_cast<ConstantOp>(fill)) {
    auto splat = cast<SplatElementsAttr>(constant.getValue());
    constant.setValueAttr(
        SplatElementsAttr::get(resized, splat.getSplatValue<Attribute>()));
  }
  fill->getResult(0).setType(resized);
  return success();
}
