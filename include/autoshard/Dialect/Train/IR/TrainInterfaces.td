//===- TrainInterfaces.td - interfaces of training-graph ops --------------===//

#ifndef AUTOSHARD_DIALECT_TRAIN_TRAININTERFACES_TD
#define AUTOSHARD_DIALECT_TRAIN_TRAININTERFACES_TD

include "mlir/IR/OpBase.td"

def Train_OptimizerOpInterface : OpInterface<"OptimizerOpInterface"> {
  let cppNamespace = "::autoshard::train";
  let description = [{
    An optimizer update: consumes parameters, their gradients and optimizer
    states, and produces the new parameters and states. Distribution passes
    use it to find the gradients that must be reduced across ranks and the
    states that a plan may shard, without knowing the optimizer.
  }];
  let methods = [
    InterfaceMethod<"The parameter operands this op updates.",
      "::mlir::MutableArrayRef<::mlir::OpOperand>", "getParamOperands">,
    InterfaceMethod<[{
        The gradient operands, one per parameter operand and in the same
        order.
      }],
      "::mlir::MutableArrayRef<::mlir::OpOperand>", "getGradientOperands">,
    InterfaceMethod<[{
        The per-element optimizer states (momentum, moments): operands with
        the parameter's shape that a plan may shard with it. Scalars (the
        step counter, the learning rate) are not among them.
      }],
      "::llvm::SmallVector<::mlir::OpOperand *>", "getStateOperands">,
  ];
}

def Train_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::autoshard::train";
  let description = [{
    An op that knows its own gradient rule: given the gradients of its
    results, it builds the ops computing the gradients of its operands.
    `autoshard-autodiff` walks the forward program backwards and calls this
    rule for every op on a path from a parameter to the loss; it sums the
    contributions where a value fans out.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the gradients of this op's operands at the builder's insertion
        point. `resultGrads[i]` is the gradient of result i, or null when no
        gradient flows into it. `seed` is true when this op computes the loss
        being differentiated: its gradient is one, and only a loss op accepts
        it. `needed[j]` says whether operand j needs a gradient; the rule
        sets `operandGrads[j]` (sized to the operands, null-initialised) for
        the needed ones and may leave the others null. Fails, with a
        diagnostic on the op, when it cannot differentiate.
      }],
      "::llvm::LogicalResult", "buildGradient",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "bool":$seed,
           "::llvm::ArrayRef<bool>":$needed,
           "::llvm::MutableArrayRef<::mlir::Value>":$operandGrads)>,
  ];
}

def Train_BatchResizableOpInterface : OpInterface<"BatchResizableOpInterface"> {
  let cppNamespace = "::autoshard::train";
  let description = [{
    An op whose result types are not a function of its operand types alone
    (a reshape names its target shape) but that can say how they change
    when a partitioner shrinks the batch dimension of its operands.
  }];
  let methods = [
    InterfaceMethod<[{
        The result types after the batch (leading) dimension of the op's
        batch-dependent operands shrank by `factor` (a partitioner giving
        each of `factor` ranks an equal contiguous block of rows). The
        operands already carry their new types; the results still carry
        the old ones. May update the op's attributes to match. Emits an
        error on the op and fails when the shrunk batch cannot be expressed.
      }],
      "::llvm::LogicalResult", "resizeBatch",
      (ins "int64_t":$factor,
           "::llvm::SmallVectorImpl<::mlir::Type> &":$resultTypes)>,
    InterfaceMethod<[{
        Called on gradient accumulation's copy of the op for micro-batch
        `index` of `count` (rows `[index * n, (index + 1) * n)` of the
        batch, `n` its new rows), after resizeBatch(`count`): an op whose
        attributes say which rows it holds updates them. Nothing by
        default.
      }],
      "void", "placeMicroBatch", (ins "int64_t":$index, "int64_t":$count),
      /*methodBody=*/"", /*defaultImplementation=*/"return;">,
  ];
}

#endif // AUTOSHARD_DIALECT_TRAIN_TRAININTERFACES_TD
