//===- TrainBase.td - the training-graph dialect, enums and attributes ----===//

#ifndef AUTOSHARD_DIALECT_TRAIN_TRAINBASE_TD
#define AUTOSHARD_DIALECT_TRAIN_TRAINBASE_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"

def Train_Dialect : Dialect {
  let name = "train";
  let cppNamespace = "::autoshard::train";
  let useDefaultTypePrinterParser = 1;
  let summary = "Training-step graphs: layers, losses, gradients, optimizers";
  let description = [{
    The `train` dialect expresses one training step of a neural network as a
    pure function on ranked tensors: the forward computation, the loss, the
    gradients and the optimizer update.

    A training step is a `func.func` carrying the unit attribute
    `train.step`. Each argument and result is tagged with its role and a name:

    ```mlir
    func.func @train_step(
        %w: tensor<4x16xf32> {train.role = #train.role<param>,
                              train.name = "fc.weight",
                              train.init = #train.init<normal, std = 0.25>},
        %x: tensor<8x16xf32> {train.role = #train.role<input>, train.name = "x"},
        %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"},
        %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr",
                          train.init = #train.init<constant, value = 0.1>})
        -> (tensor<4x16xf32> {train.role = #train.role<param>,
                              train.name = "fc.weight"},
            tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
        attributes {train.step} { ... }
    ```

    A `param` argument may name the unit it belongs to with `train.unit`, a
    string in the form of a name: the module path of its transformer block,
    `train.unit = "h.3"` or `"model.layers.3"`. The unit is what
    `autoshard-partition` gathers together under the `block` gather unit,
    what `autoshard-checkpoint-activations` recomputes as one block and what
    the cost model counts as one layer; parameters without it (embeddings,
    the final norm, the output projection) form one root unit. Units are
    ordered by their first appearance among the arguments (`shard-gen`
    declares blocks in forward order, so unit `i` is block `i`). No pass
    reads structure from a parameter's name: an imported model's names mean
    nothing to the compiler, its `train.unit` attributes do. Only `param`
    arguments carry it (their optimizer states follow them through the
    plan).

    A `param` argument may list further names it is saved under with
    `train.aliases`, a non-empty array of distinct names: one tensor that
    a PyTorch module holds under several names (tied weights, HF GPT-2's
    `transformer.wte.weight` and `lm_head.weight`) is one step parameter,
    but its `state_dict` has every name. The training binary writes the
    parameter under `train.name` and again, a copy, under each alias
    (`--save-params`, `--save-best`, `shard-ckpt consolidate`), and
    `--load-params` accepts a file that holds it under an alias
    (docs/RuntimeABI.md, "Parameter and gradient files"). No alias may be
    the name or an alias of any argument, its own included.

    ```mlir
    %wte: tensor<50257x768xf32> {train.role = #train.role<param>,
                                 train.name = "transformer.wte.weight",
                                 train.aliases = ["lm_head.weight"],
                                 train.init = #train.init<load>}
    ```

    A `param` argument may also carry `train.weight_decay`, a finite float
    >= 0: that parameter's weight decay, which `autoshard-autodiff` gives
    its optimizer update instead of the `train.optimizer` rule (decay of
    the optimizer's `weight_decay` on parameters of rank >= 2, none on the
    others). It is how a front end states PyTorch's parameter groups (a
    group of norm gains and biases with `"weight_decay": 0.0` beside one
    of matrices with 0.1); plain `torch.optim.AdamW(model.parameters())`,
    which decays every parameter, is every parameter carrying the
    optimizer's value.

    ```mlir
    %ln: tensor<768xf32> {train.role = #train.role<param>, train.name = "ln_f.weight",
                          train.init = #train.init<ones>,
                          train.weight_decay = 0.0 : f64}
    ```

    A result whose role is `param` or `opt_state` is the new value of the
    argument of the same name. Arguments with role `input` or `label` are
    batches whose dimension 0 is the global batch; distribution passes split
    it across ranks. The step's tensors are the global (unsharded) program
    until `autoshard-partition` rewrites them into the per-rank program and
    marks the function `train.partitioned`.
  }];
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    // Names of the discardable attributes this dialect gives meaning to.
    static constexpr ::llvm::StringLiteral kStepAttrName = "train.step";
    static constexpr ::llvm::StringLiteral kRoleAttrName = "train.role";
    static constexpr ::llvm::StringLiteral kNameAttrName = "train.name";
    static constexpr ::llvm::StringLiteral kInitAttrName = "train.init";
    // The unit (module path of a transformer block) a param belongs to.
    static constexpr ::llvm::StringLiteral kUnitAttrName = "train.unit";
    // Further names a param is saved under (tied weights).
    static constexpr ::llvm::StringLiteral kAliasesAttrName = "train.aliases";
    // A param's own weight decay, which autodiff's optimizer update takes
    // instead of the optimizer's rule.
    static constexpr ::llvm::StringLiteral kWeightDecayAttrName =
        "train.weight_decay";
    static constexpr ::llvm::StringLiteral kPlanAttrName = "train.plan";
    static constexpr ::llvm::StringLiteral kPartitionedAttrName =
        "train.partitioned";
    static constexpr ::llvm::StringLiteral kMemoryPlanAttrName =
        "train.memory_plan";
    // Marks an op that recomputes a forward value in the backward pass, so
    // that common-subexpression elimination does not merge it with the
    // original and undo the checkpointing.
    static constexpr ::llvm::StringLiteral kRecomputeAttrName =
        "train.recompute";
    static constexpr ::llvm::StringLiteral kOptimizerAttrName =
        "train.optimizer";
    static constexpr ::llvm::StringLiteral kMaxGradNormAttrName =
        "train.max_grad_norm";
    static constexpr ::llvm::StringLiteral kMicroBatchesAttrName =
        "train.micro_batches";
    static constexpr ::llvm::StringLiteral kShardAttrName = "train.shard";
    // Where an offloaded argument or result lives (#train.memory<host> or
    // <nvme>; device when absent), and the unit attribute of an op that
    // runs on the host (autoshard-offload).
    static constexpr ::llvm::StringLiteral kMemoryAttrName = "train.memory";
    static constexpr ::llvm::StringLiteral kOnHostAttrName = "train.on_host";
  }];
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Train_Role : I32EnumAttr<"Role", "role of a training-step argument or result", [
  I32EnumAttrCase<"Param", 0, "param">,
  I32EnumAttrCase<"OptState", 1, "opt_state">,
  I32EnumAttrCase<"Input", 2, "input">,
  I32EnumAttrCase<"Label", 3, "label">,
  I32EnumAttrCase<"Hyper", 4, "hyper">,
  I32EnumAttrCase<"Loss", 5, "loss">,
  I32EnumAttrCase<"Grad", 6, "grad">,
  // The squared global norm of the gradients before clipping, which
  // autodiff returns from a clipped step for the driver to log.
  I32EnumAttrCase<"GradNormSq", 7, "grad_norm_sq">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::autoshard::train";
}

