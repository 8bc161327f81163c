// RUN: shard-opt %s -split-input-file -verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(autoshard-plan{strategy=ddp world-size=4})' | FileCheck %s

// The plan pass creates the grid and attaches the preset's plan; it changes
// nothing else.

// CHECK: shard.grid @world(shape = 4)
// CHECK-LABEL: func.func @step
// CHECK-SAME: train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>
// CHECK-SAME: train.step
// CHECK-NEXT: train.linear %{{.*}} : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
// CHECK-NOT: shard.all_reduce
func.func @step(
    %w: tensor<4x16xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.02>},
    %x: tensor<8x16xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %logits = train.linear %x, %w : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A module that already has a @world keeps it; the grid gets a fresh name.
// CHECK: shard.grid @world_0(shape = 4)
// CHECK-NEXT: func.func private @world()
// CHECK: grid = @world_0
func.func private @world()
func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{no training step found: expected a func.func with the 'train.step' attribute}}
module {
  func.func @not_a_step() {
    return
  }
}

// -----

// expected-error@+1 {{found 2 functions marked 'train.step'; expected exactly one}}
module {
  // expected-note@+1 {{training step here}}
  func.func @a(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
      -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
    return %l : tensor<f32>
  }
  // expected-note@+1 {{training step here}}
  func.func @b(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
      -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
    return %l : tensor<f32>
  }
}

// -----

// expected-error@+1 {{'func.func' op is a training step but has no body}}
func.func private @decl(tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

shard.grid @mesh(shape = 2)
// expected-error@+1 {{already has a plan #train.plan<strategy = "ddp", grid = @mesh, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>; a step is planned once (shard-opt --strategy and shard-compile plan the step themselves: give them the step before any plan, such as shard-gen's output)}}
func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @mesh, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  return %l : tensor<f32>
}

// -----

// A step in a nested module: the grid goes where the step's symbol lookups
// find it, into that module (it was put in the outer one, and the plan then
// named a grid the step could not see).
// CHECK-LABEL: module @inner
// CHECK-NEXT: shard.grid @world(shape = 4)
// CHECK: func.func @nested_step
// CHECK-SAME: grid = @world
module {
  module @inner {
    func.func @nested_step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
        -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
      return %l : tensor<f32>
    }
  }
}
