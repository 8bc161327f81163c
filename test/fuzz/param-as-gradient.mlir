// A parameter read as its own gradient (found by CI's two minutes of
// shard-fuzz): the partitioner reduced it as a gradient, which rewrote the
// optimizer's parameter operand too, and its second, unchecked look-up of
// the optimizer's policy then read out of bounds. Now the policies are taken
// once before any rewrite, and such a gradient is refused.
// RUN: shard-opt --autoshard-partition -verify-diagnostics %s
shard.grid @world(shape = 2)
func.func @step(%w: tensor<4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<zeros>})
    -> (tensor<4xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "zero1", grid = @world, optimizer_states = sharded, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  // expected-error@+1 {{reads a parameter it or another optimizer updates as a gradient; a gradient is a value the step computes from the loss}}
  %w1 = train.sgd %w, %w, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %w1, %lr : tensor<4xf32>, tensor<f32>
}
