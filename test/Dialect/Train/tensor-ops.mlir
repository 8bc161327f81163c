// RUN: shard-opt %s | shard-opt | FileCheck %s
// RUN: shard-opt %s --mlir-print-op-generic | shard-opt | FileCheck %s

// Every generic tensor op (TrainTensorOps.td) survives printing and parsing,
// with the result types its shape rule infers.

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<4x8xf32>, %h: tensor<4x8xbf16>, %dy: tensor<4x8xf32>) {
  // CHECK: train.neg %{{.*}} : tensor<4x8xf32>
  %0 = train.neg %x : tensor<4x8xf32>
  // CHECK: train.exp %{{.*}} : tensor<4x8xf32>
  %1 = train.exp %x : tensor<4x8xf32>
  // CHECK: train.log %{{.*}} : tensor<4x8xf32>
  %2 = train.log %x : tensor<4x8xf32>
  // CHECK: train.tanh %{{.*}} : tensor<4x8xbf16>
  %3 = train.tanh %h : tensor<4x8xbf16>
  // CHECK: train.sigmoid
  %4 = train.sigmoid %x : tensor<4x8xf32>
  // CHECK: train.rsqrt
  %5 = train.rsqrt %x : tensor<4x8xf32>
  // CHECK: train.sqrt
  %6 = train.sqrt %x : tensor<4x8xf32>
  // CHECK: train.sin
  %7 = train.sin %x : tensor<4x8xf32>
  // CHECK: train.cos
  %8 = train.cos %x : tensor<4x8xf32>
  // CHECK: train.silu
  %9 = train.silu %x : tensor<4x8xf32>
  // CHECK: train.gelu_erf
  %10 = train.gelu_erf %x : tensor<4x8xf32>
  // CHECK: train.reciprocal
  %11 = train.reciprocal %x : tensor<4x8xf32>
  // CHECK: train.abs
  %12 = train.abs %x : tensor<4x8xf32>
  // CHECK: train.erf
  %erf = train.erf %x : tensor<4x8xf32>
  // CHECK: train.pow_scalar %{{.*}} {exponent = 3.000000e+00 : f32} : tensor<4x8xf32>
  %13 = train.pow_scalar %x {exponent = 3.0 : f32} : tensor<4x8xf32>
  // CHECK: train.add_scalar %{{.*}} {value = 1.000000e+00 : f32} : tensor<4x8xf32>
  %14 = train.add_scalar %x {value = 1.0 : f32} : tensor<4x8xf32>
  // CHECK: train.unary_grad tanh, %{{.*}}, %{{.*}} : tensor<4x8xf32>
  %15 = train.unary_grad tanh, %dy, %x : tensor<4x8xf32>
  // CHECK: train.unary_grad pow_scalar, %{{.*}}, %{{.*}} {alpha = 3.000000e+00 : f32} : tensor<4x8xf32>
  %16 = train.unary_grad pow_scalar, %dy, %x {alpha = 3.0 : f32} : tensor<4x8xf32>
  // CHECK: train.unary_grad erf, %{{.*}}, %{{.*}} : tensor<4x8xf32>
  %erf_grad = train.unary_grad erf, %dy, %x : tensor<4x8xf32>
  return
}

