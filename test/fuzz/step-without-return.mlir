// Found by shard-fuzz in CI's two minutes (a cut of
// autoshard-group-collectives.mlir whose step lost its return): with
// unregistered ops allowed, a function whose last op is an unknown op passes
// func.func's verifier (the op might be a terminator), and
// autoshard-partition then read the loss from that op's operands, out of
// bounds. A training step ends in a return of its results.
// RUN: shard-opt -allow-unregistered-dialect -split-input-file -verify-diagnostics %s
// RUN: shard-opt -allow-unregistered-dialect --strategy=ddp --world-size=2 -split-input-file -verify-diagnostics %s

// expected-error@+1 {{'func.func' op must end in a return of its 1 result; a training step is straight-line code ending in func.return}}
func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %a = "test.src"() : () -> tensor<f32>
}

// -----

// An unknown terminator returns nothing the step's results could be read
// from either.
// expected-error@+1 {{'func.func' op must end in a return of its 1 result}}
func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  "test.terminator"() : () -> ()
}
