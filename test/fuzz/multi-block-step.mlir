// Found by shard-fuzz (a seed: a case of autoshard-lower-to-runtime.mlir):
// a step of two blocks passed the verifier, and autoshard-partition read
// the loss from the first block's branch as if it were the return, out of
// bounds. A train.step is straight-line code in one block; the verifier
// says so before any pass runs.
// RUN: shard-opt --strategy=ddp --world-size=2 -split-input-file -verify-diagnostics %s

// expected-error@+1 {{'func.func' op has 2 blocks; a training step is straight-line code in one block}}
func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
  cf.br ^next
^next:
  return %l : tensor<f32>
}

// -----

// The same with a conditional branch and the loss returned from both.
// expected-error@+1 {{has 3 blocks; a training step is straight-line code in one block}}
func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>},
                %c: tensor<f32> {train.role = #train.role<hyper>, train.name = "c", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
  %true = arith.constant true
  cf.cond_br %true, ^a, ^b
^a:
  return %l : tensor<f32>
^b:
  return %c : tensor<f32>
}
