// Gradient accumulation over 2 micro-batches of 4 rows, mixed precision: an
// f32 master weight cast to bf16 and read twice per micro-batch, so each
// micro-batch contributes two bf16 gradients. 16 elements over 2 ranks.
func.func @step(
    %w: tensor<4x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.5>},
    %x: tensor<8x4xbf16> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.micro_batches = 2 : i64, train.max_grad_norm = 1.0 : f32,
                train.optimizer = #train.adamw<lr = 1.0e-2, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1>} {
  %wb = train.cast %w : tensor<4x4xf32> to tensor<4x4xbf16>
  %h = train.linear %x, %wb : (tensor<8x4xbf16>, tensor<4x4xbf16>) -> tensor<8x4xbf16>
  %logits = train.linear %h, %wb : (tensor<8x4xbf16>, tensor<4x4xbf16>) -> tensor<8x4xbf16>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<8x4xbf16>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
