// RUN: shard-opt %s --pass-pipeline='builtin.module(autoshard-autodiff)' | FileCheck %s

// The gradient rules of the generic ops build generic ops: a transpose's
// gradient is the inverse transpose, a concat's the slices of its inputs, a
// slice's a zero pad, reduce_max's the gradient shared among the maxima
// (compare, select, count), a broadcast operand's a reduce_sum down to its
// shape, and a weight's of a batched matmul one product over the flattened
// rows (no stacked per-batch gradients).

// CHECK-LABEL: func.func @step
// CHECK: %[[H:.*]] = train.matmul %arg2, %arg0
// CHECK: %[[T:.*]] = train.transpose
// CHECK: %[[MAX:.*]] = train.reduce_max %[[T]]
// CHECK: %[[DLOGITS:.*]] = train.softmax_cross_entropy_grad
// CHECK: %[[DC:.*]] = train.transpose %[[DLOGITS]] {permutation = array<i64: 0, 2, 1>}
// CHECK: %[[DMAX:.*]] = train.slice %[[DC]] {dim = 2 : i64, end = 1 : i64, start = 0 : i64}
// CHECK: %[[DSL:.*]] = train.slice %[[DC]] {dim = 2 : i64, end = 3 : i64, start = 1 : i64}
// CHECK: %[[FROMSL:.*]] = train.pad %[[DSL]] {dim = 2 : i64, high = 0 : i64, low = 1 : i64} : tensor<2x6x2xf32> -> tensor<2x6x3xf32>
// CHECK: %[[MAXB:.*]] = train.broadcast_to %[[MAX]] : tensor<2x6x1xf32> -> tensor<2x6x3xf32>
// CHECK: %[[ISMAX:.*]] = train.compare eq, %[[T]], %[[MAXB]]
// CHECK: %[[IND:.*]] = train.select %[[ISMAX]]
// CHECK: %[[COUNT:.*]] = train.reduce_sum %[[IND]] {dims = array<i64: 2>, keepdim}
// CHECK: %[[SHARE:.*]] = train.div %[[DMAX]], %[[COUNT]]
// CHECK: %[[SPREAD:.*]] = train.broadcast_to %[[SHARE]]
// CHECK: %[[FROMMAX:.*]] = train.mul %[[SPREAD]], %[[IND]]
// CHECK: %[[DT:.*]] = train.add %[[FROMSL]], %[[FROMMAX]]
// CHECK: %[[DS:.*]] = train.transpose %[[DT]] {permutation = array<i64: 0, 2, 1>}
// CHECK: %[[DH:.*]] = train.mul %[[DS]], %arg1 : tensor<2x3x6xf32>, tensor<6xf32> -> tensor<2x3x6xf32>
// CHECK: %[[DGFULL:.*]] = train.mul %[[DS]], %[[H]]
// CHECK: %[[DG:.*]] = train.reduce_sum %[[DGFULL]] {dims = array<i64: 0, 1>} : tensor<2x3x6xf32> -> tensor<6xf32>
// CHECK: %[[ROWS:.*]] = train.reshape %arg2 : tensor<2x3x8xf32> to tensor<6x8xf32>
// CHECK: %[[DROWS:.*]] = train.reshape %[[DH]] : tensor<2x3x6xf32> to tensor<6x6xf32>
// CHECK: %[[DW:.*]] = train.matmul %[[ROWS]], %[[DROWS]] {transpose_lhs} : (tensor<6x8xf32>, tensor<6x6xf32>) -> tensor<8x6xf32>
// CHECK: train.sgd %arg0, %[[DW]]
// CHECK: train.sgd %arg1, %[[DG]]
func.func @step(
    %w: tensor<8x6xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.2>},
    %g: tensor<6xf32> {train.role = #train.role<param>, train.name = "g", train.init = #train.init<ones>},
    %x: tensor<2x3x8xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<2x3xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1>} {
  %h = train.matmul %x, %w : (tensor<2x3x8xf32>, tensor<8x6xf32>) -> tensor<2x3x6xf32>
  %s = train.mul %h, %g : tensor<2x3x6xf32>, tensor<6xf32> -> tensor<2x3x6xf32>
  %t = train.transpose %s {permutation = array<i64: 0, 2, 1>} : tensor<2x3x6xf32> -> tensor<2x6x3xf32>
  %m = train.reduce_max %t {dims = array<i64: 2>, keepdim} : tensor<2x6x3xf32> -> tensor<2x6x1xf32>
  %sl = train.slice %t {dim = 2 : i64, start = 1 : i64, end = 3 : i64} : tensor<2x6x3xf32> -> tensor<2x6x2xf32>
  %c = train.concat %m, %sl {dim = 2 : i64} : (tensor<2x6x1xf32>, tensor<2x6x2xf32>) -> tensor<2x6x3xf32>
  %back = train.transpose %c {permutation = array<i64: 0, 2, 1>} : tensor<2x6x3xf32> -> tensor<2x3x6xf32>
  %loss = train.softmax_cross_entropy %back, %y : (tensor<2x3x6xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
