// A forward-only mixed-precision step: an f32 master weight cast to bf16
// for compute, so its gradient is bf16. 12 elements over 2 ranks.
func.func @step(
    %w: tensor<3x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.5>},
    %x: tensor<8x4xbf16> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.max_grad_norm = 1.0 : f32,
                train.optimizer = #train.adamw<lr = 1.0e-2, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1>} {
  %wb = train.cast %w : tensor<3x4xf32> to tensor<3x4xbf16>
  %logits = train.linear %x, %wb : (tensor<8x4xbf16>, tensor<3x4xbf16>) -> tensor<8x3xbf16>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<8x3xbf16>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
