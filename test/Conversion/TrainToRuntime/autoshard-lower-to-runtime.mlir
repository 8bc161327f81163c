// RUN: shard-opt %s -split-input-file -verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(autoshard-lower-to-runtime)' | FileCheck %s

// A partitioned step on 2 ranks becomes autoshard_step(ctx, args, results):
// argument and result buffers come from the two pointer arrays, every
// intermediate tensor from a fixed offset of the step's arena (asrt_arena),
// where a buffer's range is free again after its last use; results are
// written straight into the caller's buffers where that is safe; a
// collective whose input dies with it runs in place.

shard.grid @world(shape = 2)

// CHECK: llvm.mlir.global external constant @autoshard_manifest("autoshard-manifest 1\0Aabi 6\0Astep step\0Astrategy ddp\0Agrid 2\0A
// CHECK-SAME: arg 0 param w f32 4x16 init=normal:0.02\0A
// CHECK-SAME: arg 1 input x f32 4x16 batch_dim=0 global=8\0A
// CHECK-SAME: arg 2 label y i32 4 batch_dim=0 global=8 classes=4\0A
// CHECK-SAME: arg 3 hyper lr f32 scalar init=constant:0.1\0A
// CHECK-SAME: result 0 param w f32 4x16 updates=0\0A
// CHECK-SAME: result 1 loss loss f32 scalar\0A
// The memory plan: w (256 bytes) and the batch (4x16 f32 and 4 i32, 272
// bytes), lr and the loss (8) persist; the step holds w's gradient (256)
// and the logits (4x4 f32, 64) at its live peak. Its arena holds exactly
// that, largest first: the gradient at 0, where the logits were (they
// are dead by then), the loss at 64 and the logits' gradient at 256.
// CHECK-SAME: memory peak=856 persistent=536 arena=320 live=320 parameters=256 master_weights=0 gradients=256 optimizer_states=0 activations=64 gathered=0 batch=272 other=8 communication=0 offload_staging=0\0A
// Then the trace's sites, one per op that calls the runtime; the gradient
// collective and the update are in the layer of the parameter they serve.
// CHECK-SAME: site 0 op=train.linear layer=w loc=autoshard-lower-to-runtime.mlir:{{[0-9]+}} shapes=4x16xf32,4x16xf32->4x4xf32\0A
// CHECK-SAME: site 5 op=shard.all_reduce layer=w loc=autoshard-lower-to-runtime.mlir:{{[0-9]+}} shapes=4x16xf32->4x16xf32\0Asite 6 op=train.sgd layer=w
// CHECK-SAME: end\0A\00")
// CHECK-NOT: shard.grid
// CHECK-LABEL: func.func @autoshard_step(
// CHECK-SAME: %[[CTX:.*]]: !llvm.ptr, %[[ARGS:.*]]: !llvm.ptr, %[[RESULTS:.*]]: !llvm.ptr)
// CHECK: %[[W_SLOT:.*]] = llvm.getelementptr %[[ARGS]][0]
// CHECK: %[[W:.*]] = llvm.load %[[W_SLOT]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[X:.*]] = llvm.load
// CHECK: %[[Y:.*]] = llvm.load
// CHECK: %[[LR:.*]] = llvm.load
// CHECK: %[[W_OUT_SLOT:.*]] = llvm.getelementptr %[[RESULTS]][0]
// CHECK: %[[W_OUT:.*]] = llvm.load %[[W_OUT_SLOT]]
// CHECK: %[[LOSS_OUT_SLOT:.*]] = llvm.getelementptr %[[RESULTS]][1]
// CHECK: %[[LOSS_OUT:.*]] = llvm.load %[[LOSS_OUT_SLOT]]
// CHECK: %[[ARENA:.*]] = call @asrt_arena(%[[CTX]]) : (!llvm.ptr) -> !llvm.ptr
// CHECK-NEXT: %[[OFF0:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[LOGITS:.*]] = llvm.getelementptr %[[ARENA]][%[[OFF0]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK: call @asrt_linear_fwd(%[[CTX]], %{{[^,]*}}, %[[X]], %[[W]], %[[NULL:.*]], %[[LOGITS]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: %[[OFF64:.*]] = arith.constant 64 : i64
// CHECK-NEXT: %[[LOSS:.*]] = llvm.getelementptr %[[ARENA]][%[[OFF64]]]
// CHECK: call @asrt_softmax_xent_fwd(%[[CTX]], %{{[^,]*}}, %[[LOGITS]], %[[Y]], %[[LOSS]],
// The averaged loss goes straight to the caller's loss buffer.
// CHECK: call @asrt_all_reduce(%[[CTX]], %[[LOSS]], %[[LOSS_OUT]],
// CHECK: %[[OFF256:.*]] = arith.constant 256 : i64
// CHECK-NEXT: %[[DLOGITS:.*]] = llvm.getelementptr %[[ARENA]][%[[OFF256]]]
// CHECK: call @asrt_softmax_xent_grad(%[[CTX]], %{{[^,]*}}, %[[LOGITS]], %[[Y]], %{{.*}}, %[[DLOGITS]],
// CHECK: %[[OFF0B:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[DW:.*]] = llvm.getelementptr %[[ARENA]][%[[OFF0B]]]
// CHECK: call @asrt_linear_grad_weight(%[[CTX]], %{{[^,]*}}, %[[DLOGITS]], %[[X]], %[[DW]],
// In place: dw dies in the all-reduce. 64 elements, f32 (0), average (1), axis 0 (mask 1).
// CHECK-DAG: %[[N:.*]] = arith.constant 64 : i64
// CHECK-DAG: %[[F32:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[AVG:.*]] = arith.constant 1 : i32
// CHECK: call @asrt_all_reduce(%[[CTX]], %[[DW]], %[[DW]], %[[N]], %[[F32]], %[[AVG]], %{{.*}})
// The new parameter is written into the result buffer, which may be the
// parameter's own: nothing reads w after the update.
// CHECK: call @asrt_sgd_update(%[[CTX]], %{{[^,]*}}, %[[W]], %[[DW]], %[[LR]], %{{.*}}, %[[W_OUT]], %{{.*}}
// CHECK-NOT: asrt_copy
// CHECK-NOT: asrt_alloc
// CHECK-NOT: asrt_free
// CHECK: return
func.func @step(
    %w: tensor<4x16xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.02>},
    %x: tensor<4x16xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<4xi32> {train.role = #train.role<label>, train.name = "y"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.1>})
    -> (tensor<4x16xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.partitioned, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %logits = train.linear %x, %w : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x4xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
  %loss_avg = shard.all_reduce %loss on @world grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
  %dlogits = train.softmax_cross_entropy_grad %logits, %y : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<4x4xf32>
  %dw = train.linear_grad_weight %dlogits, %x : (tensor<4x4xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %dw_avg = shard.all_reduce %dw on @world grid_axes = [0] reduction = average : tensor<4x16xf32> -> tensor<4x16xf32>
  %w1 = train.sgd %w, %dw_avg, %lr : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  return %w1, %loss_avg : tensor<4x16xf32>, tensor<f32>
}

// -----

// On one rank a collective is the identity and emits nothing. A step without
// a plan is a one-rank program.
shard.grid @one(shape = 1)
// CHECK-LABEL: func.func @autoshard_step
// CHECK-NOT: asrt_all_reduce
// CHECK: call @asrt_relu_fwd
// CHECK-NOT: asrt_all_reduce
// CHECK: return
func.func @step(%x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"},
                %y: tensor<2xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %r = train.relu %x : tensor<2x4xf32>
  %loss = train.softmax_cross_entropy %r, %y : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  %avg = shard.all_reduce %loss on @one grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
  return %avg : tensor<f32>
}

// -----

// Values from a file (an imported model's) and a tied param's further
// names reach the runtime through the manifest.
// CHECK: llvm.mlir.global external constant @autoshard_manifest("autoshard-manifest 1\0Aabi 6\0Astep step\0Astrategy none\0Agrid 1\0A
// CHECK-SAME: arg 0 param wte f32 4x4 init=load aliases=lm_head.weight,head\0A
// CHECK-SAME: arg 1 opt_state wte.momentum f32 4x4 init=load\0A
// CHECK-SAME: arg 2 input g f32 4x4 batch_dim=0 global=4\0A
// CHECK-SAME: result 0 param wte f32 4x4 updates=0\0A
// CHECK-LABEL: func.func @autoshard_step
func.func @step(
    %w: tensor<4x4xf32> {train.role = #train.role<param>, train.name = "wte", train.init = #train.init<load>, train.aliases = ["lm_head.weight", "head"]},
    %m: tensor<4x4xf32> {train.role = #train.role<opt_state>, train.name = "wte.momentum", train.init = #train.init<load>},
    %g: tensor<4x4xf32> {train.role = #train.role<input>, train.name = "g"},
    %y: tensor<4xi32> {train.role = #train.role<label>, train.name = "y"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.1>})
    -> (tensor<4x4xf32> {train.role = #train.role<param>, train.name = "wte"},
        tensor<4x4xf32> {train.role = #train.role<opt_state>, train.name = "wte.momentum"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %logits = train.linear %g, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
  %w1, %m1 = train.sgd %w, %g, %lr momentum_buffer %m {momentum = 0.9 : f32} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
  return %w1, %m1, %loss : tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>
}

// -----

// torch's ignore_index reaches the kernels; a loss without it passes the
// runtime's ASRT_NO_IGNORE_INDEX (INT64_MIN). The manifest tells the data
// reader the value, which labels may hold besides [0, classes).
// CHECK: @autoshard_manifest({{.*}}\0Aarg 2 label y i32 4 batch_dim=0 global=4 classes=3 ignore_index=-100\0A
// CHECK-LABEL: func.func @autoshard_step
// CHECK: %[[IGNORE:.*]] = arith.constant -100 : i64
// CHECK-NEXT: call @asrt_softmax_xent_fwd(%{{.*}}, %[[IGNORE]]) :
// CHECK: %[[IGNORE_GRAD:.*]] = arith.constant -100 : i64
// CHECK-NEXT: call @asrt_softmax_xent_grad(%{{.*}}, %[[IGNORE_GRAD]]) :
// CHECK: %[[NONE:.*]] = arith.constant -9223372036854775808 : i64
// CHECK-NEXT: call @asrt_softmax_xent_grad(%{{.*}}, %[[NONE]]) :
func.func @step(%w: tensor<3x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %x: tensor<4x4xf32> {train.role = #train.role<input>, train.name = "x"},
                %y: tensor<4xi32> {train.role = #train.role<label>, train.name = "y"},
                %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.1>})
    -> (tensor<3x4xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %logits = train.linear %x, %w : (tensor<4x4xf32>, tensor<3x4xf32>) -> tensor<4x3xf32>
  %loss = train.softmax_cross_entropy %logits, %y {ignore_index = -100 : i64} : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
  %dlogits = train.softmax_cross_entropy_grad %logits, %y {ignore_index = -100 : i64} : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<4x3xf32>
  %plain = train.softmax_cross_entropy_grad %logits, %y : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<4x3xf32>
  %sum = train.add %dlogits, %plain : tensor<4x3xf32>
  %dw = train.linear_grad_weight %sum, %x : (tensor<4x3xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
  %w1 = train.sgd %w, %dw, %lr : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
  return %w1, %loss : tensor<3x4xf32>, tensor<f32>
}

// -----

// train.nll_loss and its gradient: the input's dtype, rows and classes, the
// ignore index; the gradient takes the labels and grad_loss, not the input.
// The manifest reads the labels' classes and ignore index from the loss.
// CHECK: @autoshard_manifest({{.*}}\0Aarg 2 label y i32 4 batch_dim=0 global=4 classes=3 ignore_index=-100\0A
// CHECK-LABEL: func.func @autoshard_step
// CHECK: call @asrt_linear_fwd
// CHECK: %[[ROWS:.*]] = arith.constant 4 : i64
// CHECK-NEXT: %[[CLASSES:.*]] = arith.constant 3 : i64
// CHECK-NEXT: %[[IGNORE:.*]] = arith.constant -100 : i64
// CHECK-NEXT: call @asrt_nll_loss_fwd(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[Y:[^,]*]], %{{[^,]*}}, %[[ROWS]], %[[CLASSES]], %[[IGNORE]]) :
// CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: call @asrt_nll_loss_grad(%{{[^,]*}}, %{{[^,]*}}, %[[Y]], %[[NULL]], %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}) : (!llvm.ptr, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64) -> ()
func.func @step(%w: tensor<3x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %x: tensor<4x4xf32> {train.role = #train.role<input>, train.name = "x"},
                %y: tensor<4xi32> {train.role = #train.role<label>, train.name = "y"},
                %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.1>})
    -> (tensor<3x4xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %logp = train.linear %x, %w : (tensor<4x4xf32>, tensor<3x4xf32>) -> tensor<4x3xf32>
  %loss = train.nll_loss %logp, %y {ignore_index = -100 : i64} : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
  %dlogp = train.nll_loss_grad %logp, %y {ignore_index = -100 : i64} : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<4x3xf32>
  %dw = train.linear_grad_weight %dlogp, %x : (tensor<4x3xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
  %w1 = train.sgd %w, %dw, %lr : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
  return %w1, %loss : tensor<3x4xf32>, tensor<f32>
}

// -----

// A parameter still read after its update cannot be overwritten in place:
// the update goes to a temporary, copied to the result buffer at the end.
// CHECK-LABEL: func.func @autoshard_step
// CHECK-SAME: %[[CTX:.*]]: !llvm.ptr, %[[ARGS:.*]]: !llvm.ptr, %[[RESULTS:.*]]: !llvm.ptr)
// CHECK: %[[W_SLOT:.*]] = llvm.getelementptr %[[ARGS]][0]
// CHECK-NEXT: %[[W:.*]] = llvm.load %[[W_SLOT]]
// CHECK: %[[W_OUT_SLOT:.*]] = llvm.getelementptr %[[RESULTS]][0]
// CHECK-NEXT: %[[W_OUT:.*]] = llvm.load %[[W_OUT_SLOT]]
// CHECK: %[[ARENA:.*]] = call @asrt_arena(%[[CTX]])
// CHECK: %[[TMP:.*]] = llvm.getelementptr %[[ARENA]][
// CHECK: call @asrt_sgd_update(%[[CTX]], %{{[^,]*}}, %[[W]], %{{.*}}, %{{.*}}, %{{.*}}, %[[TMP]],
// CHECK: call @asrt_linear_fwd(%[[CTX]], %{{[^,]*}}, %{{.*}}, %[[W]],
// CHECK: call @asrt_copy(%[[CTX]], %[[W_OUT]], %[[TMP]],
func.func @step(
    %w: tensor<4x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
    %g: tensor<4x4xf32> {train.role = #train.role<input>, train.name = "g"},
    %y: tensor<4xi32> {train.role = #train.role<label>, train.name = "y"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.1>})
    -> (tensor<4x4xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %w1 = train.sgd %w, %g, %lr : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %logits = train.linear %g, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
  return %w1, %loss : tensor<4x4xf32>, tensor<f32>
}

// -----

// Returning one argument as another's new value reads it before any copy
// overwrites it (a swap): both sources are staged.
// CHECK-LABEL: func.func @autoshard_step
// CHECK-SAME: %[[ARGS:[^:]*]]: !llvm.ptr, %[[RESULTS:[^:]*]]: !llvm.ptr)
// CHECK: llvm.getelementptr %[[ARGS]][0]
// CHECK-NEXT: %[[A:.*]] = llvm.load
// CHECK: llvm.getelementptr %[[ARGS]][1]
// CHECK-NEXT: %[[B:.*]] = llvm.load
// CHECK: llvm.getelementptr %[[RESULTS]][0]
// CHECK-NEXT: %[[A_OUT:.*]] = llvm.load
// CHECK: llvm.getelementptr %[[RESULTS]][1]
// CHECK-NEXT: %[[B_OUT:.*]] = llvm.load
// CHECK: %[[STAGE_B:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK: call @asrt_copy(%{{.*}}, %[[STAGE_B]], %[[B]],
// CHECK: %[[STAGE_A:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK: call @asrt_copy(%{{.*}}, %[[STAGE_A]], %[[A]],
// CHECK: call @asrt_copy(%{{.*}}, %[[A_OUT]], %[[STAGE_B]],
// CHECK: call @asrt_copy(%{{.*}}, %[[B_OUT]], %[[STAGE_A]],
func.func @step(
    %a: tensor<4xf32> {train.role = #train.role<param>, train.name = "a", train.init = #train.init<zeros>},
    %b: tensor<4xf32> {train.role = #train.role<param>, train.name = "b", train.init = #train.init<ones>},
    %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<4xf32> {train.role = #train.role<param>, train.name = "a"},
        tensor<4xf32> {train.role = #train.role<param>, train.name = "b"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  return %b, %a, %l : tensor<4xf32>, tensor<4xf32>, tensor<f32>
}

// -----

shard.grid @world(shape = 2)
// expected-error@+1 {{has a plan but is not partitioned; run autoshard-partition before lowering}}
func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{label argument "y" is not consumed by a loss, so its number of classes is unknown}}
func.func @step(%y: tensor<2xi32> {train.role = #train.role<label>, train.name = "y"},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{arg "x" has element type 'f64', which the runtime does not support (f32, i32, bf16, f16, i64, ui16)}}
func.func @step(%x: tensor<2xf64> {train.role = #train.role<input>, train.name = "x"},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{has 2 blocks; a training step is straight-line code in one block}}
func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
  cf.br ^next
^next:
  return %l : tensor<f32>
}

// -----

func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
  // expected-error@+1 {{has no runtime lowering; the runtime runs train ops and shard.all_reduce}}
  %c = arith.constant dense<1.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

shard.grid @world(shape = 2)
func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.partitioned, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  // expected-error@+1 {{reduction 'product' is not supported by the runtime; use sum, average, max or min}}
  %p = shard.all_reduce %l on @world grid_axes = [0] reduction = product : tensor<f32> -> tensor<f32>
  return %p : tensor<f32>
}

// -----

shard.grid @world(shape = 2)
func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.partitioned, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %c = train.relu %l : tensor<f32>
  // expected-error@+1 {{changes the element type; the runtime reduces in the input's type}}
  %p = shard.all_reduce %c on @world grid_axes = [0] : tensor<f32> -> tensor<f64>
  %q = train.relu %l : tensor<f32>
  return %q : tensor<f32>
}

// -----

// A micro-batch slice is a pointer into the batch (rows of 6 f32: 24 bytes,
// offset 4 rows = 96 bytes); scale is a runtime call.
// CHECK-LABEL: func.func @autoshard_step
// CHECK: %[[X:.*]] = llvm.load
// CHECK: %[[VIEW:.*]] = llvm.getelementptr %[[X]][96] : (!llvm.ptr) -> !llvm.ptr, i8
// CHECK: call @asrt_relu_fwd(%{{.*}}, %{{.*}}, %[[VIEW]],
// CHECK: call @asrt_scale(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, i32, !llvm.ptr, !llvm.ptr, i64, f32) -> ()
func.func @step(%x: tensor<8x6xf32> {train.role = #train.role<input>, train.name = "x"},
                %y8: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
  %mb = train.slice_rows %x {offset = 4 : i64} : tensor<8x6xf32> to tensor<4x6xf32>
  %y = train.slice_rows %y8 {offset = 4 : i64} : tensor<8xi32> to tensor<4xi32>
  %r = train.relu %mb : tensor<4x6xf32>
  %loss = train.softmax_cross_entropy %r, %y : (tensor<4x6xf32>, tensor<4xi32>) -> tensor<f32>
  %half = train.scale %loss {factor = 0.5 : f32} : tensor<f32>
  return %half : tensor<f32>
}

// -----

// An all-reduce writes a gradient's reduced value over the gradient when
// nothing but the collective reads it (PyTorch DDP's gradient_as_bucket_view):
// in a started bucket, when the start is its only reader; in a blocking
// bucket, when it dies there. A gradient read after the start, or a view of
// a gradient that is still read, gets a buffer of its own.

// CHECK-LABEL: func.func @autoshard_step(
// CHECK: call @asrt_linear_grad_weight(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[G0:[^,]*]],
// CHECK: call @asrt_linear_grad_weight(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[G1:[^,]*]],
// CHECK: call @asrt_bucket_begin(
// CHECK: call @asrt_bucket_add(%{{[^,]*}}, %[[G0]], %[[G0]],
// CHECK-NOT: %[[G1]], %[[G1]]
// CHECK: call @asrt_bucket_pack_buffer(%{{[^,]*}}, %{{[^,]*}}, %{{[^)]*}})
// CHECK-NEXT: call @asrt_bucket_start(
// CHECK: call @asrt_add(%{{[^,]*}}, %{{[^,]*}}, %[[G1]], %[[G1]],
// CHECK: call @asrt_wait(
// CHECK: call @asrt_linear_grad_weight(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[G2:[^,]*]],
// CHECK: call @asrt_linear_grad_weight(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[G3:[^,]*]],
// CHECK: call @asrt_bucket_begin(
// CHECK: call @asrt_bucket_add(%{{[^,]*}}, %[[G2]], %[[G2]],
// CHECK: call @asrt_bucket_add(%{{[^,]*}}, %[[G3]], %[[G3]],
// CHECK: call @asrt_bucket_pack_buffer(
// CHECK-NEXT: call @asrt_bucket_end(
// CHECK: call @asrt_linear_grad_weight(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[G4:[^,]*]],
// CHECK: call @asrt_linear_grad_weight(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[G5:[^,]*]],
// CHECK: call @asrt_bucket_begin(
// CHECK-NOT: %[[G4]], %[[G4]]
// CHECK: call @asrt_bucket_add(%{{[^,]*}}, %[[G5]], %[[G5]],
// CHECK: call @asrt_add(%{{[^,]*}}, %{{[^,]*}}, %[[G4]], %[[G4]],
// CHECK: return
func.func @step(
    %w: tensor<4x16xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.02>},
    %x: tensor<4x16xf32> {train.role = #train.role<input>, train.name = "x"},
    %dy: tensor<4x4xf32> {train.role = #train.role<input>, train.name = "dy"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.1>})
    -> (tensor<4x16xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.partitioned, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %g0 = train.linear_grad_weight %dy, %x : (tensor<4x4xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %g1 = train.linear_grad_weight %dy, %x : (tensor<4x4xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %h = train.collective_start all_reduce %g0, %g1 on @world grid_axes = [0] reduction = average : tensor<4x16xf32>, tensor<4x16xf32> -> !train.pending<tensor<4x16xf32>, tensor<4x16xf32>>
  %s = train.add %g1, %g1 : tensor<4x16xf32>
  %r0, %r1 = train.collective_wait %h : !train.pending<tensor<4x16xf32>, tensor<4x16xf32>>
  %g2 = train.linear_grad_weight %dy, %x : (tensor<4x4xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %g3 = train.linear_grad_weight %dy, %x : (tensor<4x4xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %r2, %r3 = train.all_reduce_bucket %g2, %g3 on @world grid_axes = [0] reduction = average : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>, tensor<4x16xf32>
  %g4 = train.linear_grad_weight %dy, %x : (tensor<4x4xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %v4 = train.reshape %g4 : tensor<4x16xf32> to tensor<64xf32>
  %g5 = train.linear_grad_weight %dy, %x : (tensor<4x4xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %h2 = train.collective_start all_reduce %v4, %g5 on @world grid_axes = [0] reduction = average : tensor<64xf32>, tensor<4x16xf32> -> !train.pending<tensor<64xf32>, tensor<4x16xf32>>
  %u4 = train.add %g4, %g4 : tensor<4x16xf32>
  %r4, %r5 = train.collective_wait %h2 : !train.pending<tensor<64xf32>, tensor<4x16xf32>>
  %r4m = train.reshape %r4 : tensor<64xf32> to tensor<4x16xf32>
  %t0 = train.add %r0, %r1 : tensor<4x16xf32>
  %t1 = train.add %t0, %s : tensor<4x16xf32>
  %t2 = train.add %t1, %r2 : tensor<4x16xf32>
  %t3 = train.add %t2, %r3 : tensor<4x16xf32>
  %t4 = train.add %t3, %u4 : tensor<4x16xf32>
  %t5 = train.add %t4, %r4m : tensor<4x16xf32>
  %t6 = train.add %t5, %r5 : tensor<4x16xf32>
  %w1 = train.sgd %w, %t6, %lr : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  return %w1, %lr : tensor<4x16xf32>, tensor<f32>
}

shard.grid @world(shape = 2)

// -----

// The lowering decides no fusion (autoshard-fuse does): a linear layer and
// its GELU that nothing fused are two calls, and a fused op is one.
// CHECK-LABEL: func.func @autoshard_step(
// CHECK: call @asrt_linear_fwd(
// CHECK: call @asrt_gelu_fwd(
// CHECK: call @asrt_linear_gelu_fwd(
// CHECK-NOT: call @asrt_linear_fwd(
// CHECK-NOT: call @asrt_gelu_fwd(
// CHECK: return
func.func @step(
    %w: tensor<8x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.02>},
    %b: tensor<8xf32> {train.role = #train.role<param>, train.name = "b", train.init = #train.init<zeros>},
    %x: tensor<16x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.1>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %h = train.linear %x, %w, %b : (tensor<16x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<16x8xf32>
  %y = train.gelu %h : tensor<16x8xf32>
  %h2, %z = train.linear_gelu %x, %w, %b : (tensor<16x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> (tensor<16x8xf32>, tensor<16x8xf32>)
  %s = train.add %y, %z : tensor<16x8xf32>
  return %lr : tensor<f32>
}
