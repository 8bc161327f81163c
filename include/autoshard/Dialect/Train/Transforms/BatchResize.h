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

/// A tensor that depends on no batch but has the batch's rows: a
/// `train.broadcast_to` that repeats its input along the leading dimension,
/// a `train.full` or a splat `train.constant` whose leading dimension is
/// `rows`, the rows of the batch-dependent value that `user` pairs it with
/// (a ViT's class token expanded to the batch, then concatenated with the
/// patches). Returns its defining op, or null. Such a tensor follows the
/// batch: each rank, and each micro-batch, takes `rows / factor` of it.
mlir::Operation *batchShapedFill(mlir::Value value, int64_t rows);

/// Gives the result of a batchShapedFill op `rows / factor` rows. Emits an
/// error naming `user` and fails when the rows do not divide, or when the
/// tensor has readers before `user` (they would keep the whole batch's
/// shape).
llvm::LogicalResult resizeBatchShapedFill(mlir::Operation *fill,
                                          mlir::Operation *user,
                                          int64_t factor);

} // namespace autoshard::train

#endif // AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_BATCHRESIZE_H
