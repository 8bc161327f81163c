// RUN: shard-opt %s -split-input-file -verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(autoshard-lower-to-runtime)'

// The generic kernels take at most ASRT_MAX_RANK (8) dimensions after the
// lowering merges the ones every operand walks contiguously: a transpose
// that reverses 9 dimensions merges none.
func.func @step(%x: tensor<2x3x2x3x2x3x2x3x2xf32> {train.role = #train.role<input>, train.name = "x"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "s"}) attributes {train.step} {
  // expected-error@+1 {{'train.transpose' op iterates over 9 dimensions that cannot be merged; the runtime's generic kernels take at most 8}}
  %t = train.transpose %x {permutation = array<i64: 8, 7, 6, 5, 4, 3, 2, 1, 0>} : tensor<2x3x2x3x2x3x2x3x2xf32> -> tensor<2x3x2x3x2x3x2x3x2xf32>
  %s = train.reduce_sum %t {dims = array<i64: 0, 1, 2, 3, 4, 5, 6, 7, 8>} : tensor<2x3x2x3x2x3x2x3x2xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A constant's elements must be a dense attribute the lowering can read.
func.func @step(%x: tensor<2xf32> {train.role = #train.role<input>, train.name = "x"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "s"}) attributes {train.step} {
  // expected-error@+1 {{'train.constant' op holds elements the lowering cannot read; give them as a dense<...> attribute}}
  %c = train.constant dense_resource<blob> : tensor<2xf32>
  %m = train.mul %x, %c : tensor<2xf32>
  %s = train.reduce_sum %m {dims = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
  return %s : tensor<f32>
}

{-#
  dialect_resources: {
    builtin: {
      blob: "0x040000000000803F00000040"
    }
  }
#-}
