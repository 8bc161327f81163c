// A three-layer MLP step as ZeRO-3 partitions it on 2 ranks, before any
// scheduling: each layer's flat parameter shards gathered right before the
// layer, fc3's and fc2's weights gathered again for the backward pass, the
// loss averaged, the gradients reduce-scattered in one group, and SGD with
// momentum on fc1.weight's shard (the other updates would be the same).
shard.grid @world(shape = 2)
func.func @step(
    %w1: tensor<8xf32> {train.role = #train.role<param>, train.name = "fc1.weight", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [4, 4], grid_axes = [0]>},
    %b1: tensor<2xf32> {train.role = #train.role<param>, train.name = "fc1.bias", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [4], grid_axes = [0]>},
    %w2: tensor<8xf32> {train.role = #train.role<param>, train.name = "fc2.weight", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [4, 4], grid_axes = [0]>},
    %b2: tensor<2xf32> {train.role = #train.role<param>, train.name = "fc2.bias", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [4], grid_axes = [0]>},
    %w3: tensor<4xf32> {train.role = #train.role<param>, train.name = "fc3.weight", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [2, 4], grid_axes = [0]>},
    %b3: tensor<1xf32> {train.role = #train.role<param>, train.name = "fc3.bias", train.init = #train.init<zeros>, train.shard = #train.flat_shard<shape = [2], grid_axes = [0]>},
    %x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<2xi32> {train.role = #train.role<label>, train.name = "y"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<zeros>},
    %m1: tensor<8xf32> {train.role = #train.role<opt_state>, train.name = "fc1.weight.momentum", train.shard = #train.flat_shard<shape = [4, 4], grid_axes = [0]>})
    -> (tensor<8xf32> {train.role = #train.role<param>, train.name = "fc1.weight"},
        tensor<8xf32> {train.role = #train.role<opt_state>, train.name = "fc1.weight.momentum"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.partitioned, train.plan = #train.plan<strategy = "zero3", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %p1:2 = train.all_gather_shards %w1, %b1 on @world grid_axes = [0] : tensor<8xf32>, tensor<2xf32> -> tensor<4x4xf32>, tensor<4xf32>
  %h1 = train.linear %x, %p1#0, %p1#1 : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %a1 = train.gelu %h1 : tensor<2x4xf32>
  %p2:2 = train.all_gather_shards %w2, %b2 on @world grid_axes = [0] : tensor<8xf32>, tensor<2xf32> -> tensor<4x4xf32>, tensor<4xf32>
  %h2 = train.linear %a1, %p2#0, %p2#1 : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %a2 = train.relu %h2 : tensor<2x4xf32>
  %p3:2 = train.all_gather_shards %w3, %b3 on @world grid_axes = [0] : tensor<4xf32>, tensor<1xf32> -> tensor<2x4xf32>, tensor<2xf32>
  %logits = train.linear %a2, %p3#0, %p3#1 : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<2x2xf32>, tensor<2xi32>) -> tensor<f32>
  %mean = shard.all_reduce %loss on @world grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
  %d3 = train.softmax_cross_entropy_grad %logits, %y : (tensor<2x2xf32>, tensor<2xi32>) -> tensor<2x2xf32>
  %gw3 = train.linear_grad_weight %d3, %a2 : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gb3 = train.bias_grad %d3 : (tensor<2x2xf32>) -> tensor<2xf32>
  %q3 = train.all_gather_shards %w3 on @world grid_axes = [0] : tensor<4xf32> -> tensor<2x4xf32>
  %e2 = train.linear_grad_input %d3, %q3 : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %d2 = train.relu_grad %e2, %h2 : tensor<2x4xf32>
  %gw2 = train.linear_grad_weight %d2, %a1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %gb2 = train.bias_grad %d2 : (tensor<2x4xf32>) -> tensor<4xf32>
  %q2 = train.all_gather_shards %w2 on @world grid_axes = [0] : tensor<8xf32> -> tensor<4x4xf32>
  %e1 = train.linear_grad_input %d2, %q2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %d1 = train.gelu_grad %e1, %h1 : tensor<2x4xf32>
  %gw1 = train.linear_grad_weight %d1, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %gb1 = train.bias_grad %d1 : (tensor<2x4xf32>) -> tensor<4xf32>
  %g:6 = train.reduce_scatter_shards %gw3, %gb3, %gw2, %gb2, %gw1, %gb1 on @world grid_axes = [0] reduction = average : tensor<2x4xf32>, tensor<2xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32> -> tensor<4xf32>, tensor<1xf32>, tensor<8xf32>, tensor<2xf32>, tensor<8xf32>, tensor<2xf32>
  %new_w1, %new_m1 = train.sgd %w1, %g#4, %lr momentum_buffer %m1 {momentum = 0.9 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  return %new_w1, %new_m1, %mean : tensor<8xf32>, tensor<8xf32>, tensor<f32>
}
