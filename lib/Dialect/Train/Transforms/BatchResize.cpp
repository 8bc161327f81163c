//===- BatchResize.cpp - result types of ops on a smaller batch -----------===//

#include "autoshard/Dialect/Train/Transforms/BatchResize.h"
#include "autoshard/Dialect/Train/IR/TrainDialect.h"

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
