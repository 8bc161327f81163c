// A partitioned step with three gradient reductions between computations.
shard.grid @world(shape = 2)
func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.partitioned, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %g0 = "test.grad"() : () -> tensor<4xf32>
  %r0 = shard.all_reduce %g0 on @world grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  %g1 = "test.grad"() : () -> tensor<4xf32>
  %r1 = shard.all_reduce %g1 on @world grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  %g2 = "test.grad"() : () -> tensor<4xf32>
  %r2 = shard.all_reduce %g2 on @world grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  "test.update"(%r0, %r1, %r2) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> ()
  return %l : tensor<f32>
}
