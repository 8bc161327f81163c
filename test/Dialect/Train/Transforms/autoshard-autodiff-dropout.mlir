// RUN: shard-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(autoshard-autodiff)' | FileCheck %s
// RUN: shard-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(autoshard-autodiff{forward-only=true})' | FileCheck %s --check-prefix=EVAL

// A dropout's gradient is a dropout of the output gradient with the same
// attributes (the same mask, drawn again). Under gradient accumulation
// each micro-batch's copy says where its rows start in the whole batch
// (row_offset) and how many rows the whole step holds (rank_rows). The
// evaluation step replaces dropout by its input.

// CHECK-LABEL: func.func @micro_batches
// CHECK: %[[D0:.*]] = train.dropout %{{.*}} {p = 5.000000e-01 : f32, rank_rows = 8 : i64, stream = 7 : i64} : tensor<4x3xf32>
// CHECK: train.dropout %{{.*}} {p = 5.000000e-01 : f32, rank_rows = 8 : i64, stream = 7 : i64} : tensor<4x3xf32>
// CHECK: train.dropout %{{.*}} {p = 5.000000e-01 : f32, rank_rows = 8 : i64, row_offset = 4 : i64, stream = 7 : i64} : tensor<4x3xf32>
// CHECK: train.dropout %{{.*}} {p = 5.000000e-01 : f32, rank_rows = 8 : i64, row_offset = 4 : i64, stream = 7 : i64} : tensor<4x3xf32>
// EVAL-LABEL: func.func @micro_batches
// EVAL-NOT: train.dropout
// EVAL: return
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
