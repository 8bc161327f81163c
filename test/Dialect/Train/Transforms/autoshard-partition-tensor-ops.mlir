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

// Views that merge the batch with the next dimension and split it out again
// ([B, T, C] -> [B*T, C] -> [B, T, C'], torch's view(-1, C) around a layer)
// take the per-rank shapes on both sides: the global 8 rows become each
// rank's 4, so B*T is 16, not 32, and the backward pass's views follow.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[A:.*]] = train.tanh %{{.*}} : tensor<4x4x16xf32>
// CHECK: %[[F:.*]] = train.reshape %[[A]] : tensor<4x4x16xf32> to tensor<16x16xf32>
// CHECK: train.matmul %[[F]], %{{.*}} {transpose_rhs} : (tensor<16x16xf32>, tensor<10x16xf32>) -> tensor<16x10xf32>
// CHECK: %[[V:.*]] = train.reshape %{{.*}} : tensor<16x10xf32> to tensor<4x4x10xf32>
// CHECK: train.softmax_cross_entropy %[[V]], %{{.*}} : (tensor<4x4x10xf32>, tensor<4x4xi32>) -> tensor<f32>
// CHECK: %[[DV:.*]] = train.softmax_cross_entropy_grad
// CHECK: train.reshape %[[DV]] : tensor<4x4x10xf32> to tensor<16x10xf32>
// CHECK: train.matmul %{{.*}}, %[[F]] {transpose_lhs} : (tensor<16x10xf32>, tensor<16x16xf32>) -> tensor<10x16xf32>
func.func @train_step(
    %w: tensor<10x16xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.2>},
    %x: tensor<8x4x16xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8x4xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1>} {
  %a = train.tanh %x : tensor<8x4x16xf32>
  %f = train.reshape %a : tensor<8x4x16xf32> to tensor<32x16xf32>
  %l = train.matmul %f, %w {transpose_rhs} : (tensor<32x16xf32>, tensor<10x16xf32>) -> tensor<32x10xf32>
  %t = train.tanh %l : tensor<32x10xf32>
  %v = train.reshape %t : tensor<32x10xf32> to tensor<8x4x10xf32>
  %loss = train.softmax_cross_entropy %v, %y : (tensor<8x4x10xf32>, tensor<8x4xi32>) -> tensor<f32>
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

// -----

// A tensor that depends on no batch but has the batch's rows, paired with
// the batch row for row, follows the batch: a ViT's class token expanded to
// the batch and concatenated with the patches, a full of the batch's shape
// and a splat constant take each rank's 4 of the 8 rows. A [T, C] table
// that broadcasts over the batch (rank 2 against the rank-3 activations)
// keeps its shape.
// CHECK-LABEL: func.func @train_step
// CHECK: train.broadcast_to %arg0 : tensor<1x1x16xf32> -> tensor<4x1x16xf32>
// CHECK: train.concat %{{.*}}, %{{.*}} {dim = 1 : i64} : (tensor<4x1x16xf32>, tensor<4x4x16xf32>) -> tensor<4x5x16xf32>
// CHECK: train.full {value = 1.000000e+00 : f32} : tensor<5x16xf32>
// CHECK: train.add %{{.*}}, %{{.*}} : tensor<4x5x16xf32>, tensor<5x16xf32> -> tensor<4x5x16xf32>
// CHECK: train.full {value = 5.000000e-01 : f32} : tensor<4x16xf32>
// CHECK: train.constant dense<2.500000e-01> : tensor<4x16xf32>
// The class token's gradient sums the rank's rows, then is averaged over
// the ranks.
// CHECK: %[[SUM:.*]] = train.reduce_sum %{{.*}} {dims = array<i64: 0>} : tensor<4x1x16xf32> -> tensor<1x16xf32>
// CHECK: %[[DCLS:.*]] = train.reshape %[[SUM]] : tensor<1x16xf32> to tensor<1x1x16xf32>
// CHECK: train.collective_start all_reduce {{.*}}%[[DCLS]] on @world
func.func @train_step(
    %cls: tensor<1x1x16xf32> {train.role = #train.role<param>, train.name = "cls", train.init = #train.init<normal, std = 0.2>},
    %w: tensor<16x16xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.2>},
    %head: tensor<10x16xf32> {train.role = #train.role<param>, train.name = "head", train.init = #train.init<normal, std = 0.2>},
    %x: tensor<8x4x16xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1>} {
  %c = train.broadcast_to %cls : tensor<1x1x16xf32> -> tensor<8x1x16xf32>
  %t = train.concat %c, %x {dim = 1} : (tensor<8x1x16xf32>, tensor<8x4x16xf32>) -> tensor<8x5x16xf32>
  %h = train.matmul %t, %w : (tensor<8x5x16xf32>, tensor<16x16xf32>) -> tensor<8x5x16xf32>
  %table = train.full {value = 1.0 : f32} : tensor<5x16xf32>
  %ht = train.add %h, %table : tensor<8x5x16xf32>, tensor<5x16xf32> -> tensor<8x5x16xf32>
  %a = train.tanh %ht : tensor<8x5x16xf32>
  %s = train.slice %a {dim = 1, start = 0, end = 1} : tensor<8x5x16xf32> -> tensor<8x1x16xf32>
  %f = train.reshape %s : tensor<8x1x16xf32> to tensor<8x16xf32>
  %b = train.full {value = 0.5 : f32} : tensor<8x16xf32>
  %fb = train.add %f, %b : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %k = train.constant dense<0.25> : tensor<8x16xf32>
  %fk = train.mul %fb, %k : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %logits = train.matmul %fk, %head {transpose_rhs} : (tensor<8x16xf32>, tensor<10x16xf32>) -> tensor<8x10xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @train_step(
    %w: tensor<8x10xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.2>},
    %x: tensor<4x8xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<4xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1>} {
  // A full of the batch's rows, read without the batch first and then with
  // it: the first reader would keep the whole batch's 4 rows.
  %b = train.full {value = 0.5 : f32} : tensor<4x8xf32>
  %s = train.reduce_sum %b {dims = array<i64: 0, 1>} : tensor<4x8xf32> -> tensor<f32>
  // expected-error@+1 {{'train.add' op pairs the batch with train.full of 'tensor<4x8xf32>', which train.reduce_sum reads before it without the batch; give each reader its own tensor}}
  %xb = train.add %x, %b : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %xc = train.mul %xb, %s : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %logits = train.matmul %xc, %w : (tensor<4x8xf32>, tensor<8x10xf32>) -> tensor<4x10xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// train.nll_loss is a loss like train.softmax_cross_entropy: each rank takes
// the mean over its share of the rows (with the same ignore index), its
// gradient scatters -1/count into the rank's rows, the ranks average the
// gradients and the reported loss (grouped into one bucket).
// CHECK-LABEL: func.func @train_step
// CHECK: %[[LOGP:.*]] = train.log_softmax %{{.*}} : tensor<4x10xf32>
// CHECK: %[[LOSS:.*]] = train.nll_loss %[[LOGP]], %[[Y:.*]] {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
// CHECK: %[[DLOGP:.*]] = train.nll_loss_grad %[[LOGP]], %[[Y]] {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<4x10xf32>
// CHECK: %[[DLOGITS:.*]] = train.softmax_grad %[[DLOGP]], %[[LOGP]] {log} : tensor<4x10xf32>
// CHECK: %[[DW:.*]] = train.linear_grad_weight %[[DLOGITS]]
// CHECK: train.collective_start all_reduce %[[LOSS]], %[[DW]] on @world grid_axes = [0] reduction = average
func.func @train_step(
    %w: tensor<10x8xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.2>},
    %x: tensor<8x8xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1>} {
  %logits = train.linear %x, %w : (tensor<8x8xf32>, tensor<10x8xf32>) -> tensor<8x10xf32>
  %logp = train.log_softmax %logits : tensor<8x10xf32>
  %loss = train.nll_loss %logp, %y {ignore_index = -100 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
