//===- TrainTensorOps.td - generic tensor ops of the train dialect --------===//
//
// The ops a front end emits for any model (PyTorch's ATen ops, one for one
// where it can): elementwise functions, broadcasting arithmetic,
// comparisons and selection, reductions, softmax, views and matrix
// products. Each has a shape rule, a verifier and a gradient rule; each
// runs on one generic kernel of the runtime (abi.h, "Generic tensor ops").
// autoshard-raise rewrites the patterns that have a fused op with a faster
// kernel (GELU chains, RMSNorm, rotary embeddings, ...) into it.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_DIALECT_TRAIN_TRAINTENSOROPS_TD
#define AUTOSHARD_DIALECT_TRAIN_TRAINTENSOROPS_TD

// A value-carrying tensor of a generic op: floating point, or a mask (i1)
// where the op says so.
def Train_MaskTensor : RankedTensorOf<[I1]>;

//===----------------------------------------------------------------------===//
// Elementwise functions of one tensor
//===----------------------------------------------------------------------===//

/// y = f(x), elementwise; its gradient is train.unary_grad of `fn` (with
/// `alpha`, a C++ expression of the op, for the functions with a scalar).
class Train_UnaryOp<string mnemonic, string fn, string formula,
                    string alpha = "0.0f">
    : Train_ForwardOp<mnemonic, [Elementwise, SameOperandsAndResultType]> {
  let summary = "elementwise " # formula;
  let description = [{
    `result = }] # formula # [{`, elementwise, in f32 (bf16 rounded on
    store).

    ```mlir
    %y = train.}] # mnemonic # [{ %x : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$input);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let extraClassDeclaration = [{
    /// The function, as train.unary_grad and the runtime name it.
    static constexpr ::autoshard::train::UnaryFn kFn =
        ::autoshard::train::UnaryFn::}] # fn # [{;
    /// The function's scalar (0 for those without one).
    float getAlpha() { return }] # alpha # [{; }
  }];
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::buildGradient(::mlir::OpBuilder &b,
        ::llvm::ArrayRef<::mlir::Value> grads, bool seed,
        ::llvm::ArrayRef<bool> needed,
        ::llvm::MutableArrayRef<::mlir::Value> operandGrads) {
      return buildUnaryGradient(b, getOperation(), kFn, getAlpha(), grads,
                                needed, operandGrads);
    }
  }];
}

def Train_NegOp : Train_UnaryOp<"neg", "Neg", "-x">;
def Train_ExpOp : Train_UnaryOp<"exp", "Exp", "exp(x)">;
def Train_LogOp : Train_UnaryOp<"log", "Log", "log(x)">;
def Train_TanhOp : Train_UnaryOp<"tanh", "Tanh", "tanh(x)">;
def Train_SigmoidOp : Train_UnaryOp<"sigmoid", "Sigmoid", "1 / (1 + exp(-x))">;
def Train_RsqrtOp : Train_UnaryOp<"rsqrt", "Rsqrt", "1 / sqrt(x)">;
def Train_SqrtOp : Train_UnaryOp<"sqrt", "Sqrt", "sqrt(x)">;
def Train_SinOp : Train_UnaryOp<"sin", "Sin", "sin(x)">;
def Train_CosOp : Train_UnaryOp<"cos", "Cos", "cos(x)">;
def Train_SiluOp : Train_UnaryOp<"silu", "Silu", "x * sigmoid(x)">;
def Train_GeluErfOp : Train_UnaryOp<"gelu_erf", "GeluErf",
    "x / 2 * (1 + erf(x / sqrt(2)))"> {
  let summary = "exact GELU, x / 2 * (1 + erf(x / sqrt(2))), elementwise";
  let description = [{
    `result = x * Phi(x)`, `Phi` the standard normal CDF: the exact GELU
    (`torch.nn.functional.gelu` with `approximate="none"`, PyTorch's
    default), elementwise, in f32 (bf16 rounded on store). Forward and
    gradient are one kernel each, which compute `Phi(x)` as
    `erfc(-x / sqrt(2)) / 2`, exact in the left tail where
    `1 + erf(x / sqrt(2))` would cancel. `train.gelu` is the tanh
    approximation, a different function: neither is rewritten to the other.
    autoshard-raise rewrites the generic chain
    `0.5 * x * (1 + erf(x / sqrt(2)))` to this op.

    ```mlir
    %y = train.gelu_erf %x : tensor<4x8xf32>
    ```
  }];
}
def Train_ErfOp : Train_UnaryOp<"erf", "Erf", "erf(x)">;
def Train_ReciprocalOp : Train_UnaryOp<"reciprocal", "Reciprocal", "1 / x">;
def Train_AbsOp : Train_UnaryOp<"abs", "Abs", "|x|">;

def Train_PowScalarOp : Train_UnaryOp<"pow_scalar", "Pow", "x ^ exponent",
    "getExponent().convertToFloat()"> {
  let arguments = (ins Train_FloatTensor:$input, F32Attr:$exponent);
  let description = [{
    `result = input ^ exponent`, elementwise (`torch.pow` with a scalar
    exponent). `exponent` is finite.

    ```mlir
    %y = train.pow_scalar %x {exponent = 3.0 : f32} : tensor<4x8xf32>
    ```
  }];
  let hasVerifier = 1;
}

def Train_AddScalarOp : Train_UnaryOp<"add_scalar", "Add", "x + value",
    "getValue().convertToFloat()"> {
  let arguments = (ins Train_FloatTensor:$input, F32Attr:$value);
  let description = [{
    `result = input + value`, elementwise. `value` is finite.

    ```mlir
    %y = train.add_scalar %x {value = 1.0 : f32} : tensor<4x8xf32>
    ```
  }];
  let hasVerifier = 1;
}

def Train_UnaryGradOp : Train_Op<"unary_grad",
    [Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = "gradient of an elementwise function of one tensor";
  let description = [{
    `grad_input = grad_output * f'(input)`, elementwise, `f` the function
    `fn` (with its scalar `alpha`: the exponent of `pow_scalar`) and `input`
    the forward input. The gradient rule of every op of train.unary_grad's
    functions.

    ```mlir
    %dx = train.unary_grad tanh, %dy, %x : tensor<4x8xf32>
    %dp = train.unary_grad pow_scalar, %dy, %x {alpha = 3.0 : f32} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Train_UnaryFn:$fn, Train_FloatTensor:$grad_output,
                       Train_FloatTensor:$input,
                       DefaultValuedAttr<F32Attr, "0.0f">:$alpha);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $fn `,` $grad_output `,` $input attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Train_DropoutOp : Train_ForwardOp<"dropout", [Elementwise,
    SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Train_BatchResizableOpInterface,
                              ["placeMicroBatch"]>]> {
  let summary = "zeroes elements at random with probability p, scales the rest";
  let description = [{
    `result = keep ? input / (1 - p) : 0`, elementwise (`nn.Dropout` in
    training mode), `0 <= p < 1`. Whether an element is kept is a Philox
    draw keyed by the run's seed, the optimizer step and `stream`, at the
    element's index in the step's whole-batch tensor: the same mask on
    every strategy, world size and micro-batching, a new one every step,
    and the same again on resume. Dimension 0 is the batch (a multiple of
    it); the compiler maintains which of the whole tensor's rows this one
    holds: on rank `i` of the batch-splitting grid its first row is
    `row_offset + i * rank_rows` (gradient accumulation sets them per
    micro-batch, the partitioner divides them by the ranks; 0 and 0 for
    the whole tensor on one rank).

    ```
    whole batch, rows 0..7    2 ranks x 2 micro-batches
    [0 1 2 3 4 5 6 7]         rank 0: mb0 rows 0-1 (row_offset 0, rank_rows 4)
                                      mb1 rows 2-3 (row_offset 2, rank_rows 4)
                              rank 1: mb0 rows 4-5, mb1 rows 6-7
    ```

    `stream` tells the dropouts of one step apart (distinct per op:
    autoshard-autodiff refuses two forward dropouts with one stream).
    Its gradient is a dropout of the same attributes on the output
    gradient: the same mask, drawn again rather than stored. The
    evaluation step (autoshard-autodiff's forward-only) replaces it by its
    input.

    ```mlir
    %y = train.dropout %x {p = 0.1 : f32, stream = 0 : i64} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$input, F32Attr:$p, I64Attr:$stream,
                       DefaultValuedAttr<I64Attr, "0">:$row_offset,
                       DefaultValuedAttr<I64Attr, "0">:$rank_rows);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Broadcasting arithmetic, comparisons and selection
//===----------------------------------------------------------------------===//

/// result = lhs OP rhs with NumPy broadcasting: the shapes align at the
/// right; a dimension of 1, or a missing one, repeats.
class Train_BinaryOp<string mnemonic, string formula, list<Trait> traits = []>
    : Train_ForwardOp<mnemonic, !listconcat(traits, [InferTypeOpAdaptor])> {
  let summary = "elementwise " # formula # " with broadcasting";
  let description = [{
    `result = }] # formula # [{`, elementwise with NumPy (and PyTorch)
    broadcasting: the shapes align at the right, and a dimension of size 1
    or a missing leading one repeats. Both operands have one element type.
    The type is written once when the shapes are equal.

    ```mlir
    %z = train.}] # mnemonic # [{ %a, %b : tensor<4x8xf32>
    %w = train.}] # mnemonic # [{ %a, %row : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$lhs, Train_FloatTensor:$rhs);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:`
    custom<BinaryTypes>(type($lhs), type($rhs), type($result))
  }];
}

def Train_AddOp : Train_BinaryOp<"add", "lhs + rhs", [Commutative]> {
  let description = [{
    `result = lhs + rhs`, elementwise with NumPy broadcasting (the shapes
    align at the right; a dimension of 1 or a missing leading one repeats).
    The residual stream of a transformer, and the op autodiff uses to sum
    the gradient contributions of a value that fans out. The type is written
    once when the shapes are equal.

    ```mlir
    %h = train.add %x, %attn : tensor<2x8x16xf32>
    %y = train.add %xw, %bias : tensor<2x8x16xf32>, tensor<16xf32> -> tensor<2x8x16xf32>
    ```
  }];
}
def Train_SubOp : Train_BinaryOp<"sub", "lhs - rhs">;
def Train_MulOp : Train_BinaryOp<"mul", "lhs * rhs", [Commutative]>;
def Train_DivOp : Train_BinaryOp<"div", "lhs / rhs">;
def Train_MaximumOp : Train_BinaryOp<"maximum", "max(lhs, rhs)",
    [Commutative]>;
def Train_MinimumOp : Train_BinaryOp<"minimum", "min(lhs, rhs)",
    [Commutative]>;
def Train_PowOp : Train_BinaryOp<"pow", "lhs ^ rhs">;

def Train_CompareOp : Train_Op<"compare", [Pure, InferTypeOpAdaptor]> {
  let summary = "elementwise comparison with broadcasting, as a mask";
  let description = [{
    `result = lhs PRED rhs` (lt, le, gt, ge, eq, ne), elementwise with
    NumPy broadcasting, as an i1 mask (one byte per element at run time).
    It has no gradient: a mask selects (train.select), it is not
    differentiated.

    ```mlir
    %m = train.compare lt, %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
    ```
  }];
  let arguments = (ins Train_ComparePredicate:$predicate,
                       Train_FloatTensor:$lhs, Train_FloatTensor:$rhs);
  let results = (outs Train_MaskTensor:$result);
  let assemblyFormat = [{
    $predicate `,` $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

def Train_SelectOp : Train_ForwardOp<"select", [InferTypeOpAdaptor]> {
  let summary = "elementwise choice between two tensors by a mask";
  let description = [{
    `result = condition ? true_value : false_value`, elementwise with NumPy
    broadcasting of all three (`torch.where`; `masked_fill` is a select with
    a 0-D fill value). The gradient flows to the chosen value only.

    ```mlir
    %z = train.select %m, %scores, %neg_inf
        : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Train_MaskTensor:$condition,
                       Train_FloatTensor:$true_value,
                       Train_FloatTensor:$false_value);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $condition `,` $true_value `,` $false_value attr-dict `:`
    functional-type(operands, results)
  }];
}

def Train_FullOp : Train_Op<"full", [Pure]> {
  let summary = "a tensor with every element equal to a constant";
  let description = [{
    Every element is `value` (finite, or an infinity: `-inf` is the fill of
    an attention mask). A 0-D `full` broadcasts against any shape. A `full`
    whose leading dimension has the batch's rows and that an op pairs with
    the batch row for row (same rank) follows the batch: the partitioner
    gives it each rank's rows, gradient accumulation each micro-batch's.
    Every reader of such a `full` must read the batch too.

    ```mlir
    %zero = train.full {value = 0.0 : f32} : tensor<f32>
    ```
  }];
  let arguments = (ins F32Attr:$value);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Train_ConstantOp : Train_Op<"constant",
    [Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "a tensor of constant elements";
  let description = [{
    The elements of `value`: what a front end folds data-independent
    subgraphs to (a causal mask, position ids, the cos/sin tables of rotary
    embeddings). f32, bf16, i32 or i1 (a mask). The training binary holds
    the elements and copies them into the step's buffer. A constant does
    not depend on the batch, so the partitioner never splits it, with one
    exception: a splat whose leading dimension has the batch's rows and
    that an op pairs with the batch row for row follows the batch, as
    `train.full` does. Other constants must not hold the global batch.

    ```mlir
    %mask = train.constant dense<[[true, false], [true, true]]> : tensor<2x2xi1>
    %pos = train.constant dense<[0, 1, 2, 3]> : tensor<4xi32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs RankedTensorOf<[F32, BF16, I32, I1]>:$result);
  let assemblyFormat = "attr-dict $value";
  let builders = [
    OpBuilder<(ins "::mlir::ElementsAttr":$value), [{
      build($_builder, $_state, value.getType(), value);
    }]>
  ];
}

//===----------------------------------------------------------------------===//
// Reductions and softmax
//===----------------------------------------------------------------------===//

class Train_ReduceOp<string mnemonic, string what>
    : Train_ForwardOp<mnemonic, [InferTypeOpAdaptor]> {
  let summary = what # " over dimensions";
  let description = [{
    The }] # what # [{ of `input` over the dimensions `dims` (distinct,
    ascending, at least one), which are dropped from the result unless
    `keepdim` keeps them with size 1 (PyTorch's `dim` and `keepdim`).
    Accumulates in f32 or wider.

    ```mlir
    %s = train.}] # mnemonic # [{ %x {dims = array<i64: 1>, keepdim}
        : tensor<4x8xf32> -> tensor<4x1xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$input, DenseI64ArrayAttr:$dims,
                       UnitAttr:$keepdim);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Train_ReduceSumOp : Train_ReduceOp<"reduce_sum", "sum">;
def Train_ReduceMeanOp : Train_ReduceOp<"reduce_mean", "mean">;
def Train_ReduceMaxOp : Train_ReduceOp<"reduce_max", "maximum"> {
  let description = [{
    The maximum of `input` over the dimensions `dims` (distinct, ascending,
    at least one), dropped from the result unless `keepdim` (`torch.amax`).
    NaN propagates. The gradient goes to the maxima, shared equally among
    ties (as `torch.amax`'s).

    ```mlir
    %m = train.reduce_max %x {dims = array<i64: 1>, keepdim}
        : tensor<4x8xf32> -> tensor<4x1xf32>
    ```
  }];
}

class Train_SoftmaxOp<string mnemonic, string formula>
    : Train_ForwardOp<mnemonic, [SameOperandsAndResultType]> {
  let summary = formula # " over the last dimension";
  let description = [{
    `result = }] # formula # [{` over the last dimension, computed stably
    (the row maximum subtracted). A softmax over another dimension is a
    transpose around this one.

    ```mlir
    %p = train.}] # mnemonic # [{ %scores : tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$input);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Train_SoftmaxOp : Train_SoftmaxOp<"softmax", "exp(x) / sum(exp(x))">;
def Train_LogSoftmaxOp : Train_SoftmaxOp<"log_softmax",
    "x - log(sum(exp(x)))">;

def Train_SoftmaxGradOp : Train_Op<"softmax_grad",
    [Pure, SameOperandsAndResultType]> {
  let summary = "gradient of softmax or log_softmax from its output";
  let description = [{
    The input gradient of `train.softmax` (of `train.log_softmax` when
    `log`) from the forward `output` and its gradient, over the last
    dimension: `grad_output - sum(grad_output * output)` times `output`, or
    `grad_output - exp(output) * sum(grad_output)`. Like the forward op,
    it needs a tensor of rank >= 1.

    ```mlir
    %dx = train.softmax_grad %dy, %p : tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$grad_output,
                       Train_FloatTensor:$output, UnitAttr:$log);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$grad_output `,` $output attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Views and data movement
//===----------------------------------------------------------------------===//

def Train_TransposeOp : Train_ForwardOp<"transpose", [InferTypeOpAdaptor]> {
  let summary = "permutation of the dimensions";
  let description = [{
    `result` dimension `i` is `input` dimension `permutation[i]`
    (`torch.permute`; `transpose(a, b)` swaps two). The runtime copies.
    f32, bf16 or i32, as every view and data-movement op here.
    An identity permutation folds away, and a transpose of a transpose
    folds into one (into none when the two permutations cancel: the
    layout changes around the fused attention and rotary ops).

    ```mlir
    %t = train.transpose %x {permutation = array<i64: 0, 2, 1, 3>}
        : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
    ```
  }];
  let arguments = (ins Train_ViewTensor:$input,
                       DenseI64ArrayAttr:$permutation);
  let results = (outs Train_ViewTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

def Train_BroadcastToOp : Train_ForwardOp<"broadcast_to",
    [DeclareOpInterfaceMethods<Train_BatchResizableOpInterface>]> {
  let summary = "repeat a tensor along dimensions of size 1 or new ones";
  let description = [{
    `torch.expand`: the result's shape, aligned at the right with the
    input's, equals it where the input's dimension is not 1; new leading
    dimensions and dimensions of size 1 repeat. The runtime copies. An
    input expanded to the batch's rows (a ViT's class token,
    `cls.expand(B, -1, -1)`) and paired with the batch row for row follows
    the batch: each rank, and each micro-batch, expands it to its own rows.

    ```mlir
    %b = train.broadcast_to %row : tensor<8xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Train_ViewTensor:$input);
  let results = (outs Train_ViewTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Train_SliceOp : Train_ForwardOp<"slice", [InferTypeOpAdaptor]> {
  let summary = "a contiguous range of one dimension";
  let description = [{
    `result = input[..., start:end, ...]` along dimension `dim`, the others
    whole (`torch.narrow`, a slice with step 1, one part of `split`).
    `0 <= start <= end <= size`. A range of whole rows is a view of the
    input's buffer; any other is copied.

    ```mlir
    %h = train.slice %x {dim = 3 : i64, start = 0 : i64, end = 8 : i64}
        : tensor<2x8x4x16xf32> -> tensor<2x8x4x8xf32>
    ```
  }];
  let arguments = (ins Train_ViewTensor:$input, I64Attr:$dim, I64Attr:$start,
                       I64Attr:$end);
  let results = (outs Train_ViewTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Train_PadOp : Train_ForwardOp<"pad", [InferTypeOpAdaptor]> {
  let summary = "widen one dimension with a constant";
  let description = [{
    `low` elements of `value` before and `high` after the input along
    dimension `dim` (`torch.nn.functional.pad` of one dimension; several
    dimensions are several pads). The gradient of a slice. On i32 labels
    it is HuggingFace's shift of causal-LM labels: pad each sequence with
    the loss's ignore index, then slice off its first position.

    ```mlir
    %p = train.pad %x {dim = 1 : i64, low = 2 : i64, high = 1 : i64}
        : tensor<4x8xf32> -> tensor<4x11xf32>
    %l = train.pad %labels {dim = 1 : i64, low = 0 : i64, high = 1 : i64,
                            value = -1.000000e+02 : f32}
        : tensor<4x8xi32> -> tensor<4x9xi32>
    ```

    `value` is finite; padding an i32 tensor, it is an integer in the int32
    range.
  }];
  let arguments = (ins Train_ViewTensor:$input, I64Attr:$dim, I64Attr:$low,
                       I64Attr:$high,
                       DefaultValuedAttr<F32Attr, "0.0f">:$value);
  let results = (outs Train_ViewTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Train_ConcatOp : Train_ForwardOp<"concat", [InferTypeOpAdaptor]> {
  let summary = "join tensors along one dimension";
  let description = [{
    `torch.cat`: the inputs in order along dimension `dim`; their other
    dimensions and element types are equal.

    ```mlir
    %c = train.concat %a, %b {dim = 1 : i64}
        : (tensor<4x8xf32>, tensor<4x2xf32>) -> tensor<4x10xf32>
    ```
  }];
  let arguments = (ins Variadic<Train_ViewTensor>:$inputs, I64Attr:$dim);
  let results = (outs Train_ViewTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, results)";
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

def Train_MatmulOp : Train_ForwardOp<"matmul", [InferTypeOpAdaptor]> {
  let summary = "batched matrix product with broadcasting batch dimensions";
  let description = [{
    `result[..., i, j] = sum_k lhs[..., i, k] * rhs[..., k, j]`
    (`torch.matmul` of operands of rank >= 2): the dimensions before the
    last two are batch dimensions, broadcast as in NumPy. `transpose_lhs`
    reads `lhs` as `[..., k, i]` and `transpose_rhs` reads `rhs` as
    `[..., j, k]` (HuggingFace's Conv1D is a matmul by an `[in, out]`
    weight; `nn.Linear` by `[out, in]` with `transpose_rhs`). Accumulates in
    f32.

    ```mlir
    %y = train.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x3xf32>) -> tensor<2x4x3xf32>
    %s = train.matmul %q, %k {transpose_rhs}
        : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$lhs, Train_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

#endif // AUTOSHARD_DIALECT_TRAIN_TRAINTENSOROPS_TD
