// RUN: shard-opt %s -split-input-file -verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(autoshard-autodiff)' | FileCheck %s
// RUN: shard-opt %s -split-input-file -verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(autoshard-autodiff{expose-gradients=true})' | FileCheck %s --check-prefix=EXPOSE

// A residual MLP under SGD with momentum: the loss seeds the backward pass,
// the residual's two paths add their gradients, the first layer's input
// gets no gradient, and each parameter gets a momentum buffer and an update.

// CHECK-LABEL: func.func @residual_sgd
// CHECK-SAME: %[[W1:[^:]+]]: tensor<8x4xf32>
// CHECK-SAME: %[[B1:[^:]+]]: tensor<8xf32>
// CHECK-SAME: %[[W2:[^:]+]]: tensor<3x8xf32>
// CHECK-SAME: %[[X:[^:]+]]: tensor<16x4xf32>
// CHECK-SAME: %[[Y:[^:]+]]: tensor<16xi32>
// CHECK-SAME: %[[LR:[^:]+]]: tensor<f32> {train.init = #train.init<constant, value = 1.000000e-01>, train.name = "lr", train.role = #train.role<hyper>}
// CHECK-SAME: %[[MW1:[^:]+]]: tensor<8x4xf32> {train.init = #train.init<zeros>, train.name = "fc1.weight.momentum_buffer", train.role = #train.role<opt_state>}
// CHECK-SAME: %[[MB1:[^:]+]]: tensor<8xf32> {{{[^}]*}}"fc1.bias.momentum_buffer"
// CHECK-SAME: %[[MW2:[^:]+]]: tensor<3x8xf32> {{{[^}]*}}"fc2.weight.momentum_buffer"
// CHECK-SAME: -> (tensor<8x4xf32> {train.name = "fc1.weight", train.role = #train.role<param>},
// CHECK-SAME: tensor<f32> {train.name = "loss", train.role = #train.role<loss>})
// CHECK-SAME: attributes {train.step}
// CHECK: %[[H:.*]] = train.linear %[[X]], %[[W1]], %[[B1]]
// CHECK: %[[A:.*]] = train.gelu %[[H]]
// CHECK: %[[R:.*]] = train.add %[[A]], %[[H]]
// CHECK: %[[LOGITS:.*]] = train.linear %[[R]], %[[W2]]
// CHECK: %[[LOSS:.*]] = train.softmax_cross_entropy %[[LOGITS]], %[[Y]]
// CHECK-NEXT: %[[DLOGITS:.*]] = train.softmax_cross_entropy_grad %[[LOGITS]], %[[Y]] :
// CHECK-NEXT: %[[DR:.*]] = train.linear_grad_input %[[DLOGITS]], %[[W2]]
// CHECK-NEXT: %[[DW2:.*]] = train.linear_grad_weight %[[DLOGITS]], %[[R]]
// CHECK-NEXT: %[[DA:.*]] = train.gelu_grad %[[DR]], %[[H]]
// CHECK-NEXT: %[[DH:.*]] = train.add %[[DR]], %[[DA]]
// CHECK-NOT: train.linear_grad_input
// CHECK-NEXT: %[[DW1:.*]] = train.linear_grad_weight %[[DH]], %[[X]]
// CHECK-NEXT: %[[DB1:.*]] = train.bias_grad %[[DH]]
// Weight decay reaches matrices only.
// CHECK-NEXT: %[[NW1:[^,]*]], %[[NMW1:.*]] = train.sgd %[[W1]], %[[DW1]], %[[LR]] momentum_buffer %[[MW1]] {momentum = 0.899999976 : f32, weight_decay = 0.00999999977 : f32}
// CHECK-NEXT: %[[NB1:[^,]*]], %[[NMB1:.*]] = train.sgd %[[B1]], %[[DB1]], %[[LR]] momentum_buffer %[[MB1]] {momentum = 0.899999976 : f32}
// CHECK-NEXT: %[[NW2:[^,]*]], %[[NMW2:.*]] = train.sgd %[[W2]], %[[DW2]], %[[LR]] momentum_buffer %[[MW2]] {momentum = 0.899999976 : f32, weight_decay = 0.00999999977 : f32}
// CHECK-NEXT: return %[[NW1]], %[[NB1]], %[[NW2]], %[[NMW1]], %[[NMB1]], %[[NMW2]], %[[LOSS]] :

