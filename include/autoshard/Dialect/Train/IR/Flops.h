//===- Flops.h - the FLOPs a training step's ops compute ------*- C++ -*-===//
//
// What the cost model's compute time and the binary's achieved FLOP rate
// count: the multiply-adds of the matrix products and of attention, two
// FLOPs each. Elementwise ops, norms and the optimizer are left out, as
// model-FLOPs utilisation leaves them out.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_DIALECT_TRAIN_IR_FLOPS_H
#define AUTOSHARD_DIALECT_TRAIN_IR_FLOPS_H

#include "mlir/IR/Operation.h"

namespace autoshard::train {

/// The FLOPs `op` computes: a train.linear, its input and weight gradients,
/// causal attention (the full score matrix, as model-FLOPs utilisation
/// counts it: 4 B H T T D forward) and its gradient (twice that); 0 for any
/// other op.
double opFlops(mlir::Operation *op);

/// The FLOPs of every op in `block`, in order.
double blockFlops(mlir::Block &block);

} // namespace autoshard::train

#endif // AUTOSHARD_DIALECT_TRAIN_IR_FLOPS_H
