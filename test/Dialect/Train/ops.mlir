// RUN: shard-opt %s | shard-opt | FileCheck %s
// RUN: shard-opt %s --mlir-print-op-generic | shard-opt | FileCheck %s

// Every op and attribute of the train dialect survives printing and parsing.

// CHECK-LABEL: func.func @layers
func.func @layers(%x: tensor<8x16xf32>, %w: tensor<4x16xf32>, %b: tensor<4xf32>,
                  %x3: tensor<2x3x16xf32>) {
  // CHECK: train.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %y = train.linear %x, %w, %b : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  // CHECK: train.linear %{{.*}}, %{{.*}} : (tensor<2x3x16xf32>, tensor<4x16xf32>) -> tensor<2x3x4xf32>
  %y3 = train.linear %x3, %w : (tensor<2x3x16xf32>, tensor<4x16xf32>) -> tensor<2x3x4xf32>
  // CHECK: train.linear_grad_input {{.*}} : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %dx = train.linear_grad_input %y, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  // CHECK: train.linear_grad_weight {{.*}} : (tensor<2x3x4xf32>, tensor<2x3x16xf32>) -> tensor<4x16xf32>
  %dw = train.linear_grad_weight %y3, %x3 : (tensor<2x3x4xf32>, tensor<2x3x16xf32>) -> tensor<4x16xf32>
  // CHECK: train.bias_grad {{.*}} : (tensor<8x4xf32>) -> tensor<4xf32>
  %db = train.bias_grad %y : (tensor<8x4xf32>) -> tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @activations
func.func @activations(%x: tensor<8x4xf32>, %dy: tensor<8x4xf32>) {
  // CHECK: train.relu %{{.*}} : tensor<8x4xf32>
  %r = train.relu %x : tensor<8x4xf32>
  // CHECK: train.relu_grad %{{.*}}, %{{.*}} : tensor<8x4xf32>
  %dr = train.relu_grad %dy, %x : tensor<8x4xf32>
  // CHECK: train.gelu %{{.*}} : tensor<8x4xf32>
  %g = train.gelu %x : tensor<8x4xf32>
  // CHECK: train.gelu_grad %{{.*}}, %{{.*}} : tensor<8x4xf32>
  %dg = train.gelu_grad %dy, %x : tensor<8x4xf32>
  return
}

// CHECK-LABEL: func.func @loss
func.func @loss(%logits: tensor<8x10xf32>, %labels: tensor<8xi32>, %dl: tensor<f32>) {
  // CHECK: train.softmax_cross_entropy {{.*}} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  %l = train.softmax_cross_entropy %logits, %labels : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  // CHECK: train.softmax_cross_entropy_grad %{{.*}}, %{{.*}} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<8x10xf32>
  %d0 = train.softmax_cross_entropy_grad %logits, %labels : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<8x10xf32>
  // CHECK: train.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xf32>
  %d1 = train.softmax_cross_entropy_grad %logits, %labels, %dl : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xf32>
  // CHECK: train.softmax_cross_entropy %{{.*}}, %{{.*}} {ignore_index = -100 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  %l2 = train.softmax_cross_entropy %logits, %labels {ignore_index = -100 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  // CHECK: train.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = 0 : i64} : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xf32>
  %d2 = train.softmax_cross_entropy_grad %logits, %labels, %dl {ignore_index = 0 : i64} : (tensor<8x10xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x10xf32>
  return
}

// CHECK-LABEL: func.func @nll_loss
func.func @nll_loss(%logp: tensor<2x4x10xbf16>, %labels: tensor<2x4xi32>, %dl: tensor<f32>) {
  // CHECK: train.nll_loss %{{.*}}, %{{.*}} : (tensor<2x4x10xbf16>, tensor<2x4xi32>) -> tensor<f32>
  %l = train.nll_loss %logp, %labels : (tensor<2x4x10xbf16>, tensor<2x4xi32>) -> tensor<f32>
  // CHECK: train.nll_loss %{{.*}}, %{{.*}} {ignore_index = -100 : i64} : (tensor<2x4x10xbf16>, tensor<2x4xi32>) -> tensor<f32>
  %l2 = train.nll_loss %logp, %labels {ignore_index = -100 : i64} : (tensor<2x4x10xbf16>, tensor<2x4xi32>) -> tensor<f32>
  // CHECK: train.nll_loss_grad %{{.*}}, %{{.*}} : (tensor<2x4x10xbf16>, tensor<2x4xi32>) -> tensor<2x4x10xbf16>
  %d0 = train.nll_loss_grad %logp, %labels : (tensor<2x4x10xbf16>, tensor<2x4xi32>) -> tensor<2x4x10xbf16>
  // CHECK: train.nll_loss_grad %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = -100 : i64} : (tensor<2x4x10xbf16>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x10xbf16>
  %d1 = train.nll_loss_grad %logp, %labels, %dl {ignore_index = -100 : i64} : (tensor<2x4x10xbf16>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x10xbf16>
  return
}

// CHECK-LABEL: func.func @optimizers
func.func @optimizers(%p: tensor<4x16xf32>, %g: tensor<4x16xf32>, %lr: tensor<f32>, %m: tensor<4x16xf32>) {
  // CHECK: train.sgd %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %p1 = train.sgd %p, %g, %lr : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  // CHECK: train.sgd {{.*}} {momentum = 5.000000e-01 : f32, nesterov = true, weight_decay = 0.00999999977 : f32}
  %p2, %m2 = train.sgd %p, %g, %lr momentum_buffer %m {momentum = 0.5 : f32, weight_decay = 0.01 : f32, nesterov = true} : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>, tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  return
}

// CHECK: shard.grid @world(shape = 2)
shard.grid @world(shape = 2)

// CHECK-LABEL: func.func @step
// CHECK-SAME: train.init = #train.init<normal, std = 2.000000e-02>, train.name = "w", train.role = #train.role<param>, train.unit = "fc"}
// CHECK-SAME: train.init = #train.init<uniform, bound = 1.000000e-01>, train.name = "b", train.role = #train.role<param>, train.unit = "fc"}
// CHECK-SAME: train.init = #train.init<ones>, train.name = "s", train.role = #train.role<param>, train.weight_decay = 0.000000e+00 : f64}
// CHECK-SAME: {train.aliases = ["lm_head.weight", "head"], train.init = #train.init<load>, train.name = "wte", train.role = #train.role<param>}
// CHECK-SAME: train.name = "w.momentum", train.role = #train.role<opt_state>
// CHECK-SAME: train.role = #train.role<input>
// CHECK-SAME: train.role = #train.role<label>
// CHECK-SAME: train.init = #train.init<constant, value = 1.000000e-01>, train.name = "lr", train.role = #train.role<hyper>
// CHECK-SAME: train.role = #train.role<loss>
// CHECK-SAME: attributes {train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>, train.step}
func.func @step(
    %w: tensor<4x16xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.02>, train.unit = "fc"},
    %b: tensor<4xf32> {train.role = #train.role<param>, train.name = "b", train.init = #train.init<uniform, bound = 0.1>, train.unit = "fc"},
    %s: tensor<4xf32> {train.role = #train.role<param>, train.name = "s", train.init = #train.init<ones>, train.weight_decay = 0.0 : f64},
    %wte: tensor<4xf32> {train.role = #train.role<param>, train.name = "wte", train.init = #train.init<load>, train.aliases = ["lm_head.weight", "head"]},
    %m: tensor<4x16xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum"},
    %x: tensor<8x16xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.1>})
    -> (tensor<4x16xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %logits = train.linear %x, %w, %b : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
  %dlogits = train.softmax_cross_entropy_grad %logits, %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<8x4xf32>
  %dw = train.linear_grad_weight %dlogits, %x : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %w1 = train.sgd %w, %dw, %lr : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  return %w1, %loss : tensor<4x16xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @transformer_ops
func.func @transformer_ops(%ids: tensor<2x8xi32>, %wte: tensor<64x16xf32>, %wpe: tensor<32x16xf32>,
                           %g: tensor<16xf32>, %b: tensor<16xf32>, %w: tensor<16x16xf32>,
                           %wkv: tensor<8x16xf32>) {
  // CHECK: train.embedding {{.*}} : (tensor<2x8xi32>, tensor<64x16xf32>) -> tensor<2x8x16xf32>
  %x = train.embedding %ids, %wte : (tensor<2x8xi32>, tensor<64x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: train.add_position_embedding {{.*}} : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
  %h = train.add_position_embedding %x, %wpe : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: train.layer_norm %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}} : (tensor<2x8x16xf32>
  %n = train.layer_norm %h, %g, %b : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK: train.rms_norm {{.*}} {epsilon = 9.99999997E-7 : f32}
  %r = train.rms_norm %h, %g {epsilon = 1.0e-6 : f32} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %q = train.linear %n, %w : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %k = train.linear %n, %wkv : (tensor<2x8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x8xf32>
  // CHECK: train.reshape {{.*}} : tensor<2x8x16xf32> to tensor<2x8x4x4xf32>
  %q4 = train.reshape %q : tensor<2x8x16xf32> to tensor<2x8x4x4xf32>
  %k4 = train.reshape %k : tensor<2x8x8xf32> to tensor<2x8x2x4xf32>
  // CHECK: train.rope {{.*}} {theta = 5.000000e+05 : f32} : tensor<2x8x4x4xf32>
  %qr = train.rope %q4 {theta = 500000.0 : f32} : tensor<2x8x4x4xf32>
  // CHECK: train.causal_attention {{.*}} -> (tensor<2x8x4x4xf32>, tensor<2x4x8xf32>)
  %o, %lse = train.causal_attention %qr, %k4, %k4 : (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x4x8xf32>)
  // CHECK: train.causal_attention_grad {{.*}} {scale = 5.000000e-01 : f32}
  %dq, %dk, %dv = train.causal_attention_grad %o, %qr, %k4, %k4, %o, %lse {scale = 0.5 : f32} : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x4x4xf32>, tensor<2x4x8xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>)
  // CHECK: train.rope_grad {{.*}} : tensor<2x8x4x4xf32>
  %dq0 = train.rope_grad %dq : tensor<2x8x4x4xf32>
  // CHECK: train.swiglu {{.*}} : tensor<2x8x16xf32>
  %s = train.swiglu %q, %n : tensor<2x8x16xf32>
  // CHECK: train.swiglu_grad {{.*}} : tensor<2x8x16xf32>
  %dg, %du = train.swiglu_grad %s, %q, %n : tensor<2x8x16xf32>
  // CHECK: train.add {{.*}} : tensor<2x8x16xf32>
  %res = train.add %h, %s : tensor<2x8x16xf32>
  // CHECK: train.cast {{.*}} : tensor<2x8x16xf32> to tensor<2x8x16xbf16>
  %hb = train.cast %res : tensor<2x8x16xf32> to tensor<2x8x16xbf16>
  // CHECK: train.layer_norm_grad {{.*}} -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  %dx, %dgm, %dbt = train.layer_norm_grad %h, %h, %g : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  // CHECK: train.rms_norm_grad {{.*}} -> (tensor<2x8x16xf32>, tensor<16xf32>)
  %rdx, %rdw = train.rms_norm_grad %h, %h, %g : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>)
  // CHECK: train.embedding_grad {{.*}} {num_embeddings = 64 : i64} : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<64x16xf32>
  %dwte = train.embedding_grad %h, %ids {num_embeddings = 64 : i64} : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<64x16xf32>
  // CHECK: train.add_position_embedding_grad {{.*}} {max_positions = 32 : i64} : (tensor<2x8x16xf32>) -> tensor<32x16xf32>
  %dwpe = train.add_position_embedding_grad %h {max_positions = 32 : i64} : (tensor<2x8x16xf32>) -> tensor<32x16xf32>
  return
}

// CHECK-LABEL: func.func @adamw_and_clipping
func.func @adamw_and_clipping(%p: tensor<16xf32>, %g: tensor<16xbf16>, %m: tensor<16xf32>, %v: tensor<16xf32>,
                              %lr: tensor<f32>, %t: tensor<i32>) {
  // CHECK: train.increment %{{.*}} : tensor<i32>
  %t1 = train.increment %t : tensor<i32>
  // CHECK: train.sum_of_squares %{{.*}}, %{{.*}} : tensor<16xbf16>, tensor<16xf32>
  %ss = train.sum_of_squares %g, %p : tensor<16xbf16>, tensor<16xf32>
  // CHECK: train.clip_coefficient %{{.*}} {max_norm = 1.000000e+00 : f32} : tensor<f32>
  %c = train.clip_coefficient %ss {max_norm = 1.0 : f32} : tensor<f32>
  // CHECK: train.adamw {{.*}} grad_scale %{{.*}} {beta2 = 0.949999988 : f32, weight_decay = 1.000000e-01 : f32}
  %p1, %m1, %v1 = train.adamw %p, %g, %m, %v, %lr, %t1 grad_scale %c {beta2 = 0.95 : f32, weight_decay = 0.1 : f32} : (tensor<16xf32>, tensor<16xbf16>, tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<i32>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  // CHECK: train.sgd {{.*}} momentum_buffer %{{.*}} grad_scale %{{.*}} {momentum = 0.899999976 : f32}
  %p2, %b2 = train.sgd %p, %g, %lr momentum_buffer %m grad_scale %c {momentum = 0.9 : f32} : (tensor<16xf32>, tensor<16xbf16>, tensor<f32>, tensor<16xf32>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>)
  return
}

// CHECK-LABEL: func.func private @forward_step
// CHECK-SAME: train.max_grad_norm = 1.000000e+00 : f32, train.optimizer = #train.adamw<lr = 6.000000e-04 : f64, beta2 = 0.94999999999999996 : f64, weight_decay = 1.000000e-01 : f64>
func.func private @forward_step() -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.max_grad_norm = 1.0 : f32,
                train.optimizer = #train.adamw<lr = 6.0e-4, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1>}

// Fields at torch's defaults may be omitted and are not printed.
// CHECK-LABEL: func.func private @default_adamw
// CHECK-SAME: train.optimizer = #train.adamw<lr = 1.000000e-03 : f64>
func.func private @default_adamw() -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.01>}
// CHECK-LABEL: func.func private @some_adamw
// CHECK-SAME: train.optimizer = #train.adamw<lr = 1.000000e-03 : f64, beta2 = 0.94999999999999996 : f64>
func.func private @some_adamw() -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.adamw<lr = 1.0e-3, beta2 = 0.95>}
// CHECK-LABEL: func.func private @default_sgd
// CHECK-SAME: train.optimizer = #train.sgd<lr = 1.000000e-01 : f64>
func.func private @default_sgd() -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1>}

// CHECK-LABEL: func.func @accumulation_ops
func.func @accumulation_ops(%x: tensor<8x64xi32>, %l: tensor<f32>) {
  // CHECK: train.slice_rows %{{.*}} {offset = 4 : i64} : tensor<8x64xi32> to tensor<4x64xi32>
  %mb = train.slice_rows %x {offset = 4 : i64} : tensor<8x64xi32> to tensor<4x64xi32>
  // CHECK: train.scale %{{.*}} {factor = 2.500000e-01 : f32} : tensor<f32>
  %avg = train.scale %l {factor = 0.25 : f32} : tensor<f32>
  return
}

// CHECK-LABEL: func.func private @accumulating_step
// CHECK-SAME: train.micro_batches = 4 : i64
func.func private @accumulating_step() -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.micro_batches = 4 : i64,
                train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>}

shard.grid @grid4(shape = 4)

// CHECK-LABEL: func.func @collectives
func.func @collectives(%w: tensor<3x5xf32>, %b: tensor<3xf32>, %s: tensor<4xf32>, %t: tensor<1xf32>) {
  // CHECK: train.shard_of %{{.*}} on @grid4 grid_axes = [0] : tensor<3x5xf32> -> tensor<4xf32>
  %ws = train.shard_of %w on @grid4 grid_axes = [0] : tensor<3x5xf32> -> tensor<4xf32>
  // CHECK: train.all_gather_shards %{{.*}}, %{{.*}} on @grid4 grid_axes = [0] : tensor<4xf32>, tensor<1xf32> -> tensor<3x5xf32>, tensor<3xf32>
  %wf, %bf = train.all_gather_shards %s, %t on @grid4 grid_axes = [0] : tensor<4xf32>, tensor<1xf32> -> tensor<3x5xf32>, tensor<3xf32>
  // CHECK: train.reduce_scatter_shards %{{.*}}, %{{.*}} on @grid4 grid_axes = [0] reduction = average : tensor<3x5xf32>, tensor<3xf32> -> tensor<4xf32>, tensor<1xf32>
  %gs, %gt = train.reduce_scatter_shards %w, %b on @grid4 grid_axes = [0] reduction = average : tensor<3x5xf32>, tensor<3xf32> -> tensor<4xf32>, tensor<1xf32>
  // CHECK: train.all_reduce_bucket %{{.*}}, %{{.*}} on @grid4 grid_axes = [0] reduction = sum : tensor<3x5xf32>, tensor<3xf32> -> tensor<3x5xf32>, tensor<3xf32>
  %rw, %rb = train.all_reduce_bucket %w, %b on @grid4 grid_axes = [0] reduction = sum : tensor<3x5xf32>, tensor<3xf32> -> tensor<3x5xf32>, tensor<3xf32>
  return
}

// CHECK-LABEL: func.func private @grouped_plan
// CHECK-SAME: bucket_cap_mb = 25, reduce_dtype = f32, groups = [<names = "wte|wpe", optimizer_states = replicated, gradients = replicated, parameters = replicated, unit = param>, <max_elements = 100000, optimizer_states = sharded, gradients = sharded, parameters = replicated, unit = block, shard_axes = [0]>]>
shard.grid @grid2(shape = 2)
func.func private @grouped_plan() -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "zero3", grid = @grid2, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25, reduce_dtype = f32, groups = [#train.param_group<names = "wte|wpe", optimizer_states = replicated, gradients = replicated, parameters = replicated, unit = param>, <max_elements = 100000, optimizer_states = sharded, gradients = sharded, parameters = replicated, unit = block, shard_axes = [0]>]>}

// The plan of a step that reduces every micro-batch: reduce_every is printed
// between reduce_dtype and groups, and only when it is not step.
// CHECK-LABEL: func.func private @micro_batch_plan
// CHECK-SAME: bucket_cap_mb = 25, reduce_every = micro_batch>
func.func private @micro_batch_plan() -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "zero2", grid = @grid2, optimizer_states = sharded, gradients = sharded, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25, reduce_every = micro_batch>}

// CHECK-LABEL: func.func private @step_plan
// CHECK-SAME: bucket_cap_mb = 25>
func.func private @step_plan() -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "zero2", grid = @grid2, optimizer_states = sharded, gradients = sharded, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25, reduce_every = step>}