// EXPOSE-LABEL: func.func @residual_sgd
// EXPOSE-SAME: tensor<8x4xf32> {train.name = "fc1.weight.grad", train.role = #train.role<grad>}
// EXPOSE-SAME: tensor<8xf32> {train.name = "fc1.bias.grad", train.role = #train.role<grad>}
// EXPOSE-SAME: tensor<3x8xf32> {train.name = "fc2.weight.grad", train.role = #train.role<grad>}
// EXPOSE-SAME: tensor<f32> {train.name = "loss", train.role = #train.role<loss>})
func.func @residual_sgd(
    %w1: tensor<8x4xf32> {train.role = #train.role<param>, train.name = "fc1.weight", train.init = #train.init<normal, std = 0.5>},
    %b1: tensor<8xf32> {train.role = #train.role<param>, train.name = "fc1.bias", train.init = #train.init<zeros>},
    %w2: tensor<3x8xf32> {train.role = #train.role<param>, train.name = "fc2.weight", train.init = #train.init<normal, std = 0.5>},
    %x: tensor<16x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<16xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1, momentum = 0.9, weight_decay = 0.01>} {
  %h = train.linear %x, %w1, %b1 : (tensor<16x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<16x8xf32>
  %a = train.gelu %h : tensor<16x8xf32>
  %r = train.add %a, %h : tensor<16x8xf32>
  %logits = train.linear %r, %w2 : (tensor<16x8xf32>, tensor<3x8xf32>) -> tensor<16x3xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<16x3xf32>, tensor<16xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A tied embedding under AdamW with clipping and mixed precision: the f32
// master table is cast to bf16 once, used by the lookup and by the output
// projection; its two bf16 gradients are summed, clipping sees the bf16
// gradient, and AdamW reads it directly.

// CHECK-LABEL: func.func @tied_bf16_adamw
// CHECK-SAME: %[[WTE:[^:]+]]: tensor<32x8xf32>
// CHECK-SAME: %[[IDS:[^:]+]]: tensor<2x4xi32>
// CHECK-SAME: %[[Y:[^:]+]]: tensor<2x4xi32>
// CHECK-SAME: %[[LR:[^:]+]]: tensor<f32> {{{[^}]*}}value = 6.000000e-04{{[^}]*}}"lr"
// CHECK-SAME: %[[T:[^:]+]]: tensor<i32> {train.init = #train.init<zeros>, train.name = "optimizer.step", train.role = #train.role<opt_state>}
// CHECK-SAME: %[[M:[^:]+]]: tensor<32x8xf32> {{{[^}]*}}"wte.exp_avg"
// CHECK-SAME: %[[V:[^:]+]]: tensor<32x8xf32> {{{[^}]*}}"wte.exp_avg_sq"
// CHECK: %[[WB:.*]] = train.cast %[[WTE]] : tensor<32x8xf32> to tensor<32x8xbf16>
// CHECK: %[[E:.*]] = train.embedding %[[IDS]], %[[WB]]
// CHECK: %[[LOGITS:.*]] = train.linear %[[E]], %[[WB]]
// CHECK: %[[DLOGITS:.*]] = train.softmax_cross_entropy_grad %[[LOGITS]], %[[Y]]
// CHECK: %[[DE:.*]] = train.linear_grad_input %[[DLOGITS]], %[[WB]]
// CHECK: %[[DWB1:.*]] = train.linear_grad_weight %[[DLOGITS]], %[[E]]
// CHECK: %[[DWB2:.*]] = train.embedding_grad %[[DE]], %[[IDS]] {num_embeddings = 32 : i64}
// CHECK: %[[DWB:.*]] = train.add %[[DWB1]], %[[DWB2]] : tensor<32x8xbf16>
// CHECK: %[[SS:.*]] = train.sum_of_squares %[[DWB]] : tensor<32x8xbf16>
// CHECK: %[[COEF:.*]] = train.clip_coefficient %[[SS]] {max_norm = 1.000000e+00 : f32}
// CHECK: %[[T1:.*]] = train.increment %[[T]]
// CHECK: %[[NW:[^,]*]], %[[NM:[^,]*]], %[[NV:.*]] = train.adamw %[[WTE]], %[[DWB]], %[[M]], %[[V]], %[[LR]], %[[T1]] grad_scale %[[COEF]] {beta2 = 0.949999988 : f32, weight_decay = 1.000000e-01 : f32} : (tensor<32x8xf32>, tensor<32x8xbf16>,
// CHECK: return %[[NW]], %[[NM]], %[[NV]], %[[T1]], %{{.*}} : tensor<32x8xf32>, tensor<32x8xf32>, tensor<32x8xf32>, tensor<i32>, tensor<f32>
func.func @tied_bf16_adamw(
    %wte: tensor<32x8xf32> {train.role = #train.role<param>, train.name = "wte", train.init = #train.init<normal, std = 0.02>},
    %ids: tensor<2x4xi32> {train.role = #train.role<input>, train.name = "ids"},
    %y: tensor<2x4xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.max_grad_norm = 1.0 : f32,
                train.optimizer = #train.adamw<lr = 6.0e-4, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1>} {
  %wb = train.cast %wte : tensor<32x8xf32> to tensor<32x8xbf16>
  %e = train.embedding %ids, %wb : (tensor<2x4xi32>, tensor<32x8xbf16>) -> tensor<2x4x8xbf16>
  %logits = train.linear %e, %wb : (tensor<2x4x8xbf16>, tensor<32x8xbf16>) -> tensor<2x4x32xbf16>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<2x4x32xbf16>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A step without train.optimizer carries its own backward: unchanged.
// CHECK-LABEL: func.func @manual
// CHECK-NEXT: return %arg0
func.func @manual(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{returns a loss that no differentiable loss op computes; autoshard-autodiff seeds the gradient at train.softmax_cross_entropy or train.nll_loss}}
func.func @step(%w: tensor<2xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>} {
  return %l : tensor<f32>
}

// -----

func.func @step(%w: tensor<3x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %x: tensor<2x3xf32> {train.role = #train.role<input>, train.name = "x"},
                %y: tensor<2xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>} {
  // expected-error@+1 {{is on the path from a parameter to the loss but has no gradient rule (DifferentiableOpInterface)}}
  %h = train.linear_grad_input %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %loss = train.softmax_cross_entropy %h, %y : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @step(%w: tensor<4x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %x: tensor<2x4x4xf32> {train.role = #train.role<input>, train.name = "x"},
                %y: tensor<2x2xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>} {
  %q = train.linear %x, %w : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
  %q4 = train.reshape %q : tensor<2x4x4xf32> to tensor<2x4x2x2xf32>
  // expected-error@+1 {{cannot differentiate through its logsumexp result, which only its gradient may use}}
  %o, %lse = train.causal_attention %q4, %q4, %q4 : (tensor<2x4x2x2xf32>, tensor<2x4x2x2xf32>, tensor<2x4x2x2xf32>) -> (tensor<2x4x2x2xf32>, tensor<2x2x4xf32>)
  %loss = train.softmax_cross_entropy %lse, %y : (tensor<2x2x4xf32>, tensor<2x2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error@+1 {{has an argument named "lr" that is not a hyper; the optimizer's learning rate needs that name}}
func.func @step(%w: tensor<3x2xf32> {train.role = #train.role<param>, train.name = "lr", train.init = #train.init<zeros>},
                %x: tensor<2x2xf32> {train.role = #train.role<input>, train.name = "x"},
                %y: tensor<2xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>} {
  %h = train.linear %x, %w : (tensor<2x2xf32>, tensor<3x2xf32>) -> tensor<2x3xf32>
  %loss = train.softmax_cross_entropy %h, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// The step's own "lr" hyper is the learning rate the binary starts with.
// expected-error@+1 {{starts its learning rate, hyper "lr", at -0.1; a learning rate is a finite number >= 0}}
func.func @step(%w: tensor<3x2xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %x: tensor<2x2xf32> {train.role = #train.role<input>, train.name = "x"},
                %y: tensor<2xi32> {train.role = #train.role<label>, train.name = "y"},
                %lr: tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<constant, value = -0.1>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1>} {
  %h = train.linear %x, %w : (tensor<2x2xf32>, tensor<3x2xf32>) -> tensor<2x3xf32>
  %loss = train.softmax_cross_entropy %h, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error@+1 {{has no parameter on which the loss depends, so there is nothing to train}}
func.func @step(%w: tensor<3x2xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %x: tensor<2x3xf32> {train.role = #train.role<input>, train.name = "x"},
                %y: tensor<2xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>} {
  %loss = train.softmax_cross_entropy %x, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error@+1 {{has 2 blocks; a training step is straight-line code in one block}}
func.func @step(%w: tensor<3x2xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>} {
  cf.br ^next
^next:
  return %l : tensor<f32>
}

// -----

// Gradient accumulation: two micro-batches of 4 rows. The shared cast of the
// master weight runs once; each micro-batch slices the batch, runs its
// forward and backward; the weight's bf16 gradients are summed, averaged,
// and handed to the optimizer once (a partitioner then reduces them once).
// CHECK-LABEL: func.func @accumulate
// CHECK-SAME: %[[W:[^:]+]]: tensor<3x4xf32>
// CHECK-SAME: %[[X:[^:]+]]: tensor<8x4xf32>
// CHECK-SAME: %[[Y:[^:]+]]: tensor<8xi32>
// CHECK-SAME: attributes {train.step}
// CHECK: %[[WB:.*]] = train.cast %[[W]] : tensor<3x4xf32> to tensor<3x4xbf16>
// CHECK-NEXT: %[[X0:.*]] = train.slice_rows %[[X]] {offset = 0 : i64} : tensor<8x4xf32> to tensor<4x4xf32>
// CHECK-NEXT: %[[Y0:.*]] = train.slice_rows %[[Y]] {offset = 0 : i64} : tensor<8xi32> to tensor<4xi32>
// CHECK: %[[L0:.*]] = train.softmax_cross_entropy %{{.*}}, %[[Y0]] : (tensor<4x3xbf16>, tensor<4xi32>)
// CHECK: %[[G0:.*]] = train.linear_grad_weight
// CHECK-NEXT: %[[X1:.*]] = train.slice_rows %[[X]] {offset = 4 : i64}
// CHECK-NEXT: %[[Y1:.*]] = train.slice_rows %[[Y]] {offset = 4 : i64}
// CHECK-NOT: train.cast %[[W]]
// CHECK: %[[L1:.*]] = train.softmax_cross_entropy %{{.*}}, %[[Y1]]
// CHECK: %[[G1:.*]] = train.linear_grad_weight
// CHECK-NEXT: %[[GSUM:.*]] = train.add %[[G0]], %[[G1]] : tensor<3x4xbf16>
// CHECK-NEXT: %[[GAVG:.*]] = train.scale %[[GSUM]] {factor = 5.000000e-01 : f32} : tensor<3x4xbf16>
// CHECK: %[[LSUM:.*]] = train.add %[[L0]], %[[L1]] : tensor<f32>
// CHECK-NEXT: %[[LAVG:.*]] = train.scale %[[LSUM]] {factor = 5.000000e-01 : f32} : tensor<f32>
// CHECK-NEXT: %[[NEW:.*]] = train.sgd %[[W]], %[[GAVG]], %{{.*}} : (tensor<3x4xf32>, tensor<3x4xbf16>, tensor<f32>)
// CHECK-NEXT: return %[[NEW]], %[[LAVG]]
func.func @accumulate(
    %w: tensor<3x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.5>},
    %x: tensor<8x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.micro_batches = 2 : i64,
                train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>} {
  %wb = train.cast %w : tensor<3x4xf32> to tensor<3x4xbf16>
  %xb = train.cast %x : tensor<8x4xf32> to tensor<8x4xbf16>
  %logits = train.linear %xb, %wb : (tensor<8x4xbf16>, tensor<3x4xbf16>) -> tensor<8x3xbf16>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<8x3xbf16>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// train.weight_decay, a parameter's own decay (PyTorch's parameter
// groups), replaces the optimizer's rule for that parameter: the matrix w1
// is not decayed, the bias b1 is, by its own value; w2 keeps the rule
// (the optimizer's decay, a matrix). The op prints no weight_decay at
// AdamW's default 0.01 and SGD's 0.

// CHECK-LABEL: func.func @per_param_decay_adamw
// CHECK-SAME: %[[W1:[^:]*]]: tensor<8x4xf32> {train.init = #train.init<zeros>, train.name = "fc1.weight", train.role = #train.role<param>, train.weight_decay = 0.000000e+00 : f64}
// CHECK: train.adamw %[[W1]], {{.*}} {weight_decay = 0.000000e+00 : f32}
// CHECK: train.adamw %{{.*}} {weight_decay = 5.000000e-02 : f32} : (tensor<8xf32>,
// CHECK: train.adamw %{{.*}} {weight_decay = 1.000000e-01 : f32} : (tensor<3x8xf32>,
func.func @per_param_decay_adamw(
    %w1: tensor<8x4xf32> {train.role = #train.role<param>, train.name = "fc1.weight", train.init = #train.init<zeros>, train.weight_decay = 0.0 : f64},
    %b1: tensor<8xf32> {train.role = #train.role<param>, train.name = "fc1.bias", train.init = #train.init<zeros>, train.weight_decay = 0.05 : f64},
    %w2: tensor<3x8xf32> {train.role = #train.role<param>, train.name = "fc2.weight", train.init = #train.init<zeros>},
    %x: tensor<16x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<16xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.adamw<lr = 0.001, weight_decay = 0.1>} {
  %h = train.linear %x, %w1, %b1 : (tensor<16x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<16x8xf32>
  %logits = train.linear %h, %w2 : (tensor<16x8xf32>, tensor<3x8xf32>) -> tensor<16x3xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<16x3xf32>, tensor<16xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @per_param_decay_sgd
// CHECK: train.sgd %{{.*}} {weight_decay = 2.500000e-01 : f32} : (tensor<8x4xf32>,
// CHECK: train.sgd %{{.*}} {weight_decay = 5.000000e-01 : f32} : (tensor<8xf32>,
// CHECK-NOT: weight_decay
// CHECK: train.sgd %{{.*}} : (tensor<3x8xf32>,
func.func @per_param_decay_sgd(
    %w1: tensor<8x4xf32> {train.role = #train.role<param>, train.name = "fc1.weight", train.init = #train.init<zeros>, train.weight_decay = 0.25 : f32},
    %b1: tensor<8xf32> {train.role = #train.role<param>, train.name = "fc1.bias", train.init = #train.init<zeros>, train.weight_decay = 0.5 : f64},
    %w2: tensor<3x8xf32> {train.role = #train.role<param>, train.name = "fc2.weight", train.init = #train.init<zeros>},
    %x: tensor<16x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<16xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1>} {
  %h = train.linear %x, %w1, %b1 : (tensor<16x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<16x8xf32>
  %logits = train.linear %h, %w2 : (tensor<16x8xf32>, tensor<3x8xf32>) -> tensor<16x3xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<16x3xf32>, tensor<16xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// torch's ignore_index: each micro-batch's gradient ignores the positions
// its loss ignores.

// CHECK-LABEL: func.func @ignore_index
// CHECK: %[[L0:.*]] = train.softmax_cross_entropy %[[Z0:[^,]*]], %[[Y0:[^ ]*]] {ignore_index = -100 : i64}
// CHECK-NEXT: train.softmax_cross_entropy_grad %[[Z0]], %[[Y0]] {ignore_index = -100 : i64}
// CHECK: %[[L1:.*]] = train.softmax_cross_entropy %[[Z1:[^,]*]], %[[Y1:[^ ]*]] {ignore_index = -100 : i64}
// CHECK-NEXT: train.softmax_cross_entropy_grad %[[Z1]], %[[Y1]] {ignore_index = -100 : i64}
func.func @ignore_index(
    %w: tensor<3x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.5>},
    %x: tensor<8x4xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.micro_batches = 2 : i64,
                train.optimizer = #train.sgd<lr = 0.1>} {
  %logits = train.linear %x, %w : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  %loss = train.softmax_cross_entropy %logits, %y {ignore_index = -100 : i64} : (tensor<8x3xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error@+1 {{cannot cut the batch of input argument "x" (6 rows) into 4 equal micro-batches}}
func.func @step(%w: tensor<3x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %x: tensor<6x4xf32> {train.role = #train.role<input>, train.name = "x"},
                %y: tensor<6xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.micro_batches = 4 : i64, train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>} {
  %h = train.linear %x, %w : (tensor<6x4xf32>, tensor<3x4xf32>) -> tensor<6x3xf32>
  %loss = train.softmax_cross_entropy %h, %y : (tensor<6x3xf32>, tensor<6xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error@+1 {{has a loss that does not depend on the batch, so micro-batches cannot divide it}}
func.func @step(%w: tensor<3x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"},
                %y: tensor<3xi32> {train.role = #train.role<param>, train.name = "y", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.micro_batches = 2 : i64, train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>} {
  %loss = train.softmax_cross_entropy %w, %y : (tensor<3x4xf32>, tensor<3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Under gradient accumulation a class token expanded to the batch is cut
// like the batch: each micro-batch expands it to its own 2 rows, and the
// token's gradient sums the micro-batches'.
// CHECK-LABEL: func.func @class_token
// CHECK-COUNT-2: train.broadcast_to %arg0 : tensor<1x1x3xf32> -> tensor<2x1x3xf32>
// CHECK-NOT: tensor<4x1x3xf32>
func.func @class_token(
    %cls: tensor<1x1x3xf32> {train.role = #train.role<param>, train.name = "cls", train.init = #train.init<normal, std = 0.5>},
    %x: tensor<4x2x3xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<4x3xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.micro_batches = 2 : i64, train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>} {
  %c = train.broadcast_to %cls : tensor<1x1x3xf32> -> tensor<4x1x3xf32>
  %t = train.concat %c, %x {dim = 1} : (tensor<4x1x3xf32>, tensor<4x2x3xf32>) -> tensor<4x3x3xf32>
  %loss = train.softmax_cross_entropy %t, %y : (tensor<4x3x3xf32>, tensor<4x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @fill_read_without_batch(
    %w: tensor<3xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<normal, std = 0.5>},
    %x: tensor<4x3xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<4xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.micro_batches = 2 : i64, train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>} {
  %b = train.broadcast_to %w : tensor<3xf32> -> tensor<4x3xf32>
  // expected-error@+1 {{'train.reduce_sum' op reads train.broadcast_to of 'tensor<4x3xf32>' without the batch, while other ops pair it with the batch's rows, which micro-batches divide; give each reader its own tensor}}
  %s = train.reduce_sum %b {dims = array<i64: 0, 1>} : tensor<4x3xf32> -> tensor<f32>
  %xb = train.add %x, %b : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  %xs = train.mul %xb, %s : tensor<4x3xf32>, tensor<f32> -> tensor<4x3xf32>
  %loss = train.softmax_cross_entropy %xs, %y : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
