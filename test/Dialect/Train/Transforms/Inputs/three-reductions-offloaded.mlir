// The step of three-reductions.mlir with its update (two adds) on the host, as
// autoshard-offload leaves it: each reduced gradient is copied to the host
// right after its reduction.
shard.grid @world(shape = 2)
func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.partitioned, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %g0 = "test.grad"() : () -> tensor<4xf32>
  %r0 = shard.all_reduce %g0 on @world grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  %h0 = train.to_host %r0 : tensor<4xf32>
  %g1 = "test.grad"() : () -> tensor<4xf32>
  %r1 = shard.all_reduce %g1 on @world grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  %h1 = train.to_host %r1 : tensor<4xf32>
  %g2 = "test.grad"() : () -> tensor<4xf32>
  %r2 = shard.all_reduce %g2 on @world grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  %h2 = train.to_host %r2 : tensor<4xf32>
  %u0 = train.add %h0, %h1 {train.on_host} : tensor<4xf32>
  %u1 = train.add %u0, %h2 {train.on_host} : tensor<4xf32>
  return %l : tensor<f32>
}
