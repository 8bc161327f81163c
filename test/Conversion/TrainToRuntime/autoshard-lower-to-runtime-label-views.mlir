// RUN: shard-opt %s --pass-pipeline='builtin.module(autoshard-lower-to-runtime)' | FileCheck %s

// i32 labels through the view ops, as HuggingFace shifts them: the pad is
// an i32 fill (dtype 1) with the ignore index and a copy into each row's
// first 4 of 5 positions; the slice from position 1 a strided copy one
// element in; the reshapes alias their inputs. The loss reads the shifted
// labels' buffer, and the manifest says which label value the data may
// hold besides [0, classes): the loss's ignore index, found through the
// views.

// CHECK: @autoshard_manifest({{.*}}\0Aarg 1 label labels i32 2x4 batch_dim=0 global=2 classes=3 ignore_index=-100\0A
// CHECK-DAG: llvm.mlir.global private constant @[[DIMS:asrt_dims\.[0-9]+]](dense<[2, 4]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global private constant @[[ROWS4:asrt_dims\.[0-9]+]](dense<[4, 1]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global private constant @[[ROWS5:asrt_dims\.[0-9]+]](dense<[5, 1]> : tensor<2xi64>)
// CHECK-LABEL: func.func @autoshard_step(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %[[ARGS:[^:]*]]: !llvm.ptr
// CHECK: %[[X:.*]] = llvm.load
// CHECK: %[[LABELS:.*]] = llvm.load
// CHECK: %[[ARENA:.*]] = call @asrt_arena(%[[CTX]])
// CHECK: %[[PADDED:.*]] = llvm.getelementptr %[[ARENA]]
// CHECK: %[[I32:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[TEN:.*]] = arith.constant 10 : i64
// CHECK-NEXT: %[[IGNORE:.*]] = arith.constant -1.000000e+02 : f32
// CHECK-NEXT: call @asrt_fill(%[[CTX]], %[[I32]], %[[PADDED]], %[[TEN]], %[[IGNORE]])
// CHECK: %[[I32B:.*]] = arith.constant 1 : i32
// CHECK: llvm.mlir.addressof @[[DIMS]]
// CHECK-NEXT: llvm.mlir.addressof @[[ROWS4]]
// CHECK: llvm.mlir.addressof @[[ROWS5]]
// CHECK: call @asrt_copy_strided(%[[CTX]], %[[I32B]], %[[LABELS]], %[[PADDED]],
// CHECK: %[[SHIFTED:.*]] = llvm.getelementptr %[[ARENA]]
// CHECK: %[[I32C:.*]] = arith.constant 1 : i32
// CHECK: llvm.mlir.addressof @[[DIMS]]
// CHECK-NEXT: llvm.mlir.addressof @[[ROWS5]]
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : i64
// CHECK: call @asrt_copy_strided(%[[CTX]], %[[I32C]], %[[PADDED]], %[[SHIFTED]], %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[ONE]],
// CHECK: call @asrt_softmax_xent_fwd(%[[CTX]], %{{[^,]*}}, %[[X]], %[[SHIFTED]],
// CHECK-NOT: call
// CHECK: return
func.func @step(
    %x: tensor<2x4x3xf32> {train.role = #train.role<input>, train.name = "x"},
    %labels: tensor<2x4xi32> {train.role = #train.role<label>, train.name = "labels"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
  %flat = train.reshape %x : tensor<2x4x3xf32> to tensor<8x3xf32>
  %padded = train.pad %labels {dim = 1 : i64, low = 0 : i64, high = 1 : i64, value = -100.0 : f32} : tensor<2x4xi32> -> tensor<2x5xi32>
  %shifted = train.slice %padded {dim = 1 : i64, start = 1 : i64, end = 5 : i64} : tensor<2x5xi32> -> tensor<2x4xi32>
  %targets = train.reshape %shifted : tensor<2x4xi32> to tensor<8xi32>
  %loss = train.softmax_cross_entropy %flat, %targets {ignore_index = -100 : i64} : (tensor<8x3xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
