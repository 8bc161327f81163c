// RUN: shard-opt %S/Inputs/two-layer-step.mlir --pass-pipeline='builtin.module(autoshard-autodiff,autoshard-plan{strategy=hybrid world-size=4 shard-group-size=2},autoshard-partition)' | FileCheck %s
// RUN: shard-opt --strategy=hybrid --overlap=false --world-size=4 --shard-group-size=2 %S/Inputs/two-layer-step.mlir | FileCheck %s --check-prefix=GROUPED
// RUN: shard-opt --strategy=hybrid --overlap=false --world-size=4 --shard-group-size=2 %S/Inputs/two-layer-step.mlir | shard-opt > /dev/null

// Hybrid sharding on a 2x2 grid: FSDP within each group of 2 ranks (axis 1),
// replicated across the 2 groups (axis 0). The batch splits over all 4
// ranks; gradients are reduce-scattered within a group, then averaged
// across groups; clipping sums squares within a group; the loss is averaged
// over everything.

// CHECK: shard.grid @world(shape = 2x2)
// CHECK-LABEL: func.func @step
// CHECK-SAME: tensor<10xf32> {{{[^}]*}}train.shard = #train.flat_shard<shape = [4, 5], grid_axes = [1]>, train.unit = "h.0"}
// CHECK-SAME: tensor<2x5xf32> {train.name = "x"
// CHECK-SAME: train.plan = #train.plan<strategy = "hybrid", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [1], unit = block, reshard = after_forward, bucket_cap_mb = 25>
// CHECK: train.all_gather_shards %{{.*}} on @world grid_axes = [1] : tensor<10xf32> -> tensor<4x5xf32>
// CHECK: shard.all_reduce %{{.*}} on @world grid_axes = [0, 1] reduction = average : tensor<f32>
// CHECK: %[[GS:.*]] = train.reduce_scatter_shards %{{.*}} on @world grid_axes = [1] reduction = average : tensor<3x4xf32> -> tensor<6xf32>
// CHECK: shard.all_reduce %[[GS]] on @world grid_axes = [0] reduction = average : tensor<6xf32>
// CHECK: %[[SS:.*]] = train.sum_of_squares
// CHECK-NEXT: shard.all_reduce %[[SS]] on @world grid_axes = [1] : tensor<f32>

// Grouped: the reduce-scatters within a group form one bucket, and so do
// the averages of the shards across groups.
// GROUPED: train.reduce_scatter_shards %{{.*}}, %{{.*}}, %{{.*}} on @world grid_axes = [1] reduction = average
// GROUPED: train.all_reduce_bucket %{{.*}}, %{{.*}}, %{{.*}} on @world grid_axes = [0] reduction = average
