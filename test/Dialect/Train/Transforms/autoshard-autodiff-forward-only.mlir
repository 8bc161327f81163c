// RUN: shard-opt %s -split-input-file -verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(autoshard-autodiff{forward-only=true})' | FileCheck %s
// RUN: not shard-opt %s -split-input-file \
// RUN:   --pass-pipeline='builtin.module(autoshard-autodiff{forward-only=true expose-gradients=true})' 2>&1 | FileCheck %s --check-prefix=EXPOSE
// EXPOSE: error: 'func.func' op cannot expose gradients of a forward-only (evaluation) step, which computes none; drop expose-gradients or forward-only

// forward-only keeps the forward pass and the loss as they are and drops
// what only training needs: the optimizer configuration, clipping and
// micro-batching. No gradient, state or hyperparameter is added.

// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[W:[^:]+]]: tensor<3x4xf32> {{{[^}]*}}train.role = #train.role<param>}, %[[X:[^:]+]]: tensor<8x4xf32> {{{[^}]*}}}, %[[Y:[^:]+]]: tensor<8xi32> {{{[^}]*}}})
// CHECK-SAME: -> (tensor<f32> {train.name = "loss", train.role = #train.role<loss>})
// CHECK-SAME: attributes {train.step} {
// CHECK-NEXT: %[[LOGITS:.*]] = train.linear %[[X]], %[[W]]
// CHECK-NEXT: %[[LOSS:.*]] = train.softmax_cross_entropy %[[LOGITS]], %[[Y]]
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
func.func @step(
    %w: tensor<3x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.5>},
    %x: tensor<8x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.micro_batches = 2 : i64, train.max_grad_norm = 1.0 : f32,
                train.optimizer = #train.adamw<lr = 1.0e-2>} {
  %logits = train.linear %x, %w : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<8x3xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A step that carries its own update is a training step.
func.func @own_update(
    %w: tensor<4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
    %x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.1>})
    -> (tensor<4xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %g = train.bias_grad %x : (tensor<2x4xf32>) -> tensor<4xf32>
  // expected-error@+1 {{updates a parameter, but the step is compiled forward-only (evaluation), which takes a forward step: parameters and batch in, the loss out, its backward pass and optimizer left to autodiff}}
  %w1 = train.sgd %w, %g, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %w1, %lr : tensor<4xf32>, tensor<f32>
}
