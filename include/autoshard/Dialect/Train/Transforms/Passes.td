//===- Passes.td - distribution passes over training steps ----------------===//

#ifndef AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_PASSES_TD
#define AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def RaisePass : Pass<"autoshard-raise", "mlir::ModuleOp"> {
  let summary = "Rewrite generic op chains into the fused ops of fast kernels";
  let description = [{
    Runs on a forward step, before `autoshard-autodiff`, so that both the
    forward and the backward pass get the fused kernels. It recognises the
    chains of generic tensor ops a front end (PyTorch's decompositions)
    writes and replaces each with the `train` op the runtime has a fast
    kernel for:

    - the tanh GELU `mul(scale(x, 0.5), add_scalar(tanh(scale(add(x,
      scale(pow_scalar(x, 3), 0.044715)), sqrt(2/pi))), 1))`: `train.gelu`;
    - the exact GELU `mul(scale(x, 0.5), add_scalar(erf(scale(x,
      1/sqrt(2))), 1))`, also with the half on the other factor
      (`mul(x, scale(add_scalar(...), 0.5))`) or taken last
      (`scale(mul(x, add_scalar(...)), 0.5)`): `train.gelu_erf` (never
      `train.gelu`, the tanh approximation: another function);
    - RMSNorm `mul(w, mul(x, rsqrt(add_scalar(reduce_mean(pow_scalar(x, 2),
      [last], keepdim), eps))))`, the square also as `mul(x, x)`, `w` one
      gain per feature: `train.rms_norm` with `epsilon = eps`;
    - rotate-half rotary embeddings `add(mul(x, cos), mul(concat(neg(slice(x,
      D/2..D)), slice(x, 0..D/2)), sin))` on `x [B, H, T, D]` whose `cos`
      and `sin` are `train.constant` tables `[T, D]` (possibly cast to bf16):
      `train.rope` between two transposes to and from `[B, T, H, D]`, with
      the theta recovered from the tables;
    - `mul(silu(gate), up)`: `train.swiglu`;
    - causal attention `matmul(softmax(select(mask, scale(matmul(q, k,
      transpose_rhs), s), full(-inf))), v)` on `[B, H, T, D]` heads with a
      constant lower-triangular mask, or in masked_fill's spelling
      `select(hidden, full(-inf), scores)` with a constant mask of the
      positions `j > i`; the scale on the scores or `1/sqrt(D)` on q
      before the product (`matmul(scale(q, 1/sqrt(D)), k, transpose_rhs)`):
      `train.causal_attention` on the heads transposed to `[B, T, H, D]`
      (keys and values repeated by Llama's `repeat_kv` reshape /
      broadcast_to / reshape are read un-repeated, as grouped-query heads),
      `scale = s` unless `s` is the default `1/sqrt(D)`;
    - `add(matmul(x, w, transpose_rhs), b)` with `w [out, in]` and
      `b [out]`, and a bare `matmul(x, w, transpose_rhs)` with a 2-D `w`:
      `train.linear`; HuggingFace's Conv1D, `matmul(x, w)` (+ `b`) by a
      step argument `w` stored `[in, out]` (or its cast):
      `train.linear` of `transpose(w)`;
    - a linear layer on a view of the activations with the rows merged,
      viewed back (`reshape(linear(reshape(x, [N, in])), [..., out])`, as
      torch.export records `view(-1, in)` around a layer): `train.linear`
      on `x` itself;
    - GPT-2's learned positions `add(x, embedding(arange(T), wpe))`, the
      ids `[T]` or `[1, T]`: `train.add_position_embedding`;
    - `nll_loss(log_softmax(x), labels)` (torch's `F.nll_loss(
      F.log_softmax(x, -1), t)`): `train.softmax_cross_entropy x, labels`
      with the loss's `ignore_index`.

    Products and sums match in either operand order; constants match
    within a relative 1e-5. The transposes it adds fold (train.transpose's
    folder) with those of the heads' layout, so a front end's
    `[B, T, H, D] -> [B, H, T, D]` and back vanish around the fused ops.

    ```mlir
    // Before:
    %c = train.pow_scalar %x {exponent = 3.0 : f32} : tensor<8x64xf32>
    %s = train.scale %c {factor = 0.044715 : f32} : tensor<8x64xf32>
    %i = train.add %x, %s : tensor<8x64xf32>
    %u = train.scale %i {factor = 0.797884583 : f32} : tensor<8x64xf32>
    %t = train.tanh %u : tensor<8x64xf32>
    %o = train.add_scalar %t {value = 1.0 : f32} : tensor<8x64xf32>
    %h = train.scale %x {factor = 0.5 : f32} : tensor<8x64xf32>
    %y = train.mul %h, %o : tensor<8x64xf32>
    // After:
    %y = train.gelu %x : tensor<8x64xf32>
    ```

    Refusals leave the generic ops as they are (each still runs on its own
    kernel): a chain whose intermediate value has another reader (it is
    still needed), a constant out of tolerance (a GELU coefficient, an
    exponent other than 3 or 2, a non-positive epsilon), a mean of a
    product that is not `x * x`, a mask that is not exactly causal (or, in
    masked_fill's spelling, not exactly its complement), a fill other than
    -inf (or a float of at most -1e30, a front end's lowest float), rotary tables that are not cos and sin of
    `t * theta^(-2i/D)` for one theta (every entry checked, within 1e-4, or
    1e-2 for bf16 tables), position ids other than `0..T-1`, and shapes the
    fused op does not take. A factor on q other than `1/sqrt(D)` (within
    1e-5) stays q's: the fused op reads the scaled q.
  }];
}

def AutodiffPass : Pass<"autoshard-autodiff", "mlir::ModuleOp"> {
  let summary = "Derive the backward pass and the optimizer update of a step";
  let description = [{
    Turns a forward step (parameters and batch in, loss out, with a
    `train.optimizer`) into a full training step. Reverse-mode: the loss op
    seeds the gradient, every op on a path from a parameter to the loss
    builds its operands' gradients with its own rule
    (`DifferentiableOpInterface`), and contributions to a value that fans
    out (the residual stream, a tied embedding) are summed with `train.add`.
    Then every parameter that receives a gradient gets the optimizer's
    update: new `opt_state` arguments (AdamW's `<param>.exp_avg` and
    `<param>.exp_avg_sq` and the step counter `optimizer.step`, or SGD's
    `<param>.momentum_buffer`), an `lr` hyperparameter if the step has none,
    and results for the new parameters and states. `train.max_grad_norm`
    adds global-norm clipping (`train.sum_of_squares`,
    `train.clip_coefficient`). Under mixed precision the optimizer reads the
    bf16 gradient of an f32 master parameter directly.

    ```mlir
    // Before:
    func.func @step(%w: tensor<4x16xf32> {train.role = #train.role<param>, ...},
                    %x: ..., %y: ...)
        -> (tensor<f32> {train.role = #train.role<loss>, ...})
        attributes {train.step, train.optimizer =
                    #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>} {
      %logits = train.linear %x, %w : ...
      %loss = train.softmax_cross_entropy %logits, %y : ...
      return %loss : tensor<f32>
    }
    // After: the same forward, then
      %dlogits = train.softmax_cross_entropy_grad %logits, %y : ...
      %dw = train.linear_grad_weight %dlogits, %x : ...
      %w1 = train.sgd %w, %dw, %lr : ...
      return %w1, %loss : ...
    ```

    A step without `train.optimizer` that updates its parameters itself
    already carries its backward and is left unchanged. One that updates
    nothing would train nothing: an error, unless `allow-no-optimizer`
    (or `forward-only`, an evaluation step) says that is meant. A
    parameter on no path to the loss receives no gradient: an error naming
    it, unless `allow-unused-params` (PyTorch DDP's
    `find_unused_parameters=True`), with which it keeps its value, as
    torch's optimizers skip a parameter whose `grad` is `None`: no state,
    no weight decay, no update. Fails also on a loss that no loss op
    computes, on an op on the gradient path that has no gradient rule, and
    on two `train.dropout`s of one `stream`. Under gradient accumulation
    each micro-batch's copy of a dropout learns which rows it holds
    (`BatchResizableOpInterface::placeMicroBatch`).

    `forward-only` builds an evaluation step instead: the forward pass and
    the loss, nothing derived. With `train.micro_batches = K` the forward
    pass runs on each of the K blocks of the batch in turn, as training's
    does, and the step returns the mean of their losses (the loss of the
    whole batch, its activations a micro-batch's). Each `train.dropout` is
    replaced by its input (evaluation mode). The optimizer
    configuration, `train.max_grad_norm` and `train.micro_batches` are
    dropped; a step that carries its own optimizer updates is an error.
  }];
  let options = [
    Option<"exposeGradients", "expose-gradients", "bool", /*default=*/"false",
           "Also return each parameter's gradient as a `grad` result">,
    Option<"forwardOnly", "forward-only", "bool", /*default=*/"false",
           "Evaluation: keep the forward pass and the loss, derive nothing">,
    Option<"allowNoOptimizer", "allow-no-optimizer", "bool",
           /*default=*/"false",
           "Accept a step with neither train.optimizer nor updates of its "
           "own (its parameters never change)">,
    Option<"allowUnusedParams", "allow-unused-params", "bool",
           /*default=*/"false",
           "Accept parameters the loss does not depend on; they are left "
           "unchanged">,
  ];
}

def PlanPass : Pass<"autoshard-plan", "mlir::ModuleOp"> {
  let summary = "Attach a distribution plan for a named strategy";
  let description = [{
    Finds the module's training step (the `func.func` marked `train.step`),
    creates the device grid and attaches the plan of the named strategy as
    `train.plan`. Strategies are presets of one plan attribute; this pass
    only chooses the plan, `autoshard-partition` applies it.

    ```mlir
    // autoshard-plan{strategy=ddp world-size=4}
    shard.grid @world(shape = 4)
    func.func @train_step(...) attributes {train.step, train.plan =
        #train.plan<strategy = "ddp", grid = @world,
                    optimizer_states = replicated, gradients = replicated,
                    parameters = replicated>}
    ```

    The hybrid strategy runs on a 2-D grid `[world / G, G]` and shards over
    its axis 1 (`--shard-group-size=G`); the others on a 1-D grid.

    Fails, naming the bad value and the valid ones, on an unknown strategy,
    a world size below 1, a shard group size that does not divide the world
    size (or one given to another strategy), a module without exactly one
    training step, or a step that already has a plan.
  }];
  let options = [
    Option<"strategy", "strategy", "std::string", /*default=*/"\"ddp\"",
           "Named distribution strategy (autoshard/Strategy/Strategy.h)">,
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1",
           "Number of ranks the step runs on">,
    Option<"shardGroupSize", "shard-group-size", "int64_t", /*default=*/"0",
           "Ranks per shard group of the hybrid strategy (it divides the "
           "world size); 0 elsewhere">,
    Option<"reshardAfterForward", "reshard-after-forward", "bool",
           /*default=*/"true",
           "Release gathered parameters after the forward pass and gather "
           "them again for the backward pass (false: FSDP's SHARD_GRAD_OP)">,
    Option<"bucketCapMb", "bucket-cap-mb", "int64_t", /*default=*/"25",
           "Largest bucket of collectives grouping merges, in MiB (25: "
           "PyTorch DDP's default)">,
    ListOption<"paramGroups", "param-groups", "std::string",
               "Parameter groups with their own placements, PRESET=REGEX "
               "(zero2=.*bias: parameters whose whole name matches REGEX are "
               "placed as PRESET places them); the first match decides">,
    Option<"persistenceThreshold", "persistence-threshold", "int64_t",
           /*default=*/"0",
           "Keep parameters of at most this many elements whole, with "
           "sharded gradients and states (DeepSpeed's "
           "stage3_param_persistence_threshold); 0: none">,
    Option<"reduceDtype", "reduce-dtype", "::autoshard::strategy::ReduceDtype",
           /*default=*/"::autoshard::strategy::ReduceDtype::Gradient",
           "Element type gradients are reduced in: gradient (their own) or "
           "f32 (bf16 gradients cast up before the reduction)">,
    Option<"reduceEvery", "reduce-every", "::autoshard::strategy::ReduceEvery",
           /*default=*/"::autoshard::strategy::ReduceEvery::Step",
           "When sharded gradients are reduce-scattered under gradient "
           "accumulation: step (once, after the last micro-batch) or "
           "micro-batch (each micro-batch's gradient when complete: K times "
           "the bytes, no full gradient kept across micro-batches)">,
    ListOption<"keepGathered", "keep-gathered", "std::string",
               "Keep the sharded parameters whose whole name matches one of "
               "these regular expressions gathered from the forward pass to "
               "the backward pass (FSDP2's reshard_after_forward=False on "
               "their modules)">,
  ];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def PartitionPass : Pass<"autoshard-partition", "mlir::ModuleOp"> {
  let summary = "Rewrite a planned training step into the per-rank program";
  let description = [{
    Applies the step's `train.plan`: every batch argument (role `input` or
    `label`) is split along dimension 0 over the grid, result types are
    re-derived for the smaller batch, every gradient that an optimizer
    consumes is averaged over the grid right after it is computed (and
    every other use of it, global-norm clipping and exposed gradients
    included, reads the average), and the loss is averaged so that every
    rank returns the global loss.

    Before (global program, 2 ranks planned):
    ```mlir
    %dw = train.linear_grad_weight %dy, %x
        : (tensor<16x4xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    %w1 = train.sgd %w, %dw, %lr : ...
    ```
    After (per-rank program):
    ```mlir
    %dw = train.linear_grad_weight %dy, %x
        : (tensor<8x4xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %dw_avg = shard.all_reduce %dw on @world grid_axes = [0]
        reduction = average : tensor<4x8xf32> -> tensor<4x8xf32>
    %w1 = train.sgd %w, %dw_avg, %lr : ...
    ```

    The step's loss must be a mean over the batch (as every `train` loss
    is): then the average of the ranks' gradients is the gradient of the
    global batch, and the ranks compute what one rank would.
  }];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def GroupCollectivesPass : Pass<"autoshard-group-collectives",
                                "mlir::ModuleOp"> {
  let summary = "Merge neighbouring collectives into buckets";
  let description = [{
    Walks the partitioned step in program order and merges collectives of
    one kind (all-reduce, reduce-scatter of flat shards, all-gather of flat
    shards) over the same grid axes, reduction and element type into one
    bucket op, as long as the bucket stays under the plan's `bucket_cap_mb`
    and no op in between reads a member's result. Each key has its own
    open bucket: collectives of other keys in between do not close it. The bucket goes where its
    last member was, so it starts when its last input is ready: PyTorch
    DDP's gradient buckets, bucketed reduce-scatter for ZeRO-2/3, and FSDP's
    one gather per transformer block. Bytes on the wire do not change (the
    runtime pads each member as it would alone); the number of collectives
    does.

    ```mlir
    // Before: two gradients reduced where they are computed.
    %a = shard.all_reduce %ga on @world grid_axes = [0] reduction = average : ...
    %gb = train.bias_grad %dy : ...
    %b = shard.all_reduce %gb on @world grid_axes = [0] reduction = average : ...
    // After: one bucket once both exist.
    %gb = train.bias_grad %dy : ...
    %a, %b = train.all_reduce_bucket %ga, %gb on @world grid_axes = [0]
        reduction = average : ... -> ...
    ```

    A step without a plan is left unchanged.
  }];
}

def CheckpointActivationsPass : Pass<"autoshard-checkpoint-activations",
                                     "mlir::ModuleOp"> {
  let summary = "Recompute transformer blocks' activations in the backward pass";
  let description = [{
    Activation checkpointing on the whole step, after `autoshard-autodiff`
    and before partitioning. A transformer block is the set of forward ops
    that read the parameters of one unit (the params with the same
    `train.unit`; names are not read) and the ops after them up to the next
    block; ops that read root-unit parameters (no `train.unit`: the
    embeddings, the final norm, the output projection) are in no block. A
    step without `train.unit` has no blocks: the pass warns and recomputes
    nothing. Per micro-batch and block, the
    block's forward ops are cloned right before the first backward op that
    reads one of their results, and every backward reader reads the clones:
    the forward values then die in the forward pass, and only the block's
    input (the previous block's output) lives on to the backward pass.

    - `mode=blocks` recomputes every op of the block (PyTorch's
      `checkpoint` around each transformer block).
    - `mode=selective` recomputes only the cheap ops (norms, activations,
      residual adds, reshapes) and keeps the outputs of the matrix products
      and of attention (Megatron's selective recomputation).
    - `mode=none` leaves the step unchanged.

    The recomputation runs with the same kernels on the same inputs, so
    the gradients are bit-identical. Under FSDP it is part of the backward
    pass: the partitioner gathers a block's parameters once for the
    recomputation and the block's backward together, never twice.
    Parameter casts (bf16 compute copies) are not recomputed. The clones
    carry `train.recompute`, so that common-subexpression elimination does
    not merge them with the originals.
  }];
  let options = [
    Option<"mode", "mode", "::autoshard::strategy::ActivationCheckpointing",
           /*default=*/"::autoshard::strategy::ActivationCheckpointing::Blocks",
           "What to recompute: none, blocks, selective">,
  ];
}

def ScheduleCollectivesPass : Pass<"autoshard-schedule-collectives",
                                   "mlir::ModuleOp"> {
  let summary = "Overlap collectives with compute: start/wait pairs";
  let description = [{
    Splits every collective of the partitioned step (all-reduces and their
    buckets, flat-shard gathers and reduce-scatters) into a
    `train.collective_start` and a `train.collective_wait`, and moves them
    apart:

    - every wait sits right before the first reader of its results;
    - a reduction (a gradient bucket, the loss, a replica average) and a
      gather of computed values (ZeRO-1/2's updated shards) start as soon as
      their last input is computed, and at most `prefetch-depth` of them are
      in flight: each is waited, at the latest, when the one `depth` later
      starts, so a bucket's full gradients are freed while the backward pass
      computes the next ones;
    - gathers of parameters (ZeRO-3, FSDP) are prefetched: the k-th starts
      when the (k - prefetch-depth)-th is waited, so at most
      `prefetch-depth` gathers run ahead of the unit in use (FSDP's forward
      and backward prefetch, and its rate limit on gathers in flight);
      depth 0 starts each right before its wait;
    - offload transfers become `train.transfer_start` and
      `train.transfer_wait` pairs likewise. A copy of a reduced gradient to
      the host (a host optimizer's input) is not a reader that places the
      reduction's wait: it starts right after that wait, and at most
      `prefetch-depth` groups of such copies (those after one reduction)
      are in flight, each waited when the group `depth` later starts, so
      that the gradient's device buffer dies in the backward pass. Nor is
      the clipping norm's sum of squares of such copied results (the
      partial sum autoshard-offload puts after the copies): it reads them
      right after the wait and the copies' starts.

    Collectives run in the order they start, the same on every rank.

    ```mlir
    // Before (FSDP, two blocks):
    %b0 = train.all_gather_shards %s0 ...
    %y0 = train.linear %x, %b0
    %b1 = train.all_gather_shards %s1 ...
    %y1 = train.linear %y0, %b1
    // After, prefetch-depth=1:
    %h0 = train.collective_start all_gather_shards %s0 ...
    %b0 = train.collective_wait %h0
    %h1 = train.collective_start all_gather_shards %s1 ...   // gathers ...
    %y0 = train.linear %x, %b0                               // ... during this
    %b1 = train.collective_wait %h1
    %y1 = train.linear %y0, %b1
    ```

    A step that is not partitioned is left unchanged.
  }];
  let options = [
    Option<"prefetchDepth", "prefetch-depth", "int64_t", /*default=*/"1",
           "Parameter gathers in flight ahead of the one in use, and "
           "reductions in flight at once (0: none, collectives run where "
           "they were)">,
  ];
}

def OffloadPass : Pass<"autoshard-offload", "mlir::ModuleOp"> {
  let summary = "Keep optimizer states and parameters in host memory or NVMe files";
  let description = [{
    ZeRO-Offload and ZeRO-Infinity as explicit IR. `optimizer=cpu|nvme`
    moves every optimizer state, and the f32 master weights of a
    mixed-precision step (parameters read only by casts, shards and the
    optimizer), to host memory (`#train.memory<host>`) or to NVMe files
    (`#train.memory<nvme>`), and runs the optimizer updates, the step
    counter and the masters' casts on the host (`train.on_host`).
    `params=cpu|nvme` does the same for sharded parameters (ZeRO-3, FSDP,
    hybrid: DeepSpeed's offload_param). A step without optimizer updates
    and without `train.optimizer` (an evaluation step) has no states:
    `optimizer=` moves its master weights alone, so that they sit where the
    training step of the same options keeps them.

    Then every value that crosses gets a transfer: `train.to_host` right
    after a device value is computed (a gradient goes to the host as soon
    as it is reduced) or right before the first host op that reads an
    argument; `train.to_device` right before the first device op that reads
    a host value; `train.nvme_read` right before each op that reads an NVMe
    argument, and `train.nvme_write` of each NVMe argument's new value
    before the return.

    Global-norm clipping would read every gradient on the device after the
    last reduction and keep each alive until then: its `train.sum_of_squares`
    is split into one over the gradients copied after each op (a reduction),
    right after their copies, and the partial sums are added up
    (`train.add`) where the norm was, in the order of the reductions. The sum
    over shard axes that autoshard-partition put after the norm reads the
    total.

    ```mlir
    // ZeRO-2, optimizer=cpu:
    %g = train.reduce_scatter_shards %dw ...
    %gh = train.to_host %g : tensor<512xf32>
    %ss = train.sum_of_squares %g : tensor<512xf32>  // with clipping
    %m = ..., train.adamw ... {train.on_host}   // states in host memory
    %w1 = train.to_device %p1 : tensor<512xf32>
    %w = train.all_gather_shards %w1 ...
    ```

    Runs after autoshard-partition and autoshard-group-collectives (a copy
    is a reader that would close a gradient bucket) and before
    autoshard-schedule-collectives. With both options `none` the step is
    left unchanged.
  }];
  let options = [
    Option<"optimizer", "optimizer", "::autoshard::strategy::Offload",
           /*default=*/"::autoshard::strategy::Offload::None",
           "Where optimizer states and fp32 master weights live: none "
           "(device), cpu (host memory) or nvme (files of --offload-dir)">,
    Option<"params", "params", "::autoshard::strategy::Offload",
           /*default=*/"::autoshard::strategy::Offload::None",
           "Where sharded parameters live: none, cpu or nvme">,
  ];
}

def FusePass : Pass<"autoshard-fuse", "mlir::ModuleOp"> {
  let summary = "Fuse groups of train ops that one runtime kernel computes";
  let description = [{
    Rewrites the groups of ops in the (partitioned) step that the runtime
    runs as one kernel into the train dialect's fused ops, so that the
    lowering turns each op into one call and a test can read what was fused:

    - a linear layer with a bias and its first GELU, when nothing reads the
      layer's result before that GELU: `train.linear_gelu` at the GELU;
    - an input gradient read by GELU's gradient alone, that gradient and the
      first bias gradient of its result: `train.linear_grad_gelu` at GELU's
      gradient;
    - a weight gradient and a bias gradient of the same output gradient,
      neither read before the later of the two: `train.linear_grad_weight_bias`
      at the later one (the first such weight gradient for each bias
      gradient, each op in one group);
    - runs of two or more AdamW updates with the same learning rate, step,
      clipping scale, betas, eps and gradient element type, on the same side
      of an offload, none reading another's update, until an op reads one of
      their results: `train.adamw_multi` at the run's last update.

    Each fused op takes the place of the group's op that runs last, so every
    operand is defined there and nothing reads a result earlier; the
    arithmetic per element is that of the ops it replaces.

    ```mlir
    // Before:
    %h = train.linear %x, %w, %b : (...) -> tensor<8x4xf32>
    %y = train.gelu %h : tensor<8x4xf32>
    // After:
    %h, %y = train.linear_gelu %x, %w, %b : (...) -> (tensor<8x4xf32>, tensor<8x4xf32>)
    ```

    It runs in the lowering pipeline after CSE and canonicalization, right
    before `autoshard-lower-to-runtime`, and in the memory plan's copy of the
    step, which must see the ops the lowering sees.
  }];
}

#endif // AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_PASSES_TD
