//===- BatchResize.h - result types of ops on a smaller batch ---*- C++ -*-===//

#ifndef AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_BATCHRESIZE_H
#define AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_BATCHRESIZE_H

#include "mlir/IR/Operation.h"

namespace autoshard::train {

/// Sets the result types of `op`, whose batch-dependent operands already
/// carry types whose batch (leading) dimension shrank by `factor`: through
/// the op's shape rule (InferTypeOpInterface), its SameOperandsAndResultType
/// trait, or BatchResizableOpInterface. Used by the partitioner (a rank's
/// share of the batch) and by gradient accumulation (a micro-batch). Emits an
/// error on the op and fails for an op with none of these.
llvm::LogicalResult rederiveResultTypes(mlir::Operation *op, int64_t factor);

} // namespace autoshard::train

#endif // AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_BATCHRESIZE_H
