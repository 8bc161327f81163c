// The step of three-reductions-offloaded.mlir with global-norm clipping, as
// autoshard-offload leaves it: right after the copies of each reduced
// gradient to the host, the sum of its squares; the partial sums added up
// after the last reduction, before the clipping coefficient.
shard.grid @world(shape = 2)
func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"},
        tensor<f32> {train.role = #train.role<grad_norm_sq>, train.name = "grad_norm_sq"})
    attributes {train.step, train.partitioned, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %g0 = "test.grad"() : () -> tensor<4xf32>
  %r0 = shard.all_reduce %g0 on @world grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  %h0 = train.to_host %r0 : tensor<4xf32>
  %s0 = train.sum_of_squares %r0 : tensor<4xf32>
  %g1 = "test.grad"() : () -> tensor<4xf32>
  %r1 = shard.all_reduce %g1 on @world grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  %h1 = train.to_host %r1 : tensor<4xf32>
  %s1 = train.sum_of_squares %r1 : tensor<4xf32>
  %g2 = "test.grad"() : () -> tensor<4xf32>
  %r2 = shard.all_reduce %g2 on @world grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  %h2 = train.to_host %r2 : tensor<4xf32>
  %s2 = train.sum_of_squares %r2 : tensor<4xf32>
  %t0 = train.add %s0, %s1 : tensor<f32>
  %t1 = train.add %t0, %s2 : tensor<f32>
  %c = train.clip_coefficient %t1 {max_norm = 1.0 : f32} : tensor<f32>
  %ch = train.to_host %c : tensor<f32>
  %u0 = train.add %h0, %h1 {train.on_host} : tensor<4xf32>
  %u1 = train.add %u0, %h2 {train.on_host} : tensor<4xf32>
  %u2 = train.add %ch, %ch {train.on_host} : tensor<f32>
  return %l, %t1 : tensor<f32>, tensor<f32>
}
