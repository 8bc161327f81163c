// A forward-only step for the strategy tests: two linear layers in one
// transformer-block-like unit (train.unit "h.0"), an output bias in the root
// unit, AdamW with clipping. The backward pass reads the second matrix again
// but not the first (its input gets no gradient). 20, 12 and 3 elements: 3
// pads on 2 and 4 ranks.
func.func @step(
    %w0: tensor<4x5xf32> {train.role = #train.role<param>, train.name = "h.0.fc1.weight", train.init = #train.init<normal, std = 0.5>, train.unit = "h.0"},
    %w1: tensor<3x4xf32> {train.role = #train.role<param>, train.name = "h.0.fc2.weight", train.init = #train.init<normal, std = 0.5>, train.unit = "h.0"},
    %b: tensor<3xf32> {train.role = #train.role<param>, train.name = "out.bias", train.init = #train.init<zeros>},
    %x: tensor<8x5xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.max_grad_norm = 1.0 : f32,
                train.optimizer = #train.adamw<lr = 1.0e-2, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1>} {
  %h = train.linear %x, %w0 : (tensor<8x5xf32>, tensor<4x5xf32>) -> tensor<8x4xf32>
  %a = train.relu %h : tensor<8x4xf32>
  %logits = train.linear %a, %w1, %b : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<8x3xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
