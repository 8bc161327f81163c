// RUN: shard-opt %s --pass-pipeline='builtin.module(autoshard-lower-to-runtime)' | FileCheck %s

// train.dropout lowers to asrt_dropout: n elements in rows of row_elems
// (the elements after dim 0, the batch), the rows it holds in the whole
// batch (row_offset, rank_rows), p and the stream.

// CHECK-LABEL: func.func @autoshard_step
// The op's trace site comes first (its own constant 0 : i32).
// CHECK: call @asrt_op_site
// CHECK-DAG: %[[DT:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[N:.*]] = arith.constant 64 : i64
// CHECK-DAG: %[[ROW:.*]] = arith.constant 16 : i64
// CHECK-DAG: %[[OFF:.*]] = arith.constant 2 : i64
// CHECK-DAG: %[[RANK:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[P:.*]] = arith.constant 2.500000e-01 : f32
// CHECK-DAG: %[[STREAM:.*]] = arith.constant 5 : i64
// CHECK: call @asrt_dropout(%{{[^,]*}}, %[[DT]], %{{[^,]*}}, %{{[^,]*}}, %[[N]], %[[ROW]], %[[OFF]], %[[RANK]], %[[P]], %[[STREAM]]) : (!llvm.ptr, i32, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, f32, i64) -> ()
func.func @step(
    %x: tensor<4x2x8xf32> {train.role = #train.role<input>, train.name = "x"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "s"}) attributes {train.step} {
  %d = train.dropout %x {p = 0.25 : f32, stream = 5 : i64, row_offset = 2 : i64, rank_rows = 8 : i64} : tensor<4x2x8xf32>
  %s = train.reduce_sum %d {dims = array<i64: 0, 1, 2>} : tensor<4x2x8xf32> -> tensor<f32>
  return %s : tensor<f32>
}
