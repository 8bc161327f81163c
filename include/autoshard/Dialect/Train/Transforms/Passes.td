//===- Passes.td - distribution passes over training steps ----------------===//

#ifndef AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_PASSES_TD
#define AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

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

    Fails, naming the bad value and the valid ones, on an unknown strategy,
    a world size below 1, a module without exactly one training step, or a
    step that already has a plan.
  }];
  let options = [
    Option<"strategy", "strategy", "std::string", /*default=*/"\"ddp\"",
           "Named distribution strategy (ddp)">,
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1",
           "Number of ranks the step runs on">,
  ];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def PartitionPass : Pass<"autoshard-partition", "mlir::ModuleOp"> {
  let summary = "Rewrite a planned training step into the per-rank program";
  let description = [{
    Applies the step's `train.plan`: every batch argument (role `input` or
    `label`) is split along dimension 0 over the grid, result types are
    re-derived for the smaller batch, every gradient that an optimizer
    consumes is averaged over the grid right after it is computed, and the
    loss is averaged so that every rank returns the global loss.

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

#endif // AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_PASSES_TD
