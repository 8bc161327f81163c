// RUN: shard-opt %s -split-input-file -allow-unregistered-dialect \
// RUN:   --pass-pipeline='builtin.module(autoshard-group-collectives)' | FileCheck %s

// Each step takes a loss and returns it (the smallest valid step); the
// tensors the collectives move come from "test.src".

// Neighbouring all-reduces of one kind merge into one bucket where the last
// of them was; ops in between that do not read them stay where they are.

shard.grid @world(shape = 2)
// CHECK-LABEL: func.func @merge
// CHECK-NEXT: %[[A:.*]] = "test.src"
// CHECK-NEXT: %[[B:.*]] = "test.src"
// CHECK-NEXT: %[[R:.*]]:2 = train.all_reduce_bucket %[[A]], %[[B]] on @world grid_axes = [0] reduction = average : tensor<4x5xf32>, tensor<3xf32> -> tensor<4x5xf32>, tensor<3xf32>
// CHECK-NEXT: "test.use"(%[[R]]#0, %[[R]]#1)
// CHECK-NOT: shard.all_reduce
func.func @merge(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %a = "test.src"() : () -> tensor<4x5xf32>
  %ra = shard.all_reduce %a on @world grid_axes = [0] reduction = average : tensor<4x5xf32> -> tensor<4x5xf32>
  %b = "test.src"() : () -> tensor<3xf32>
  %rb = shard.all_reduce %b on @world grid_axes = [0] reduction = average : tensor<3xf32> -> tensor<3xf32>
  "test.use"(%ra, %rb) : (tensor<4x5xf32>, tensor<3xf32>) -> ()
  return %l : tensor<f32>
}

// -----

