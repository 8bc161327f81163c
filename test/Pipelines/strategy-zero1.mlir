// RUN: shard-opt %S/Inputs/two-layer-step.mlir --pass-pipeline='builtin.module(autoshard-autodiff,autoshard-plan{strategy=zero1 world-size=2},autoshard-partition)' | FileCheck %s
// RUN: shard-opt --strategy=zero1 --overlap=false --world-size=2 %S/Inputs/two-layer-step.mlir | FileCheck %s --check-prefix=GROUPED
// RUN: shard-opt --strategy=zero1 --overlap=false --world-size=2 %S/Inputs/two-layer-step.mlir | shard-opt > /dev/null
// RUN: shard-opt --strategy=zero1 --overlap=false --world-size=2 %S/Inputs/accumulation-step.mlir | FileCheck %s --check-prefix=MIXED
// RUN: shard-opt --strategy=zero1 --overlap=false --world-size=2 %S/Inputs/accumulation-step.mlir | shard-opt > /dev/null

// ZeRO-1: the optimizer states are flat shards (ceil(20/2) = 10, 6 and 2
// elements); the gradients stay whole until the update, are reduce-scattered
// into shards then, and clipping sums the shards' squares over the ranks;
// each parameter stays replicated: its shard is updated and gathered back.

// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[W0:[^:]+]]: tensor<4x5xf32> {{{[^}]*}}"h.0.fc1.weight"
// CHECK-SAME: tensor<4xi32> {train.name = "y"
// CHECK-SAME: %[[M0:[^:]+]]: tensor<10xf32> {{{[^}]*}}"h.0.fc1.weight.exp_avg", train.role = #train.role<opt_state>, train.shard = #train.flat_shard<shape = [4, 5], grid_axes = [0]>}
// CHECK-SAME: -> (tensor<4x5xf32> {train.name = "h.0.fc1.weight", train.role = #train.role<param>}
// CHECK-SAME: tensor<10xf32> {train.name = "h.0.fc1.weight.exp_avg", train.role = #train.role<opt_state>, train.shard = #train.flat_shard<shape = [4, 5], grid_axes = [0]>}
// CHECK-NOT: all_gather_shards
// CHECK: %[[DW0:.*]] = train.linear_grad_weight {{.*}} -> tensor<4x5xf32>
// CHECK-NEXT: %[[GS0:.*]] = train.reduce_scatter_shards %[[DW0]] on @world grid_axes = [0] reduction = average : tensor<4x5xf32> -> tensor<10xf32>
// CHECK-NEXT: train.reduce_scatter_shards {{.*}} : tensor<3x4xf32> -> tensor<6xf32>
// CHECK-NEXT: train.reduce_scatter_shards {{.*}} : tensor<3xf32> -> tensor<2xf32>
// CHECK-NEXT: %[[SS:.*]] = train.sum_of_squares %[[GS0]], {{.*}} : tensor<10xf32>, tensor<6xf32>, tensor<2xf32>
// CHECK-NEXT: %[[TOTAL:.*]] = shard.all_reduce %[[SS]] on @world grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK-NEXT: train.clip_coefficient %[[TOTAL]]
// CHECK: %[[PS0:.*]] = train.shard_of %[[W0]] on @world grid_axes = [0] : tensor<4x5xf32> -> tensor<10xf32>
// CHECK-NEXT: %[[NP0:[^,]*]], {{.*}} = train.adamw %[[PS0]], %[[GS0]], %[[M0]],
// CHECK-NEXT: %[[NW0:.*]] = train.all_gather_shards %[[NP0]] on @world grid_axes = [0] : tensor<10xf32> -> tensor<4x5xf32>
// CHECK: return %[[NW0]],

// Grouped: one bucket reduce-scatters the three gradients, one bucket
// gathers the three updated parameters.
// GROUPED: train.reduce_scatter_shards %{{.*}}, %{{.*}}, %{{.*}} on @world grid_axes = [0] reduction = average : tensor<4x5xf32>, tensor<3x4xf32>, tensor<3xf32> -> tensor<10xf32>, tensor<6xf32>, tensor<2xf32>
// GROUPED: train.all_gather_shards %{{.*}}, %{{.*}}, %{{.*}} on @world grid_axes = [0] : tensor<10xf32>, tensor<6xf32>, tensor<2xf32> -> tensor<4x5xf32>, tensor<3x4xf32>, tensor<3xf32>
// GROUPED-NEXT: return

// Mixed precision, 2 micro-batches: the f32 master weight is sharded with
// its optimizer states (8 of 16 elements, returned as a shard); its bf16
// compute copy is cast from the shard and gathered once for the whole step,
// before its first reader, and both micro-batches read that one copy. The
// optimizer updates the master shard in place: nothing is gathered after it.
// MIXED-LABEL: func.func @step
// MIXED-SAME: %[[W:[^:]+]]: tensor<8xf32> {{{[^}]*}}train.name = "w", train.role = #train.role<param>, train.shard = #train.flat_shard<shape = [4, 4], grid_axes = [0]>}
// MIXED-SAME: -> (tensor<8xf32> {train.name = "w", train.role = #train.role<param>, train.shard = #train.flat_shard<shape = [4, 4], grid_axes = [0]>}
// MIXED: %[[WB:.*]] = train.cast %[[W]] : tensor<8xf32> to tensor<8xbf16>
// MIXED: %[[FULL:.*]] = train.all_gather_shards %[[WB]] on @world grid_axes = [0] : tensor<8xbf16> -> tensor<4x4xbf16>
// MIXED-NEXT: train.linear %{{.*}}, %[[FULL]]
// MIXED-NOT: all_gather_shards
// MIXED: train.slice_rows %{{.*}} {offset = 2 : i64}
// MIXED-NOT: all_gather_shards
// MIXED: train.linear %{{.*}}, %[[FULL]]
// MIXED-NOT: all_gather_shards
// MIXED: %[[GS:.*]] = train.reduce_scatter_shards %{{.*}} : tensor<4x4xbf16> -> tensor<8xbf16>
// MIXED-NOT: all_gather_shards
// MIXED: %[[NW:[^,]*]], {{.*}} = train.adamw %[[W]], %[[GS]]
// MIXED-NOT: all_gather_shards
// MIXED: return %[[NW]],
