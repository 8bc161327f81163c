// RUN: shard-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect \
// RUN:   --pass-pipeline='builtin.module(autoshard-partition)' | FileCheck %s

// Under a replicated (DDP) plan on 2 ranks, each rank takes half of the
// global batch, every gradient an optimizer consumes is averaged over the
// grid as soon as it is computed, and the loss is averaged for reporting.

shard.grid @world(shape = 2)

// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[W:[^:]+]]: tensor<4x16xf32>
// CHECK-SAME: %[[B:[^:]+]]: tensor<4xf32>
// CHECK-SAME: %[[X:[^:]+]]: tensor<4x16xf32> {{{.*}}train.role = #train.role<input>}
// CHECK-SAME: %[[Y:[^:]+]]: tensor<4xi32> {{{.*}}train.role = #train.role<label>}
// CHECK-SAME: %[[LR:[^:]+]]: tensor<f32>
// CHECK-SAME: attributes {train.partitioned, train.plan
// CHECK: %[[LOGITS:.*]] = train.linear %[[X]], %[[W]], %[[B]] : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<4x4xf32>
// CHECK: %[[LOSS:.*]] = train.softmax_cross_entropy %[[LOGITS]], %[[Y]] : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
// CHECK-NEXT: %[[LOSS_AVG:.*]] = shard.all_reduce %[[LOSS]] on @world grid_axes = [0] reduction = average : tensor<f32> -> tensor<f32>
// CHECK: %[[DLOGITS:.*]] = train.softmax_cross_entropy_grad %[[LOGITS]], %[[Y]] : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[DW:.*]] = train.linear_grad_weight %[[DLOGITS]], %[[X]] : (tensor<4x4xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[DW_AVG:.*]] = shard.all_reduce %[[DW]] on @world grid_axes = [0] reduction = average : tensor<4x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[DB:.*]] = train.bias_grad %[[DLOGITS]] : (tensor<4x4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[DB_AVG:.*]] = shard.all_reduce %[[DB]] on @world grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[W1:.*]] = train.sgd %[[W]], %[[DW_AVG]], %[[LR]]
// CHECK-NEXT: %[[B1:.*]] = train.sgd %[[B]], %[[DB_AVG]], %[[LR]]
// CHECK-NEXT: return %[[W1]], %[[B1]], %[[LOSS_AVG]]
// CHECK-NOT: shard.all_reduce
func.func @step(
    %w: tensor<4x16xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.02>},
    %b: tensor<4xf32> {train.role = #train.role<param>, train.name = "b", train.init = #train.init<zeros>},
    %x: tensor<8x16xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.1>})
    -> (tensor<4x16xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<4xf32> {train.role = #train.role<param>, train.name = "b"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %logits = train.linear %x, %w, %b : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
  %dlogits = train.softmax_cross_entropy_grad %logits, %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<8x4xf32>
  %dw = train.linear_grad_weight %dlogits, %x : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %db = train.bias_grad %dlogits : (tensor<8x4xf32>) -> tensor<4xf32>
  %w1 = train.sgd %w, %dw, %lr : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %b1 = train.sgd %b, %db, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %w1, %b1, %loss : tensor<4x16xf32>, tensor<4xf32>, tensor<f32>
}

// -----

// A gradient that feeds two optimizer updates is reduced once.
shard.grid @world(shape = 2)
// CHECK-LABEL: func.func @shared_gradient
// CHECK-COUNT-1: shard.all_reduce {{.*}} : tensor<4xf32>
// CHECK-NOT: shard.all_reduce {{.*}} : tensor<4xf32>
func.func @shared_gradient(
    %a: tensor<4xf32> {train.role = #train.role<param>, train.name = "a", train.init = #train.init<zeros>},
    %b: tensor<4xf32> {train.role = #train.role<param>, train.name = "b", train.init = #train.init<zeros>},
    %g: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "g"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.1>})
    -> (tensor<4xf32> {train.role = #train.role<param>, train.name = "a"},
        tensor<4xf32> {train.role = #train.role<param>, train.name = "b"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %d = train.bias_grad %g : (tensor<2x4xf32>) -> tensor<4xf32>
  %a1 = train.sgd %a, %d, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %b1 = train.sgd %b, %d, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %a1, %b1, %lr : tensor<4xf32>, tensor<4xf32>, tensor<f32>
}

// -----

shard.grid @world(shape = 4)
// expected-error@+1 {{the global batch of input argument "x" has 6 rows, which 4 ranks cannot split evenly; use a multiple of 4}}
func.func @step(%x: tensor<6x2xf32> {train.role = #train.role<input>, train.name = "x"},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{has no 'train.plan'; run autoshard-plan first}}
func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
  return %l : tensor<f32>
}

// -----

shard.grid @world(shape = 2)
// expected-error@+1 {{is already partitioned}}
func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.partitioned, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  return %l : tensor<f32>
}

// -----

func.func private @world()
// expected-error@+1 {{plan refers to @world, which is not a shard.grid}}
func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{has a dynamic axis 0; a training plan needs a static grid}}
shard.grid @world(shape = ?)
func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  return %l : tensor<f32>
}

// -----

// A state that is no argument of the step cannot be sharded with its
// parameter.
shard.grid @world(shape = 2)
func.func @step(%w: tensor<4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"},
                %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<zeros>})
    -> (tensor<4xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "zero1", grid = @world, optimizer_states = sharded, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %g = train.bias_grad %x : (tensor<2x4xf32>) -> tensor<4xf32>
  // expected-error@+1 {{has an optimizer state that is not an argument of the step; a plan shards states the step carries}}
  %w1, %m1 = train.sgd %w, %g, %lr momentum_buffer %g {momentum = 0.9 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %w1, %lr : tensor<4xf32>, tensor<f32>
}

// -----

shard.grid @world(shape = 2)
func.func @step(%x: tensor<8x2xf32> {train.role = #train.role<input>, train.name = "x"},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  // expected-error@+1 {{has no type-inference rule, so its result types cannot be re-derived for a smaller batch}}
  %r = "other.op"(%x) : (tensor<8x2xf32>) -> tensor<8x2xf32>
  return %l : tensor<f32>
}

// -----

shard.grid @world(shape = 2)
func.func @step(%w: tensor<8x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %x: tensor<8x4xf32> {train.role = #train.role<input>, train.name = "x"},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<8x4xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %a = train.relu %x : tensor<8x4xf32>
  // expected-error@+1 {{the per-rank step would return 'tensor<4x4xf32>', 'tensor<f32>' instead of 'tensor<8x4xf32>', 'tensor<f32>'; a step returns only parameters, optimizer states and the loss, whose types do not depend on the batch}}
  return %a, %l : tensor<8x4xf32>, tensor<f32>
}

// -----

// Micro-batch slices shrink with the batch: each rank takes its share of
// every micro-batch, and views of the batch keep their inner dimensions.
shard.grid @world(shape = 2)
// CHECK-LABEL: func.func @slices
// CHECK-SAME: %[[X:[^:]+]]: tensor<4x6xf32>
// CHECK: train.slice_rows %[[X]] {offset = 2 : i64} : tensor<4x6xf32> to tensor<2x6xf32>
// CHECK: train.reshape %{{.*}} : tensor<2x6xf32> to tensor<2x2x3xf32>
func.func @slices(%x: tensor<8x6xf32> {train.role = #train.role<input>, train.name = "x"},
                  %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %mb = train.slice_rows %x {offset = 4 : i64} : tensor<8x6xf32> to tensor<4x6xf32>
  %v = train.reshape %mb : tensor<4x6xf32> to tensor<4x2x3xf32>
  return %l : tensor<f32>
}

// -----

shard.grid @world(shape = 4)
func.func @step(%x: tensor<8x6xf32> {train.role = #train.role<input>, train.name = "x"},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  // expected-error@+1 {{the micro-batch of rows [2, 4) does not split evenly over 4 ranks, each of which takes its share of every micro-batch; use a micro-batch of a multiple of 4 rows}}
  %mb = train.slice_rows %x {offset = 2 : i64} : tensor<8x6xf32> to tensor<2x6xf32>
  return %l : tensor<f32>
}

// -----

shard.grid @world(shape = 4)
func.func @step(%x: tensor<8x6xf32> {train.role = #train.role<input>, train.name = "x"},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  // expected-error@+1 {{cannot give each of 4 ranks an equal block of the view 'tensor<2x24xf32>'}}
  %v = train.reshape %x : tensor<8x6xf32> to tensor<2x24xf32>
  return %l : tensor<f32>
}

// -----

// A sharded plan updates parameters the step carries.
shard.grid @world(shape = 2)
func.func @step(%w: tensor<4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"},
                %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<zeros>})
    -> (tensor<4xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "zero1", grid = @world, optimizer_states = sharded, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %g = train.bias_grad %x : (tensor<2x4xf32>) -> tensor<4xf32>
  %v = train.relu %w : tensor<4xf32>
  // expected-error@+1 {{updates a value that is not a parameter argument of the step}}
  %w1 = train.sgd %v, %g, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %w1, %lr : tensor<4xf32>, tensor<f32>
}

// -----

// One gradient cannot be both reduced whole and reduce-scattered: the two
// parameters it updates must share a placement.
shard.grid @world(shape = 2)
func.func @shared_gradient_split(
    %a: tensor<4xf32> {train.role = #train.role<param>, train.name = "a", train.init = #train.init<zeros>},
    %b: tensor<4xf32> {train.role = #train.role<param>, train.name = "b", train.init = #train.init<zeros>},
    %g: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "g"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.1>})
    -> (tensor<4xf32> {train.role = #train.role<param>, train.name = "a"},
        tensor<4xf32> {train.role = #train.role<param>, train.name = "b"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "zero2", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25, groups = [<names = "b", optimizer_states = replicated, gradients = replicated, parameters = replicated, unit = param>]>} {
  %d = train.bias_grad %g : (tensor<2x4xf32>) -> tensor<4xf32>
  %a1 = train.sgd %a, %d, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  // expected-error@+1 {{reads a gradient that also updates a parameter the plan places differently; put both in one parameter group}}
  %b1 = train.sgd %b, %d, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %a1, %b1, %lr : tensor<4xf32>, tensor<4xf32>, tensor<f32>
}

// -----

// An evaluation step (no optimizer) under ZeRO-1 keeps a mixed-precision
// master (an f32 parameter read only through a cast to bf16) where the
// training step keeps it, sharded with the states the plan shards: this
// rank's f32 shard is cast and the bf16 copy gathered before its reader.
// f32 parameters read otherwise stay whole.
shard.grid @world(shape = 2)
// CHECK-LABEL: func.func @evaluation_masters
// CHECK-SAME: %[[W:[^:]+]]: tensor<32xf32> {{{.*}}train.shard = #train.flat_shard<shape = [4, 16], grid_axes = [0]>}
// CHECK-SAME: %[[V:[^:]+]]: tensor<4x4xf32> {{{.*}}train.name = "v", train.role = #train.role<param>}
// CHECK-SAME: %[[B:[^:]+]]: tensor<4xf32> {{{.*}}train.name = "b", train.role = #train.role<param>}
// CHECK: %[[SHARD:.*]] = train.cast %[[W]] : tensor<32xf32> to tensor<32xbf16>
// CHECK: %[[FULL:.*]] = train.all_gather_shards %[[SHARD]] on @world grid_axes = [0] : tensor<32xbf16> -> tensor<4x16xbf16>
// CHECK: train.linear %{{.*}}, %[[FULL]]
func.func @evaluation_masters(
    %w: tensor<4x16xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.02>},
    %v: tensor<4x4xf32> {train.role = #train.role<param>, train.name = "v", train.init = #train.init<normal, std = 0.02>},
    %b: tensor<4xf32> {train.role = #train.role<param>, train.name = "b", train.init = #train.init<zeros>},
    %x: tensor<8x16xbf16> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "zero1", grid = @world, optimizer_states = sharded, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %wc = train.cast %w : tensor<4x16xf32> to tensor<4x16xbf16>
  %logits = train.linear %x, %wc : (tensor<8x16xbf16>, tensor<4x16xbf16>) -> tensor<8x4xbf16>
  %l32 = train.cast %logits : tensor<8x4xbf16> to tensor<8x4xf32>
  %biased = train.linear %l32, %v, %b : (tensor<8x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %loss = train.softmax_cross_entropy %biased, %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
