// RUN: shard-opt --strategy=zero3 --overlap=false --world-size=2 --bucket-cap-mb=1 --param-group='ddp=out\..*' --param-group='zero2=h\.0\.fc2\..*' %S/Inputs/two-layer-step.mlir | FileCheck %s
// RUN: shard-opt --strategy=zero3 --overlap=false --world-size=2 --param-group='ddp=out\..*' --param-group='zero2=h\.0\.fc2\..*' %S/Inputs/two-layer-step.mlir | shard-opt > /dev/null
// RUN: shard-opt --strategy=zero3 --overlap=false --world-size=2 --persistence-threshold=12 %S/Inputs/two-layer-step.mlir | FileCheck %s --check-prefix=PERSIST
// RUN: not shard-opt --world-size=1 --strategy=zero3 --overlap=false --param-group=ddp %S/Inputs/two-layer-step.mlir 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not shard-opt --world-size=1 --strategy=zero3 --overlap=false --param-group='ddp=out\..*' --param-group='zero2=fc2' %S/Inputs/two-layer-step.mlir 2>&1 | FileCheck %s --check-prefix=NOMATCH

// Parameter groups under ZeRO-3: out.bias is placed as DDP places it
// (averaged whole), h.0.fc2.weight as ZeRO-2 (gradient reduce-scattered,
// the updated shard gathered back), h.0.fc1.weight as the plan (a shard
// gathered for its reader). Clipping sums the sharded gradients' squares
// over the grid and adds the whole gradient's.

// CHECK-LABEL: func.func @step
// CHECK-SAME: %arg0: tensor<10xf32> {{{[^}]*}}train.name = "h.0.fc1.weight", train.role = #train.role<param>, train.shard = #train.flat_shard<shape = [4, 5], grid_axes = [0]>, train.unit = "h.0"}
// CHECK-SAME: %arg1: tensor<3x4xf32> {{{[^}]*}}train.name = "h.0.fc2.weight", train.role = #train.role<param>, train.unit = "h.0"}
// CHECK-SAME: %arg2: tensor<3xf32> {{{[^}]*}}train.name = "out.bias", train.role = #train.role<param>}
// CHECK-SAME: %arg9: tensor<6xf32> {{{[^}]*}}train.name = "h.0.fc2.weight.exp_avg", train.role = #train.role<opt_state>, train.shard
// CHECK-SAME: %arg11: tensor<3xf32> {{{[^}]*}}train.name = "out.bias.exp_avg", train.role = #train.role<opt_state>}
// CHECK: %[[F0:.*]] = train.all_gather_shards %arg0 on @world grid_axes = [0] : tensor<10xf32> -> tensor<4x5xf32>
// CHECK: train.linear %{{.*}}, %[[F0]]
// CHECK: train.linear %{{.*}}, %arg1, %arg2
// CHECK: %[[DW1:.*]] = train.linear_grad_weight {{.*}} -> tensor<3x4xf32>
// CHECK: %[[DB:.*]] = train.bias_grad
// CHECK: %[[R:.*]]:2 = train.all_reduce_bucket %{{.*}}, %[[DB]] on @world grid_axes = [0] reduction = average : tensor<f32>, tensor<3xf32>
// CHECK: %[[DW0:.*]] = train.linear_grad_weight {{.*}} -> tensor<4x5xf32>
// CHECK-NEXT: %[[S:.*]]:2 = train.reduce_scatter_shards %[[DW1]], %[[DW0]] on @world grid_axes = [0] reduction = average : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<6xf32>, tensor<10xf32>
// CHECK-NEXT: %[[SS:.*]] = train.sum_of_squares %[[S]]#1, %[[S]]#0
// CHECK-NEXT: %[[NORM:.*]] = shard.all_reduce %[[SS]] on @world grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK-NEXT: %[[WHOLE:.*]] = train.sum_of_squares %[[R]]#1 : tensor<3xf32>
// CHECK-NEXT: %[[TOTAL:.*]] = train.add %[[NORM]], %[[WHOLE]] : tensor<f32>
// CHECK-NEXT: train.clip_coefficient %[[TOTAL]]
// CHECK: train.adamw %arg0, %[[S]]#1
// CHECK: %[[P1:.*]] = train.shard_of %arg1 on @world grid_axes = [0] : tensor<3x4xf32> -> tensor<6xf32>
// CHECK-NEXT: %[[N1:.*]], %{{.*}}, %{{.*}} = train.adamw %[[P1]], %[[S]]#0
// CHECK-NEXT: %[[G1:.*]] = train.all_gather_shards %[[N1]] on @world grid_axes = [0] : tensor<6xf32> -> tensor<3x4xf32>
// CHECK-NEXT: train.adamw %arg2, %[[R]]#1, %arg11, %arg12
// CHECK: return %{{.*}}, %[[G1]], %

// The persistence threshold keeps the 12-element h.0.fc2.weight and the
// bias whole (their gradients and states still sharded); the 20-element
// h.0.fc1.weight is a shard.
// PERSIST: %arg0: tensor<10xf32>
// PERSIST-SAME: %arg1: tensor<3x4xf32>
// PERSIST-SAME: %arg2: tensor<3xf32>
// PERSIST-SAME: groups = [<max_elements = 12, optimizer_states = sharded, gradients = sharded, parameters = replicated, unit = param, shard_axes = [0]>]
// PERSIST: train.all_gather_shards %arg0
// PERSIST-NOT: train.all_gather_shards %arg1
// PERSIST-NOT: train.all_gather_shards %arg2

// BAD: error: parameter group 'ddp' must be PRESET=REGEX with PRESET one of ddp, zero1, zero2, zero3, fsdp, hybrid
// A group that matches no parameter name (the expression must match a
// whole name) is refused rather than silently placing nothing.
// NOMATCH: error: parameter group 'zero2=fc2' matches no parameter of the step; its regular expression must match a whole parameter name, such as 'h.0.fc1.weight'

