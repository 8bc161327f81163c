// RUN: shard-opt %S/Inputs/two-layer-step.mlir --pass-pipeline='builtin.module(autoshard-autodiff,autoshard-plan{strategy=fsdp world-size=4},autoshard-partition)' | FileCheck %s
// RUN: shard-opt --strategy=fsdp --overlap=false --world-size=4 %S/Inputs/two-layer-step.mlir | FileCheck %s --check-prefix=GROUPED
// RUN: shard-opt --strategy=fsdp --overlap=false --world-size=4 %S/Inputs/two-layer-step.mlir | shard-opt > /dev/null

// FSDP: as ZeRO-3, but a transformer block's parameters (h.0.*) are gathered
// together before the block's first reader; the root unit's (out.bias)
// before its own. On 4 ranks: shards of ceil(20/4) = 5, 3 and 1 elements.

// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[W0:[^:]+]]: tensor<5xf32>
// CHECK-SAME: %[[W1:[^:]+]]: tensor<3xf32>
// CHECK-SAME: %[[B:[^:]+]]: tensor<1xf32>
// CHECK-NEXT: %[[F0:.*]] = train.all_gather_shards %[[W0]] on @world grid_axes = [0] : tensor<5xf32> -> tensor<4x5xf32>
// CHECK-NEXT: %[[F1:.*]] = train.all_gather_shards %[[W1]] on @world grid_axes = [0] : tensor<3xf32> -> tensor<3x4xf32>
// CHECK-NEXT: train.linear %{{.*}}, %[[F0]] : (tensor<2x5xf32>
// CHECK-NEXT: train.relu
// CHECK-NEXT: %[[FB:.*]] = train.all_gather_shards %[[B]] {{.*}} : tensor<1xf32> -> tensor<3xf32>
// CHECK-NEXT: train.linear %{{.*}}, %[[F1]], %[[FB]]
// CHECK: train.softmax_cross_entropy_grad
// CHECK-NEXT: %[[G1:.*]] = train.all_gather_shards %[[W1]]
// CHECK-NEXT: train.linear_grad_input %{{.*}}, %[[G1]]

// Grouped: block h.0's parameters arrive in one collective.
// GROUPED: train.all_gather_shards %{{.*}}, %{{.*}} on @world grid_axes = [0] : tensor<5xf32>, tensor<3xf32> -> tensor<4x5xf32>, tensor<3x4xf32>
