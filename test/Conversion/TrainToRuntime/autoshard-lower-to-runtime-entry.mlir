// RUN: shard-opt %s -split-input-file -verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(autoshard-lower-to-runtime{entry=eval})' | FileCheck %s
// RUN: shard-opt %s -split-input-file \
// RUN:   --pass-pipeline='builtin.module(autoshard-lower-to-runtime{entry=step})' | FileCheck %s --check-prefix=STEP
// RUN: not shard-opt %s -split-input-file \
// RUN:   --pass-pipeline='builtin.module(autoshard-lower-to-runtime{entry=test})' 2>&1 | FileCheck %s --check-prefix=BAD

// entry=eval names the entry point and the manifest of a training binary's
// evaluation step (shard-compile --with-eval links it beside the training
// step's autoshard_step and autoshard_manifest); entry=step, the default,
// the training step's.

// CHECK: llvm.mlir.global external constant @autoshard_eval_manifest("autoshard-manifest 1
// CHECK-NOT: @autoshard_manifest
// CHECK-LABEL: func.func @autoshard_eval_step(
// CHECK: call @asrt_relu_fwd
// STEP: llvm.mlir.global external constant @autoshard_manifest("autoshard-manifest 1
// STEP-LABEL: func.func @autoshard_step(
// BAD: error: autoshard-lower-to-runtime: entry 'test' is not valid; expected step or eval
func.func @step(%x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"},
                %y: tensor<2xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %r = train.relu %x : tensor<2x4xf32>
  %loss = train.softmax_cross_entropy %r, %y : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A module lowers one evaluation step.
// expected-error@+1 {{the module already defines autoshard_eval_step or autoshard_eval_manifest; lower a step once}}
module {
  func.func private @autoshard_eval_step()
  func.func @step(%x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"},
                  %y: tensor<2xi32> {train.role = #train.role<label>, train.name = "y"})
      -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
      attributes {train.step} {
    %r = train.relu %x : tensor<2x4xf32>
    %loss = train.softmax_cross_entropy %r, %y : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
