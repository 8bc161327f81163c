// Found by shard-fuzz in its 40-minute run (a one-byte mutation of
// autoshard-lower-to-runtime.mlir and autoshard-partition.mlir cases:
// `shape = 1` -> `shape = 0`): a shard.grid with an axis of size 0 passes
// the shard dialect's verifier, and then autoshard-partition divided the
// batch by the grid's size and the lowering (and so autoshard-plan-memory)
// padded collectives to a multiple of the group's size: integer divisions
// by zero, SIGFPE. The grid of a plan and of every collective of a step
// has a static size of at least 1 on every axis.
// RUN: shard-opt --autoshard-partition -split-input-file -verify-diagnostics %s
// RUN: shard-opt --autoshard-plan-memory -split-input-file -verify-diagnostics %s

shard.grid @one(shape = 0)
func.func @step(%x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"},
                %y: tensor<2xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %r = train.relu %x : tensor<2x4xf32>
  %loss = train.softmax_cross_entropy %r, %y : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  // expected-error@+1 {{'shard.all_reduce' op runs on @one, whose axis 0 has size 0; a training step's grids have a static size of at least 1 on every axis}}
  %avg = shard.all_reduce %loss on @one grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
  return %avg : tensor<f32>
}

// -----

// The axis a collective reduces over is fine, another is empty.
shard.grid @grid(shape = 2x0)
func.func @step(%w: tensor<4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<4xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  // expected-error@+1 {{'train.all_reduce_bucket' op runs on @grid, whose axis 1 has size 0}}
  %s = train.all_reduce_bucket %w on @grid grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  return %s, %l : tensor<4xf32>, tensor<f32>
}

// -----

shard.grid @world(shape = 0)
// expected-error@+1 {{plan runs on @world, whose axis 0 has size 0; a training grid has at least 1 rank on every axis}}
func.func @step(%x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"},
                %y: tensor<2xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %loss = train.softmax_cross_entropy %x, %y : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A collective on a grid of unknown size.
shard.grid @grid(shape = ?)
func.func @step(%w: tensor<4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<4xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  // expected-error@+1 {{'shard.all_reduce' op runs on @grid, whose axis 0 has a dynamic size; a training step's grids have a static size of at least 1 on every axis}}
  %s = shard.all_reduce %w on @grid grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  return %s, %l : tensor<4xf32>, tensor<f32>
}
