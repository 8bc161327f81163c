// Three layers as ZeRO-3 partitions them on 2 ranks with the parameters'
// shards in NVMe files (autoshard-offload's reads and copies to the
// device), before any scheduling: each shard read, copied to the device
// and gathered right before its layer.
shard.grid @world(shape = 2)
func.func @step(
    %w1: tensor<8xf32> {train.role = #train.role<param>, train.name = "fc1.weight", train.init = #train.init<zeros>, train.memory = #train.memory<nvme>, train.shard = #train.flat_shard<shape = [4, 4], grid_axes = [0]>},
    %w2: tensor<8xf32> {train.role = #train.role<param>, train.name = "fc2.weight", train.init = #train.init<zeros>, train.memory = #train.memory<nvme>, train.shard = #train.flat_shard<shape = [4, 4], grid_axes = [0]>},
    %w3: tensor<8xf32> {train.role = #train.role<param>, train.name = "fc3.weight", train.init = #train.init<zeros>, train.memory = #train.memory<nvme>, train.shard = #train.flat_shard<shape = [4, 4], grid_axes = [0]>},
    %x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.partitioned, train.plan = #train.plan<strategy = "zero3", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %r1 = train.nvme_read %w1 : tensor<8xf32>
  %d1 = train.to_device %r1 : tensor<8xf32>
  %p1 = train.all_gather_shards %d1 on @world grid_axes = [0] : tensor<8xf32> -> tensor<4x4xf32>
  %h1 = "test.layer"(%x, %p1) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r2 = train.nvme_read %w2 : tensor<8xf32>
  %d2 = train.to_device %r2 : tensor<8xf32>
  %p2 = train.all_gather_shards %d2 on @world grid_axes = [0] : tensor<8xf32> -> tensor<4x4xf32>
  %h2 = "test.layer"(%h1, %p2) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r3 = train.nvme_read %w3 : tensor<8xf32>
  %d3 = train.to_device %r3 : tensor<8xf32>
  %p3 = train.all_gather_shards %d3 on @world grid_axes = [0] : tensor<8xf32> -> tensor<4x4xf32>
  %h3 = "test.layer"(%h2, %p3) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %loss = "test.loss"(%h3) : (tensor<2x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
