// RUN: shard-opt %s -split-input-file \
// RUN:   --pass-pipeline='builtin.module(autoshard-fuse,autoshard-lower-to-runtime)' | FileCheck %s

// The fused ops of autoshard-fuse (test/Dialect/Train/Transforms/
// autoshard-fuse.mlir: which groups) lower to one runtime call each; the
// group's ops that the call absorbs emit nothing, and the call's buffers are
// placed where the fused op is.

// AdamW updates with the same scalars become one multi-tensor call over a
// stack array of asrt_adamw_tensor (each with its own weight decay) at the
// last of them. An op between them that reads none of their results runs
// before the call; one that reads a result ends the group, and so does an
// update with another learning rate. A group of one keeps the single call.
// CHECK-LABEL: func.func @autoshard_step
// CHECK: call @asrt_add(
// CHECK: %[[LIST:.*]] = llvm.alloca %{{.*}} x !llvm.array<3 x struct<(ptr, ptr, ptr, ptr, ptr, ptr, ptr, i64, f32)>>
// CHECK: llvm.getelementptr %[[LIST]][0, 0, 7]
// CHECK: llvm.getelementptr %[[LIST]][0, 2, 8]
// CHECK: %[[THREE:.*]] = arith.constant 3 : i64
// CHECK: call @asrt_adamw_update_multi(%{{[^,]*}}, %{{[^,]*}}, %[[LIST]], %[[THREE]],
// CHECK: call @asrt_add(
// CHECK: call @asrt_adamw_update(
// CHECK-NOT: call @asrt_adamw_update
func.func @step(
    %a: tensor<8xf32> {train.role = #train.role<param>, train.name = "a", train.init = #train.init<zeros>},
    %b: tensor<8x2xf32> {train.role = #train.role<param>, train.name = "b", train.init = #train.init<zeros>},
    %c: tensor<8xf32> {train.role = #train.role<param>, train.name = "c", train.init = #train.init<zeros>},
    %d: tensor<8xf32> {train.role = #train.role<param>, train.name = "d", train.init = #train.init<zeros>},
    %ga: tensor<8xf32> {train.role = #train.role<input>, train.name = "ga"},
    %gb: tensor<8x2xf32> {train.role = #train.role<input>, train.name = "gb"},
    %ma: tensor<8xf32> {train.role = #train.role<opt_state>, train.name = "a.exp_avg", train.init = #train.init<zeros>},
    %va: tensor<8xf32> {train.role = #train.role<opt_state>, train.name = "a.exp_avg_sq", train.init = #train.init<zeros>},
    %mb: tensor<8x2xf32> {train.role = #train.role<opt_state>, train.name = "b.exp_avg", train.init = #train.init<zeros>},
    %vb: tensor<8x2xf32> {train.role = #train.role<opt_state>, train.name = "b.exp_avg_sq", train.init = #train.init<zeros>},
    %mc: tensor<8xf32> {train.role = #train.role<opt_state>, train.name = "c.exp_avg", train.init = #train.init<zeros>},
    %vc: tensor<8xf32> {train.role = #train.role<opt_state>, train.name = "c.exp_avg_sq", train.init = #train.init<zeros>},
    %md: tensor<8xf32> {train.role = #train.role<opt_state>, train.name = "d.exp_avg", train.init = #train.init<zeros>},
    %vd: tensor<8xf32> {train.role = #train.role<opt_state>, train.name = "d.exp_avg_sq", train.init = #train.init<zeros>},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.1>},
    %lr2: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr2", train.init = #train.init<constant, value = 0.2>},
    %t: tensor<i32> {train.role = #train.role<opt_state>, train.name = "optimizer.step", train.init = #train.init<zeros>})
    -> (tensor<8xf32> {train.role = #train.role<param>, train.name = "a"},
        tensor<8x2xf32> {train.role = #train.role<param>, train.name = "b"},
        tensor<8xf32> {train.role = #train.role<param>, train.name = "c"},
        tensor<8xf32> {train.role = #train.role<param>, train.name = "d"},
        tensor<8xf32> {train.role = #train.role<opt_state>, train.name = "a.exp_avg"},
        tensor<8xf32> {train.role = #train.role<opt_state>, train.name = "a.exp_avg_sq"},
        tensor<8x2xf32> {train.role = #train.role<opt_state>, train.name = "b.exp_avg"},
        tensor<8x2xf32> {train.role = #train.role<opt_state>, train.name = "b.exp_avg_sq"},
        tensor<8xf32> {train.role = #train.role<opt_state>, train.name = "c.exp_avg"},
        tensor<8xf32> {train.role = #train.role<opt_state>, train.name = "c.exp_avg_sq"},
        tensor<8xf32> {train.role = #train.role<opt_state>, train.name = "d.exp_avg"},
        tensor<8xf32> {train.role = #train.role<opt_state>, train.name = "d.exp_avg_sq"},
        tensor<i32> {train.role = #train.role<opt_state>, train.name = "optimizer.step"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %t1 = train.increment %t : tensor<i32>
  %a1, %ma1, %va1 = train.adamw %a, %ga, %ma, %va, %lr, %t1 {weight_decay = 0.1 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<i32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %gd = train.add %ga, %ga : tensor<8xf32>
  %b1, %mb1, %vb1 = train.adamw %b, %gb, %mb, %vb, %lr, %t1 {weight_decay = 0.0 : f32} : (tensor<8x2xf32>, tensor<8x2xf32>, tensor<8x2xf32>, tensor<8x2xf32>, tensor<f32>, tensor<i32>) -> (tensor<8x2xf32>, tensor<8x2xf32>, tensor<8x2xf32>)
  %d1, %md1, %vd1 = train.adamw %d, %gd, %md, %vd, %lr, %t1 : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<i32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %s = train.add %a1, %d1 : tensor<8xf32>
  %c1, %mc1, %vc1 = train.adamw %c, %s, %mc, %vc, %lr2, %t1 : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<i32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %a1, %b1, %c1, %d1, %ma1, %va1, %mb1, %vb1, %mc1, %vc1, %md1, %vd1, %t1, %lr : tensor<8xf32>, tensor<8x2xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x2xf32>, tensor<8x2xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i32>, tensor<f32>
}

// -----

// A linear layer with a bias whose result feeds a GELU runs as one
// asrt_linear_gelu_fwd call at the GELU (a GPU runs it as one GEMM with a
// GELU epilogue), writing both the pre-activation, which GELU's gradient
// reads later, and the activation. Not without a bias, and not when
// anything reads the layer's result before its GELU.

// CHECK-LABEL: func.func @autoshard_step(
// CHECK: %[[W1:.*]] = llvm.load
// CHECK: %[[B1:.*]] = llvm.load
// CHECK: %[[W2:.*]] = llvm.load
// CHECK: %[[X:.*]] = llvm.load
// CHECK-NOT: call @asrt_linear_fwd
// CHECK: call @asrt_linear_gelu_fwd(%{{[^,]*}}, %{{[^,]*}}, %[[X]], %[[W1]], %[[B1]], %[[PRE:[^,]*]], %[[ACT:[^,]*]],
// CHECK: call @asrt_linear_fwd(%{{[^,]*}}, %{{[^,]*}}, %[[X]], %[[W2]], %{{[^,]*}}, %[[PRE2:[^,]*]],
// CHECK: call @asrt_gelu_fwd(%{{[^,]*}}, %{{[^,]*}}, %[[PRE2]],
// CHECK: call @asrt_linear_fwd(%{{[^,]*}}, %{{[^,]*}}, %[[X]], %[[W1]], %[[B1]], %[[PRE3:[^,]*]],
// CHECK: call @asrt_add(%{{[^,]*}}, %{{[^,]*}}, %[[PRE3]], %[[PRE3]],
// CHECK: call @asrt_gelu_fwd(%{{[^,]*}}, %{{[^,]*}}, %[[PRE3]],
// CHECK: call @asrt_gelu_grad(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[PRE]],
// CHECK-NOT: asrt_linear_gelu_fwd
// CHECK: return
func.func @step(
    %w1: tensor<8x4xf32> {train.role = #train.role<param>, train.name = "w1", train.init = #train.init<normal, std = 0.02>},
    %b1: tensor<8xf32> {train.role = #train.role<param>, train.name = "b1", train.init = #train.init<zeros>},
    %w2: tensor<8x4xf32> {train.role = #train.role<param>, train.name = "w2", train.init = #train.init<normal, std = 0.02>},
    %x: tensor<16x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.1>})
    -> (tensor<8x4xf32> {train.role = #train.role<param>, train.name = "w1"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %h = train.linear %x, %w1, %b1 : (tensor<16x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<16x8xf32>
  %a = train.gelu %h : tensor<16x8xf32>
  %h2 = train.linear %x, %w2 : (tensor<16x4xf32>, tensor<8x4xf32>) -> tensor<16x8xf32>
  %a2 = train.gelu %h2 : tensor<16x8xf32>
  %h3 = train.linear %x, %w1, %b1 : (tensor<16x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<16x8xf32>
  %s = train.add %h3, %h3 : tensor<16x8xf32>
  %a3 = train.gelu %h3 : tensor<16x8xf32>
  %d = train.add %a2, %a3 : tensor<16x8xf32>
  %g = train.gelu_grad %d, %h : tensor<16x8xf32>
  %r = train.add %g, %s : tensor<16x8xf32>
  %gw = train.linear_grad_weight %r, %x : (tensor<16x8xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %w1n = train.sgd %w1, %gw, %lr : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<f32>) -> tensor<8x4xf32>
  return %w1n, %lr : tensor<8x4xf32>, tensor<f32>
}

// -----

// In the backward, a layer's input gradient read only by GELU's gradient,
// and the bias gradient of the result, run as one asrt_linear_grad_gelu
// call at GELU's gradient (a GPU runs it as one GEMM whose epilogue applies
// GELU's derivative and reduces the bias gradient); without a bias
// gradient it passes null. Not when the input gradient has another reader.

// CHECK-LABEL: func.func @autoshard_step(
// CHECK: %[[W:.*]] = llvm.load
// CHECK: %[[PRE:.*]] = llvm.load
// CHECK: %[[DY:.*]] = llvm.load
// CHECK-NOT: call @asrt_linear_grad_input
// CHECK: call @asrt_linear_grad_gelu(%{{[^,]*}}, %{{[^,]*}}, %[[DY]], %[[W]], %[[PRE]], %[[DPRE:[^,]*]], %[[DB:[^,]*]],
// CHECK-NOT: call @asrt_bias_grad
// CHECK: %[[NULL:.*]] = llvm.mlir.zero
// CHECK: call @asrt_linear_grad_gelu(%{{[^,]*}}, %{{[^,]*}}, %[[DY]], %[[W]], %[[PRE]], %{{[^,]*}}, %[[NULL]],
// CHECK: call @asrt_linear_grad_input(%{{[^,]*}}, %{{[^,]*}}, %[[DY]], %[[W]], %[[DX3:[^,]*]],
// CHECK: call @asrt_gelu_grad(%{{[^,]*}}, %{{[^,]*}}, %[[DX3]], %[[PRE]],
// CHECK: call @asrt_add(%{{[^,]*}}, %{{[^,]*}}, %[[DX3]],
// CHECK-NOT: asrt_linear_grad_gelu
// CHECK: return
func.func @step(
    %w: tensor<8x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.02>},
    %pre: tensor<16x4xf32> {train.role = #train.role<input>, train.name = "pre"},
    %dy: tensor<16x8xf32> {train.role = #train.role<input>, train.name = "dy"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.1>})
    -> (tensor<8x4xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %dx = train.linear_grad_input %dy, %w : (tensor<16x8xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  %dpre = train.gelu_grad %dx, %pre : tensor<16x4xf32>
  %db = train.bias_grad %dpre : (tensor<16x4xf32>) -> tensor<4xf32>
  %dx2 = train.linear_grad_input %dy, %w : (tensor<16x8xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  %dpre2 = train.gelu_grad %dx2, %pre : tensor<16x4xf32>
  %dx3 = train.linear_grad_input %dy, %w : (tensor<16x8xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  %dpre3 = train.gelu_grad %dx3, %pre : tensor<16x4xf32>
  %s = train.add %dx3, %dpre2 : tensor<16x4xf32>
  %t = train.add %s, %dpre3 : tensor<16x4xf32>
  %u = train.add %t, %dpre : tensor<16x4xf32>
  %gw = train.linear_grad_weight %dy, %u : (tensor<16x8xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %gb = train.bias_grad %u : (tensor<16x4xf32>) -> tensor<4xf32>
  %w1 = train.sgd %w, %gw, %lr : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<f32>) -> tensor<8x4xf32>
  return %w1, %lr : tensor<8x4xf32>, tensor<f32>
}

// -----

// A weight gradient and the bias gradient of the same output gradient run
// as one asrt_linear_grad_weight_bias call at the later of the two (a GPU
// runs it as one GEMM whose epilogue reduces the bias gradient), in either
// order; a second weight gradient of that output gradient runs alone. Not
// when the earlier result is read before the later op.

// CHECK-LABEL: func.func @autoshard_step(
// CHECK: llvm.load
// CHECK: %[[X:.*]] = llvm.load
// CHECK: %[[DY:.*]] = llvm.load
// CHECK: %[[DY2:.*]] = llvm.load
// CHECK: %[[DY3:.*]] = llvm.load
// CHECK-NOT: call @asrt_linear_grad_weight(
// CHECK-NOT: call @asrt_bias_grad(
// CHECK: call @asrt_linear_grad_weight_bias(%{{[^,]*}}, %{{[^,]*}}, %[[DY]], %[[X]], %[[DW:[^,]*]], %[[DB:[^,]*]], %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}})
// CHECK: call @asrt_linear_grad_weight(%{{[^,]*}}, %{{[^,]*}}, %[[DY]], %[[X]],
// CHECK-NOT: call @asrt_linear_grad_weight(
// CHECK-NOT: call @asrt_bias_grad(
// CHECK: call @asrt_linear_grad_weight_bias(%{{[^,]*}}, %{{[^,]*}}, %[[DY2]], %[[X]],
// CHECK: call @asrt_linear_grad_weight(%{{[^,]*}}, %{{[^,]*}}, %[[DY3]], %[[X]], %[[DW3:[^,]*]],
// CHECK: call @asrt_add(%{{[^,]*}}, %{{[^,]*}}, %[[DW3]], %[[DW3]],
// CHECK: call @asrt_bias_grad(%{{[^,]*}}, %{{[^,]*}}, %[[DY3]],
// CHECK-NOT: asrt_linear_grad_weight_bias
// CHECK: return
func.func @step(
    %w: tensor<8x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.02>},
    %x: tensor<16x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %dy: tensor<16x8xf32> {train.role = #train.role<input>, train.name = "dy"},
    %dy2: tensor<16x8xf32> {train.role = #train.role<input>, train.name = "dy2"},
    %dy3: tensor<16x8xf32> {train.role = #train.role<input>, train.name = "dy3"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.1>})
    -> (tensor<8x4xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %gw = train.linear_grad_weight %dy, %x : (tensor<16x8xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %gb = train.bias_grad %dy : (tensor<16x8xf32>) -> tensor<8xf32>
  %gwx = train.linear_grad_weight %dy, %x : (tensor<16x8xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %gb2 = train.bias_grad %dy2 : (tensor<16x8xf32>) -> tensor<8xf32>
  %gw2 = train.linear_grad_weight %dy2, %x : (tensor<16x8xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %gw3 = train.linear_grad_weight %dy3, %x : (tensor<16x8xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %s = train.add %gw3, %gw3 : tensor<8x4xf32>
  %gb3 = train.bias_grad %dy3 : (tensor<16x8xf32>) -> tensor<8xf32>
  %t = train.add %gw, %gwx : tensor<8x4xf32>
  %u = train.add %t, %gw2 : tensor<8x4xf32>
  %v = train.add %u, %s : tensor<8x4xf32>
  %w1 = train.sgd %w, %v, %lr : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<f32>) -> tensor<8x4xf32>
  return %w1, %lr : tensor<8x4xf32>, tensor<f32>
}
