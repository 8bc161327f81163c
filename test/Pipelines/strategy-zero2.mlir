// RUN: shard-opt %S/Inputs/two-layer-step.mlir --pass-pipeline='builtin.module(autoshard-autodiff,autoshard-plan{strategy=zero2 world-size=2},autoshard-partition)' | FileCheck %s
// RUN: shard-opt --strategy=zero2 --overlap=false --world-size=2 %S/Inputs/two-layer-step.mlir | FileCheck %s --check-prefix=GROUPED
// RUN: shard-opt --strategy=zero2 --overlap=false --world-size=2 %S/Inputs/two-layer-step.mlir | shard-opt > /dev/null

// ZeRO-2: as ZeRO-1, but each gradient is reduce-scattered as soon as the
// backward pass computes it, so only its shard lives on.

// CHECK-LABEL: func.func @step
// CHECK: %[[DW1:.*]] = train.linear_grad_weight {{.*}} -> tensor<3x4xf32>
// CHECK-NEXT: train.reduce_scatter_shards %[[DW1]] on @world grid_axes = [0] reduction = average : tensor<3x4xf32> -> tensor<6xf32>
// CHECK-NEXT: %[[DB:.*]] = train.bias_grad
// CHECK-NEXT: train.reduce_scatter_shards %[[DB]] {{.*}} : tensor<3xf32> -> tensor<2xf32>
// CHECK: %[[DW0:.*]] = train.linear_grad_weight {{.*}} -> tensor<4x5xf32>
// CHECK-NEXT: train.reduce_scatter_shards %[[DW0]] {{.*}} : tensor<4x5xf32> -> tensor<10xf32>
// CHECK-NEXT: train.sum_of_squares
// CHECK: train.shard_of
// CHECK-NEXT: train.adamw
// CHECK-NEXT: train.all_gather_shards {{.*}} : tensor<10xf32> -> tensor<4x5xf32>

// Grouped: the three reduce-scatters wait for the last gradient and run as
// one bucket, in the order the backward pass computed the gradients.
// GROUPED: train.linear_grad_weight {{.*}} -> tensor<4x5xf32>
// GROUPED-NEXT: train.reduce_scatter_shards %{{.*}}, %{{.*}}, %{{.*}} {{.*}} : tensor<3x4xf32>, tensor<3xf32>, tensor<4x5xf32> -> tensor<6xf32>, tensor<2xf32>, tensor<10xf32>
