// RUN: shard-opt %examples/mlp.mlir --pass-pipeline='builtin.module(autoshard-autodiff,autoshard-plan{strategy=ddp world-size=4},autoshard-partition)' | FileCheck %s
// RUN: shard-opt --strategy=ddp --overlap=false --world-size=4 %examples/mlp.mlir | FileCheck %s --check-prefix=GROUPED
// The printed IR is valid input again and survives a second round trip.
// RUN: shard-opt --strategy=ddp --overlap=false --world-size=4 %examples/mlp.mlir | shard-opt | FileCheck %s --check-prefix=GROUPED
// The named pipeline is the same as the --strategy sugar.
// RUN: shard-opt --pass-pipeline='builtin.module(autoshard-strategy{strategy=ddp world-size=4 overlap=false})' %examples/mlp.mlir > %t.pipeline
// RUN: shard-opt --strategy=ddp --overlap=false --world-size=4 %examples/mlp.mlir > %t.sugar
// RUN: diff %t.pipeline %t.sugar

// DDP on 4 ranks: the global batch of 64 rows becomes 16 per rank, the
// parameters keep their full shapes, each of the six gradients is averaged
// over the grid right where backward produces it (the last layer's first),
// and the loss is averaged for reporting.

// CHECK: shard.grid @world(shape = 4)
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<64x32xf32> {{{[^}]*}}train.name = "fc1.weight"
// CHECK-SAME: tensor<16x32xf32> {{{[^}]*}}train.name = "x"
// CHECK-SAME: tensor<16xi32> {{{[^}]*}}train.name = "y"
// CHECK-SAME: train.partitioned, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>
// CHECK: %[[LOSS:.*]] = train.softmax_cross_entropy {{.*}} : (tensor<16x10xf32>, tensor<16xi32>) -> tensor<f32>
// CHECK-NEXT: %[[LOSS_AVG:.*]] = shard.all_reduce %[[LOSS]] on @world grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
// CHECK: %[[DW3:.*]] = train.linear_grad_weight {{.*}} -> tensor<10x64xf32>
// CHECK-NEXT: %[[DW3_AVG:.*]] = shard.all_reduce %[[DW3]] on @world grid_axes = [0] reduction = average : tensor<10x64xf32>
// CHECK: %[[DB3:.*]] = train.bias_grad {{.*}} -> tensor<10xf32>
// CHECK-NEXT: %[[DB3_AVG:.*]] = shard.all_reduce %[[DB3]] {{.*}} : tensor<10xf32>
// CHECK: %[[DW2:.*]] = train.linear_grad_weight {{.*}} -> tensor<64x64xf32>
// CHECK-NEXT: %[[DW2_AVG:.*]] = shard.all_reduce %[[DW2]] {{.*}} : tensor<64x64xf32>
// CHECK: %[[DB2:.*]] = train.bias_grad {{.*}} -> tensor<64xf32>
// CHECK-NEXT: %[[DB2_AVG:.*]] = shard.all_reduce %[[DB2]] {{.*}} : tensor<64xf32>
// CHECK: %[[DW1:.*]] = train.linear_grad_weight {{.*}} : (tensor<16x64xf32>, tensor<16x32xf32>) -> tensor<64x32xf32>
// CHECK-NEXT: %[[DW1_AVG:.*]] = shard.all_reduce %[[DW1]] {{.*}} : tensor<64x32xf32>
// CHECK: %[[DB1:.*]] = train.bias_grad {{.*}} -> tensor<64xf32>
// CHECK-NEXT: %[[DB1_AVG:.*]] = shard.all_reduce %[[DB1]] {{.*}} : tensor<64xf32>
// CHECK-NEXT: train.sgd %{{.*}}, %[[DW1_AVG]], %{{.*}} momentum_buffer %{{.*}} {momentum = 0.899999976 : f32}
// CHECK-NEXT: train.sgd %{{.*}}, %[[DB1_AVG]],
// CHECK-NEXT: train.sgd %{{.*}}, %[[DW2_AVG]],
// CHECK-NEXT: train.sgd %{{.*}}, %[[DB2_AVG]],
// CHECK-NEXT: train.sgd %{{.*}}, %[[DW3_AVG]],
// CHECK-NEXT: train.sgd %{{.*}}, %[[DB3_AVG]],
// CHECK: return {{.*}}, %[[LOSS_AVG]] :

// The full strategy pipeline then groups the reductions into one bucket
// (25 MiB cap): the loss and the six gradients, issued once the last
// gradient exists.
// GROUPED-NOT: all_reduce
// GROUPED: train.all_reduce_bucket %{{.*}} on @world grid_axes = [0] reduction = average : tensor<f32>, tensor<10x64xf32>, tensor<10xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<64x32xf32>, tensor<64xf32> ->
// GROUPED-NOT: all_reduce