// A reader of a member closes the bucket, also from inside a region.
shard.grid @world(shape = 2)
// CHECK-LABEL: func.func @reader_between
// CHECK: shard.all_reduce
// CHECK-NEXT: "test.use"
// CHECK-NEXT: shard.all_reduce
// CHECK-NEXT: "test.region"
// CHECK: shard.all_reduce
// CHECK-NOT: train.all_reduce_bucket
func.func @reader_between(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %a = "test.src"() : () -> tensor<4xf32>
  %ra = shard.all_reduce %a on @world grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  "test.use"(%ra) : (tensor<4xf32>) -> ()
  %rb = shard.all_reduce %a on @world grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  "test.region"() ({
    "test.use"(%rb) : (tensor<4xf32>) -> ()
    "test.yield"() : () -> ()
  }) : () -> ()
  %rc = shard.all_reduce %a on @world grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// Different reductions, element types or grid axes are different buckets;
// a max reduction is never grouped.
shard.grid @grid(shape = 2x2)
// CHECK-LABEL: func.func @keys
// CHECK: shard.all_reduce %{{.*}} on @grid grid_axes = [0] : tensor<f32>
// CHECK-NEXT: shard.all_reduce %{{.*}} on @grid grid_axes = [0] reduction = average : tensor<4xf32>
// CHECK-NEXT: shard.all_reduce %{{.*}} on @grid grid_axes = [0] reduction = average : tensor<4xbf16>
// CHECK-NEXT: shard.all_reduce %{{.*}} on @grid grid_axes = [1] reduction = average
// CHECK-NEXT: shard.all_reduce %{{.*}} reduction = max
// CHECK-NEXT: shard.all_reduce %{{.*}} reduction = max
// CHECK-NEXT: return
func.func @keys(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @grid, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %b = "test.src"() : () -> tensor<4xf32>
  %c = "test.src"() : () -> tensor<4xbf16>
  %r0 = shard.all_reduce %l on @grid grid_axes = [0] reduction = sum : tensor<f32> -> tensor<f32>
  %r1 = shard.all_reduce %b on @grid grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  %r2 = shard.all_reduce %c on @grid grid_axes = [0] reduction = average : tensor<4xbf16> -> tensor<4xbf16>
  %r3 = shard.all_reduce %b on @grid grid_axes = [1] reduction = average : tensor<4xf32> -> tensor<4xf32>
  %r4 = shard.all_reduce %b on @grid grid_axes = [0] reduction = max : tensor<4xf32> -> tensor<4xf32>
  %r5 = shard.all_reduce %b on @grid grid_axes = [0] reduction = max : tensor<4xf32> -> tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// The cap: a bucket closes once it holds at least bucket_cap_mb MiB. Each
// tensor here is 512 KiB, so a 1 MiB cap holds two.
shard.grid @world(shape = 2)
// CHECK-LABEL: func.func @cap
// CHECK: train.all_reduce_bucket %[[A:[^,]*]], %[[A]] on
// CHECK-NEXT: train.all_reduce_bucket %[[A]], %[[A]] on
// CHECK-NEXT: shard.all_reduce %[[A]]
// CHECK-NEXT: return
func.func @cap(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 1>} {
  %a = "test.src"() : () -> tensor<131072xf32>
  %r0 = shard.all_reduce %a on @world grid_axes = [0] reduction = average : tensor<131072xf32> -> tensor<131072xf32>
  %r1 = shard.all_reduce %a on @world grid_axes = [0] reduction = average : tensor<131072xf32> -> tensor<131072xf32>
  %r2 = shard.all_reduce %a on @world grid_axes = [0] reduction = average : tensor<131072xf32> -> tensor<131072xf32>
  %r3 = shard.all_reduce %a on @world grid_axes = [0] reduction = average : tensor<131072xf32> -> tensor<131072xf32>
  %r4 = shard.all_reduce %a on @world grid_axes = [0] reduction = average : tensor<131072xf32> -> tensor<131072xf32>
  return %l : tensor<f32>
}

// -----

// Flat-shard collectives merge too, a bucket op with its neighbours: the
// reduce-scatters of ZeRO-2/3 gradients and the gathers of FSDP's blocks.
shard.grid @world(shape = 2)
// CHECK-LABEL: func.func @shards
// CHECK: %[[S:.*]]:3 = train.reduce_scatter_shards %{{.*}}, %{{.*}}, %{{.*}} on @world grid_axes = [0] reduction = average : tensor<3x4xf32>, tensor<3xf32>, tensor<2xf32> -> tensor<6xf32>, tensor<2xf32>, tensor<1xf32>
// CHECK-NEXT: %[[G:.*]]:3 = train.all_gather_shards %[[S]]#0, %[[S]]#1, %[[S]]#2 on @world grid_axes = [0] : tensor<6xf32>, tensor<2xf32>, tensor<1xf32> -> tensor<3x4xf32>, tensor<3xf32>, tensor<2xf32>
// CHECK-NEXT: "test.use"(%[[G]]#0, %[[G]]#1, %[[G]]#2)
func.func @shards(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "zero3", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %w = "test.src"() : () -> tensor<3x4xf32>
  %b = "test.src"() : () -> tensor<3xf32>
  %c = "test.src"() : () -> tensor<2xf32>
  %sw, %sb = train.reduce_scatter_shards %w, %b on @world grid_axes = [0] reduction = average : tensor<3x4xf32>, tensor<3xf32> -> tensor<6xf32>, tensor<2xf32>
  %sc = train.reduce_scatter_shards %c on @world grid_axes = [0] reduction = average : tensor<2xf32> -> tensor<1xf32>
  %fw = train.all_gather_shards %sw on @world grid_axes = [0] : tensor<6xf32> -> tensor<3x4xf32>
  %fb = train.all_gather_shards %sb on @world grid_axes = [0] : tensor<2xf32> -> tensor<3xf32>
  %fc = train.all_gather_shards %sc on @world grid_axes = [0] : tensor<1xf32> -> tensor<2xf32>
  "test.use"(%fw, %fb, %fc) : (tensor<3x4xf32>, tensor<3xf32>, tensor<2xf32>) -> ()
  return %l : tensor<f32>
}

// -----

// A step without a plan is left alone.
shard.grid @world(shape = 2)
// CHECK-LABEL: func.func @no_plan
// CHECK-NEXT: shard.all_reduce
// CHECK-NEXT: shard.all_reduce
func.func @no_plan(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %r0 = shard.all_reduce %l on @world grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
  %r1 = shard.all_reduce %l on @world grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Each kind has its own open bucket: an all-reduce between two
// reduce-scatters does not close theirs, and a collective that reads a
// member (the replica average of a shard) closes only that member's bucket.
shard.grid @grid(shape = 2x2)
// CHECK-LABEL: func.func @interleaved
// CHECK: %[[AR:.*]] = shard.all_reduce %{{.*}} on @grid grid_axes = [0, 1] reduction = average : tensor<3xf32>
// CHECK-NEXT: %[[S:.*]]:2 = train.reduce_scatter_shards %{{.*}}, %{{.*}} on @grid grid_axes = [1] reduction = average : tensor<4x2xf32>, tensor<6xf32> -> tensor<4xf32>, tensor<3xf32>
// CHECK-NEXT: %[[R:.*]]:2 = train.all_reduce_bucket %[[S]]#0, %[[S]]#1 on @grid grid_axes = [0] reduction = average
// CHECK-NEXT: "test.use"(%[[AR]], %[[R]]#0, %[[R]]#1)
func.func @interleaved(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "hybrid", grid = @grid, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [1], unit = block, reshard = after_forward, bucket_cap_mb = 25>} {
  %a = "test.src"() : () -> tensor<4x2xf32>
  %b = "test.src"() : () -> tensor<3xf32>
  %c = "test.src"() : () -> tensor<6xf32>
  %sa = train.reduce_scatter_shards %a on @grid grid_axes = [1] reduction = average : tensor<4x2xf32> -> tensor<4xf32>
  %rb = shard.all_reduce %b on @grid grid_axes = [0, 1] reduction = average : tensor<3xf32> -> tensor<3xf32>
  %sc = train.reduce_scatter_shards %c on @grid grid_axes = [1] reduction = average : tensor<6xf32> -> tensor<3xf32>
  %ra = shard.all_reduce %sa on @grid grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  %rc = shard.all_reduce %sc on @grid grid_axes = [0] reduction = average : tensor<3xf32> -> tensor<3xf32>
  "test.use"(%rb, %ra, %rc) : (tensor<3xf32>, tensor<4xf32>, tensor<3xf32>) -> ()
  return %l : tensor<f32>
}
