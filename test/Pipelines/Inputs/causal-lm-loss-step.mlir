// A causal language model's loss as HuggingFace computes it
// (ForCausalLMLoss) and a torch.export front end emits it: the logits
// flattened, logits.view(-1, V); the labels padded at the end of each
// sequence with the ignore index, shifted left by one and flattened; the
// mean cross-entropy over the positions not ignored, one per sequence.
// Used by test/Pipelines/strategy-ddp-causal-lm-loss.mlir and
// test/e2e/causal-lm-loss.test: 4 sequences of 4 positions, so that 1, 2
// and 4 ranks split the batch.
func.func @train_step(
    %w1: tensor<16x8xf32> {train.role = #train.role<param>, train.name = "fc.weight", train.init = #train.init<normal, std = 0.35>},
    %b1: tensor<16xf32> {train.role = #train.role<param>, train.name = "fc.bias", train.init = #train.init<normal, std = 0.1>},
    %w2: tensor<10x16xf32> {train.role = #train.role<param>, train.name = "head.weight", train.init = #train.init<normal, std = 0.25>},
    %x: tensor<4x4x8xf32> {train.role = #train.role<input>, train.name = "x"},
    %labels: tensor<4x4xi32> {train.role = #train.role<label>, train.name = "labels"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.adamw<lr = 0.02>} {
  %h = train.linear %x, %w1, %b1 : (tensor<4x4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x4x16xf32>
  %a = train.tanh %h : tensor<4x4x16xf32>
  %logits = train.linear %a, %w2 : (tensor<4x4x16xf32>, tensor<10x16xf32>) -> tensor<4x4x10xf32>
  %flat = train.reshape %logits : tensor<4x4x10xf32> to tensor<16x10xf32>
  %padded = train.pad %labels {dim = 1 : i64, low = 0 : i64, high = 1 : i64, value = -100.0 : f32} : tensor<4x4xi32> -> tensor<4x5xi32>
  %shifted = train.slice %padded {dim = 1 : i64, start = 1 : i64, end = 5 : i64} : tensor<4x5xi32> -> tensor<4x4xi32>
  %targets = train.reshape %shifted : tensor<4x4xi32> to tensor<16xi32>
  %loss = train.softmax_cross_entropy %flat, %targets {ignore_index = -100 : i64} : (tensor<16x10xf32>, tensor<16xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
