// A causal language model that shifts its own labels, as a HuggingFace
// model called with labels=input_ids does: the step's batch is the token
// ids alone (no label argument), the logits at positions [0, T-1) are
// scored against the ids at [1, T), and the last position predicts
// nothing. A bigram model (embedding, then a linear head) over V = 32
// tokens, 8 sequences of 16: 1 and 2 ranks split the batch. Used by
// test/e2e/model-shifts-labels.test.
func.func @train_step(
    %wte: tensor<32x32xf32> {train.role = #train.role<param>, train.name = "wte.weight", train.init = #train.init<normal, std = 0.5>},
    %w: tensor<32x32xf32> {train.role = #train.role<param>, train.name = "head.weight", train.init = #train.init<normal, std = 0.2>},
    %b: tensor<32xf32> {train.role = #train.role<param>, train.name = "head.bias", train.init = #train.init<zeros>},
    %ids: tensor<8x16xi32> {train.role = #train.role<input>, train.name = "input_ids"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.adamw<lr = 0.02>} {
  %h = train.embedding %ids, %wte : (tensor<8x16xi32>, tensor<32x32xf32>) -> tensor<8x16x32xf32>
  %logits = train.linear %h, %w, %b : (tensor<8x16x32xf32>, tensor<32x32xf32>, tensor<32xf32>) -> tensor<8x16x32xf32>
  %scored = train.slice %logits {dim = 1 : i64, start = 0 : i64, end = 15 : i64} : tensor<8x16x32xf32> -> tensor<8x15x32xf32>
  %next = train.slice %ids {dim = 1 : i64, start = 1 : i64, end = 16 : i64} : tensor<8x16xi32> -> tensor<8x15xi32>
  %flat = train.reshape %scored : tensor<8x15x32xf32> to tensor<120x32xf32>
  %targets = train.reshape %next : tensor<8x15xi32> to tensor<120xi32>
  %loss = train.softmax_cross_entropy %flat, %targets : (tensor<120x32xf32>, tensor<120xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
