//===- ShapeRules.h - helpers of the train ops' shape rules -----*- C++ -*-===//
//
// What the shape rules and verifiers of TrainOps.cpp (the fused layers) and
// TensorOps.cpp (the generic ops) share, so that both word a diagnostic
// alike. Internal to the dialect library.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_LIB_DIALECT_TRAIN_IR_SHAPERULES_H
#define AUTOSHARD_LIB_DIALECT_TRAIN_IR_SHAPERULES_H

#include "autoshard/Dialect/Train/IR/TrainDialect.h"

#include "mlir/IR/Diagnostics.h"

namespace autoshard::train::detail {

inline mlir::RankedTensorType tensorOf(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType());
}

/// verifyFloat on the attribute `name` of `op`, as 'train.x' op errors.
inline mlir::LogicalResult verifyFloatAttr(mlir::Operation *op,
                                           llvm::StringRef name, float value,
                                           FloatRule rule) {
  return verifyFloat([op] { return op->emitOpError(); }, name, value, rule);
}

/// Operands of one op compute in one element type (f32, or bf16 under mixed
/// precision).
inline mlir::LogicalResult
checkSameElementType(std::optional<mlir::Location> loc, llvm::StringRef op,
                     mlir::ValueRange values) {
  mlir::Type first = tensorOf(values.front()).getElementType();
  for (mlir::Value v : values.drop_front())
    if (tensorOf(v).getElementType() != first)
      return mlir::emitOptionalError(
          loc, "'", op, "' operands must share one element type, got ", first,
          " and ", tensorOf(v).getElementType());
  return mlir::success();
}

} // namespace autoshard::train::detail

#endif // AUTOSHARD_LIB_DIALECT_TRAIN_IR_SHAPERULES_H
