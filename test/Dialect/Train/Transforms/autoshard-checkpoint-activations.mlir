// A 2-block GPT-2 after autodiff (Inputs/gpt2-2-layers-autodiff.mlir:
// shard-gen gpt2-tiny --layers=2 --micro-batch=2 | shard-opt
// --autoshard-autodiff, before autodiff returned grad_norm_sq). Block h.0
// (train.unit "h.0") reads %arg2..%arg17, h.1 %arg18..%arg33.
// RUN: shard-opt %S/Inputs/gpt2-2-layers-autodiff.mlir --autoshard-checkpoint-activations | FileCheck %s --check-prefix=BLOCKS
// RUN: shard-opt %S/Inputs/gpt2-2-layers-autodiff.mlir --autoshard-checkpoint-activations=mode=selective | FileCheck %s --check-prefix=SELECTIVE
// RUN: shard-opt %S/Inputs/gpt2-2-layers-autodiff.mlir --autoshard-checkpoint-activations=mode=none | FileCheck %s --check-prefix=NONE
// RUN: not shard-opt %S/Inputs/gpt2-2-layers-autodiff.mlir --autoshard-checkpoint-activations=mode=everything 2>&1 | FileCheck %s --check-prefix=BADMODE
// RUN: shard-opt --strategy=ddp --world-size=2 %examples/mlp.mlir | not shard-opt --autoshard-checkpoint-activations 2>&1 | FileCheck %s --check-prefix=PARTITIONED
// RUN: shard-opt --world-size=1 --strategy=ddp --activation-checkpointing=blocks %examples/mlp.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOBLOCKS

// Blocks: h.1 is recomputed from its input (h.0's output) after the final
// norm's backward and before h.1's backward; h.0 from its input (the
// embeddings) after h.1's backward. The last linear of each block (the MLP
// projection into the residual stream) is not recomputed: nothing in the
// backward pass reads its output.
// BLOCKS: train.softmax_cross_entropy_grad
// BLOCKS: train.layer_norm_grad %{{.*}}, %{{.*}}, %arg34
// BLOCKS: %[[LN1:.*]] = train.layer_norm %[[IN1:[^,]*]], %arg18, %arg19 {train.recompute}
// BLOCKS-NEXT: train.linear %[[LN1]], %arg20, %arg21 {train.recompute}
// BLOCKS: train.causal_attention {{.*}} {train.recompute}
// BLOCKS: %[[RES1:.*]] = train.add %[[IN1]], %{{.*}} {train.recompute}
// BLOCKS-NEXT: train.layer_norm %[[RES1]], %arg28, %arg29 {train.recompute}
// BLOCKS-NEXT: train.linear %{{.*}}, %arg30, %arg31 {train.recompute}
// BLOCKS-NEXT: train.gelu {{.*}} {train.recompute}
// BLOCKS-NOT: %arg32, %arg33 {train.recompute}
// BLOCKS: train.layer_norm_grad %{{.*}}, %[[RES1]], %arg28
// BLOCKS: train.layer_norm_grad %{{.*}}, %[[IN1]], %arg18
// BLOCKS: train.layer_norm %{{.*}}, %arg2, %arg3 {train.recompute}
// BLOCKS: train.layer_norm_grad %{{.*}}, %{{.*}}, %arg2

// Selective: only the cheap ops (norms, GELU, residual adds, reshapes) are
// recomputed; the matrix products and attention keep their outputs.
// SELECTIVE: train.layer_norm %{{.*}}, %arg18, %arg19 {train.recompute}
// SELECTIVE: train.gelu {{.*}} {train.recompute}
// SELECTIVE-NOT: train.linear {{.*}} {train.recompute}
// SELECTIVE-NOT: train.causal_attention {{.*}} {train.recompute}

// NONE-NOT: train.recompute

// BADMODE: shard-opt: for the --mode option: unknown value 'everything'; valid: none, blocks, selective

// PARTITIONED: error: 'func.func' op is already partitioned; checkpoint activations before autoshard-partition
// A step without transformer blocks (the MLP's fc1, fc2: no train.unit)
// compiles, with a warning that nothing is recomputed.
// NOBLOCKS: warning: activation checkpointing 'blocks' recomputes transformer blocks, and this step has none (no forward op reads a param with a 'train.unit'): nothing is recomputed
