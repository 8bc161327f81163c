// An MLP with two dropouts (different streams and probabilities) for
// dropout.test: 16 rows, so that 4 ranks x 2 micro-batches split it.
func.func @train_step(
    %w1: tensor<32x8xf32> {train.role = #train.role<param>, train.name = "fc1.weight", train.init = #train.init<normal, std = 0.35>},
    %b1: tensor<32xf32> {train.role = #train.role<param>, train.name = "fc1.bias", train.init = #train.init<normal, std = 0.1>},
    %w2: tensor<32x32xf32> {train.role = #train.role<param>, train.name = "fc2.weight", train.init = #train.init<normal, std = 0.18>},
    %b2: tensor<32xf32> {train.role = #train.role<param>, train.name = "fc2.bias", train.init = #train.init<normal, std = 0.1>},
    %w3: tensor<4x32xf32> {train.role = #train.role<param>, train.name = "fc3.weight", train.init = #train.init<normal, std = 0.18>},
    %b3: tensor<4xf32> {train.role = #train.role<param>, train.name = "fc3.bias", train.init = #train.init<normal, std = 0.1>},
    %x: tensor<16x8xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<16xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.2>} {
  %h1 = train.linear %x, %w1, %b1 : (tensor<16x8xf32>, tensor<32x8xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  %a1 = train.tanh %h1 : tensor<16x32xf32>
  %d1 = train.dropout %a1 {p = 0.5 : f32, stream = 0 : i64} : tensor<16x32xf32>
  %h2 = train.linear %d1, %w2, %b2 : (tensor<16x32xf32>, tensor<32x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  %a2 = train.tanh %h2 : tensor<16x32xf32>
  %d2 = train.dropout %a2 {p = 0.25 : f32, stream = 1 : i64} : tensor<16x32xf32>
  %logits = train.linear %d2, %w3, %b3 : (tensor<16x32xf32>, tensor<4x32xf32>, tensor<4xf32>) -> tensor<16x4xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<16x4xf32>, tensor<16xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
