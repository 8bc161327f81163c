// Flat shards (#train.flat_shard on a step's arguments and results) that
// make no sense (found by hand while probing the lowering with mutated
// ZeRO-3 steps; UBSan in the shard-fuzz build reported the manifest shifting
// 1 by a negative grid axis, and shapes that disagree with the argument went
// into the manifest for the runtime to refuse). The step's verifier checks
// them as the runtime's manifest parser does: a full shape it may hold,
// distinct ascending axes of the plan's grid below 31 (the runtime's axis
// mask), and an argument that is that shape's flat shard over those axes.
// RUN: shard-opt --autoshard-lower-to-runtime -split-input-file -verify-diagnostics %s

// Valid: 6 elements over 2 ranks, 3 each; lowers.
shard.grid @world(shape = 2)
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [2, 3], grid_axes = [0]>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.shard = #train.flat_shard<shape = [2, 3], grid_axes = [0]>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "zero3", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>, train.partitioned} {
  return %w, %l : tensor<3xf32>, tensor<f32>
}

// -----

shard.grid @world(shape = 2)
// expected-error@+1 {{argument #0 has train.shard #train.flat_shard<shape = [2, 3], grid_axes = [-1]>: grid_axes must be distinct, ascending axes of @world (rank 1) below 31}}
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [2, 3], grid_axes = [-1]>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.shard = #train.flat_shard<shape = [2, 3], grid_axes = [-1]>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "zero3", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>, train.partitioned} {
  return %w, %l : tensor<3xf32>, tensor<f32>
}

// -----

shard.grid @world(shape = 2)
// expected-error@+1 {{grid_axes must be distinct, ascending axes of @world (rank 1) below 31}}
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [2, 3], grid_axes = [1]>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.shard = #train.flat_shard<shape = [2, 3], grid_axes = [1]>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "zero3", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>, train.partitioned} {
  return %w, %l : tensor<3xf32>, tensor<f32>
}

// -----

shard.grid @world(shape = 2x2)
// expected-error@+1 {{grid_axes must be distinct, ascending axes of @world (rank 2) below 31}}
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [2, 3], grid_axes = [1, 0]>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.shard = #train.flat_shard<shape = [2, 3], grid_axes = [1, 0]>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "zero3", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>, train.partitioned} {
  return %w, %l : tensor<3xf32>, tensor<f32>
}

// -----

shard.grid @world(shape = 2)
// expected-error@+1 {{its full shape must have dimensions >= 0 and hold at most 2^59 elements}}
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [-2, 3], grid_axes = [0]>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.shard = #train.flat_shard<shape = [-2, 3], grid_axes = [0]>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "zero3", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>, train.partitioned} {
  return %w, %l : tensor<3xf32>, tensor<f32>
}

// -----

shard.grid @world(shape = 2)
// expected-error@+1 {{its full shape must have dimensions >= 0 and hold at most 2^59 elements}}
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [4294967296, 4294967296], grid_axes = [0]>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.shard = #train.flat_shard<shape = [4294967296, 4294967296], grid_axes = [0]>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "zero3", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>, train.partitioned} {
  return %w, %l : tensor<3xf32>, tensor<f32>
}

// -----

shard.grid @world(shape = 2)
// expected-error@+1 {{the flat shard of 300 elements over 2 ranks is 1-D with ceil(300 / 2) = 150 elements, but the argument is 'tensor<3xf32>'}}
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [100, 3], grid_axes = [0]>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.shard = #train.flat_shard<shape = [100, 3], grid_axes = [0]>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "zero3", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>, train.partitioned} {
  return %w, %l : tensor<3xf32>, tensor<f32>
}

// -----

shard.grid @world(shape = 2)
// expected-error@+1 {{the flat shard of 7 elements over 2 ranks is 1-D with ceil(7 / 2) = 4 elements, but the argument is 'tensor<3x1xf32>'}}
func.func @step(%w: tensor<3x1xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [7], grid_axes = [0]>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3x1xf32> {train.role = #train.role<param>, train.name = "w", train.shard = #train.flat_shard<shape = [7], grid_axes = [0]>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "zero3", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>, train.partitioned} {
  return %w, %l : tensor<3x1xf32>, tensor<f32>
}

// -----

shard.grid @world(shape = 2)
// expected-error@+1 {{a flat shard lies on the grid of the step's train.plan, and the step has no plan with a shard.grid}}
func.func @step(%w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [2, 3], grid_axes = [0]>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.shard = #train.flat_shard<shape = [2, 3], grid_axes = [0]>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  return %w, %l : tensor<3xf32>, tensor<f32>
}
