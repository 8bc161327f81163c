//===- Passes.td - the passes that drive other pipelines ---*- tablegen -*-===//

#ifndef AUTOSHARD_PIPELINES_PASSES_TD
#define AUTOSHARD_PIPELINES_PASSES_TD

include "mlir/Pass/PassBase.td"

def AutoStrategyPass : Pass<"autoshard-auto-strategy", "mlir::ModuleOp"> {
  let summary = "Choose the strategy from the cost model and run its pipeline";
  let description = [{
    `--strategy=auto`: describes the training step for the cost model
    (parameters and which of them the backward pass reads, FLOPs from the
    ops, activations from the memory plan of each checkpointing mode),
    estimates every plan the compiler can build on the cluster of
    `device`, `nodes` and `ranks-per-node`, chooses (DDP when it fits; else
    the fastest plan that fits, preferring the least sharded within 5%),
    confirms the choice with the compiler's exact memory plan, prints the
    cost report when asked, and runs the chosen preset's strategy pipeline
    on the module.

    ```mlir
    // shard-opt --pass-pipeline='builtin.module(autoshard-auto-strategy{world-size=8 device=h100-80gb cost-report=text})'
    ```

    Its options are those of the `autoshard-strategy` pipeline
    (StrategyOptions.def), which runs this pass for `strategy=auto`; the
    strategy-specific refinements `param-group` and `keep-gathered` are
    refused, since auto chooses the placements itself. A device file that
    does not load, nodes that do not divide the world size, or no plan
    that fits the device's (or `memory-budget`'s) memory per rank are
    errors that say what would fit.
  }];
}

#endif // AUTOSHARD_PIPELINES_PASSES_TD