def Train_InitKind : I32EnumAttr<"InitKind", "how an argument is initialised", [
  I32EnumAttrCase<"Zeros", 0, "zeros">,
  I32EnumAttrCase<"Ones", 1, "ones">,
  I32EnumAttrCase<"Normal", 2, "normal">,
  I32EnumAttrCase<"Uniform", 3, "uniform">,
  I32EnumAttrCase<"Constant", 4, "constant">,
  // The value comes from a file (--load-params or --resume).
  I32EnumAttrCase<"Load", 5, "load">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::autoshard::train";
}

def Train_Placement : I32EnumAttr<"Placement",
    "how a class of training state is laid out across the ranks of a grid", [
  I32EnumAttrCase<"Replicated", 0, "replicated">,
  I32EnumAttrCase<"Sharded", 1, "sharded">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::autoshard::train";
}

def Train_MemorySpace : I32EnumAttr<"MemorySpace",
    "where a tensor of a training step lives", [
  I32EnumAttrCase<"Device", 0, "device">,
  I32EnumAttrCase<"Host", 1, "host">,
  I32EnumAttrCase<"Nvme", 2, "nvme">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::autoshard::train";
}

def Train_Reduction : I32EnumAttr<"Reduction",
    "how a sharded collective combines the ranks' values", [
  I32EnumAttrCase<"Sum", 0, "sum">,
  I32EnumAttrCase<"Average", 1, "average">
]> {
  let cppNamespace = "::autoshard::train";
}

def Train_Unit : I32EnumAttr<"Unit",
    "the group of parameters whose collectives a plan schedules together", [
  I32EnumAttrCase<"Param", 0, "param">,
  I32EnumAttrCase<"Block", 1, "block">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::autoshard::train";
}

