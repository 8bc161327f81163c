// RUN: shard-opt %s --pass-pipeline='builtin.module(autoshard-lower-to-runtime)' | FileCheck %s

// The trace's sites: each op whose lowering calls the runtime is preceded by
// asrt_op_site(I), and the manifest's `site I` record names the op, its
// layer (the train.unit of the parameters it reads, or outside every unit
// the module of the parameter: "head" for "head.weight"; an op that reads
// no parameter takes the layer of the op before it), its location in this
// file and its shapes.

// CHECK: @autoshard_manifest("autoshard-manifest 1
// CHECK-SAME: site 0 op=train.linear layer=h.0 loc=autoshard-lower-to-runtime-sites.mlir:[[#@LINE+29]] shapes=2x4xf32,3x4xf32,3xf32->2x3xf32\0A
// CHECK-SAME: site 1 op=train.relu layer=h.0 loc=autoshard-lower-to-runtime-sites.mlir:[[#@LINE+29]] shapes=2x3xf32->2x3xf32\0A
// CHECK-SAME: site 2 op=train.linear layer=head loc=autoshard-lower-to-runtime-sites.mlir:[[#@LINE+29]] shapes=2x3xf32,5x3xf32,5xf32->2x5xf32\0A
// CHECK-SAME: site 3 op=train.softmax_cross_entropy layer=head loc=autoshard-lower-to-runtime-sites.mlir:[[#@LINE+29]] shapes=2x5xf32,2xi32->f32\0A
// CHECK-SAME: end\0A
// CHECK-LABEL: func.func @autoshard_step(
// CHECK: %[[S0:.*]] = arith.constant 0 : i32
// CHECK-NEXT: call @asrt_op_site(%{{.*}}, %[[S0]])
// CHECK-NOT: call @asrt_op_site
// CHECK: call @asrt_linear_fwd(
// CHECK: %[[S1:.*]] = arith.constant 1 : i32
// CHECK-NEXT: call @asrt_op_site(%{{.*}}, %[[S1]])
// CHECK-NOT: call @asrt_op_site
// CHECK: call @asrt_relu_fwd(
// CHECK: call @asrt_op_site
// CHECK-NOT: call @asrt_op_site
// CHECK: call @asrt_linear_fwd(
// CHECK: call @asrt_op_site
// CHECK-NOT: call @asrt_op_site
// CHECK: call @asrt_softmax_xent_fwd(
// CHECK-NOT: call @asrt_op_site
func.func @step(%w1: tensor<3x4xf32> {train.role = #train.role<param>, train.name = "h.0.fc.weight", train.unit = "h.0", train.init = #train.init<zeros>},
                %b1: tensor<3xf32> {train.role = #train.role<param>, train.name = "h.0.fc.bias", train.unit = "h.0", train.init = #train.init<zeros>},
                %w2: tensor<5x3xf32> {train.role = #train.role<param>, train.name = "head.weight", train.init = #train.init<zeros>},
                %b2: tensor<5xf32> {train.role = #train.role<param>, train.name = "head.bias", train.init = #train.init<zeros>},
                %x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"},
                %y: tensor<2xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %h = train.linear %x, %w1, %b1 : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %r = train.relu %h : tensor<2x3xf32>
  %o = train.linear %r, %w2, %b2 : (tensor<2x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<2x5xf32>
  %loss = train.softmax_cross_entropy %o, %y : (tensor<2x5xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
