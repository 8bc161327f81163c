// A ZeRO-2 step on 2 ranks with SGD and momentum, as autoshard-partition
// leaves it: the gradients reduce-scattered, each rank's update on its
// flat shard of the parameter and of the momentum, and the new shards
// gathered into the parameters.
shard.grid @world(shape = 2)
func.func @step(
    %w: tensor<4x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
    %b: tensor<4xf32> {train.role = #train.role<param>, train.name = "b", train.init = #train.init<zeros>},
    %mw: tensor<8xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum", train.shard = #train.flat_shard<shape = [4, 4], grid_axes = [0]>},
    %mb: tensor<2xf32> {train.role = #train.role<opt_state>, train.name = "b.momentum", train.shard = #train.flat_shard<shape = [4], grid_axes = [0]>},
    %x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<zeros>})
    -> (tensor<4x4xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<4xf32> {train.role = #train.role<param>, train.name = "b"},
        tensor<8xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum", train.shard = #train.flat_shard<shape = [4, 4], grid_axes = [0]>},
        tensor<2xf32> {train.role = #train.role<opt_state>, train.name = "b.momentum", train.shard = #train.flat_shard<shape = [4], grid_axes = [0]>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.partitioned, train.plan = #train.plan<strategy = "zero2", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %loss = "test.loss"(%x, %w, %b) : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<f32>
  %mean = shard.all_reduce %loss on @world grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
  %gb = "test.grad"(%x) : (tensor<2x4xf32>) -> tensor<4xf32>
  %gw = "test.grad"(%x) : (tensor<2x4xf32>) -> tensor<4x4xf32>
  %g:2 = train.reduce_scatter_shards %gb, %gw on @world grid_axes = [0] reduction = average : tensor<4xf32>, tensor<4x4xf32> -> tensor<2xf32>, tensor<8xf32>
  %w_shard = train.shard_of %w on @world grid_axes = [0] : tensor<4x4xf32> -> tensor<8xf32>
  %new_w, %new_mw = train.sgd %w_shard, %g#1, %lr momentum_buffer %mw {momentum = 0.9 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  %b_shard = train.shard_of %b on @world grid_axes = [0] : tensor<4xf32> -> tensor<2xf32>
  %new_b, %new_mb = train.sgd %b_shard, %g#0, %lr momentum_buffer %mb {momentum = 0.9 : f32} : (tensor<2xf32>, tensor<2xf32>, tensor<f32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)
  %full:2 = train.all_gather_shards %new_w, %new_b on @world grid_axes = [0] : tensor<8xf32>, tensor<2xf32> -> tensor<4x4xf32>, tensor<4xf32>
  return %full#0, %full#1, %new_mw, %new_mb, %mean : tensor<4x4xf32>, tensor<4xf32>, tensor<8xf32>, tensor<2xf32>, tensor<f32>
}
