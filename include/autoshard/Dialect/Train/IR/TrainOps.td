//===- TrainOps.td - operations of the training-graph dialect -------------===//

#ifndef AUTOSHARD_DIALECT_TRAIN_TRAINOPS_TD
#define AUTOSHARD_DIALECT_TRAIN_TRAINOPS_TD

include "autoshard/Dialect/Train/IR/TrainBase.td"
include "autoshard/Dialect/Train/IR/TrainInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"

class Train_Op<string mnemonic, list<Trait> traits = []>
    : Op<Train_Dialect, mnemonic, traits>;

// Activations, weights and their gradients: f32, or bf16 under mixed
// precision. Within one op they share an element type (checked by the shape
// rules), except where an op's description says otherwise.
def Train_FloatTensor : RankedTensorOf<[F32, BF16]>;
def Train_F32Tensor : RankedTensorOf<[F32]>;
def Train_IndexTensor : RankedTensorOf<[I32]>;
// What the view and data-movement ops (reshape, transpose, broadcast_to,
// slice, pad, concat) move: activations, and the i32 labels and ids that a
// front end reshapes, pads and slices on their way to a loss or an
// embedding (HuggingFace shifts its causal-LM labels that way).
def Train_ViewTensor : RankedTensorOf<[F32, BF16, I32]>;
def Train_ScalarTensor : 0DTensorOf<[F32]>;
// A scalar f32 that ops without a shape rule can build by themselves.
def Train_BuildableScalarTensor : 0DTensorOf<[F32]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getF32Type())";
}
def Train_StepTensor : 0DTensorOf<[I32]>;

/// A loss: a forward op whose scalar result is a mean over this rank's
/// positions (labels), where autodiff may seed the backward pass. The passes
/// that treat losses apart (a data-parallel plan averages their results
/// over the ranks, a loss ends a micro-batch) ask for this trait, not for
/// a list of ops.
def Train_Loss : NativeOpTrait<"LossTrait"> {
  let cppNamespace = "::autoshard::train";
}

/// A forward op whose gradient rule is its own (DifferentiableOpInterface).
class Train_ForwardOp<string mnemonic, list<Trait> traits = []>
    : Train_Op<mnemonic, !listconcat(traits, [Pure,
        DeclareOpInterfaceMethods<Train_DifferentiableOpInterface>])>;

//===----------------------------------------------------------------------===//
// Dense layers
//===----------------------------------------------------------------------===//

