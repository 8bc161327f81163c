// RUN: shard-opt %s -split-input-file -allow-unregistered-dialect -canonicalize | FileCheck %s

// train.transpose's folds: an identity permutation is no op, two that
// cancel are none (the layout changes around the fused attention and rotary
// ops that autoshard-raise leaves), and two others are one.

// CHECK-LABEL: func.func @transpose_identity
// CHECK-NEXT: %[[X:.*]] = "test.src"
// CHECK-NEXT: "test.use"(%[[X]])
func.func @transpose_identity() {
  %x = "test.src"() : () -> tensor<2x3x4xf32>
  %t = train.transpose %x {permutation = array<i64: 0, 1, 2>} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  "test.use"(%t) : (tensor<2x3x4xf32>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @transpose_cancel
// CHECK-NEXT: %[[X:.*]] = "test.src"
// CHECK-NEXT: "test.use"(%[[X]], %[[X]])
func.func @transpose_cancel() {
  %x = "test.src"() : () -> tensor<2x3x4x5xf32>
  %a = train.transpose %x {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x4x5xf32> -> tensor<2x4x3x5xf32>
  %b = train.transpose %a {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x3x5xf32> -> tensor<2x3x4x5xf32>
  // A rotation and its inverse: [1, 2, 0] then [2, 0, 1].
  %c = train.transpose %x {permutation = array<i64: 1, 2, 0, 3>} : tensor<2x3x4x5xf32> -> tensor<3x4x2x5xf32>
  %d = train.transpose %c {permutation = array<i64: 2, 0, 1, 3>} : tensor<3x4x2x5xf32> -> tensor<2x3x4x5xf32>
  "test.use"(%b, %d) : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> ()
  return
}

// -----

// Two that do not cancel become one transpose of the input by the
// composition: result dim i = input dim inner[outer[i]].

// CHECK-LABEL: func.func @transpose_compose
// CHECK-NEXT: %[[X:.*]] = "test.src"
// CHECK-NEXT: %[[T:.*]] = train.transpose %[[X]] {permutation = array<i64: 2, 1, 0>} : tensor<2x3x4xf32> -> tensor<4x3x2xf32>
// CHECK-NEXT: "test.use"(%[[T]])
func.func @transpose_compose() {
  %x = "test.src"() : () -> tensor<2x3x4xf32>
  %a = train.transpose %x {permutation = array<i64: 1, 0, 2>} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %b = train.transpose %a {permutation = array<i64: 2, 0, 1>} : tensor<3x2x4xf32> -> tensor<4x3x2xf32>
  "test.use"(%b) : (tensor<4x3x2xf32>) -> ()
  return
}