def Train_Reshard : I32EnumAttr<"Reshard",
    "when sharded parameters gathered for compute are released", [
  I32EnumAttrCase<"AfterForward", 0, "after_forward">,
  I32EnumAttrCase<"AfterBackward", 1, "after_backward">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::autoshard::train";
}

def Train_ReduceDtype : I32EnumAttr<"ReduceDtype",
    "the element type gradients are reduced in", [
  I32EnumAttrCase<"Gradient", 0, "gradient">,
  I32EnumAttrCase<"F32", 1, "f32">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::autoshard::train";
}

def Train_ReduceEvery : I32EnumAttr<"ReduceEvery",
    "how often sharded gradients are reduced under gradient accumulation", [
  I32EnumAttrCase<"Step", 0, "step">,
  I32EnumAttrCase<"MicroBatch", 1, "micro_batch">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::autoshard::train";
}

def Train_CollectiveKind : I32EnumAttr<"CollectiveKind",
    "which collective an asynchronous start issues", [
  I32EnumAttrCase<"AllReduce", 0, "all_reduce">,
  I32EnumAttrCase<"AllGatherShards", 1, "all_gather_shards">,
  I32EnumAttrCase<"ReduceScatterShards", 2, "reduce_scatter_shards">
]> {
  let cppNamespace = "::autoshard::train";
}

def Train_TransferKind : I32EnumAttr<"TransferKind",
    "which offload transfer an asynchronous start issues", [
  I32EnumAttrCase<"ToHost", 0, "to_host">,
  I32EnumAttrCase<"ToDevice", 1, "to_device">,
  I32EnumAttrCase<"NvmeRead", 2, "nvme_read">,
  I32EnumAttrCase<"NvmeWrite", 3, "nvme_write">
]> {
  let cppNamespace = "::autoshard::train";
}

// The values equal abi.h's asrt_unary_fn (checked where the lowering
// passes them).
def Train_UnaryFn : I32EnumAttr<"UnaryFn",
    "an elementwise function of one tensor, as train.unary_grad names it", [
  I32EnumAttrCase<"Neg", 0, "neg">,
  I32EnumAttrCase<"Exp", 1, "exp">,
  I32EnumAttrCase<"Log", 2, "log">,
  I32EnumAttrCase<"Tanh", 3, "tanh">,
  I32EnumAttrCase<"Sigmoid", 4, "sigmoid">,
  I32EnumAttrCase<"Rsqrt", 5, "rsqrt">,
  I32EnumAttrCase<"Sqrt", 6, "sqrt">,
  I32EnumAttrCase<"Sin", 7, "sin">,
  I32EnumAttrCase<"Cos", 8, "cos">,
  I32EnumAttrCase<"Silu", 9, "silu">,
  I32EnumAttrCase<"GeluTanh", 10, "gelu">,
  I32EnumAttrCase<"GeluErf", 11, "gelu_erf">,
  I32EnumAttrCase<"Pow", 12, "pow_scalar">,
  I32EnumAttrCase<"Add", 13, "add_scalar">,
  I32EnumAttrCase<"Mul", 14, "scale">,
  I32EnumAttrCase<"Reciprocal", 15, "reciprocal">,
  I32EnumAttrCase<"Relu", 16, "relu">,
  I32EnumAttrCase<"Abs", 17, "abs">,
  I32EnumAttrCase<"Erf", 18, "erf">
]> {
  let cppNamespace = "::autoshard::train";
}

