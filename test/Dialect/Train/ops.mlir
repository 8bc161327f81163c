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
  return
}

// CHECK-LABEL: func.func @optimizers
func.func @optimizers(%p: tensor<4x16xf32>, %g: tensor<4x16xf32>, %lr: tensor<f32>, %m: tensor<4x16xf32>) {
  // CHECK: train.sgd %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %p1 = train.sgd %p, %g, %lr : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  // CHECK: train.sgd {{.*}} {momentum = 5.000000e-01 : f32, nesterov = true, weight_decay = 0.00999999977 : f32}
  %p2, %m2 = train.sgd %p, %g, %lr, %m {momentum = 0.5 : f32, weight_decay = 0.01 : f32, nesterov = true} : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>, tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  return
}

// CHECK: shard.grid @world(shape = 2)
shard.grid @world(shape = 2)

// CHECK-LABEL: func.func @step
// CHECK-SAME: train.init = #train.init<normal, std = 2.000000e-02>, train.name = "w", train.role = #train.role<param>
// CHECK-SAME: train.init = #train.init<uniform, bound = 1.000000e-01>
// CHECK-SAME: train.init = #train.init<ones>
// CHECK-SAME: train.name = "w.momentum", train.role = #train.role<opt_state>
// CHECK-SAME: train.role = #train.role<input>
// CHECK-SAME: train.role = #train.role<label>
// CHECK-SAME: train.init = #train.init<constant, value = 1.000000e-01>, train.name = "lr", train.role = #train.role<hyper>
// CHECK-SAME: train.role = #train.role<loss>
// CHECK-SAME: attributes {train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated>, train.step}
func.func @step(
    %w: tensor<4x16xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.02>},
    %b: tensor<4xf32> {train.role = #train.role<param>, train.name = "b", train.init = #train.init<uniform, bound = 0.1>},
    %s: tensor<4xf32> {train.role = #train.role<param>, train.name = "s", train.init = #train.init<ones>},
    %m: tensor<4x16xf32> {train.role = #train.role<opt_state>, train.name = "w.momentum"},
    %x: tensor<8x16xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"},
    %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = 0.1>})
    -> (tensor<4x16xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated>} {
  %logits = train.linear %x, %w, %b : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
  %dlogits = train.softmax_cross_entropy_grad %logits, %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<8x4xf32>
  %dw = train.linear_grad_weight %dlogits, %x : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %w1 = train.sgd %w, %dw, %lr : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  return %w1, %loss : tensor<4x16xf32>, tensor<f32>
}