// CHECK-LABEL: func.func @async_collectives
func.func @async_collectives(%s0: tensor<6xf32>, %s1: tensor<2xf32>, %g: tensor<3x4xf32>) {
  // CHECK: %[[H:.*]] = train.collective_start all_gather_shards %{{.*}}, %{{.*}} on @grid2 grid_axes = [0] : tensor<6xf32>, tensor<2xf32> -> !train.pending<tensor<3x4xf32>, tensor<3xf32>>
  %h = train.collective_start all_gather_shards %s0, %s1 on @grid2 grid_axes = [0] : tensor<6xf32>, tensor<2xf32> -> !train.pending<tensor<3x4xf32>, tensor<3xf32>>
  // CHECK: train.collective_start reduce_scatter_shards %{{.*}} on @grid2 grid_axes = [0] reduction = average : tensor<3x4xf32> -> !train.pending<tensor<6xf32>>
  %r = train.collective_start reduce_scatter_shards %g on @grid2 grid_axes = [0] reduction = average : tensor<3x4xf32> -> !train.pending<tensor<6xf32>>
  // CHECK: train.collective_start all_reduce %{{.*}} on @grid2 grid_axes = [0] reduction = sum : tensor<3x4xf32> -> !train.pending<tensor<3x4xf32>>
  %a = train.collective_start all_reduce %g on @grid2 grid_axes = [0] reduction = sum : tensor<3x4xf32> -> !train.pending<tensor<3x4xf32>>
  // CHECK: train.collective_wait %[[H]] : !train.pending<tensor<3x4xf32>, tensor<3xf32>>
  %w, %b = train.collective_wait %h : !train.pending<tensor<3x4xf32>, tensor<3xf32>>
  %rs = train.collective_wait %r : !train.pending<tensor<6xf32>>
  %ar = train.collective_wait %a : !train.pending<tensor<3x4xf32>>
  return
}

