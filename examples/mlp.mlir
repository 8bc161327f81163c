// A small MLP classifier's training step, backward written out by hand:
// 32 features -> 64 (GELU) -> 64 (ReLU) -> 10 classes, softmax cross-entropy,
// SGD with momentum 0.9. The batch (64 rows) is the global batch; the
// distribution passes split it across ranks.
//
//   shard-opt --strategy=ddp --world-size=2 examples/mlp.mlir
//   shard-compile --strategy=ddp --world-size=2 examples/mlp.mlir -o mlp
//   mpirun -np 2 ./mlp --steps 50

func.func @train_step(
    %w1: tensor<64x32xf32> {train.role = #train.role<param>, train.name = "fc1.weight", train.init = #train.init<normal, std = 0.17677>},
    %b1: tensor<64xf32> {train.role = #train.role<param>, train.name = "fc1.bias", train.init = #train.init<zeros>},
    %w2: tensor<64x64xf32> {train.role = #train.role<param>, train.name = "fc2.weight", train.init = #train.init<normal, std = 0.125>},
    %b2: tensor<64xf32> {train.role = #train.role<param>, train.name = "fc2.bias", train.init = #train.init<zeros>},
    %w3: tensor<10x64xf32> {train.role = #train.role<param>, train.name = "fc3.weight", train.init = #train.init<normal, std = 0.125>},
    %b3: tensor<10xf32> {train.role = #train.role<param>, train.name = "fc3.bias", train.init = #train.init<zeros>},
    %m_w1: tensor<64x32xf32> {train.role = #train.role<opt_state>, train.name = "fc1.weight.momentum"},
    %m_b1: tensor<64xf32> {train.role = #train.role<opt_state>, train.name = "fc1.bias.momentum"},
    %m_w2: tensor<64x64xf32> {train.role = #train.role<opt_state>, train.name = "fc2.weight.momentum"},
    %m_b2: tensor<64xf32> {train.role = #train.role<opt_state>, train.name = "fc2.bias.momentum"},
    %m_w3: tensor<10x64xf32> {train.role = #train.role<opt_state>, train.name = "fc3.weight.momentum"},
    %m_b3: tensor<10xf32> {train.role = #train.role<opt_state>, train.name = "fc3.bias.momentum"},
    %x: tensor<64x32xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<64xi32> {train.role = #train.role<label>, train.name = "y"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.05>})
    -> (tensor<64x32xf32> {train.role = #train.role<param>, train.name = "fc1.weight"},
        tensor<64xf32> {train.role = #train.role<param>, train.name = "fc1.bias"},
        tensor<64x64xf32> {train.role = #train.role<param>, train.name = "fc2.weight"},
        tensor<64xf32> {train.role = #train.role<param>, train.name = "fc2.bias"},
        tensor<10x64xf32> {train.role = #train.role<param>, train.name = "fc3.weight"},
        tensor<10xf32> {train.role = #train.role<param>, train.name = "fc3.bias"},
        tensor<64x32xf32> {train.role = #train.role<opt_state>, train.name = "fc1.weight.momentum"},
        tensor<64xf32> {train.role = #train.role<opt_state>, train.name = "fc1.bias.momentum"},
        tensor<64x64xf32> {train.role = #train.role<opt_state>, train.name = "fc2.weight.momentum"},
        tensor<64xf32> {train.role = #train.role<opt_state>, train.name = "fc2.bias.momentum"},
        tensor<10x64xf32> {train.role = #train.role<opt_state>, train.name = "fc3.weight.momentum"},
        tensor<10xf32> {train.role = #train.role<opt_state>, train.name = "fc3.bias.momentum"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  // Forward.
  %h1 = train.linear %x, %w1, %b1 : (tensor<64x32xf32>, tensor<64x32xf32>, tensor<64xf32>) -> tensor<64x64xf32>
  %a1 = train.gelu %h1 : tensor<64x64xf32>
  %h2 = train.linear %a1, %w2, %b2 : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<64x64xf32>
  %a2 = train.relu %h2 : tensor<64x64xf32>
  %logits = train.linear %a2, %w3, %b3 : (tensor<64x64xf32>, tensor<10x64xf32>, tensor<10xf32>) -> tensor<64x10xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<64x10xf32>, tensor<64xi32>) -> tensor<f32>

  // Backward.
  %dlogits = train.softmax_cross_entropy_grad %logits, %y : (tensor<64x10xf32>, tensor<64xi32>) -> tensor<64x10xf32>
  %dw3 = train.linear_grad_weight %dlogits, %a2 : (tensor<64x10xf32>, tensor<64x64xf32>) -> tensor<10x64xf32>
  %db3 = train.bias_grad %dlogits : (tensor<64x10xf32>) -> tensor<10xf32>
  %da2 = train.linear_grad_input %dlogits, %w3 : (tensor<64x10xf32>, tensor<10x64xf32>) -> tensor<64x64xf32>
  %dh2 = train.relu_grad %da2, %h2 : tensor<64x64xf32>
  %dw2 = train.linear_grad_weight %dh2, %a1 : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %db2 = train.bias_grad %dh2 : (tensor<64x64xf32>) -> tensor<64xf32>
  %da1 = train.linear_grad_input %dh2, %w2 : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %dh1 = train.gelu_grad %da1, %h1 : tensor<64x64xf32>
  %dw1 = train.linear_grad_weight %dh1, %x : (tensor<64x64xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %db1 = train.bias_grad %dh1 : (tensor<64x64xf32>) -> tensor<64xf32>

  // SGD with momentum.
  %nw1, %nm_w1 = train.sgd %w1, %dw1, %lr momentum_buffer %m_w1 {momentum = 0.9 : f32} : (tensor<64x32xf32>, tensor<64x32xf32>, tensor<f32>, tensor<64x32xf32>) -> (tensor<64x32xf32>, tensor<64x32xf32>)
  %nb1, %nm_b1 = train.sgd %b1, %db1, %lr momentum_buffer %m_b1 {momentum = 0.9 : f32} : (tensor<64xf32>, tensor<64xf32>, tensor<f32>, tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>)
  %nw2, %nm_w2 = train.sgd %w2, %dw2, %lr momentum_buffer %m_w2 {momentum = 0.9 : f32} : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<f32>, tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>)
  %nb2, %nm_b2 = train.sgd %b2, %db2, %lr momentum_buffer %m_b2 {momentum = 0.9 : f32} : (tensor<64xf32>, tensor<64xf32>, tensor<f32>, tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>)
  %nw3, %nm_w3 = train.sgd %w3, %dw3, %lr momentum_buffer %m_w3 {momentum = 0.9 : f32} : (tensor<10x64xf32>, tensor<10x64xf32>, tensor<f32>, tensor<10x64xf32>) -> (tensor<10x64xf32>, tensor<10x64xf32>)
  %nb3, %nm_b3 = train.sgd %b3, %db3, %lr momentum_buffer %m_b3 {momentum = 0.9 : f32} : (tensor<10xf32>, tensor<10xf32>, tensor<f32>, tensor<10xf32>) -> (tensor<10xf32>, tensor<10xf32>)

  return %nw1, %nb1, %nw2, %nb2, %nw3, %nb3, %nm_w1, %nm_b1, %nm_w2, %nm_b2, %nm_w3, %nm_b3, %loss
      : tensor<64x32xf32>, tensor<64xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<10x64xf32>, tensor<10xf32>,
        tensor<64x32xf32>, tensor<64xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<10x64xf32>, tensor<10xf32>, tensor<f32>
}
