// RUN: shard-opt %S/Inputs/two-layer-step.mlir --pass-pipeline='builtin.module(autoshard-autodiff,autoshard-plan{strategy=zero2 world-size=2},autoshard-partition)' | FileCheck %s
// RUN: shard-opt --strategy=zero2 --overlap=false --world-size=2 %S/Inputs/two-layer-step.mlir | FileCheck %s --check-prefix=GROUPED
// RUN: shard-opt --strategy=zero2 --overlap=false --world-size=2 %S/Inputs/two-layer-step.mlir | shard-opt > /dev/null
// RUN: shard-opt --strategy=zero2 --world-size=2 %S/Inputs/accumulation-step.mlir | FileCheck %s --check-prefix=MIXED

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

// Mixed precision, 2 micro-batches, scheduled: as ZeRO-1 (strategy-zero1.mlir),
// the master is a shard argument and its bf16 copy is gathered once, the
// gather started at the top of the step, ahead of the first micro-batch's
// slices, and waited before its first reader.
// MIXED-LABEL: func.func @step
// MIXED-SAME: %[[W:[^:]+]]: tensor<8xf32> {{{[^}]*}}train.name = "w", train.role = #train.role<param>, train.shard = #train.flat_shard<shape = [4, 4], grid_axes = [0]>}
// MIXED: %[[WB:.*]] = train.cast %[[W]] : tensor<8xf32> to tensor<8xbf16>
// MIXED-NEXT: %[[START:.*]] = train.collective_start all_gather_shards %[[WB]] on @world grid_axes = [0] : tensor<8xbf16> -> !train.pending<tensor<4x4xbf16>>
// MIXED-NEXT: train.slice_rows
// MIXED-NEXT: train.slice_rows
// MIXED-NEXT: %[[FULL:.*]] = train.collective_wait %[[START]]
// MIXED-NOT: all_gather_shards
// MIXED: train.slice_rows %{{.*}} {offset = 2 : i64}
// MIXED: train.linear %{{.*}}, %[[FULL]]
// MIXED-NOT: all_gather_shards
// MIXED: train.adamw %[[W]],
// MIXED-NOT: all_gather_shards
// MIXED: return
