// Steps that would compile into binaries that train nothing, or part of
// the model not at all, are refused unless a flag says they are meant.
// RUN: shard-opt %s -split-input-file -verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(autoshard-autodiff)'
// RUN: shard-opt %s -split-input-file \
// RUN:   --pass-pipeline='builtin.module(autoshard-autodiff{allow-unused-params=true allow-no-optimizer=true expose-gradients=true})' \
// RUN:   | FileCheck %s
// The tools' flags reach the pass.
// RUN: not shard-opt --strategy=ddp --world-size=1 %s -split-input-file 2>&1 \
// RUN:   | FileCheck %s --check-prefix=TOOL
// RUN: shard-opt --strategy=ddp --world-size=1 --allow-unused-params \
// RUN:   --allow-no-optimizer %s -split-input-file -o /dev/null
// --strategy=auto derives the step to describe it with the same flags.
// RUN: shard-opt --strategy=auto --world-size=1 --allow-unused-params \
// RUN:   --allow-no-optimizer %s -split-input-file -o /dev/null

// A parameter on no path to the loss (a layer built but not wired in).
// TOOL: has 2 parameters the loss does not depend on: "unused.weight", "unused.bias"; remove them from the step, or accept them unchanged with --allow-unused-params
// With allow-unused-params it is left as torch leaves a parameter whose grad
// is None: no state, no gradient, no update.
// CHECK-LABEL: func.func @unused
// CHECK-SAME: %[[W:[^:]+]]: tensor<3x2xf32>
// CHECK-SAME: %[[U:[^:]+]]: tensor<3x2xf32> {{{[^}]*}}"unused.weight"
// CHECK-NOT: unused.{{[a-z]+}}.exp_avg
// CHECK-SAME: "w.exp_avg"
// CHECK-NOT: unused.{{[a-z]+}}.exp_avg
// CHECK-SAME: -> (tensor<3x2xf32> {train.name = "w", train.role = #train.role<param>},
// CHECK-NOT: "unused.
// CHECK-SAME: "w.grad"
// CHECK-NOT: "unused.
// CHECK-SAME: "loss"
// CHECK-NOT: train.adamw %[[U]]
// CHECK: return
// expected-error@+1 {{has 2 parameters the loss does not depend on: "unused.weight", "unused.bias"; remove them from the step, or accept them unchanged with --allow-unused-params (autoshard-autodiff's allow-unused-params; PyTorch DDP's find_unused_parameters=True)}}
func.func @unused(%w: tensor<3x2xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                  %u: tensor<3x2xf32> {train.role = #train.role<param>, train.name = "unused.weight", train.init = #train.init<zeros>},
                  %ub: tensor<3xf32> {train.role = #train.role<param>, train.name = "unused.bias", train.init = #train.init<zeros>},
                  %x: tensor<2x2xf32> {train.role = #train.role<input>, train.name = "x"},
                  %y: tensor<2xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.adamw<lr = 0.1>} {
  %h = train.linear %x, %w : (tensor<2x2xf32>, tensor<3x2xf32>) -> tensor<2x3xf32>
  // Computed, but the loss never reads it.
  %dead = train.linear %x, %u, %ub : (tensor<2x2xf32>, tensor<3x2xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %loss = train.softmax_cross_entropy %h, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Parameters, no train.optimizer, no updates of its own: every step would
// leave the parameters as initialised.
// TOOL: has parameters but neither a train.optimizer nor updates of its own
// With allow-no-optimizer the step passes through unchanged.
// CHECK-LABEL: func.func @no_optimizer
// CHECK-SAME: -> (tensor<f32> {train.name = "loss", train.role = #train.role<loss>})
// CHECK-NOT: train.softmax_cross_entropy_grad
// CHECK: return
// expected-error@+1 {{has parameters but neither a train.optimizer nor updates of its own, so training would leave every parameter unchanged; add train.optimizer = #train.adamw<lr = ...> (or #train.sgd<...>), compile an evaluation step with --forward-only, or accept it with --allow-no-optimizer}}
func.func @no_optimizer(%w: tensor<3x2xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                        %x: tensor<2x2xf32> {train.role = #train.role<input>, train.name = "x"},
                        %y: tensor<2xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %h = train.linear %x, %w : (tensor<2x2xf32>, tensor<3x2xf32>) -> tensor<2x3xf32>
  %loss = train.softmax_cross_entropy %h, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
