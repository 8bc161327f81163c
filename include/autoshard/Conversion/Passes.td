//===- Passes.td - lowering passes ----------------------------------------===//

#ifndef AUTOSHARD_CONVERSION_PASSES_TD
#define AUTOSHARD_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def LowerToRuntimePass : Pass<"autoshard-lower-to-runtime", "mlir::ModuleOp"> {
  let summary = "Lower a per-rank training step to calls into the runtime ABI";
  let description = [{
    Rewrites the module's training step into the function the runtime's
    driver calls, `autoshard_step(ctx, args, results)`, and embeds the
    step's manifest as the global `autoshard_manifest`
    (docs/RuntimeABI.md). Every `train` op (the fused ops of
    `autoshard-fuse` among them: the lowering decides no grouping) and
    every `shard` collective becomes one call to its `asrt_*` function on
    raw buffer pointers; every intermediate tensor gets a buffer at a fixed
    offset of the step's arena, placed once every lifetime is known.

    ```mlir
    %y = train.relu %x : tensor<8x4xf32>
    ```
    becomes
    ```mlir
    %offset = arith.constant 0 : i64   // set once the arena is packed
    %y = llvm.getelementptr %arena[%offset] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    %f32 = arith.constant 0 : i32      // ASRT_DTYPE_F32
    %n = arith.constant 32 : i64
    call @asrt_relu_fwd(%ctx, %f32, %x, %y, %n)
        : (!llvm.ptr, i32, !llvm.ptr, !llvm.ptr, i64) -> ()
    ```

    Results are written straight into the caller's result buffers when that
    is safe even if a result buffer is the buffer of the argument it
    updates (the driver donates parameters and optimizer states), and
    copied there at the end otherwise. A collective over a group of one
    rank is the identity and emits no call; a collective whose input dies
    with it runs in place.

    The step must have been partitioned if it has a plan. The output uses
    the func, arith and llvm dialects only.

    With `entry=eval` the symbols are `autoshard_eval_step` and
    `autoshard_eval_manifest`: a training binary's evaluation step
    (`shard-compile --with-eval`), linked beside the training step.
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"step\"",
           "The entry point: step (autoshard_step, autoshard_manifest) or "
           "eval (autoshard_eval_step, autoshard_eval_manifest)">,
  ];
  let dependentDialects = [
    "mlir::arith::ArithDialect",
    "mlir::func::FuncDialect",
    "mlir::LLVM::LLVMDialect",
  ];
}

def PlanMemoryPass : Pass<"autoshard-plan-memory", "mlir::ModuleOp"> {
  let summary = "Plan each rank's memory before launch; enforce a budget";
  let description = [{
    Computes what one rank of the (partitioned) step holds in memory from
    the buffers `autoshard-lower-to-runtime` gives its tensors: the
    persistent state the driver allocates (every argument, and the results
    that update none) and the peak of the step's own buffers in program
    order, the buffers the buckets are packed into among them (the
    lowering places those in the step's arena too, from the collective's
    issue to its completion). It records the plan on the step as
    `train.memory_plan`, a dictionary of bytes: `peak` (persistent plus
    arena: what the runtime measures), `persistent`, `arena`, `live`, and
    the bytes at the peak by category (`parameters`, `gradients`,
    `optimizer_states`, `activations`, `gathered`, `batch`, `other`,
    `communication`).

    With `budget` (bytes, or a size such as `80GiB`), a plan whose peak
    exceeds it is an error naming both, the categories at the peak and the
    largest tensors then.
  }];
  let options = [
    Option<"budget", "budget", "std::string", /*default=*/"\"\"",
           "Largest memory a rank may use (bytes, or 80GiB, 1.5GB, ...)">,
  ];
  // It lowers a copy of the step to see its buffers, after CSE,
  // canonicalization and autoshard-fuse, as the lowering pipeline does.
  let dependentDialects = [
    "mlir::arith::ArithDialect",
    "mlir::func::FuncDialect",
    "mlir::LLVM::LLVMDialect",
  ];
}

#endif // AUTOSHARD_CONVERSION_PASSES_TD
