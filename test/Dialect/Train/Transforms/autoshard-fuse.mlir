// RUN: shard-opt %s -split-input-file -allow-unregistered-dialect \
// RUN:   --pass-pipeline='builtin.module(autoshard-fuse)' | FileCheck %s

// Each step takes a loss and returns it (the smallest valid step); the
// tensors the fused groups read come from "test.src".

// A linear layer with a bias and its GELU become one op at the GELU; the
// pre-activation stays a result for its later readers.

// CHECK-LABEL: func.func @linear_gelu
// CHECK: %[[X:.*]] = "test.src"() : () -> tensor<8x16xf32>
// CHECK-NEXT: %[[W:.*]] = "test.src"() : () -> tensor<4x16xf32>
// CHECK-NEXT: %[[B:.*]] = "test.src"() : () -> tensor<4xf32>
// CHECK-NEXT: "test.between"
// CHECK-NEXT: %[[PRE:.*]], %[[Y:.*]] = train.linear_gelu %[[X]], %[[W]], %[[B]] : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>)
// CHECK-NEXT: "test.use"(%[[Y]], %[[PRE]])
// CHECK-NOT: train.linear
// CHECK-NOT: train.gelu
func.func @linear_gelu(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %x = "test.src"() : () -> tensor<8x16xf32>
  %w = "test.src"() : () -> tensor<4x16xf32>
  %b = "test.src"() : () -> tensor<4xf32>
  %h = train.linear %x, %w, %b : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  "test.between"() : () -> ()
  %y = train.gelu %h : tensor<8x4xf32>
  "test.use"(%y, %h) : (tensor<8x4xf32>, tensor<8x4xf32>) -> ()
  return %l : tensor<f32>
}

// -----

// Not fused: a layer without a bias, and a layer whose result is read
// before its GELU (the fused op would produce it too late).

// CHECK-LABEL: func.func @linear_gelu_not_fused
// CHECK: train.linear %{{.*}}, %{{.*}} :
// CHECK-NEXT: train.gelu
// CHECK: train.linear %{{.*}}, %{{.*}}, %{{.*}} :
// CHECK-NEXT: "test.use"
// CHECK-NEXT: train.gelu
// CHECK-NOT: train.linear_gelu
func.func @linear_gelu_not_fused(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %x = "test.src"() : () -> tensor<8x16xf32>
  %w = "test.src"() : () -> tensor<4x16xf32>
  %b = "test.src"() : () -> tensor<4xf32>
  %h0 = train.linear %x, %w : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
  %y0 = train.gelu %h0 : tensor<8x4xf32>
  %h1 = train.linear %x, %w, %b : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  "test.use"(%h1) : (tensor<8x4xf32>) -> ()
  %y1 = train.gelu %h1 : tensor<8x4xf32>
  "test.use"(%y0, %y1) : (tensor<8x4xf32>, tensor<8x4xf32>) -> ()
  return %l : tensor<f32>
}

// -----

// In the backward pass: an input gradient that only GELU's gradient reads,
// that gradient and the bias gradient of its result become one op at GELU's
// gradient. The weight gradient of the same output gradient stays alone:
// its bias gradient is taken.

// CHECK-LABEL: func.func @linear_grad_gelu
// CHECK: %[[DY:.*]] = "test.src"() : () -> tensor<8x16xf32>
// CHECK-NEXT: %[[W:.*]] = "test.src"() : () -> tensor<16x4xf32>
// CHECK-NEXT: %[[PRE:.*]] = "test.src"() : () -> tensor<8x4xf32>
// CHECK-NEXT: %[[X:.*]] = "test.src"() : () -> tensor<8x32xf32>
// CHECK-NEXT: %[[DPRE:.*]], %[[DB:.*]] = train.linear_grad_gelu %[[DY]], %[[W]], %[[PRE]] : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>)
// CHECK-NEXT: %[[DW:.*]] = train.linear_grad_weight %[[DPRE]], %[[X]]
// CHECK-NEXT: "test.use"(%[[DPRE]], %[[DW]], %[[DB]])
// CHECK-NOT: train.bias_grad
func.func @linear_grad_gelu(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %dy = "test.src"() : () -> tensor<8x16xf32>
  %w = "test.src"() : () -> tensor<16x4xf32>
  %pre = "test.src"() : () -> tensor<8x4xf32>
  %x = "test.src"() : () -> tensor<8x32xf32>
  %dx = train.linear_grad_input %dy, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %dpre = train.gelu_grad %dx, %pre : tensor<8x4xf32>
  %dw = train.linear_grad_weight %dpre, %x : (tensor<8x4xf32>, tensor<8x32xf32>) -> tensor<4x32xf32>
  %db = train.bias_grad %dpre : (tensor<8x4xf32>) -> tensor<4xf32>
  "test.use"(%dpre, %dw, %db) : (tensor<8x4xf32>, tensor<4x32xf32>, tensor<4xf32>) -> ()
  return %l : tensor<f32>
}

