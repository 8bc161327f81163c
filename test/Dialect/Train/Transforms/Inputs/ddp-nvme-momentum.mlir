// A DDP step on 2 ranks with its SGD momentum buffers in NVMe files, as
// autoshard-offload leaves it, before any scheduling: the gradients are
// averaged in one bucket (in the reverse of the updates' order, as the
// backward pass makes them) and copied to the host right after it, in the
// order the updates read them; then each update copies its parameter and
// the learning rate to the host, reads its momentum from its file, runs
// there, writes the momentum back and copies the new parameter to the
// device.
shard.grid @world(shape = 2)
func.func @step(
    %w: tensor<4x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
    %b: tensor<4xf32> {train.role = #train.role<param>, train.name = "b", train.init = #train.init<zeros>},
    %mw: tensor<4x4xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum", train.memory = #train.memory<nvme>},
    %mb: tensor<4xf32> {train.role = #train.role<opt_state>, train.name = "b.momentum", train.memory = #train.memory<nvme>},
    %x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<zeros>})
    -> (tensor<4x4xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<4xf32> {train.role = #train.role<param>, train.name = "b"},
        tensor<4x4xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum", train.memory = #train.memory<nvme>},
        tensor<4xf32> {train.role = #train.role<opt_state>, train.name = "b.momentum", train.memory = #train.memory<nvme>},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.partitioned, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %loss = "test.loss"(%x, %w, %b) : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<f32>
  %gb = "test.grad"(%x) : (tensor<2x4xf32>) -> tensor<4xf32>
  %gw = "test.grad"(%x) : (tensor<2x4xf32>) -> tensor<4x4xf32>
  %r:3 = train.all_reduce_bucket %loss, %gb, %gw on @world grid_axes = [0] reduction = average : tensor<f32>, tensor<4xf32>, tensor<4x4xf32> -> tensor<f32>, tensor<4xf32>, tensor<4x4xf32>
  %gw_host = train.to_host %r#2 : tensor<4x4xf32>
  %gb_host = train.to_host %r#1 : tensor<4xf32>
  %w_host = train.to_host %w : tensor<4x4xf32>
  %lr_host = train.to_host %lr : tensor<f32>
  %mw_read = train.nvme_read %mw : tensor<4x4xf32>
  %new_w, %new_mw = train.sgd %w_host, %gw_host, %lr_host momentum_buffer %mw_read {momentum = 0.9 : f32, train.on_host} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
  %mw_written = train.nvme_write %new_mw to %mw : tensor<4x4xf32>
  %w_device = train.to_device %new_w : tensor<4x4xf32>
  %b_host = train.to_host %b : tensor<4xf32>
  %mb_read = train.nvme_read %mb : tensor<4xf32>
  %new_b, %new_mb = train.sgd %b_host, %gb_host, %lr_host momentum_buffer %mb_read {momentum = 0.9 : f32, train.on_host} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %mb_written = train.nvme_write %new_mb to %mb : tensor<4xf32>
  %b_device = train.to_device %new_b : tensor<4xf32>
  return %w_device, %b_device, %mw_written, %mb_written, %r#0 : tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<f32>
}
