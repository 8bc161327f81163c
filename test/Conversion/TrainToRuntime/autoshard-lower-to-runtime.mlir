// RUN: shard-opt %s -split-input-file -verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(autoshard-lower-to-runtime)' | FileCheck %s

// A partitioned step on 2 ranks becomes autoshard_step(ctx, args, results):
// argument and result buffers come from the two pointer arrays, every
// intermediate tensor from a fixed offset of the step's arena (asrt_arena),
// where a buffer's range is free again after its last use; results are
// written straight into the caller's buffers where that is safe; a
// collective whose input dies with it runs in place.

shard.grid @world(shape = 2)

// CHECK: llvm.mlir.global external constant @autoshard_manifest("autoshard-manifest 1\0Aabi 5\0Astep step\0Astrategy ddp\0Agrid 2\0A
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
// CHECK-SAME: memory peak=856 persistent=536 arena=320 live=320 parameters=256 gradients=256 optimizer_states=0 activations=64 gathered=0 batch=272 other=8 communication=0\0Aend\0A\00")
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