// -----

// An input gradient read twice is needed on its own: GELU's gradient is not
// fused with it. The weight and bias gradients of one output gradient are,
// at the later of the two.

// CHECK-LABEL: func.func @linear_grad_weight_bias
// CHECK: %[[DX:.*]] = train.linear_grad_input
// CHECK-NEXT: %[[DPRE:.*]] = train.gelu_grad %[[DX]]
// CHECK-NEXT: "test.use"(%[[DX]])
// CHECK-NEXT: "test.between"
// CHECK-NEXT: %[[DW:.*]], %[[DB:.*]] = train.linear_grad_weight_bias %[[DPRE]], %{{.*}} : (tensor<8x4xf32>, tensor<8x32xf32>) -> (tensor<4x32xf32>, tensor<4xf32>)
// CHECK-NEXT: "test.use"(%[[DW]], %[[DB]])
func.func @linear_grad_weight_bias(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %dy = "test.src"() : () -> tensor<8x16xf32>
  %w = "test.src"() : () -> tensor<16x4xf32>
  %pre = "test.src"() : () -> tensor<8x4xf32>
  %x = "test.src"() : () -> tensor<8x32xf32>
  %dx = train.linear_grad_input %dy, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %dpre = train.gelu_grad %dx, %pre : tensor<8x4xf32>
  "test.use"(%dx) : (tensor<8x4xf32>) -> ()
  %db = train.bias_grad %dpre : (tensor<8x4xf32>) -> tensor<4xf32>
  "test.between"() : () -> ()
  %dw = train.linear_grad_weight %dpre, %x : (tensor<8x4xf32>, tensor<8x32xf32>) -> tensor<4x32xf32>
  "test.use"(%dw, %db) : (tensor<4x32xf32>, tensor<4xf32>) -> ()
  return %l : tensor<f32>
}

// -----

// Neighbouring AdamW updates with the same scalars become one multi-tensor
// update at the last of them; an op in between that reads none of their
// results runs before it. An update with other hyperparameters starts a
// run of its own, and a reader of a result ends a run (here, one of one
// update, which stays train.adamw).

// CHECK-LABEL: func.func @adamw
// CHECK: "test.between"
// CHECK-NEXT: %[[R:.*]]:6 = train.adamw_multi params(%[[P:.*]], %[[Q:.*]]) grads(%{{.*}}, %{{.*}}) exp_avgs(%{{.*}}, %{{.*}}) exp_avg_sqs(%{{.*}}, %{{.*}}) lr(%[[LR:.*]]) step(%[[T:.*]]) {beta1 = 0.899999976 : f32, beta2 = 9.990000e-01 : f32, eps = 9.99999993E-9 : f32, weight_decays = array<f32: 1.000000e-01, 0.000000e+00>}
// CHECK-NEXT: = train.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[LR]], %[[T]] {eps = 9.99999997E-7 : f32
// CHECK-NEXT: "test.use"(%[[R]]#0, %[[R]]#1, %[[R]]#2, %[[R]]#3, %[[R]]#4, %[[R]]#5)
func.func @adamw(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %p = "test.src"() : () -> tensor<4x16xf32>
  %q = "test.src"() : () -> tensor<4xf32>
  %r = "test.src"() : () -> tensor<4xf32>
  %lr = "test.src"() : () -> tensor<f32>
  %t = "test.src"() : () -> tensor<i32>
  %p1, %pm, %pv = train.adamw %p, %p, %p, %p, %lr, %t {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decay = 0.1 : f32} : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>, tensor<i32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>)
  "test.between"() : () -> ()
  %q1, %qm, %qv = train.adamw %q, %q, %q, %q, %lr, %t {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %r1, %rm, %rv = train.adamw %r, %r, %r, %r, %lr, %t {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-6 : f32, weight_decay = 0.0 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  "test.use"(%p1, %q1, %pm, %qm, %pv, %qv) : (tensor<4x16xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4xf32>) -> ()
  "test.use"(%r1, %rm, %rv) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> ()
  return %l : tensor<f32>
}
