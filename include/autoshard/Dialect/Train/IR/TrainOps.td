//===- TrainOps.td - operations of the training-graph dialect -------------===//

#ifndef AUTOSHARD_DIALECT_TRAIN_TRAINOPS_TD
#define AUTOSHARD_DIALECT_TRAIN_TRAINOPS_TD

include "autoshard/Dialect/Train/IR/TrainBase.td"
include "autoshard/Dialect/Train/IR/TrainInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Train_Op<string mnemonic, list<Trait> traits = []>
    : Op<Train_Dialect, mnemonic, traits>;

// Element types the ops accept today. Mixed precision (bf16) widens these.
def Train_FloatTensor : RankedTensorOf<[F32]>;
def Train_LabelTensor : RankedTensorOf<[I32]>;
def Train_ScalarTensor : 0DTensorOf<[F32]>;

//===----------------------------------------------------------------------===//
// Dense layers
//===----------------------------------------------------------------------===//

def Train_LinearOp : Train_Op<"linear", [Pure, InferTypeOpAdaptor]> {
  let summary = "affine layer: input * weight^T + bias";
  let description = [{
    `result[..., o] = sum_i input[..., i] * weight[o, i] + bias[o]`.

    The weight has PyTorch's `nn.Linear` layout `[out_features,
    in_features]`; the bias is optional. All leading dimensions of the input
    are batch dimensions.

    ```mlir
    %y = train.linear %x, %w, %b
        : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    ```

    The last dimension of `input` must equal `in_features`, and the bias, if
    present, must have `out_features` elements.
  }];
  let arguments = (ins Train_FloatTensor:$input, Train_FloatTensor:$weight,
                       Optional<Train_FloatTensor>:$bias);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Train_LinearGradInputOp : Train_Op<"linear_grad_input",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "gradient of a linear layer with respect to its input";
  let description = [{
    `grad_input[..., i] = sum_o grad_output[..., o] * weight[o, i]`.

    ```mlir
    %dx = train.linear_grad_input %dy, %w
        : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
    ```

    The last dimension of `grad_output` must equal `out_features`.
  }];
  let arguments = (ins Train_FloatTensor:$grad_output,
                       Train_FloatTensor:$weight);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $grad_output `,` $weight attr-dict `:` functional-type(operands, results)
  }];
}

def Train_LinearGradWeightOp : Train_Op<"linear_grad_weight",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "gradient of a linear layer with respect to its weight";
  let description = [{
    `grad_weight[o, i] = sum over batch positions of
    grad_output[..., o] * input[..., i]`.

    ```mlir
    %dw = train.linear_grad_weight %dy, %x
        : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    ```

    `grad_output` and `input` must have the same leading (batch) dimensions.
    The gradient is a sum over this rank's batch positions: across ranks it
    is a partial sum that a data-parallel plan reduces.
  }];
  let arguments = (ins Train_FloatTensor:$grad_output,
                       Train_FloatTensor:$input);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $grad_output `,` $input attr-dict `:` functional-type(operands, results)
  }];
}

def Train_BiasGradOp : Train_Op<"bias_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "gradient of a bias: sum over batch positions";
  let description = [{
    `grad_bias[o] = sum over batch positions of grad_output[..., o]`.

    ```mlir
    %db = train.bias_grad %dy : (tensor<8x4xf32>) -> tensor<4xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$grad_output);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $grad_output attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

class Train_ActivationOp<string mnemonic, string formula>
    : Train_Op<mnemonic, [Pure, Elementwise, SameOperandsAndResultType]> {
  let description = [{
    Elementwise }] # formula # [{.

    ```mlir
    %y = train.}] # mnemonic # [{ %x : tensor<8x4xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$input);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

class Train_ActivationGradOp<string mnemonic, string of>
    : Train_Op<mnemonic, [Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = "gradient of " # of;
  let description = [{
    `grad_input = grad_output * d}] # of # [{(input)/d input`, elementwise;
    `input` is the forward input.

    ```mlir
    %dx = train.}] # mnemonic # [{ %dy, %x : tensor<8x4xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$grad_output, Train_FloatTensor:$input);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$grad_output `,` $input attr-dict `:` type($result)";
}

def Train_ReluOp : Train_ActivationOp<"relu", "`max(x, 0)`"> {
  let summary = "rectified linear unit";
}
def Train_ReluGradOp : Train_ActivationGradOp<"relu_grad", "relu">;

def Train_GeluOp : Train_ActivationOp<"gelu",
    "`0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, the tanh form of GELU "
    "that GPT-2 uses"> {
  let summary = "Gaussian error linear unit (tanh approximation)";
}
def Train_GeluGradOp : Train_ActivationGradOp<"gelu_grad", "gelu">;

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