def Train_LinearOp : Train_ForwardOp<"linear", [InferTypeOpAdaptor]> {
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
// Elementwise
//===----------------------------------------------------------------------===//

class Train_ActivationOp<string mnemonic, string formula>
    : Train_ForwardOp<mnemonic, [Elementwise, SameOperandsAndResultType]> {
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
    "that GPT-2 uses (torch's `approximate=\"tanh\"`; the exact GELU, "
    "torch's default, is `train.gelu_erf`)"> {
  let summary = "Gaussian error linear unit (tanh approximation)";
}
def Train_GeluGradOp : Train_ActivationGradOp<"gelu_grad", "gelu">;

def Train_SwigluOp : Train_ForwardOp<"swiglu",
    [Elementwise, SameOperandsAndResultType]> {
  let summary = "gated SiLU of a Llama feed-forward block";
  let description = [{
    `result = silu(gate) * up`, `silu(g) = g / (1 + exp(-g))`, elementwise:
    Llama's feed-forward is `down(swiglu(gate(x), up(x)))`.

    ```mlir
    %h = train.swiglu %gate, %up : tensor<8x32xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$gate, Train_FloatTensor:$up);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
}

def Train_SwigluGradOp : Train_Op<"swiglu_grad",
    [Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = "gradient of swiglu with respect to both inputs";
  let description = [{
    `grad_gate = grad_output * up * silu'(gate)`,
    `grad_up = grad_output * silu(gate)`.

    ```mlir
    %dgate, %dup = train.swiglu_grad %dy, %gate, %up : tensor<8x32xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$grad_output, Train_FloatTensor:$gate,
                       Train_FloatTensor:$up);
  let results = (outs Train_FloatTensor:$grad_gate, Train_FloatTensor:$grad_up);
  let assemblyFormat = [{
    $grad_output `,` $gate `,` $up attr-dict `:` type($grad_gate)
  }];
}

def Train_CastOp : Train_ForwardOp<"cast", [Elementwise,
    SameOperandsAndResultShape,
    DeclareOpInterfaceMethods<Train_BatchResizableOpInterface>]> {
  let summary = "conversion between f32 and bf16";
  let description = [{
    Converts each element, rounding to nearest-even towards bf16. Mixed
    precision keeps f32 master weights and casts them to bf16 for compute;
    the gradient of a cast is the cast back.

    ```mlir
    %wb = train.cast %w : tensor<4x16xf32> to tensor<4x16xbf16>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$input);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

def Train_ReshapeOp : Train_ForwardOp<"reshape",
    [DeclareOpInterfaceMethods<Train_BatchResizableOpInterface>]> {
  let summary = "view a tensor with another shape of the same size";
  let description = [{
    Reinterprets the row-major elements of `input` with the result's shape
    (splitting heads: `[B, T, H*D]` to `[B, T, H, D]`; `logits.view(-1, V)`,
    `[B, T, V]` to `[B*T, V]`, before a loss). The element count and type
    must not change. No data moves: the runtime aliases the buffer. Takes
    f32, bf16 and i32 tensors (labels flattened for the loss).

    ```mlir
    %q4 = train.reshape %q : tensor<2x8x16xf32> to tensor<2x8x4x4xf32>
    ```
  }];
  let arguments = (ins Train_ViewTensor:$input);
  let results = (outs Train_ViewTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

def Train_ScaleOp : Train_ForwardOp<"scale",
    [Elementwise, SameOperandsAndResultType]> {
  let summary = "multiply by a constant";
  let description = [{
    `result = factor * input`, elementwise. Gradient accumulation averages
    the losses and gradients of its micro-batches with it.

    ```mlir
    %avg = train.scale %sum {factor = 0.25 : f32} : tensor<f32>
    ```

    `factor` is finite.
  }];
  let arguments = (ins Train_FloatTensor:$input, F32Attr:$factor);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Train_SliceRowsOp : Train_Op<"slice_rows", [Pure,
    DeclareOpInterfaceMethods<Train_BatchResizableOpInterface>]> {
  let summary = "a contiguous block of rows of a batch (a view)";
  let description = [{
    `result = input[offset : offset + rows]` along dimension 0, the other
    dimensions whole. Gradient accumulation cuts a batch into micro-batches
    with it. No data moves: the runtime points into the input's buffer.

    ```mlir
    %mb = train.slice_rows %ids {offset = 4 : i64}
        : tensor<8x64xi32> to tensor<4x64xi32>
    ```

    The block must lie inside the input, and the result must have the
    input's element type and inner dimensions.
  }];
  let arguments = (ins AnyRankedTensor:$input,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$offset);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Embeddings
//===----------------------------------------------------------------------===//

def Train_EmbeddingOp : Train_ForwardOp<"embedding", [InferTypeOpAdaptor]> {
  let summary = "table lookup: one row of the table per id";
  let description = [{
    `result[..., :] = table[ids[...], :]` for a table `[num_embeddings,
    dim]`; the result has the ids' shape with `dim` appended. An id outside
    the table is a runtime error naming it.

    ```mlir
    %x = train.embedding %ids, %wte
        : (tensor<2x8xi32>, tensor<64x16xf32>) -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins Train_IndexTensor:$ids, Train_FloatTensor:$table);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $table attr-dict `:` functional-type(operands, results)
  }];
}

def Train_EmbeddingGradOp : Train_Op<"embedding_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "gradient of an embedding table: scatter-add of the rows";
  let description = [{
    `grad_table[i, :] = sum of grad_output[p, :] over positions p with
    ids[p] == i`; rows of unused ids are zero.

    ```mlir
    %dwte = train.embedding_grad %dx, %ids {num_embeddings = 64 : i64}
        : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<64x16xf32>
    ```

    `grad_output` must have the ids' shape with one more dimension.
  }];
  let arguments = (ins Train_FloatTensor:$grad_output, Train_IndexTensor:$ids,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_embeddings);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $grad_output `,` $ids attr-dict `:` functional-type(operands, results)
  }];
}

def Train_AddPositionEmbeddingOp : Train_ForwardOp<"add_position_embedding",
    [InferTypeOpAdaptor]> {
  let summary = "add learned position embeddings (GPT-2's wpe)";
  let description = [{
    `result[b, t, :] = input[b, t, :] + table[t, :]` for `input [B, T, C]`
    and `table [max_positions, C]` with `T <= max_positions`.

    ```mlir
    %h = train.add_position_embedding %x, %wpe
        : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$input, Train_FloatTensor:$table);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $table attr-dict `:` functional-type(operands, results)
  }];
}

def Train_AddPositionEmbeddingGradOp : Train_Op<"add_position_embedding_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "gradient of learned position embeddings";
  let description = [{
    `grad_table[t, :] = sum over b of grad_output[b, t, :]` for `t < T`, and
    zero for the positions the sequence does not reach.

    ```mlir
    %dwpe = train.add_position_embedding_grad %dh {max_positions = 32 : i64}
        : (tensor<2x8x16xf32>) -> tensor<32x16xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$grad_output,
                       ConfinedAttr<I64Attr, [IntPositive]>:$max_positions);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $grad_output attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

def Train_LayerNormOp : Train_ForwardOp<"layer_norm", [InferTypeOpAdaptor]> {
  let summary = "layer normalization over the last dimension";
  let description = [{
    `result = (x - mean) / sqrt(var + epsilon) * gamma + beta` with the mean
    and the biased variance of the last dimension.

    ```mlir
    %y = train.layer_norm %x, %gamma, %beta {epsilon = 1.0e-5 : f32}
        : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
    ```

    `gamma` and `beta` have the last dimension's size.

    `epsilon` is finite and positive: with 0, a constant row divides 0 by 0.
  }];
  let arguments = (ins Train_FloatTensor:$input, Train_FloatTensor:$gamma,
                       Train_FloatTensor:$beta,
                       DefaultValuedAttr<F32Attr, "1.0e-5f">:$epsilon);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma `,` $beta attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Train_LayerNormGradOp : Train_Op<"layer_norm_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "gradient of layer_norm with respect to input, gamma and beta";
  let description = [{
    Recomputes the row statistics from `input`. `grad_gamma` and `grad_beta`
    are sums over the rows of this rank.

    ```mlir
    %dx, %dgamma, %dbeta = train.layer_norm_grad %dy, %x, %gamma
        {epsilon = 1.0e-5 : f32}
        : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>)
        -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
    ```

    `epsilon` is finite and positive: with 0, a constant row divides 0 by 0.
  }];
  let arguments = (ins Train_FloatTensor:$grad_output, Train_FloatTensor:$input,
                       Train_FloatTensor:$gamma,
                       DefaultValuedAttr<F32Attr, "1.0e-5f">:$epsilon);
  let results = (outs Train_FloatTensor:$grad_input,
                      Train_FloatTensor:$grad_gamma,
                      Train_FloatTensor:$grad_beta);
  let assemblyFormat = [{
    $grad_output `,` $input `,` $gamma attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Train_RmsNormOp : Train_ForwardOp<"rms_norm", [InferTypeOpAdaptor]> {
  let summary = "root-mean-square normalization over the last dimension";
  let description = [{
    `result = x / sqrt(mean(x^2) + epsilon) * weight` (Llama's RMSNorm).

    ```mlir
    %y = train.rms_norm %x, %w {epsilon = 1.0e-5 : f32}
        : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
    ```

    `epsilon` is finite and positive: with 0, a constant row divides 0 by 0.
  }];
  let arguments = (ins Train_FloatTensor:$input, Train_FloatTensor:$weight,
                       DefaultValuedAttr<F32Attr, "1.0e-5f">:$epsilon);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Train_RmsNormGradOp : Train_Op<"rms_norm_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "gradient of rms_norm with respect to input and weight";
  let description = [{
    ```mlir
    %dx, %dw = train.rms_norm_grad %dy, %x, %w {epsilon = 1.0e-5 : f32}
        : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>)
        -> (tensor<2x8x16xf32>, tensor<16xf32>)
    ```

    `epsilon` is finite and positive: with 0, a constant row divides 0 by 0.
  }];
  let arguments = (ins Train_FloatTensor:$grad_output, Train_FloatTensor:$input,
                       Train_FloatTensor:$weight,
                       DefaultValuedAttr<F32Attr, "1.0e-5f">:$epsilon);
  let results = (outs Train_FloatTensor:$grad_input,
                      Train_FloatTensor:$grad_weight);
  let assemblyFormat = [{
    $grad_output `,` $input `,` $weight attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Train_RopeOp : Train_ForwardOp<"rope", [SameOperandsAndResultType]> {
  let summary = "rotary position embedding of queries or keys";
  let description = [{
    Rotates `input [B, T, H, D]`: for `i < D/2` the pair
    `(x[..., i], x[..., i + D/2])` at position `t` turns by the angle
    `t * theta^(-2i/D)` (the rotate-half pairing of GPT-NeoX and Hugging
    Face's Llama). `D` must be even.

    ```mlir
    %q = train.rope %q0 {theta = 10000.0 : f32} : tensor<2x8x4x4xf32>
    ```

    `theta` is finite and positive.
  }];
  let arguments = (ins Train_FloatTensor:$input,
                       DefaultValuedAttr<F32Attr, "10000.0f">:$theta);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Train_RopeGradOp : Train_Op<"rope_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "gradient of rope: the inverse rotation";
  let description = [{
    ```mlir
    %dq0 = train.rope_grad %dq {theta = 10000.0 : f32} : tensor<2x8x4x4xf32>
    ```

    `theta` is finite and positive.
  }];
  let arguments = (ins Train_FloatTensor:$grad_output,
                       DefaultValuedAttr<F32Attr, "10000.0f">:$theta);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$grad_output attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Train_CausalAttentionOp : Train_ForwardOp<"causal_attention",
    [InferTypeOpAdaptor]> {
  let summary = "causal scaled-dot-product self-attention, grouped-query heads";
  let description = [{
    For `query [B, T, H, D]` and `key`, `value [B, T, Hkv, D]` with `H` a
    multiple of `Hkv` (grouped-query attention; `Hkv == H` is multi-head),
    query head `h` attends to key/value head `h / (H / Hkv)` over positions
    `j <= t`:

    ```
    p = softmax_j(scale * q[b, t, h] . k[b, j, h'])
    result[b, t, h] = sum_j p[j] v[b, j, h']
    logsumexp[b, h, t] = log sum_j exp(scale * q . k)      (f32)
    ```

    `scale` defaults to `1/sqrt(D)`. The log-sum-exp lets the gradient
    recompute the probabilities instead of storing `[B, H, T, T]` of them.

    ```mlir
    %o, %lse = train.causal_attention %q, %k, %v
        : (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>)
        -> (tensor<2x8x4x4xf32>, tensor<2x4x8xf32>)
    ```

    A given `scale` is finite.
  }];
  let arguments = (ins Train_FloatTensor:$query, Train_FloatTensor:$key,
                       Train_FloatTensor:$value,
                       OptionalAttr<F32Attr>:$scale);
  let results = (outs Train_FloatTensor:$result, Train_F32Tensor:$logsumexp);
  let assemblyFormat = [{
    $query `,` $key `,` $value attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// The scale attribute, or 1/sqrt(head_dim).
    float getScaleOrDefault();
  }];
  let hasVerifier = 1;
}

def Train_CausalAttentionGradOp : Train_Op<"causal_attention_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "gradient of causal_attention w.r.t. query, key and value";
  let description = [{
    Recomputes the probabilities from `query`, `key` and the forward's
    `logsumexp`. The key and value gradients sum over the query heads that
    share them.

    ```mlir
    %dq, %dk, %dv = train.causal_attention_grad %do, %q, %k, %v, %o, %lse
        : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>,
           tensor<2x8x2x4xf32>, tensor<2x8x4x4xf32>, tensor<2x4x8xf32>)
        -> (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>)
    ```

    A given `scale` is finite.
  }];
  let arguments = (ins Train_FloatTensor:$grad_output, Train_FloatTensor:$query,
                       Train_FloatTensor:$key, Train_FloatTensor:$value,
                       Train_FloatTensor:$result, Train_F32Tensor:$logsumexp,
                       OptionalAttr<F32Attr>:$scale);
  let results = (outs Train_FloatTensor:$grad_query,
                      Train_FloatTensor:$grad_key,
                      Train_FloatTensor:$grad_value);
  let assemblyFormat = [{
    $grad_output `,` $query `,` $key `,` $value `,` $result `,` $logsumexp
    attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    float getScaleOrDefault();
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

def Train_SoftmaxCrossEntropyOp : Train_ForwardOp<"softmax_cross_entropy",
    [Train_Loss, InferTypeOpAdaptor]> {
  let summary = "mean softmax cross-entropy of logits against class labels";
  let description = [{
    `loss = mean over counted positions p of
    -log(softmax(logits[p, :])[labels[p]])`, an f32 scalar also for bf16
    logits.

    The last dimension of `logits` indexes the classes; `labels` has the
    shape of `logits` without it. Every position counts, unless the op
    carries `ignore_index`: then the positions whose label equals it do
    not, as with `torch.nn.functional.cross_entropy(ignore_index=-100,
    reduction='mean')` (HuggingFace pads causal-LM labels with -100). When
    no position counts the loss is 0 and so is its gradient (torch: NaN).
    A counted label must lie in `[0, classes)`; the runtime checks it.
    Autodiff seeds the backward pass here, and the gradient op carries
    the same `ignore_index`.

    The mean is over this rank's positions. A data-parallel plan averages
    the ranks' losses (and gradients), as PyTorch DDP does: that is the
    mean over the global batch when every rank counts the same number of
    positions (always without `ignore_index`; with it, when each
    sequence ignores as many positions, as HuggingFace's shifted labels
    do: one per sequence), and otherwise a mean of the ranks' means.
    Gradient accumulation averages its micro-batches' means the same way.

    ```mlir
    %loss = train.softmax_cross_entropy %logits, %labels
        : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
    %hf = train.softmax_cross_entropy %logits, %labels {ignore_index = -100 : i64}
        : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
    ```

    A given `ignore_index` fits in i32, the labels' type (a wider one
    could match no label).
  }];
  let arguments = (ins Train_FloatTensor:$logits, Train_IndexTensor:$labels,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Train_ScalarTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Train_SoftmaxCrossEntropyGradOp : Train_Op<"softmax_cross_entropy_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "gradient of the mean softmax cross-entropy w.r.t. the logits";
  let description = [{
    `grad_logits[p, :] = (softmax(logits[p, :]) - onehot(labels[p])) /
    counted * grad_loss` for a counted position `p`, zero for a position
    whose label is `ignore_index`; `counted` is the number of counted
    positions (all of them without `ignore_index`), `grad_loss` 1 when it
    is absent. With no counted position the gradient is zero.

    ```mlir
    %dlogits = train.softmax_cross_entropy_grad %logits, %labels
        : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<8x10xf32>
    %dhf = train.softmax_cross_entropy_grad %logits, %labels {ignore_index = -100 : i64}
        : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<8x10xf32>
    ```

    `labels` must have the shape of `logits` without its last dimension;
    a given `ignore_index` fits in i32.
  }];
  let arguments = (ins Train_FloatTensor:$logits, Train_IndexTensor:$labels,
                       Optional<Train_ScalarTensor>:$grad_loss,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels (`,` $grad_loss^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Train_NllLossOp : Train_ForwardOp<"nll_loss",
    [Train_Loss, InferTypeOpAdaptor]> {
  let summary = "mean negative log-likelihood of log-probabilities";
  let description = [{
    `loss = mean over counted positions p of -input[p, labels[p]]`, an f32
    scalar also for bf16 input: `torch.nn.functional.nll_loss` with
    `reduction='mean'` and no class weights. `input` holds
    log-probabilities (a `train.log_softmax`'s result), but any values are
    accepted.

    It follows `train.softmax_cross_entropy` in everything else: the last
    dimension of `input` indexes the classes and `labels` has the shape of
    `input` without it; with `ignore_index` the positions whose label
    equals it do not count (torch's default is -100); when no position
    counts the loss is 0 and so is its gradient (torch: NaN); a counted
    label must lie in `[0, classes)` (the runtime checks it); the mean is
    over this rank's positions, and a data-parallel plan averages the ranks'
    losses as it does the cross-entropy's. autoshard-raise rewrites
    `nll_loss(log_softmax(x), labels)` into `softmax_cross_entropy(x,
    labels)` when nothing else reads the log-probabilities.

    ```mlir
    %logp = train.log_softmax %logits : tensor<8x10xf32>
    %loss = train.nll_loss %logp, %labels {ignore_index = -100 : i64}
        : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
    ```

    A given `ignore_index` fits in i32, the labels' type.
  }];
  let arguments = (ins Train_FloatTensor:$input, Train_IndexTensor:$labels,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Train_ScalarTensor:$result);
  let assemblyFormat = [{
    $input `,` $labels attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Train_NllLossGradOp : Train_Op<"nll_loss_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "gradient of the mean negative log-likelihood w.r.t. its input";
  let description = [{
    `grad_input[p, c] = -grad_loss / counted` where `c = labels[p]` for a
    counted position `p`, zero everywhere else; `counted` is the number of
    counted positions (all of them without `ignore_index`), `grad_loss` 1
    when it is absent. With no counted position the gradient is zero.
    `input` gives only the result's type; its values are not read.

    ```mlir
    %dlogp = train.nll_loss_grad %logp, %labels, %dloss {ignore_index = -100 : i64}
        : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xf32>
    ```

    `labels` must have the shape of `input` without its last dimension;
    a given `ignore_index` fits in i32.
  }];
  let arguments = (ins Train_FloatTensor:$input, Train_IndexTensor:$labels,
                       Optional<Train_ScalarTensor>:$grad_loss,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $labels (`,` $grad_loss^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Flat shards
//===----------------------------------------------------------------------===//

// A tensor of `numel` elements sharded over the `n` ranks of the grid axes
// `grid_axes`: flattened, zero-padded to n * k elements, k = ceil(numel / n),
// the rank with index i in the group holding elements [i*k, (i+1)*k).
// Upstream shard collectives split a dimension evenly; these ops carry the
// flat, padded layout ZeRO and FSDP shard parameters, gradients and
// optimizer states in.
// The collectives are not Pure: CSE must not merge the gathers a plan
// placed apart (a parameter released after the forward pass is gathered
// again for the backward pass), and every rank must run every collective.
class Train_ShardOp<string mnemonic, list<Trait> traits = []>
    : Train_Op<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
  let extraClassDeclaration = [{
    /// The ranks in the group: the product of the grid's masked dims.
    int64_t getGroupSize();
  }];
}

def Train_ShardOfOp : Train_ShardOp<"shard_of", [Pure]> {
  let summary = "this rank's flat shard of a replicated tensor (no communication)";
  let description = [{
    ```
    ranks 0 1 (grid_axes [0]), input [a b c] on both:
      rank 0: [a b]   rank 1: [c 0]
    ```

    ```mlir
    %s = train.shard_of %w on @world grid_axes = [0]
        : tensor<3xf32> -> tensor<2xf32>
    ```

    The result is 1-D with ceil(numel / n) elements of the input's type.
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$grid_axes);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `on` $grid `grid_axes` `=` $grid_axes attr-dict `:`
    type($input) `->` type($result)
  }];
}

def Train_AllGatherShardsOp : Train_ShardOp<"all_gather_shards"> {
  let summary = "full tensors from every rank's flat shards";
  let description = [{
    ```
    rank 0: [a b]   rank 1: [c 0]   ->   both: [a b c]
    ```

    Several operands form one bucket: one collective for all of them
    (FSDP gathers a transformer block's parameters together).

    ```mlir
    %w = train.all_gather_shards %s on @world grid_axes = [0]
        : tensor<2xf32> -> tensor<3xf32>
    %a, %b = train.all_gather_shards %sa, %sb on @world grid_axes = [0]
        : tensor<2xf32>, tensor<6xf32> -> tensor<3xf32>, tensor<3x4xf32>
    ```

    Result i is operand i's full tensor; operand i is its flat shard.
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs,
                       FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$grid_axes);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    $inputs `on` $grid `grid_axes` `=` $grid_axes attr-dict `:`
    type($inputs) `->` type($results)
  }];
}

def Train_ReduceScatterShardsOp : Train_ShardOp<"reduce_scatter_shards"> {
  let summary = "this rank's flat shards of the reduction of every rank's tensors";
  let description = [{
    ```
    rank 0: [a b c]   rank 1: [d e f]   (average)
      rank 0: [(a+d)/2 (b+e)/2]   rank 1: [(c+f)/2 0]
    ```

    Several operands form one bucket (ZeRO-2/3's bucketed gradient
    reduction).

    ```mlir
    %gs = train.reduce_scatter_shards %g on @world grid_axes = [0]
        reduction = average : tensor<3xf32> -> tensor<2xf32>
    ```

    Result i is operand i's flat shard.
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs,
                       FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$grid_axes,
                       Train_Reduction:$reduction);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    $inputs `on` $grid `grid_axes` `=` $grid_axes `reduction` `=` $reduction
    attr-dict `:` type($inputs) `->` type($results)
  }];
}

def Train_AllReduceBucketOp : Train_ShardOp<"all_reduce_bucket"> {
  let summary = "one all-reduce over several tensors (a DDP gradient bucket)";
  let description = [{
    Reduces every operand over the group as `shard.all_reduce` would, in one
    collective: PyTorch DDP's gradient buckets. `autoshard-group-collectives`
    forms them from the all-reduces of gradients, up to the plan's bucket
    cap.

    ```mlir
    %a, %b = train.all_reduce_bucket %ga, %gb on @world grid_axes = [0]
        reduction = average : tensor<4x5xf32>, tensor<3xf32>
                           -> tensor<4x5xf32>, tensor<3xf32>
    ```

    Result i has operand i's type.
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs,
                       FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$grid_axes,
                       Train_Reduction:$reduction);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    $inputs `on` $grid `grid_axes` `=` $grid_axes `reduction` `=` $reduction
    attr-dict `:` type($inputs) `->` type($results)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::ValueRange":$inputs, "::llvm::StringRef":$grid,
                   "::llvm::ArrayRef<int16_t>":$gridAxes,
                   "::autoshard::train::Reduction":$reduction)>
  ];
}

def Train_CollectiveStartOp : Train_ShardOp<"collective_start", [
    MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "issue a collective; its results arrive at the matching wait";
  let description = [{
    Issues the collective `kind` (as `shard.all_reduce`/`all_reduce_bucket`,
    `train.all_gather_shards` or `train.reduce_scatter_shards` would run it,
    with the same operands and attributes) and returns at once; the
    collective runs while the ops between the start and its
    `train.collective_wait` compute. The inputs must not change before the
    wait (they are SSA values, so they cannot); the handle's types are the
    results the wait yields. `autoshard-schedule-collectives` turns
    collectives into start/wait pairs and moves them apart.

    ```mlir
    %h = train.collective_start all_gather_shards %s0, %s1 on @world
        grid_axes = [0] : tensor<6xf32>, tensor<2xf32>
        -> !train.pending<tensor<3x4xf32>, tensor<3xf32>>
    ...                                    // computes while it gathers
    %w, %b = train.collective_wait %h : !train.pending<tensor<3x4xf32>, tensor<3xf32>>
    ```

    Every start has exactly one wait; collectives run in the order they
    start, which is the same on every rank.
  }];
  let arguments = (ins Train_CollectiveKind:$kind,
                       Variadic<AnyRankedTensor>:$inputs,
                       FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$grid_axes,
                       OptionalAttr<Train_Reduction>:$reduction);
  let results = (outs Train_PendingType:$handle);
  let assemblyFormat = [{
    $kind $inputs `on` $grid `grid_axes` `=` $grid_axes
    (`reduction` `=` $reduction^)? attr-dict `:` type($inputs) `->`
    qualified(type($handle))
  }];
  let hasVerifier = 1;
}

def Train_CollectiveWaitOp : Train_Op<"collective_wait", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "the results of a started collective, once it completes";
  let description = [{
    Blocks until the collective of `handle` completes and yields its
    results, one per type of the handle.

    ```mlir
    %g = train.collective_wait %h : !train.pending<tensor<3x4xf32>>
    ```
  }];
  let arguments = (ins Train_PendingType:$handle);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = "$handle attr-dict `:` qualified(type($handle))";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

def Train_SgdOp : Train_Op<"sgd", [Pure, InferTypeOpAdaptor,
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<Train_OptimizerOpInterface>]> {
  let summary = "stochastic gradient descent step with optional momentum";
  let description = [{
    One step of `torch.optim.SGD` (dampening 0) on one parameter:

    ```
    g        = grad_scale * grad + weight_decay * param
    buf'     = momentum * buf + g                       (momentum != 0)
    d        = nesterov ? g + momentum * buf' : buf'    (g when momentum == 0)
    param'   = param - lr * d
    ```

    `lr` is a scalar tensor (usually a `hyper` argument of the step, so the
    training binary can override it). The momentum buffer is an operand and
    a result exactly when `momentum` is not zero. `grad_scale` (a global-norm
    clipping coefficient) is optional. The parameter and the buffer are f32;
    the gradient may be bf16.

    ```mlir
    %p1 = train.sgd %p, %g, %lr
        : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
    %p2, %m2 = train.sgd %p, %g, %lr momentum_buffer %m {momentum = 0.9 : f32}
        : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>, tensor<4x16xf32>)
        -> (tensor<4x16xf32>, tensor<4x16xf32>)
    ```

    `grad` and the buffer must have the parameter's shape; `momentum` and
    `weight_decay` must be finite and non-negative; `nesterov` needs a
    non-zero momentum.
  }];
  let arguments = (ins Train_F32Tensor:$param, Train_FloatTensor:$grad,
                       Train_ScalarTensor:$lr,
                       Optional<Train_F32Tensor>:$momentum_buffer,
                       Optional<Train_ScalarTensor>:$grad_scale,
                       DefaultValuedAttr<F32Attr, "0.0f">:$momentum,
                       DefaultValuedAttr<F32Attr, "0.0f">:$weight_decay,
                       DefaultValuedAttr<BoolAttr, "false">:$nesterov);
  let results = (outs Train_F32Tensor:$new_param,
                      Optional<Train_F32Tensor>:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $lr (`momentum_buffer` $momentum_buffer^)?
    (`grad_scale` $grad_scale^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Train_AdamwOp : Train_Op<"adamw", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Train_OptimizerOpInterface>]> {
  let summary = "AdamW step (decoupled weight decay, bias correction)";
  let description = [{
    One step of `torch.optim.AdamW` on one parameter, at step `t` (the
    already incremented counter, starting at 1):

    ```
    g      = grad_scale * grad
    param' = param * (1 - lr * weight_decay)
    m'     = beta1 m + (1 - beta1) g
    v'     = beta2 v + (1 - beta2) g^2
    param' = param' - lr * (m' / (1 - beta1^t)) / (sqrt(v' / (1 - beta2^t)) + eps)
    ```

    Parameter and moments are f32; the gradient may be bf16.

    ```mlir
    %p1, %m1, %v1 = train.adamw %p, %g, %m, %v, %lr, %t
        {beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32,
         weight_decay = 0.1 : f32}
        : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>,
           tensor<f32>, tensor<i32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
    ```

    `beta1` and `beta2` lie in [0, 1); `eps` is positive; `weight_decay` is
    non-negative; all finite.
  }];
  let arguments = (ins Train_F32Tensor:$param, Train_FloatTensor:$grad,
                       Train_F32Tensor:$exp_avg, Train_F32Tensor:$exp_avg_sq,
                       Train_ScalarTensor:$lr, Train_StepTensor:$step,
                       Optional<Train_ScalarTensor>:$grad_scale,
                       DefaultValuedAttr<F32Attr, "0.9f">:$beta1,
                       DefaultValuedAttr<F32Attr, "0.999f">:$beta2,
                       DefaultValuedAttr<F32Attr, "1.0e-8f">:$eps,
                       DefaultValuedAttr<F32Attr, "0.01f">:$weight_decay);
  let results = (outs Train_F32Tensor:$new_param, Train_F32Tensor:$new_exp_avg,
                      Train_F32Tensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $lr `,` $step
    (`grad_scale` $grad_scale^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Train_IncrementOp : Train_Op<"increment",
    [Pure, SameOperandsAndResultType]> {
  let summary = "the optimizer's step counter plus one";
  let description = [{
    ```mlir
    %t1 = train.increment %t : tensor<i32>
    ```
  }];
  let arguments = (ins Train_StepTensor:$input);
  let results = (outs Train_StepTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Train_SumOfSquaresOp : Train_Op<"sum_of_squares", [Pure]> {
  let summary = "the squared global L2 norm of a set of tensors";
  let description = [{
    `result = sum over every element x of every input of x^2`, in f32
    (summed in double). With a clipping coefficient it implements
    `torch.nn.utils.clip_grad_norm_`.

    ```mlir
    %ss = train.sum_of_squares %dw, %db : tensor<4x16xf32>, tensor<4xbf16>
    ```
  }];
  let arguments = (ins Variadic<Train_FloatTensor>:$inputs);
  let results = (outs Train_BuildableScalarTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
  let hasVerifier = 1;
}

def Train_ClipCoefficientOp : Train_Op<"clip_coefficient",
    [Pure, SameOperandsAndResultType]> {
  let summary = "gradient-clipping factor from a squared global norm";
  let description = [{
    `result = min(1, max_norm / (sqrt(sum_of_squares) + 1e-6))`, the factor
    by which `clip_grad_norm_` scales every gradient. `max_norm` is
    positive and finite.

    ```mlir
    %c = train.clip_coefficient %ss {max_norm = 1.0 : f32} : tensor<f32>
    ```
  }];
  let arguments = (ins Train_ScalarTensor:$sum_of_squares, F32Attr:$max_norm);
  let results = (outs Train_ScalarTensor:$result);
  let assemblyFormat = "$sum_of_squares attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Offload (autoshard-offload): transfers between device memory, host memory
// and NVMe files. Ops marked `train.on_host` run on the host and read and
// write host values; every value that crosses goes through one of these.
//===----------------------------------------------------------------------===//

def Train_ToHostOp : Train_Op<"to_host", [SameOperandsAndResultType]> {
  let summary = "copy a device tensor to host memory";
  let description = [{
    A gradient on its way to the optimizer on the host (ZeRO-Offload), or a
    device tensor that a host op reads. The copy is exact. Each copy is a
    buffer of its own (it allocates, so CSE does not merge copies).

    ```mlir
    %gh = train.to_host %g : tensor<1024xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs Res<AnyRankedTensor, "", [MemAlloc]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Train_ToDeviceOp : Train_Op<"to_device", [SameOperandsAndResultType]> {
  let summary = "copy a host tensor to device memory";
  let description = [{
    An updated parameter, a compute copy cast on the host, or an offloaded
    parameter shard on its way to a gather. Each copy is a buffer of its
    own that lives only until its last reader (it allocates, so CSE does
    not merge copies): the device holds offloaded state only while it is
    in use.

    ```mlir
    %wd = train.to_device %wh : tensor<1024xbf16>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs Res<AnyRankedTensor, "", [MemAlloc]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Train_NvmeReadOp : Train_Op<"nvme_read", [SameOperandsAndResultType]> {
  let summary = "read an argument kept in an NVMe file into host memory";
  let description = [{
    `source` is an argument of the step with `train.memory = #train.memory<nvme>`;
    the result is its value in a host buffer that lives until its last use.
    Each read is its own buffer (it allocates, so CSE does not merge reads).

    ```mlir
    %m = train.nvme_read %exp_avg : tensor<1024xf32>
    ```
  }];
  let arguments = (ins Arg<AnyRankedTensor, "the NVMe-resident argument",
                           [MemRead]>:$source);
  let results = (outs Res<AnyRankedTensor, "", [MemAlloc]>:$result);
  let assemblyFormat = "$source attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Train_NvmeWriteOp : Train_Op<"nvme_write", [
    AllTypesMatch<["value", "target", "result"]>]> {
  let summary = "write the new value of an NVMe-resident argument to its file";
  let description = [{
    Writes the host tensor `value` as the new value of `target`, an argument
    with `train.memory = #train.memory<nvme>`, and yields it: the step
    returns the result as the update of `target`, which the runtime does
    not copy anywhere else.

    ```mlir
    %m2 = train.nvme_write %m1 to %exp_avg : tensor<1024xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$value,
                       Arg<AnyRankedTensor, "the NVMe-resident argument",
                           [MemWrite]>:$target);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$value `to` $target attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Train_TransferStartOp : Train_Op<"transfer_start", [
    MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "issue an offload transfer; its result arrives at the matching wait";
  let description = [{
    Starts the transfer `kind` (as `train.to_host`, `train.to_device`,
    `train.nvme_read` or `train.nvme_write` would run it: `input` is the
    copied value, the NVMe argument read, or the value written to `target`)
    and returns at once; it runs on the runtime's offload stream while the
    ops between the start and its `train.transfer_wait` compute.
    `autoshard-schedule-collectives` splits transfers into start/wait pairs
    and moves them apart (NVMe reads and copies of offloaded state are
    prefetched).

    ```mlir
    %h = train.transfer_start nvme_read %exp_avg : tensor<1024xf32>
        -> !train.pending<tensor<1024xf32>>
    ...                                   // computes while it reads
    %m = train.transfer_wait %h : !train.pending<tensor<1024xf32>>
    %h2 = train.transfer_start nvme_write %m2 to %exp_avg : tensor<1024xf32>
        : tensor<1024xf32> -> !train.pending<tensor<1024xf32>>
    ```

    Every start has exactly one wait.
  }];
  let arguments = (ins Train_TransferKind:$kind, AnyRankedTensor:$input,
                       Optional<AnyRankedTensor>:$target);
  let results = (outs Train_PendingType:$handle);
  let assemblyFormat = [{
    $kind $input (`to` $target^ `:` type($target))? attr-dict `:`
    type($input) `->` qualified(type($handle))
  }];
  let hasVerifier = 1;
}

def Train_TransferWaitOp : Train_Op<"transfer_wait", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "the result of a started transfer, once it completes";
  let description = [{
    ```mlir
    %m = train.transfer_wait %h : !train.pending<tensor<1024xf32>>
    ```
  }];
  let arguments = (ins Train_PendingType:$handle);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$handle attr-dict `:` qualified(type($handle))";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused ops (autoshard-fuse)
//===----------------------------------------------------------------------===//

// What one runtime kernel computes for a group of the ops above. Only
// `autoshard-fuse` creates them, after the strategy pipeline and right
// before the lowering, which turns each into one call; no pass before it
// knows them (they have no gradient rule and no partitioning rule).

/// A fused op; `unfused` names the op each result stands for, in result
/// order, for what the memory plan reports about the result's buffer.
class Train_FusedOp<string mnemonic, list<string> unfused,
                    list<Trait> traits = []>
    : Train_Op<mnemonic, !listconcat(traits, [Pure])> {
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The op of the unfused step whose result result #`index` is.
    static ::llvm::StringRef getUnfusedOpName(unsigned index) {
      static const char *const names[] = {}] #
      !interleave(!foreach(name, unfused, "\"" # name # "\""), ", ") # [{};
      return names[index];
    }
  }];
}

def Train_LinearGeluOp : Train_FusedOp<"linear_gelu",
    ["train.linear", "train.gelu"]> {
  let summary = "a linear layer with a bias and the GELU of its result";
  let description = [{
    `pre_activation = train.linear(input, weight, bias)` and
    `result = train.gelu(pre_activation)` as one kernel (a GPU runs it as one
    GEMM with a GELU epilogue). Both results are produced: the backward pass
    reads the pre-activation.

    ```
      x ──┐
      W ──┼─ linear ─► pre ─ gelu ─► y        ==>   x, W, b ─ linear_gelu ─► pre, y
      b ──┘
    ```

    ```mlir
    %pre, %y = train.linear_gelu %x, %w, %b
        : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>)
        -> (tensor<8x4xf32>, tensor<8x4xf32>)
    ```

    The operands follow `train.linear`'s shape rule (the bias is required);
    both results have the type `train.linear` infers.
  }];
  let arguments = (ins Train_FloatTensor:$input, Train_FloatTensor:$weight,
                       Train_FloatTensor:$bias);
  let results = (outs Train_FloatTensor:$pre_activation,
                      Train_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias attr-dict `:` functional-type(operands, results)
  }];
}

def Train_LinearGradGeluOp : Train_FusedOp<"linear_grad_gelu",
    ["train.gelu_grad", "train.bias_grad"]> {
  let summary = "a linear layer's input gradient through GELU's derivative";
  let description = [{
    `grad_pre_activation = train.gelu_grad(train.linear_grad_input(
    grad_output, weight), pre_activation)` and, when the op has a second
    result, `bias_grad = train.bias_grad(grad_pre_activation)`, as one kernel
    (a GPU runs it as one GEMM whose epilogue applies GELU's derivative and
    reduces the bias gradient). The input gradient in between is never
    materialized.

    ```mlir
    %dpre, %db = train.linear_grad_gelu %dy, %w, %pre
        : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<8x4xf32>)
        -> (tensor<8x4xf32>, tensor<4xf32>)
    ```

    `grad_output` and `weight` follow `train.linear_grad_input`'s shape rule,
    whose result must have `pre_activation`'s type, which is also the first
    result's; the bias gradient is `train.bias_grad`'s of the first result.
  }];
  let arguments = (ins Train_FloatTensor:$grad_output, Train_FloatTensor:$weight,
                       Train_FloatTensor:$pre_activation);
  let results = (outs Train_FloatTensor:$grad_pre_activation,
                      Optional<Train_FloatTensor>:$bias_grad);
  let assemblyFormat = [{
    $grad_output `,` $weight `,` $pre_activation attr-dict `:`
    functional-type(operands, results)
  }];
}

def Train_LinearGradWeightBiasOp : Train_FusedOp<"linear_grad_weight_bias",
    ["train.linear_grad_weight", "train.bias_grad"]> {
  let summary = "a linear layer's weight and bias gradients of one output gradient";
  let description = [{
    `weight_grad = train.linear_grad_weight(grad_output, input)` and
    `bias_grad = train.bias_grad(grad_output)` as one kernel (a GPU runs it as
    one GEMM whose epilogue reduces the bias gradient).

    ```mlir
    %dw, %db = train.linear_grad_weight_bias %dy, %x
        : (tensor<8x4xf32>, tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4xf32>)
    ```

    The operands follow `train.linear_grad_weight`'s shape rule; the results
    have the types `train.linear_grad_weight` and `train.bias_grad` infer.
  }];
  let arguments = (ins Train_FloatTensor:$grad_output, Train_FloatTensor:$input);
  let results = (outs Train_FloatTensor:$weight_grad,
                      Train_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $grad_output `,` $input attr-dict `:` functional-type(operands, results)
  }];
}

def Train_AdamwMultiOp : Train_FusedOp<"adamw_multi", [], [
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<Train_OptimizerOpInterface>]> {
  let summary = "AdamW steps of several parameters as one multi-tensor update";
  let description = [{
    `n` (at least two) `train.adamw` updates that share the learning rate,
    the step, the clipping scale, the betas, `eps` and the gradients' element
    type, as one multi-tensor kernel (PyTorch's `foreach`/fused AdamW). Tensor
    `i` is updated exactly as `train.adamw` updates it, with the weight decay
    `weight_decays[i]`. The results are the `n` new parameters, then the `n`
    new first moments, then the `n` new second moments.

    ```mlir
    %r:6 = train.adamw_multi params(%p, %q) grads(%gp, %gq)
        exp_avgs(%mp, %mq) exp_avg_sqs(%vp, %vq) lr(%lr) step(%t)
        {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32,
         weight_decays = array<f32: 0.1, 0.0>}
        : (tensor<16x4xf32>, tensor<4xf32>, tensor<16x4xf32>, tensor<4xf32>,
           tensor<16x4xf32>, tensor<4xf32>, tensor<16x4xf32>, tensor<4xf32>,
           tensor<f32>, tensor<i32>)
        -> (tensor<16x4xf32>, tensor<4xf32>, tensor<16x4xf32>, tensor<4xf32>,
            tensor<16x4xf32>, tensor<4xf32>)
    ```

    Every operand group has `n` members, as has `weight_decays`; each tensor
    follows `train.adamw`'s shape rule, and its three results have its
    parameter's type. The attributes follow `train.adamw`'s rules; no tensor
    reads a value another one updates (their updates run at once).
  }];
  let arguments = (ins Variadic<Train_F32Tensor>:$params,
                       Variadic<Train_FloatTensor>:$grads,
                       Variadic<Train_F32Tensor>:$exp_avgs,
                       Variadic<Train_F32Tensor>:$exp_avg_sqs,
                       Train_ScalarTensor:$lr, Train_StepTensor:$step,
                       Optional<Train_ScalarTensor>:$grad_scale,
                       F32Attr:$beta1, F32Attr:$beta2, F32Attr:$eps,
                       DenseF32ArrayAttr:$weight_decays);
  let results = (outs Variadic<Train_F32Tensor>:$results);
  let assemblyFormat = [{
    `params` `(` $params `)` `grads` `(` $grads `)`
    `exp_avgs` `(` $exp_avgs `)` `exp_avg_sqs` `(` $exp_avg_sqs `)`
    `lr` `(` $lr `)` `step` `(` $step `)`
    (`grad_scale` `(` $grad_scale^ `)`)? attr-dict `:`
    functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// How many parameters the op updates.
    unsigned getNumTensors() { return getParams().size(); }
    ::mlir::Value getNewParam(unsigned i) { return getResult(i); }
    ::mlir::Value getNewExpAvg(unsigned i) {
      return getResult(getNumTensors() + i);
    }
    ::mlir::Value getNewExpAvgSq(unsigned i) {
      return getResult(2 * getNumTensors() + i);
    }
  }];
}

include "autoshard/Dialect/Train/IR/TrainTensorOps.td"

#endif // AUTOSHARD_DIALECT_TRAIN_TRAINOPS_TD
