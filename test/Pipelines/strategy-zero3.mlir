// RUN: shard-opt %S/Inputs/two-layer-step.mlir --pass-pipeline='builtin.module(autoshard-autodiff,autoshard-plan{strategy=zero3 world-size=2},autoshard-partition)' | FileCheck %s
// RUN: shard-opt --strategy=zero3 --overlap=false --world-size=2 %S/Inputs/two-layer-step.mlir | FileCheck %s --check-prefix=GROUPED
// RUN: shard-opt --strategy=zero3 --overlap=false --world-size=2 %S/Inputs/two-layer-step.mlir | shard-opt > /dev/null
// RUN: shard-opt %S/Inputs/two-layer-step.mlir --pass-pipeline='builtin.module(autoshard-autodiff,autoshard-plan{strategy=zero3 world-size=2 reshard-after-forward=false},autoshard-partition)' | FileCheck %s --check-prefix=KEEP

// ZeRO-3: parameters, gradients and states are shards. Each parameter is
// gathered right before its first reader in the forward pass, released
// after its last, and gathered again for the backward pass only if the
// backward pass reads it (the second matrix; not the first, whose input
// needs no gradient, nor the bias). The update runs on the shards in place.

// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[W0:[^:]+]]: tensor<10xf32> {{{[^}]*}}train.shard = #train.flat_shard<shape = [4, 5], grid_axes = [0]>, train.unit = "h.0"}
// CHECK-SAME: %[[W1:[^:]+]]: tensor<6xf32>
// CHECK-SAME: %[[B:[^:]+]]: tensor<2xf32>
// CHECK-SAME: -> (tensor<10xf32> {train.name = "h.0.fc1.weight", train.role = #train.role<param>, train.shard = #train.flat_shard<shape = [4, 5], grid_axes = [0]>}
// CHECK-NEXT: %[[F0:.*]] = train.all_gather_shards %[[W0]] on @world grid_axes = [0] : tensor<10xf32> -> tensor<4x5xf32>
// CHECK-NEXT: train.linear %{{.*}}, %[[F0]]
// CHECK-NEXT: train.relu
// CHECK-NEXT: %[[F1:.*]] = train.all_gather_shards %[[W1]] {{.*}} -> tensor<3x4xf32>
// CHECK-NEXT: %[[FB:.*]] = train.all_gather_shards %[[B]] {{.*}} -> tensor<3xf32>
// CHECK-NEXT: train.linear %{{.*}}, %[[F1]], %[[FB]]
// CHECK: train.softmax_cross_entropy_grad
// CHECK-NEXT: %[[G1:.*]] = train.all_gather_shards %[[W1]] {{.*}} -> tensor<3x4xf32>
// CHECK-NEXT: train.linear_grad_input %{{.*}}, %[[G1]]
// CHECK-NOT: train.all_gather_shards
// CHECK: %[[GS0:.*]] = train.reduce_scatter_shards {{.*}} : tensor<4x5xf32> -> tensor<10xf32>
// CHECK: train.adamw %[[W0]], %[[GS0]],

// With SHARD_GRAD_OP the forward gather serves the backward pass too.
// KEEP-LABEL: func.func @step
// KEEP-COUNT-3: train.all_gather_shards
// KEEP-NOT: train.all_gather_shards

// Grouped: the second layer's weight and bias, gathered at the same point,
// form one bucket; the backward pass's single gather stays alone.
// GROUPED: train.all_gather_shards %{{.*}} : tensor<10xf32> -> tensor<4x5xf32>
// GROUPED: train.all_gather_shards %{{.*}}, %{{.*}} on @world grid_axes = [0] : tensor<6xf32>, tensor<2xf32> -> tensor<3x4xf32>, tensor<3xf32>
// GROUPED: train.softmax_cross_entropy_grad
// GROUPED-NEXT: train.all_gather_shards %{{.*}} : tensor<6xf32> -> tensor<3x4xf32>

// On one rank a 1-D shard has the full tensor's type; the result that
// updates a sharded argument is still marked as a shard, so its manifest
// entry matches the argument's.
// RUN: shard-opt --strategy=zero3 --overlap=false --world-size=1 %S/Inputs/two-layer-step.mlir | FileCheck %s --check-prefix=ONE
// RUN: shard-opt --strategy=zero3 --forward-only --overlap=false --world-size=2 %S/Inputs/mixed-precision-step.mlir | FileCheck %s --check-prefix=EVAL
// ONE: -> (
// ONE-SAME: tensor<3xf32> {train.name = "out.bias", train.role = #train.role<param>, train.shard = #train.flat_shard<shape = [3], grid_axes = [0]>}
// ONE-SAME: tensor<3xf32> {train.name = "out.bias.exp_avg", train.role = #train.role<opt_state>, train.shard = #train.flat_shard<shape = [3], grid_axes = [0]>}

// An evaluation step (--forward-only): no optimizer updates the parameter,
// which the plan still shards; its bf16 copy is gathered for the forward
// pass, and the step returns the averaged loss alone.
// EVAL-LABEL: func.func @step
// EVAL-SAME: %[[W:[^:]+]]: tensor<6xf32> {{{[^}]*}}train.shard = #train.flat_shard<shape = [3, 4], grid_axes = [0]>}
// EVAL-SAME: -> (tensor<f32> {train.name = "loss", train.role = #train.role<loss>})
// EVAL: %[[WB:.*]] = train.cast %[[W]] : tensor<6xf32> to tensor<6xbf16>
// EVAL-NEXT: %[[FULL:.*]] = train.all_gather_shards %[[WB]] on @world grid_axes = [0] : tensor<6xbf16> -> tensor<3x4xbf16>
// EVAL-NEXT: train.linear %{{.*}}, %[[FULL]]
// EVAL-NEXT: %[[LOSS:.*]] = train.softmax_cross_entropy
// EVAL-NEXT: %[[AVG:.*]] = shard.all_reduce %[[LOSS]] on @world grid_axes = [0] reduction = average
// EVAL-NEXT: return %[[AVG]] : tensor<f32>