// CHECK-LABEL: func.func @binary
func.func @binary(%a: tensor<4x8xf32>, %row: tensor<8xf32>, %col: tensor<4x1xf32>,
                  %s: tensor<f32>) {
  // CHECK: train.add %{{.*}}, %{{.*}} : tensor<4x8xf32>{{$}}
  %0 = train.add %a, %a : tensor<4x8xf32>
  // CHECK: train.add %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %1 = train.add %a, %row : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  // CHECK: train.sub %{{.*}}, %{{.*}} : tensor<4x1xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %2 = train.sub %col, %row : tensor<4x1xf32>, tensor<8xf32> -> tensor<4x8xf32>
  // CHECK: train.mul %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %3 = train.mul %a, %s : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  // CHECK: train.div
  %4 = train.div %a, %col : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  // CHECK: train.maximum
  %5 = train.maximum %a, %a : tensor<4x8xf32>
  // CHECK: train.minimum
  %6 = train.minimum %a, %a : tensor<4x8xf32>
  // CHECK: train.pow
  %7 = train.pow %a, %s : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  // CHECK: train.compare le, %{{.*}}, %{{.*}} : (tensor<4x1xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  %m = train.compare le, %col, %row : (tensor<4x1xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  // CHECK: train.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %8 = train.select %m, %a, %s : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  // CHECK: train.full {value = 0xFF800000 : f32} : tensor<f32>
  %9 = train.full {value = 0xFF800000 : f32} : tensor<f32>
  // CHECK: train.constant dense<{{\[\[}}true, false], [true, true]]> : tensor<2x2xi1>
  %10 = train.constant dense<[[true, false], [true, true]]> : tensor<2x2xi1>
  // CHECK: train.constant dense<[0, 1, 2, 3]> : tensor<4xi32>
  %11 = train.constant dense<[0, 1, 2, 3]> : tensor<4xi32>
  return
}

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<2x4x8xf32>, %dy: tensor<2x4x8xf32>) {
  // CHECK: train.reduce_sum %{{.*}} {dims = array<i64: 2>, keepdim} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %0 = train.reduce_sum %x {dims = array<i64: 2>, keepdim} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  // CHECK: train.reduce_mean %{{.*}} {dims = array<i64: 1, 2>} : tensor<2x4x8xf32> -> tensor<2xf32>
  %1 = train.reduce_mean %x {dims = array<i64: 1, 2>} : tensor<2x4x8xf32> -> tensor<2xf32>
  // CHECK: train.reduce_max %{{.*}} {dims = array<i64: 0>} : tensor<2x4x8xf32> -> tensor<4x8xf32>
  %2 = train.reduce_max %x {dims = array<i64: 0>} : tensor<2x4x8xf32> -> tensor<4x8xf32>
  // CHECK: train.softmax %{{.*}} : tensor<2x4x8xf32>
  %3 = train.softmax %x : tensor<2x4x8xf32>
  // CHECK: train.log_softmax %{{.*}} : tensor<2x4x8xf32>
  %4 = train.log_softmax %x : tensor<2x4x8xf32>
  // CHECK: train.softmax_grad %{{.*}}, %{{.*}} {log} : tensor<2x4x8xf32>
  %5 = train.softmax_grad %dy, %4 {log} : tensor<2x4x8xf32>
  return
}

// CHECK-LABEL: func.func @views
func.func @views(%x: tensor<2x8x4x16xf32>, %row: tensor<16xf32>, %a: tensor<4x8xf32>,
                 %b: tensor<4x2xf32>) {
  // CHECK: train.transpose %{{.*}} {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %0 = train.transpose %x {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  // CHECK: train.broadcast_to %{{.*}} : tensor<16xf32> -> tensor<4x16xf32>
  %1 = train.broadcast_to %row : tensor<16xf32> -> tensor<4x16xf32>
  // CHECK: train.slice %{{.*}} {dim = 3 : i64, end = 8 : i64, start = 0 : i64} : tensor<2x8x4x16xf32> -> tensor<2x8x4x8xf32>
  %2 = train.slice %x {dim = 3 : i64, start = 0 : i64, end = 8 : i64} : tensor<2x8x4x16xf32> -> tensor<2x8x4x8xf32>
  // CHECK: train.pad %{{.*}} {dim = 1 : i64, high = 1 : i64, low = 2 : i64} : tensor<4x8xf32> -> tensor<4x11xf32>
  %3 = train.pad %a {dim = 1 : i64, low = 2 : i64, high = 1 : i64} : tensor<4x8xf32> -> tensor<4x11xf32>
  // CHECK: train.concat %{{.*}}, %{{.*}} {dim = 1 : i64} : (tensor<4x8xf32>, tensor<4x2xf32>) -> tensor<4x10xf32>
  %4 = train.concat %a, %b {dim = 1 : i64} : (tensor<4x8xf32>, tensor<4x2xf32>) -> tensor<4x10xf32>
  return
}

