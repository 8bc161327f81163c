// RUN: shard-opt %s -split-input-file -verify-diagnostics --strategy=ddp --world-size=2 --raise=false | FileCheck %s

// --raise=false: the generic ops themselves are partitioned here, not the
// fused ops autoshard-raise would make of them.

// The partitioner splits the global batch through the generic tensor ops:
// every op that keeps the batch as its leading dimension takes each rank's
// share (shapes re-inferred), the backward pass's products sum over the
// rank's rows (the weight gradient of a batched matmul is one product over
// the flattened rows) and the gradients are averaged across ranks. A
// forward op that combines rows of different batch elements is refused,
// naming it.

// CHECK-LABEL: func.func @train_step
// CHECK: train.matmul %{{.*}}, %{{.*}} : (tensor<4x4x16xf32>, tensor<16x32xf32>) -> tensor<4x4x32xf32>
// CHECK: train.add %{{.*}}, %{{.*}} : tensor<4x4x32xf32>, tensor<32xf32> -> tensor<4x4x32xf32>
// CHECK: train.reduce_mean %{{.*}} {dims = array<i64: 2>, keepdim} : tensor<4x4x32xf32> -> tensor<4x4x1xf32>
// CHECK: train.transpose %{{.*}} {permutation = array<i64: 0, 2, 1>} : tensor<4x4x32xf32> -> tensor<4x32x4xf32>
// CHECK: train.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<4x4x32xf32>, tensor<10x32xf32>) -> tensor<4x4x10xf32>
// CHECK: train.softmax_cross_entropy %{{.*}}, %{{.*}} : (tensor<4x4x10xf32>, tensor<4x4xi32>) -> tensor<f32>
// The gain's gradient sums the rank's rows; the first layer's weight
// gradient is one product over the flattened rows; every gradient is then
// averaged over the ranks.
// CHECK: %[[DG:.*]] = train.reduce_sum %{{.*}} {dims = array<i64: 0, 1>} : tensor<4x4x32xf32> -> tensor<32xf32>
// CHECK: %[[DW1:.*]] = train.matmul %{{.*}}, %{{.*}} {transpose_lhs} : (tensor<16x16xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
// CHECK: train.collective_start all_reduce {{.*}}%[[DG]]{{.*}}%[[DW1]] on @world grid_axes = [0] reduction = average
func.func @train_step(
    %w1: tensor<16x32xf32> {train.role = #train.role<param>, train.name = "w1", train.init = #train.init<normal, std = 0.2>},
    %b1: tensor<32xf32> {train.role = #train.role<param>, train.name = "b1", train.init = #train.init<normal, std = 0.1>},
    %w2: tensor<10x32xf32> {train.role = #train.role<param>, train.name = "w2", train.init = #train.init<normal, std = 0.2>},
    %g: tensor<32xf32> {train.role = #train.role<param>, train.name = "g", train.init = #train.init<ones>},
    %x: tensor<8x4x16xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8x4xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1>} {
  %h = train.matmul %x, %w1 : (tensor<8x4x16xf32>, tensor<16x32xf32>) -> tensor<8x4x32xf32>
  %hb = train.add %h, %b1 : tensor<8x4x32xf32>, tensor<32xf32> -> tensor<8x4x32xf32>
  %a = train.tanh %hb : tensor<8x4x32xf32>
  %sq = train.pow_scalar %a {exponent = 2.0 : f32} : tensor<8x4x32xf32>
  %ms = train.reduce_mean %sq {dims = array<i64: 2>, keepdim} : tensor<8x4x32xf32> -> tensor<8x4x1xf32>
  %e = train.add_scalar %ms {value = 1.0e-5 : f32} : tensor<8x4x1xf32>
  %r = train.rsqrt %e : tensor<8x4x1xf32>
  %n = train.mul %a, %r : tensor<8x4x32xf32>, tensor<8x4x1xf32> -> tensor<8x4x32xf32>
  %ng = train.mul %n, %g : tensor<8x4x32xf32>, tensor<32xf32> -> tensor<8x4x32xf32>
  %t = train.transpose %ng {permutation = array<i64: 0, 2, 1>} : tensor<8x4x32xf32> -> tensor<8x32x4xf32>
  %t2 = train.transpose %t {permutation = array<i64: 0, 2, 1>} : tensor<8x32x4xf32> -> tensor<8x4x32xf32>
  %logits = train.matmul %t2, %w2 {transpose_rhs} : (tensor<8x4x32xf32>, tensor<10x32xf32>) -> tensor<8x4x10xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<8x4x10xf32>, tensor<8x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @train_step(
    %w: tensor<8x10xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.2>},
    %x: tensor<4x8xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<4xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1>} {
  // A mean over the batch (batch normalisation's statistics) differs on each rank's share.
  // expected-error@+1 {{'train.reduce_mean' op combines rows of different batch elements ('tensor<1x8xf32>' on the global batch, 'tensor<1x8xf32>' on each rank's share): a rank holds only its share of the batch, so a data-parallel plan cannot split it; keep the batch as the leading dimension and reduce over it only in the loss}}
  %m = train.reduce_mean %x {dims = array<i64: 0>, keepdim} : tensor<4x8xf32> -> tensor<1x8xf32>
  %c = train.sub %x, %m : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
  %logits = train.matmul %c, %w : (tensor<4x8xf32>, tensor<8x10xf32>) -> tensor<4x10xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @train_step(
    %w: tensor<8x10xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.2>},
    %x: tensor<4x8xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<4xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1>} {
  // A transpose that moves the batch away from the leading dimension.
  // expected-error@+1 {{'train.transpose' op combines rows of different batch elements ('tensor<8x4xf32>' on the global batch, 'tensor<8x2xf32>' on each rank's share)}}
  %t = train.transpose %x {permutation = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %back = train.transpose %t {permutation = array<i64: 1, 0>} : tensor<8x4xf32> -> tensor<4x8xf32>
  %logits = train.matmul %back, %w : (tensor<4x8xf32>, tensor<8x10xf32>) -> tensor<4x10xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A view of a parameter is not batch-derived: it keeps its shape.
// CHECK-LABEL: func.func @train_step
// CHECK: train.reshape %arg0 : tensor<40xf32> to tensor<4x10xf32>
func.func @train_step(
    %w: tensor<40xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.2>},
    %x: tensor<4x10xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<4xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1>} {
  %w2 = train.reshape %w : tensor<40xf32> to tensor<4x10xf32>
  %logits = train.linear %x, %w2 : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<4x4xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
