// RUN: shard-opt %s -split-input-file -verify-diagnostics --strategy=zero3 --world-size=2 --raise=false | FileCheck %s

// The partitioner gives each rank a block of the batch; a dropout learns
// where its rows start: rank i's micro-batch k holds rows
// row_offset + i * rank_rows of the whole batch's 8 (rank 1's second
// micro-batch: 2 + 1 * 4 = 6). The gradient's dropout has the same rows.

// CHECK-LABEL: func.func @micro_batches
// CHECK: train.dropout %{{.*}} {p = 5.000000e-01 : f32, rank_rows = 4 : i64, stream = 7 : i64} : tensor<2x3xf32>
// CHECK: train.dropout %{{.*}} {p = 5.000000e-01 : f32, rank_rows = 4 : i64, stream = 7 : i64} : tensor<2x3xf32>
// CHECK: train.dropout %{{.*}} {p = 5.000000e-01 : f32, rank_rows = 4 : i64, row_offset = 2 : i64, stream = 7 : i64} : tensor<2x3xf32>
// CHECK: train.dropout %{{.*}} {p = 5.000000e-01 : f32, rank_rows = 4 : i64, row_offset = 2 : i64, stream = 7 : i64} : tensor<2x3xf32>
func.func @micro_batches(
    %w: tensor<3x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.5>},
    %x: tensor<8x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.micro_batches = 2 : i64,
                train.optimizer = #train.sgd<lr = 1.0e-2>} {
  %logits = train.linear %x, %w : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  %d = train.dropout %logits {p = 0.5 : f32, stream = 7 : i64} : tensor<8x3xf32>
  %loss = train.softmax_cross_entropy %d, %y : (tensor<8x3xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Rows that 2 ranks cannot share (a hand-written row_offset of 1).
func.func @odd_rows(
    %w: tensor<3x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.5>},
    %x: tensor<8x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 1.0e-2>} {
  %logits = train.linear %x, %w : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  // expected-error@+1 {{holds rows from 1 of blocks of 8, which do not split evenly over 2 ranks}}
  %d = train.dropout %logits {p = 0.5 : f32, stream = 7 : i64, row_offset = 1 : i64} : tensor<8x3xf32>
  %loss = train.softmax_cross_entropy %d, %y : (tensor<8x3xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