// The fused ops of autoshard-fuse.
// CHECK-LABEL: func.func @fused
func.func @fused(%x: tensor<8x16xf32>, %w: tensor<4x16xf32>, %b: tensor<4xf32>,
                 %dy: tensor<8x4xf32>,
                 %p: tensor<4x16xf32>, %q: tensor<4xf32>, %g: tensor<4x16xbf16>,
                 %gq: tensor<4xbf16>, %lr: tensor<f32>, %t: tensor<i32>,
                 %scale: tensor<f32>, %w3: tensor<16x4xf32>) {
  // CHECK: %{{.*}}, %{{.*}} = train.linear_gelu %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>)
  %pre, %y = train.linear_gelu %x, %w, %b : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>)
  // CHECK: %{{.*}}, %{{.*}} = train.linear_grad_gelu %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>)
  %dpre, %db = train.linear_grad_gelu %x, %w3, %pre : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>)
  // Without the bias gradient.
  // CHECK: train.linear_grad_gelu %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %dpre2 = train.linear_grad_gelu %x, %w3, %pre : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  // CHECK: %{{.*}}, %{{.*}} = train.linear_grad_weight_bias %{{.*}}, %{{.*}} : (tensor<8x4xf32>, tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4xf32>)
  %dw, %db2 = train.linear_grad_weight_bias %dy, %x : (tensor<8x4xf32>, tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4xf32>)
  // CHECK: %{{.*}}:6 = train.adamw_multi params(%{{.*}}, %{{.*}}) grads(%{{.*}}, %{{.*}}) exp_avgs(%{{.*}}, %{{.*}}) exp_avg_sqs(%{{.*}}, %{{.*}}) lr(%{{.*}}) step(%{{.*}}) grad_scale(%{{.*}}) {beta1 = 0.899999976 : f32, beta2 = 9.990000e-01 : f32, eps = 9.99999993E-9 : f32, weight_decays = array<f32: 1.000000e-01, 0.000000e+00>}
  %r:6 = train.adamw_multi params(%p, %q) grads(%g, %gq) exp_avgs(%p, %q) exp_avg_sqs(%p, %q) lr(%lr) step(%t) grad_scale(%scale) {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decays = array<f32: 0.1, 0.0>} : (tensor<4x16xf32>, tensor<4xf32>, tensor<4x16xbf16>, tensor<4xbf16>, tensor<4x16xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<f32>, tensor<i32>, tensor<f32>) -> (tensor<4x16xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4xf32>)
  return
}
