// A DDP step on 2 ranks with SGD and momentum, as autoshard-partition and
// autoshard-group-collectives leave it: the loss and the gradients averaged
// in one bucket, then one update per parameter on the device.
shard.grid @world(shape = 2)
func.func @step(
    %w: tensor<4x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
    %b: tensor<4xf32> {train.role = #train.role<param>, train.name = "b", train.init = #train.init<zeros>},
    %mw: tensor<4x4xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum"},
    %mb: tensor<4xf32> {train.role = #train.role<opt_state>, train.name = "b.momentum"},
    %x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<zeros>})
    -> (tensor<4x4xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<4xf32> {train.role = #train.role<param>, train.name = "b"},
        tensor<4x4xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum"},
        tensor<4xf32> {train.role = #train.role<opt_state>, train.name = "b.momentum"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.partitioned, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %loss = "test.loss"(%x, %w, %b) : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<f32>
  %gb = "test.grad"(%x) : (tensor<2x4xf32>) -> tensor<4xf32>
  %gw = "test.grad"(%x) : (tensor<2x4xf32>) -> tensor<4x4xf32>
  %r:3 = train.all_reduce_bucket %loss, %gb, %gw on @world grid_axes = [0] reduction = average : tensor<f32>, tensor<4xf32>, tensor<4x4xf32> -> tensor<f32>, tensor<4xf32>, tensor<4x4xf32>
  %new_w, %new_mw = train.sgd %w, %r#2, %lr momentum_buffer %mw {momentum = 0.9 : f32} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
  %new_b, %new_mb = train.sgd %b, %r#1, %lr momentum_buffer %mb {momentum = 0.9 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %new_w, %new_b, %new_mw, %new_mb, %r#0 : tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<f32>
}
