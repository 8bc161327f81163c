// RUN: shard-opt --strategy=ddp --world-size=2 --overlap=false %S/Inputs/causal-lm-loss-step.mlir | FileCheck %s
// RUN: shard-opt --pass-pipeline='builtin.module(autoshard-autodiff)' %S/Inputs/causal-lm-loss-step.mlir | FileCheck %s --check-prefix=AUTODIFF
// RUN: sed 's/train.step, train.optimizer/train.step, train.micro_batches = 2 : i64, train.optimizer/' %S/Inputs/causal-lm-loss-step.mlir \
// RUN:   | shard-opt --strategy=ddp --world-size=2 --overlap=false | FileCheck %s --check-prefix=MICRO

// HuggingFace's causal-LM loss under DDP on 2 ranks. The labels are a
// batch argument, so the partitioner splits them and re-derives the i32
// views between them and the loss (pad, slice, reshape) for each rank's 2
// of the 4 sequences; the logits' reshape, which merges the batch into the
// positions ([B, T, V] to [B*T, V], logits.view(-1, V)), takes the rank's
// 8 of the 16 rows, and its gradient the way back. Each rank means over
// its own positions; the loss and the gradients are averaged over the
// ranks, as PyTorch DDP does.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x8xf32> {train.name = "x"
// CHECK-SAME: %[[LABELS:[^:]*]]: tensor<2x4xi32> {train.name = "labels"
// CHECK: %[[LOGITS:.*]] = train.linear %{{.*}} -> tensor<2x4x10xf32>
// CHECK-NEXT: %[[FLAT:.*]] = train.reshape %[[LOGITS]] : tensor<2x4x10xf32> to tensor<8x10xf32>
// CHECK-NEXT: %[[PADDED:.*]] = train.pad %[[LABELS]] {dim = 1 : i64, high = 1 : i64, low = 0 : i64, value = -1.000000e+02 : f32} : tensor<2x4xi32> -> tensor<2x5xi32>
// CHECK-NEXT: %[[SHIFTED:.*]] = train.slice %[[PADDED]] {dim = 1 : i64, end = 5 : i64, start = 1 : i64} : tensor<2x5xi32> -> tensor<2x4xi32>
// CHECK-NEXT: %[[TARGETS:.*]] = train.reshape %[[SHIFTED]] : tensor<2x4xi32> to tensor<8xi32>
// CHECK-NEXT: %[[LOSS:.*]] = train.softmax_cross_entropy %[[FLAT]], %[[TARGETS]] {ignore_index = -100 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
// CHECK-NEXT: %[[DFLAT:.*]] = train.softmax_cross_entropy_grad %[[FLAT]], %[[TARGETS]] {ignore_index = -100 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<8x10xf32>
// CHECK-NEXT: %[[DLOGITS:.*]] = train.reshape %[[DFLAT]] : tensor<8x10xf32> to tensor<2x4x10xf32>
// CHECK: %[[DW2:.*]] = train.linear_grad_weight %[[DLOGITS]]
// CHECK: train.all_reduce_bucket %[[LOSS]], %[[DW2]], {{.*}} on @world grid_axes = [0] reduction = average
// CHECK: return

// Autodiff asks the integer values for no gradient: the label views appear
// once, in the forward pass.
// AUTODIFF-LABEL: func.func @train_step
// AUTODIFF: train.softmax_cross_entropy_grad {{.*}} {ignore_index = -100 : i64}
// AUTODIFF-NOT: i32> ->
// AUTODIFF-NOT: i32> to
// AUTODIFF: return

// Two micro-batches per rank: each slices its sequence of labels and
// means over its own positions.
// MICRO-LABEL: func.func @train_step
// MICRO: %[[Y0:.*]] = train.slice_rows %{{.*}} {offset = 0 : i64} : tensor<2x4xi32> to tensor<1x4xi32>
// MICRO: %[[P0:.*]] = train.pad %[[Y0]] {{.*}} : tensor<1x4xi32> -> tensor<1x5xi32>
// MICRO: train.softmax_cross_entropy %{{.*}}, %{{.*}} {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
// MICRO: %[[Y1:.*]] = train.slice_rows %{{.*}} {offset = 1 : i64} : tensor<2x4xi32> to tensor<1x4xi32>
// MICRO: %[[P1:.*]] = train.pad %[[Y1]] {{.*}} : tensor<1x4xi32> -> tensor<1x5xi32>
// MICRO: train.softmax_cross_entropy %{{.*}}, %{{.*}} {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
