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
  ];
}

#endif // AUTOSHARD_DIALECT_TRAIN_TRAININTERFACES_TD
