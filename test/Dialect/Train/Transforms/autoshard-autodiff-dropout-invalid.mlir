// RUN: shard-opt %s -split-input-file -verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(autoshard-autodiff)'

// Two dropouts of one stream would drop the same elements.
func.func @one_stream(
    %w: tensor<3x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.5>},
    %x: tensor<8x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 1.0e-2>} {
  %x0 = train.dropout %x {p = 0.1 : f32, stream = 2 : i64} : tensor<8x4xf32>
  %logits = train.linear %x0, %w : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  // expected-error@+1 {{has stream 2, as another train.dropout of the step has}}
  %d = train.dropout %logits {p = 0.5 : f32, stream = 2 : i64} : tensor<8x3xf32>
  %loss = train.softmax_cross_entropy %d, %y : (tensor<8x3xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