// The view ops move i32 labels too: HuggingFace's shift of causal-LM labels
// (pad with the ignore index, slice off the first position, flatten).
// CHECK-LABEL: func.func @label_views
func.func @label_views(%y: tensor<2x8xi32>, %ids: tensor<8xi32>) {
  // CHECK: train.pad %{{.*}} {dim = 1 : i64, high = 1 : i64, low = 0 : i64, value = -1.000000e+02 : f32} : tensor<2x8xi32> -> tensor<2x9xi32>
  %0 = train.pad %y {dim = 1 : i64, low = 0 : i64, high = 1 : i64, value = -100.0 : f32} : tensor<2x8xi32> -> tensor<2x9xi32>
  // CHECK: train.slice %{{.*}} {dim = 1 : i64, end = 9 : i64, start = 1 : i64} : tensor<2x9xi32> -> tensor<2x8xi32>
  %1 = train.slice %0 {dim = 1 : i64, start = 1 : i64, end = 9 : i64} : tensor<2x9xi32> -> tensor<2x8xi32>
  // CHECK: train.reshape %{{.*}} : tensor<2x8xi32> to tensor<16xi32>
  %2 = train.reshape %1 : tensor<2x8xi32> to tensor<16xi32>
  // CHECK: train.transpose %{{.*}} {permutation = array<i64: 1, 0>} : tensor<2x8xi32> -> tensor<8x2xi32>
  %3 = train.transpose %y {permutation = array<i64: 1, 0>} : tensor<2x8xi32> -> tensor<8x2xi32>
  // CHECK: train.broadcast_to %{{.*}} : tensor<8xi32> -> tensor<2x8xi32>
  %4 = train.broadcast_to %ids : tensor<8xi32> -> tensor<2x8xi32>
  // CHECK: train.concat %{{.*}}, %{{.*}} {dim = 0 : i64} : (tensor<2x8xi32>, tensor<2x8xi32>) -> tensor<4x8xi32>
  %5 = train.concat %y, %4 {dim = 0 : i64} : (tensor<2x8xi32>, tensor<2x8xi32>) -> tensor<4x8xi32>
  return
}

// CHECK-LABEL: func.func @matmuls
func.func @matmuls(%x: tensor<2x4x8xf32>, %w: tensor<8x3xf32>, %q: tensor<2x4x8x16xf32>,
                   %k: tensor<2x1x8x16xf32>) {
  // CHECK: train.matmul %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<8x3xf32>) -> tensor<2x4x3xf32>
  %0 = train.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x3xf32>) -> tensor<2x4x3xf32>
  // CHECK: train.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<2x4x8x16xf32>, tensor<2x1x8x16xf32>) -> tensor<2x4x8x8xf32>
  %1 = train.matmul %q, %k {transpose_rhs} : (tensor<2x4x8x16xf32>, tensor<2x1x8x16xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: train.matmul %{{.*}}, %{{.*}} {transpose_lhs} : (tensor<2x4x8xf32>, tensor<2x4x3xf32>) -> tensor<2x8x3xf32>
  %2 = train.matmul %x, %0 {transpose_lhs} : (tensor<2x4x8xf32>, tensor<2x4x3xf32>) -> tensor<2x8x3xf32>
  return
}

// CHECK-LABEL: func.func @dropout
func.func @dropout(%x: tensor<4x8xf32>, %h: tensor<4x8xbf16>) {
  // CHECK: train.dropout %{{.*}} {p = 1.000000e-01 : f32, stream = 0 : i64} : tensor<4x8xf32>
  %0 = train.dropout %x {p = 0.1 : f32, stream = 0 : i64} : tensor<4x8xf32>
  // CHECK: train.dropout %{{.*}} {p = 5.000000e-01 : f32, rank_rows = 8 : i64, row_offset = 2 : i64, stream = 3 : i64} : tensor<4x8xbf16>
  %1 = train.dropout %h {p = 0.5 : f32, stream = 3 : i64, row_offset = 2 : i64, rank_rows = 8 : i64} : tensor<4x8xbf16>
  return
}
