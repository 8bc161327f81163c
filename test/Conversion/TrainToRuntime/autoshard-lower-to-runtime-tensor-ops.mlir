// RUN: shard-opt %s --pass-pipeline='builtin.module(autoshard-lower-to-runtime)' | FileCheck %s

// The generic tensor ops lower to abi.h's generic kernels with the
// iteration space and each operand's element strides as constant arrays:
// broadcasting is a zero stride, a transpose permuted strides, a slice an
// offset, and dimensions that every operand walks contiguously merge. A
// batch of activations times one weight is a single product (the batch
// stacks into the rows); a range of whole rows is a view.

// CHECK-DAG: llvm.mlir.global private constant @[[ADD_DIMS:asrt_dims\.[0-9]+]](dense<[8, 32]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global private constant @[[ROW_STRIDES:asrt_dims\.[0-9]+]](dense<[32, 1]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global private constant @[[BCAST_STRIDES:asrt_dims\.[0-9]+]](dense<[0, 1]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global private constant @[[T_DIMS:asrt_dims\.[0-9]+]](dense<[2, 32, 4]> : tensor<3xi64>)
// CHECK-DAG: llvm.mlir.global private constant @[[T_IN:asrt_dims\.[0-9]+]](dense<[128, 1, 32]> : tensor<3xi64>)
// CHECK-DAG: llvm.mlir.global private constant @[[T_OUT:asrt_dims\.[0-9]+]](dense<[128, 4, 1]> : tensor<3xi64>)
// CHECK-DAG: llvm.mlir.global private constant @[[S_DIMS:asrt_dims\.[0-9]+]](dense<[64, 2]> : tensor<2xi64>)

// A constant's elements are bytes of the object (a mask one byte each),
// copied into the step's buffer.
// CHECK-DAG: llvm.mlir.global private constant @[[MASK:asrt_const\.[0-9]+]]("\01\00\01\01\01") {addr_space = 0 : i32, alignment = 64 : i64}

// CHECK-LABEL: func.func @autoshard_step
// matmul [2,4,16] x [16,32]: one product of 8 x 16 by 16 x 32, no batch.
// CHECK: %[[NULL0:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[NULL1:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[NULL2:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[M:.*]] = arith.constant 8 : i64
// CHECK: %[[N:.*]] = arith.constant 32 : i64
// CHECK: %[[K:.*]] = arith.constant 16 : i64
// CHECK: call @asrt_matmul(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[NULL0]], %[[NULL1]], %[[NULL2]], %[[M]], %[[N]], %[[K]],
// add [2,4,32] + [32]: two merged dimensions, the bias broadcast.
// CHECK: llvm.mlir.addressof @[[ADD_DIMS]]
// CHECK: llvm.mlir.addressof @[[ROW_STRIDES]]
// CHECK: llvm.mlir.addressof @[[BCAST_STRIDES]]
// CHECK: call @asrt_binary(
// CHECK: %[[TANH:.*]] = arith.constant 3 : i32
// CHECK: call @asrt_unary(%{{[^,]*}}, %{{[^,]*}}, %[[TANH]],
// CHECK: llvm.mlir.addressof @[[T_DIMS]]
// CHECK: llvm.mlir.addressof @[[T_IN]]
// CHECK: llvm.mlir.addressof @[[T_OUT]]
// CHECK: call @asrt_copy_strided(
// The slice of the last dimension starts one element in.
// CHECK: llvm.mlir.addressof @[[S_DIMS]]
// CHECK: %[[ONE:.*]] = arith.constant 1 : i64
// CHECK: call @asrt_copy_strided(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[ONE]],
// The pad fills, then copies into the middle.
// CHECK: call @asrt_fill(
// CHECK: call @asrt_copy_strided(
// The concat copies each input.
// CHECK: call @asrt_copy_strided(
// CHECK: call @asrt_copy_strided(
// compare gt is asrt_binary's GT (9) into a mask.
// CHECK: %[[GT:.*]] = arith.constant 9 : i32
// CHECK: call @asrt_binary(%{{[^,]*}}, %{{[^,]*}}, %[[GT]],
// CHECK: %[[SRC:.*]] = llvm.mlir.addressof @[[MASK]]
// CHECK: call @asrt_load_constant(%{{[^,]*}}, %{{[^,]*}}, %[[SRC]], %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64) -> ()
// CHECK: call @asrt_fill(
// CHECK: call @asrt_select(
// CHECK: call @asrt_select(
// CHECK: call @asrt_softmax(
// reduce_sum over dims 0 and 2 of [2,32,5]: kept [32] (stride 5), reduced [2,5] (strides 160, 1).
// CHECK: call @asrt_reduce(
// CHECK: %[[MAX:.*]] = arith.constant 2 : i32
// CHECK: call @asrt_reduce(%{{[^,]*}}, %{{[^,]*}}, %[[MAX]],
// The slice of whole rows is a view: no call.
// CHECK-NOT: call @asrt_copy_strided
// CHECK: return
func.func @step(
    %w: tensor<16x32xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
    %b: tensor<32xf32> {train.role = #train.role<param>, train.name = "b", train.init = #train.init<zeros>},
    %x: tensor<2x4x16xf32> {train.role = #train.role<input>, train.name = "x"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "s"}) attributes {train.step} {
  %h = train.matmul %x, %w : (tensor<2x4x16xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
  %hb = train.add %h, %b : tensor<2x4x32xf32>, tensor<32xf32> -> tensor<2x4x32xf32>
  %t = train.tanh %hb : tensor<2x4x32xf32>
  %tr = train.transpose %t {permutation = array<i64: 0, 2, 1>} : tensor<2x4x32xf32> -> tensor<2x32x4xf32>
  %sl = train.slice %tr {dim = 2 : i64, start = 1 : i64, end = 3 : i64} : tensor<2x32x4xf32> -> tensor<2x32x2xf32>
  %p = train.pad %sl {dim = 2 : i64, low = 1 : i64, high = 0 : i64} : tensor<2x32x2xf32> -> tensor<2x32x3xf32>
  %c = train.concat %p, %sl {dim = 2 : i64} : (tensor<2x32x3xf32>, tensor<2x32x2xf32>) -> tensor<2x32x5xf32>
  %m0 = train.compare gt, %c, %c : (tensor<2x32x5xf32>, tensor<2x32x5xf32>) -> tensor<2x32x5xi1>
  %mask = train.constant dense<[true, false, true, true, true]> : tensor<5xi1>
  %z = train.full {value = 0.0 : f32} : tensor<f32>
  %sel0 = train.select %m0, %c, %z : (tensor<2x32x5xi1>, tensor<2x32x5xf32>, tensor<f32>) -> tensor<2x32x5xf32>
  %sel = train.select %mask, %sel0, %z : (tensor<5xi1>, tensor<2x32x5xf32>, tensor<f32>) -> tensor<2x32x5xf32>
  %sm = train.softmax %sel : tensor<2x32x5xf32>
  %r = train.reduce_sum %sm {dims = array<i64: 0, 2>} : tensor<2x32x5xf32> -> tensor<32xf32>
  %rows = train.slice %r {dim = 0 : i64, start = 8 : i64, end = 16 : i64} : tensor<32xf32> -> tensor<8xf32>
  %s = train.reduce_max %rows {dims = array<i64: 0>} : tensor<8xf32> -> tensor<f32>
  return %s : tensor<f32>
}
