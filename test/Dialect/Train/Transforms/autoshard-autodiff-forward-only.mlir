// RUN: shard-opt %s -split-input-file -verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(autoshard-autodiff{forward-only=true})' | FileCheck %s
// RUN: not shard-opt %s -split-input-file \
// RUN:   --pass-pipeline='builtin.module(autoshard-autodiff{forward-only=true expose-gradients=true})' 2>&1 | FileCheck %s --check-prefix=EXPOSE
// EXPOSE: error: 'func.func' op cannot expose gradients of a forward-only (evaluation) step, which computes none; drop expose-gradients or forward-only

// forward-only keeps the forward pass and the loss and drops what only
// training needs: the optimizer configuration and clipping. No gradient,
// state or hyperparameter is added.

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
    attributes {train.step, train.max_grad_norm = 1.0 : f32,
                train.optimizer = #train.adamw<lr = 1.0e-2>} {
  %logits = train.linear %x, %w : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<8x3xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Micro-batches: the forward pass runs on each block of the batch in turn,
// as training's does, and the step returns the mean of their losses; ops
// that do not read the batch (a master's cast) run once.

// CHECK-LABEL: func.func @micro_batches
// CHECK-SAME: (%[[W:[^:]+]]: tensor<3x4xf32> {{{[^}]*}}}, %[[X:[^:]+]]: tensor<8x4xbf16> {{{[^}]*}}}, %[[Y:[^:]+]]: tensor<8xi32> {{{[^}]*}}})
// CHECK-SAME: attributes {train.step} {
// CHECK-NEXT: %[[WC:.*]] = train.cast %[[W]] : tensor<3x4xf32> to tensor<3x4xbf16>
// CHECK-NEXT: %[[X0:.*]] = train.slice_rows %[[X]] {offset = 0 : i64} : tensor<8x4xbf16> to tensor<4x4xbf16>
// CHECK-NEXT: %[[Y0:.*]] = train.slice_rows %[[Y]] {offset = 0 : i64} : tensor<8xi32> to tensor<4xi32>
// CHECK-NEXT: %[[L0:.*]] = train.linear %[[X0]], %[[WC]] : (tensor<4x4xbf16>, tensor<3x4xbf16>) -> tensor<4x3xbf16>
// CHECK-NEXT: %[[LOSS0:.*]] = train.softmax_cross_entropy %[[L0]], %[[Y0]]
// CHECK-NEXT: %[[X1:.*]] = train.slice_rows %[[X]] {offset = 4 : i64}
// CHECK-NEXT: %[[Y1:.*]] = train.slice_rows %[[Y]] {offset = 4 : i64}
// CHECK-NEXT: %[[L1:.*]] = train.linear %[[X1]], %[[WC]]
// CHECK-NEXT: %[[LOSS1:.*]] = train.softmax_cross_entropy %[[L1]], %[[Y1]]
// CHECK-NEXT: %[[SUM:.*]] = train.add %[[LOSS0]], %[[LOSS1]] : tensor<f32>
// CHECK-NEXT: %[[MEAN:.*]] = train.scale %[[SUM]] {factor = 5.000000e-01 : f32} : tensor<f32>
// CHECK-NEXT: return %[[MEAN]] : tensor<f32>
func.func @micro_batches(
    %w: tensor<3x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.5>},
    %x: tensor<8x4xbf16> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.micro_batches = 2 : i64,
                train.optimizer = #train.adamw<lr = 1.0e-2>} {
  %wc = train.cast %w : tensor<3x4xf32> to tensor<3x4xbf16>
  %logits = train.linear %x, %wc : (tensor<8x4xbf16>, tensor<3x4xbf16>) -> tensor<8x3xbf16>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<8x3xbf16>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A batch micro-batches cannot divide.
// expected-error@+1 {{cannot cut the batch of input argument "x" (6 rows) into 4 equal micro-batches}}
func.func @uneven(
    %w: tensor<3x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.5>},
    %x: tensor<6x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<6xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.micro_batches = 4 : i64,
                train.optimizer = #train.adamw<lr = 1.0e-2>} {
  %logits = train.linear %x, %w : (tensor<6x4xf32>, tensor<3x4xf32>) -> tensor<6x3xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<6x3xf32>, tensor<6xi32>) -> tensor<f32>
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
