// A ZeRO-2 step on 2 ranks with SGD and global-norm clipping, as
// autoshard-partition leaves it with one bucket per gradient: the bias's
// gradient is reduce-scattered first, the weight's second; the clipping
// norm sums the squares of both shards (in parameter order) and of a
// tensor that no host reader needs, and sums them over the shard axis.
shard.grid @world(shape = 2)
func.func @step(
    %w: tensor<4x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
    %b: tensor<4xf32> {train.role = #train.role<param>, train.name = "b", train.init = #train.init<zeros>},
    %x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<zeros>})
    -> (tensor<4x4xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<4xf32> {train.role = #train.role<param>, train.name = "b"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"},
        tensor<f32> {train.role = #train.role<grad_norm_sq>, train.name = "grad_norm_sq"})
    attributes {train.step, train.partitioned, train.plan = #train.plan<strategy = "zero2", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %loss = "test.loss"(%x, %w, %b) : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<f32>
  %mean = shard.all_reduce %loss on @world grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
  %gb = "test.grad"(%x) : (tensor<2x4xf32>) -> tensor<4xf32>
  %sb = train.reduce_scatter_shards %gb on @world grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<2xf32>
  %gw = "test.grad"(%x) : (tensor<2x4xf32>) -> tensor<4x4xf32>
  %sw = train.reduce_scatter_shards %gw on @world grid_axes = [0] reduction = average : tensor<4x4xf32> -> tensor<8xf32>
  %other = "test.grad"(%x) : (tensor<2x4xf32>) -> tensor<2xf32>
  %ss = train.sum_of_squares %sw, %sb, %other : tensor<8xf32>, tensor<2xf32>, tensor<2xf32>
  %norm = shard.all_reduce %ss on @world grid_axes = [0] : tensor<f32> -> tensor<f32>
  %clip = train.clip_coefficient %norm {max_norm = 1.0 : f32} : tensor<f32>
  %w_shard = train.shard_of %w on @world grid_axes = [0] : tensor<4x4xf32> -> tensor<8xf32>
  %new_w = train.sgd %w_shard, %sw, %lr grad_scale %clip : (tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<f32>) -> tensor<8xf32>
  %b_shard = train.shard_of %b on @world grid_axes = [0] : tensor<4xf32> -> tensor<2xf32>
  %new_b = train.sgd %b_shard, %sb, %lr grad_scale %clip : (tensor<2xf32>, tensor<2xf32>, tensor<f32>, tensor<f32>) -> tensor<2xf32>
  %full:2 = train.all_gather_shards %new_w, %new_b on @world grid_axes = [0] : tensor<8xf32>, tensor<2xf32> -> tensor<4x4xf32>, tensor<4xf32>
  return %full#0, %full#1, %mean, %norm : tensor<4x4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>
}