def Train_SoftmaxCrossEntropyOp : Train_Op<"softmax_cross_entropy",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "mean softmax cross-entropy of logits against class labels";
  let description = [{
    `loss = mean over positions p of -log(softmax(logits[p, :])[labels[p]])`.

    The last dimension of `logits` indexes the classes; `labels` has the
    shape of `logits` without it. The mean is over this rank's positions.

    ```mlir
    %loss = train.softmax_cross_entropy %logits, %labels
        : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$logits, Train_LabelTensor:$labels);
  let results = (outs Train_ScalarTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` functional-type(operands, results)
  }];
}

def Train_SoftmaxCrossEntropyGradOp : Train_Op<"softmax_cross_entropy_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "gradient of the mean softmax cross-entropy w.r.t. the logits";
  let description = [{
    `grad_logits = (softmax(logits) - onehot(labels)) / positions * grad_loss`,
    with `grad_loss` 1 when it is absent.

    ```mlir
    %dlogits = train.softmax_cross_entropy_grad %logits, %labels
        : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<8x10xf32>
    ```

    `labels` must have the shape of `logits` without its last dimension.
  }];
  let arguments = (ins Train_FloatTensor:$logits, Train_LabelTensor:$labels,
                       Optional<Train_ScalarTensor>:$grad_loss);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels (`,` $grad_loss^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

def Train_SgdOp : Train_Op<"sgd", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Train_OptimizerOpInterface>]> {
  let summary = "stochastic gradient descent step with optional momentum";
  let description = [{
    One step of `torch.optim.SGD` (dampening 0) on one parameter:

    ```
    g        = grad + weight_decay * param
    buf'     = momentum * buf + g                       (momentum != 0)
    d        = nesterov ? g + momentum * buf' : buf'    (g when momentum == 0)
    param'   = param - lr * d
    ```

    `lr` is a scalar tensor (usually a `hyper` argument of the step, so the
    training binary can override it). The momentum buffer is an operand and
    a result exactly when `momentum` is not zero.

    ```mlir
    %p1 = train.sgd %p, %g, %lr
        : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
    %p2, %m2 = train.sgd %p, %g, %lr, %m {momentum = 0.9 : f32}
        : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>, tensor<4x16xf32>)
        -> (tensor<4x16xf32>, tensor<4x16xf32>)
    ```

    `grad` and the buffer must have the parameter's type; `momentum` and
    `weight_decay` must be finite and non-negative; `nesterov` needs a
    non-zero momentum.
  }];
  let arguments = (ins Train_FloatTensor:$param, Train_FloatTensor:$grad,
                       Train_ScalarTensor:$lr,
                       Optional<Train_FloatTensor>:$momentum_buffer,
                       DefaultValuedAttr<F32Attr, "0.0f">:$momentum,
                       DefaultValuedAttr<F32Attr, "0.0f">:$weight_decay,
                       DefaultValuedAttr<BoolAttr, "false">:$nesterov);
  let results = (outs Train_FloatTensor:$new_param,
                      Optional<Train_FloatTensor>:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $lr (`,` $momentum_buffer^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // AUTOSHARD_DIALECT_TRAIN_TRAINOPS_TD
