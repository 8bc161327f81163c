// RUN: shard-gen llama-tiny --generic > %t.mlir
// RUN: shard-opt --strategy=ddp --world-size=2 --overlap=false %t.mlir \
// RUN:   | FileCheck %s --check-prefix=RAISED \
// RUN:       --implicit-check-not='{{train\.(matmul|softmax|softmax_grad|select|silu|rsqrt|transpose|unary_grad) }}'
// RUN: shard-opt --strategy=ddp --world-size=2 --overlap=false --raise=false %t.mlir \
// RUN:   | FileCheck %s --check-prefix=GENERIC \
// RUN:       --implicit-check-not='{{train\.(causal_attention|rope|rms_norm|swiglu|linear) }}'
// RUN: shard-opt %t.mlir --pass-pipeline='builtin.module(autoshard-strategy{strategy=ddp world-size=2 overlap=false raise=false})' \
// RUN:   | FileCheck %s --check-prefix=GENERIC \
// RUN:       --implicit-check-not='{{train\.(causal_attention|rope|rms_norm|swiglu|linear) }}'
// RUN: shard-opt --strategy=auto --world-size=2 %t.mlir | FileCheck %s --check-prefix=AUTO

// The strategy pipeline raises a front end's generic forward pass before
// autodiff (--raise, on by default): the backward pass is then built from
// the fused ops' gradient rules, and neither pass has a generic attention,
// norm or activation left. --raise=false (or raise=false in the textual
// pipeline) keeps the generic ops, and their generic gradients.

// RAISED-LABEL: func.func @train_step
// RAISED: train.rms_norm
// RAISED: train.rope
// RAISED: train.causal_attention
// RAISED: train.swiglu
// RAISED: train.softmax_cross_entropy_grad
// RAISED: train.swiglu_grad
// RAISED: train.causal_attention_grad
// RAISED: train.rope_grad
// RAISED: train.rms_norm_grad
// RAISED: train.all_reduce_bucket

// GENERIC-LABEL: func.func @train_step
// GENERIC: train.softmax
// GENERIC: train.softmax_grad
// GENERIC: train.all_reduce_bucket

// --strategy=auto prices and builds the raised step too.
// AUTO-LABEL: func.func @train_step
// AUTO: train.causal_attention_grad
// AUTO-NOT: train.softmax_grad