// The values equal abi.h's comparison codes of asrt_binary_fn minus
// ASRT_BINARY_LT (checked where the lowering passes them).
def Train_ComparePredicate : I32EnumAttr<"ComparePredicate",
    "the comparison of train.compare", [
  I32EnumAttrCase<"LT", 0, "lt">,
  I32EnumAttrCase<"LE", 1, "le">,
  I32EnumAttrCase<"GT", 2, "gt">,
  I32EnumAttrCase<"GE", 3, "ge">,
  I32EnumAttrCase<"EQ", 4, "eq">,
  I32EnumAttrCase<"NE", 5, "ne">
]> {
  let cppNamespace = "::autoshard::train";
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

def Train_PendingType : TypeDef<Train_Dialect, "Pending"> {
  let mnemonic = "pending";
  let summary = "the handle of a collective in flight, and what it will yield";
  let description = [{
    `train.collective_start` returns it; `train.collective_wait` consumes it
    and yields tensors of the listed types.

    ```mlir
    !train.pending<tensor<3x4xf32>, tensor<3xf32>>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::Type">:$types);
  let assemblyFormat = "`<` $types `>`";
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

class Train_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Train_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Train_RoleAttr : EnumAttr<Train_Dialect, Train_Role, "role"> {
  let summary = "role of a step argument or result";
  let assemblyFormat = "`<` $value `>`";
}

def Train_MemorySpaceAttr : EnumAttr<Train_Dialect, Train_MemorySpace, "memory"> {
  let summary = "where an offloaded argument or result of a step lives";
  let description = [{
    `train.memory` on a step's argument (and on the result that updates it):
    `host` for (pinned) host memory, `nvme` for a file of the training
    binary's `--offload-dir`, which the step reads with `train.nvme_read`
    and writes with `train.nvme_write`. Without it a tensor is in device
    memory. Set by `autoshard-offload`.
  }];
  let assemblyFormat = "`<` $value `>`";
}

def Train_InitAttr : Train_Attr<"Init", "init"> {
  let summary = "initialisation of a parameter, optimizer state or hyperparameter";
  let description = [{
    How the training binary fills an argument before the first step. The
    value of every element it generates is a pure function of the seed,
    the argument's name and the element's global index, so initialisation
    is the same at every world size and under every sharding.

    ```mlir
    #train.init<zeros>
    #train.init<ones>
    #train.init<normal, std = 0.02>        // mean 0
    #train.init<uniform, bound = 0.1>      // in [-bound, bound)
    #train.init<constant, value = 3.0e-4>
    #train.init<load>                      // from --load-params or --resume
    ```

    `std` and `bound` must be positive and finite; `value` finite.

    `load` says that the value is not the binary's to choose: it comes
    from a file, as for a model imported from PyTorch whose initial
    parameters were written beside the step. `param` and `opt_state`
    arguments may take it; a `hyper` may not (parameter files do not hold
    hypers). A training binary with a `load` argument refuses to start,
    on every rank and before the first step, unless `--load-params FILE`
    (which must then hold the argument) or `--resume` gives it.
  }];
  let parameters = (ins "::autoshard::train::InitKind":$kind,
                        "::llvm::APFloat":$value);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The name of the parameter that `value` holds for `kind` ("std",
    /// "bound", "value"), or an empty string for kinds without one.
    static ::llvm::StringRef getValueName(::autoshard::train::InitKind kind);
    double getValueAsDouble() const { return getValue().convertToDouble(); }
  }];
}

def Train_ParamGroupAttr : Train_Attr<"ParamGroup", "param_group"> {
  let summary = "the placement of the parameters a plan's group selects";
  let description = [{
    A plan's `groups` override its placements for the parameters they
    select, together with those parameters' gradients and optimizer states.
    A group selects the parameters whose name matches `names` (a POSIX
    extended regular expression matched against the whole name), and
    whose element count is at most `max_elements` (DeepSpeed's
    `stage3_param_persistence_threshold`). An omitted selector does not
    filter. The first group that selects a parameter decides its placement;
    a parameter no group selects follows the plan. `shard_axes` defaults to
    the plan's.

    ```mlir
    // ZeRO-3, except embeddings (replicated) and small tensors (ZeRO-2).
    groups = [
      #train.param_group<names = "wte|wpe", optimizer_states = replicated,
                         gradients = replicated, parameters = replicated,
                         unit = param>,
      #train.param_group<max_elements = 100000, optimizer_states = sharded,
                         gradients = sharded, parameters = replicated,
                         unit = param>]
    ```
  }];
  let parameters = (ins
    OptionalParameter<"::mlir::StringAttr">:$names,
    DefaultValuedParameter<"int64_t", "0">:$max_elements,
    "::autoshard::train::Placement":$optimizer_states,
    "::autoshard::train::Placement":$gradients,
    "::autoshard::train::Placement":$parameters,
    "::autoshard::train::Unit":$unit,
    OptionalArrayRefParameter<"int16_t">:$shard_axes);
  let assemblyFormat = [{
    `<` (`names` `=` $names^ `,` ` `)?
        (`max_elements` `=` $max_elements^ `,` ` `)?
        `optimizer_states` `=` $optimizer_states `,`
        `gradients` `=` $gradients `,` `parameters` `=` $parameters `,`
        `unit` `=` $unit (`,` `shard_axes` `=` `[` $shard_axes^ `]`)? `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Whether this group selects a parameter of this name and size.
    bool selects(::llvm::StringRef name, int64_t elements) const;
  }];
}

def Train_PlanAttr : Train_Attr<"Plan", "plan"> {
  let summary = "how a training step is distributed over a device grid";
  let description = [{
    The distribution plan of a training step: the grid it runs on and, for
    each class of training state, whether it is replicated on every rank or
    sharded over the grid axes `shard_axes`. Named strategies are presets
    of this one attribute (`autoshard-plan`); one pass applies any plan
    (`autoshard-partition`).

    | strategy | optimizer_states | gradients | parameters | unit |
    |----------|------------------|-----------|------------|------|
    | ddp      | replicated | replicated (all-reduce) | replicated | param |
    | zero1    | sharded    | replicated (reduce-scatter before the update) | replicated | param |
    | zero2    | sharded    | sharded (reduce-scatter when computed) | replicated | param |
    | zero3    | sharded    | sharded    | sharded (gathered per use) | param |
    | fsdp     | sharded    | sharded    | sharded (gathered per block) | block |
    | hybrid   | as fsdp over `shard_axes`, replicated over the other grid axes |||| block |

    A sharded tensor is stored flat: zero-padded to a multiple of the shard
    group's size, each rank holding one contiguous block. The batch is
    split along its dimension 0 over every grid axis. `unit` groups the
    collectives of the parameters of one transformer block (the params with
    the same `train.unit`; the others form one root unit, so a step without
    `train.unit` attributes is gathered as one unit). `reshard` says whether gathered parameters are
    released after the forward pass (and gathered again for the backward
    pass) or kept until the backward pass (FSDP's SHARD_GRAD_OP).
    `bucket_cap_mb` bounds the collectives that grouping merges.
    `groups` (`#train.param_group`) give selected parameters their own
    placements, unit and shard axes.
    `reduce_dtype` is the element type gradients are reduced in: their own
    (`gradient`, the default, omitted when printed) or `f32`, which casts
    bf16 gradients up before the reduction while parameters are still
    gathered in bf16 (FSDP's `MixedPrecision(reduce_dtype=torch.float32)`).
    `reduce_every` says when sharded gradients are reduce-scattered under
    gradient accumulation: once per `step`, after the last micro-batch (the
    default, omitted when printed; FSDP under `no_sync`), or every
    `micro_batch`, each micro-batch's gradient as soon as it is complete,
    summed into the shard (DeepSpeed's ZeRO-2, FSDP without `no_sync`):
    K times the reduce-scatter bytes, but no full gradient outlives its
    micro-batch. `keep_gathered` (a POSIX extended regular expression
    matched against whole parameter names; omitted: none) keeps the
    sharded parameters it selects gathered from the forward pass to the
    backward pass under `reshard = after_forward`, as FSDP2's
    `reshard_after_forward=False` on their modules (the last block's
    parameters, which the backward pass reads first).

    ```mlir
    shard.grid @world(shape = 4)
    func.func @train_step(...) attributes {
        train.step,
        train.plan = #train.plan<strategy = "zero3", grid = @world,
                                 optimizer_states = sharded,
                                 gradients = sharded, parameters = sharded,
                                 shard_axes = [0], unit = param,
                                 reshard = after_forward, bucket_cap_mb = 25>}
    ```
  }];
  let parameters = (ins
    "::mlir::StringAttr":$strategy,
    "::mlir::FlatSymbolRefAttr":$grid,
    "::autoshard::train::Placement":$optimizer_states,
    "::autoshard::train::Placement":$gradients,
    "::autoshard::train::Placement":$parameters,
    ArrayRefParameter<"int16_t">:$shard_axes,
    "::autoshard::train::Unit":$unit,
    "::autoshard::train::Reshard":$reshard,
    "int64_t":$bucket_cap_mb,
    DefaultValuedParameter<"::autoshard::train::ReduceDtype",
                           "::autoshard::train::ReduceDtype::Gradient">
        :$reduce_dtype,
    DefaultValuedParameter<"::autoshard::train::ReduceEvery",
                           "::autoshard::train::ReduceEvery::Step">
        :$reduce_every,
    OptionalArrayRefParameter<"::autoshard::train::ParamGroupAttr">:$groups,
    OptionalParameter<"::mlir::StringAttr">:$keep_gathered);
  let assemblyFormat = [{
    `<` `strategy` `=` $strategy `,` `grid` `=` $grid `,`
        `optimizer_states` `=` $optimizer_states `,`
        `gradients` `=` $gradients `,`
        `parameters` `=` $parameters `,`
        `shard_axes` `=` `[` $shard_axes `]` `,`
        `unit` `=` $unit `,` `reshard` `=` $reshard `,`
        `bucket_cap_mb` `=` $bucket_cap_mb ``
        custom<PlanOptionalFields>($reduce_dtype, $reduce_every,
                                   $keep_gathered, $groups) `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The first group that selects this parameter, or null: the plan's
    /// own placements apply.
    ParamGroupAttr groupOf(::llvm::StringRef name, int64_t elements) const;
    /// Whether this parameter's gathered copy is kept from the forward
    /// pass to the backward pass (reshard = after_backward, or a name
    /// keep_gathered selects).
    bool keepsGathered(::llvm::StringRef name) const;
  }];
}

def Train_FlatShardAttr : Train_Attr<"FlatShard", "flat_shard"> {
  let summary = "an argument or result stored as this rank's flat shard";
  let description = [{
    Set by `autoshard-partition` on the step's arguments and results whose
    per-rank type is a flat shard: the tensor's full shape and the grid axes
    it is sharded over. The manifest passes both to the runtime, which
    initialises, loads and saves the tensor in its full form.

    ```mlir
    %w: tensor<14xf32> {train.shard = #train.flat_shard<shape = [4, 7], grid_axes = [0]>, ...}
    ```
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$shape,
                        ArrayRefParameter<"int16_t">:$grid_axes);
  let assemblyFormat = [{
    `<` `shape` `=` `[` $shape `]` `,` `grid_axes` `=` `[` $grid_axes `]` `>`
  }];
}

// An optimizer hyper-parameter that may be omitted: an f64 FloatAttr, as
// the parser builds from a bare literal, with torch's default.
class Train_FloatDefault<string value>
    : DefaultValuedParameter<"::mlir::FloatAttr",
          "::mlir::FloatAttr::get(::mlir::Float64Type::get($_ctxt), " # value #
          ")">;

def Train_AdamwConfigAttr : Train_Attr<"AdamwConfig", "adamw"> {
  let summary = "AdamW as the optimizer autodiff should build";
  let description = [{
    Set as `train.optimizer` on a step that has only a forward pass and a
    loss; `autoshard-autodiff` derives the backward pass and applies
    `train.adamw` to every parameter that receives a gradient, with weight
    decay on parameters of rank 2 or more only (biases and norm gains are
    not decayed, as in nanoGPT and Megatron), unless the parameter's
    argument carries its own `train.weight_decay` (PyTorch's parameter
    groups; see the dialect's description), which then applies instead.

    ```mlir
    train.optimizer = #train.adamw<lr = 6.0e-4, beta1 = 0.9, beta2 = 0.95,
                                   eps = 1.0e-8, weight_decay = 0.1>
    ```

    `lr` is required; the other fields default to torch.optim.AdamW's
    (beta1 0.9, beta2 0.999, eps 1e-8, weight_decay 0.01), and a field at
    its default is not printed. GPT training usually sets beta2 0.95 and
    weight_decay 0.1.
  }];
  let parameters = (ins "::mlir::FloatAttr":$lr,
                        Train_FloatDefault<"0.9">:$beta1,
                        Train_FloatDefault<"0.999">:$beta2,
                        Train_FloatDefault<"1.0e-8">:$eps,
                        Train_FloatDefault<"0.01">:$weight_decay);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Train_SgdConfigAttr : Train_Attr<"SgdConfig", "sgd"> {
  let summary = "SGD as the optimizer autodiff should build";
  let description = [{
    ```mlir
    train.optimizer = #train.sgd<lr = 0.1, momentum = 0.9, weight_decay = 0.0>
    ```

    Weight decay applies to parameters of rank 2 or more, unless a
    parameter's argument carries its own `train.weight_decay`, which then
    applies instead. `lr` is required;
    momentum and weight_decay default to torch.optim.SGD's 0, and a field at
    its default is not printed.
  }];
  let parameters = (ins "::mlir::FloatAttr":$lr,
                        Train_FloatDefault<"0.0">:$momentum,
                        Train_FloatDefault<"0.0">:$weight_decay);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // AUTOSHARD_DIALECT_TRAIN_TRAINBASE_TD
