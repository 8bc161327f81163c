// The forward step zero3-bf16-adamw.mlir and zero1-bf16-adamw.mlir are
// partitioned from, before autodiff: f32 master weights cast to bf16 for
// compute, AdamW with clipping named in the step's attributes but no update
// yet. 68 parameters; the global batch is 4 sequences of 4 tokens.
func.func @train_step(
    %embed: tensor<8x4xf32> {train.role = #train.role<param>, train.name = "embed.weight", train.init = #train.init<normal, std = 0.02>},
    %norm: tensor<4xf32> {train.role = #train.role<param>, train.name = "norm.weight", train.init = #train.init<ones>},
    %head: tensor<8x4xf32> {train.role = #train.role<param>, train.name = "head.weight", train.init = #train.init<normal, std = 0.02>},
    %ids: tensor<4x4xi32> {train.role = #train.role<input>, train.name = "input_ids"},
    %labels: tensor<4x4xi32> {train.role = #train.role<label>, train.name = "labels"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.max_grad_norm = 1.0 : f32,
                train.optimizer = #train.adamw<lr = 1.0e-3, beta2 = 0.95, weight_decay = 0.1>} {
  %e = train.cast %embed : tensor<8x4xf32> to tensor<8x4xbf16>
  %n = train.cast %norm : tensor<4xf32> to tensor<4xbf16>
  %h = train.cast %head : tensor<8x4xf32> to tensor<8x4xbf16>
  %x = train.embedding %ids, %e : (tensor<4x4xi32>, tensor<8x4xbf16>) -> tensor<4x4x4xbf16>
  %y = train.rms_norm %x, %n : (tensor<4x4x4xbf16>, tensor<4xbf16>) -> tensor<4x4x4xbf16>
  %logits = train.linear %y, %h : (tensor<4x4x4xbf16>, tensor<8x4xbf16>) -> tensor<4x4x8xbf16>
  %loss = train.softmax_cross_entropy %logits, %labels : (tensor<4x4x8xbf16>, tensor<4x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
