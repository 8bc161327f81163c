// RUN: shard-opt %s -split-input-file -verify-diagnostics

// One case per diagnostic of the train dialect: attributes, the step
// signature, and the shape rules of each op.

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

// expected-error@+1 {{unknown init kind 'gaussian'; expected zeros, ones, normal, uniform or constant}}
func.func private @f(tensor<2xf32> {train.init = #train.init<gaussian, std = 1.0>})

// -----

// expected-error@+1 {{'normal' init takes 'std', not 'bound'}}
func.func private @f(tensor<2xf32> {train.init = #train.init<normal, bound = 1.0>})

// -----

// expected-error@+1 {{init value must be finite, got INF}}
func.func private @f(tensor<2xf32> {train.init = #train.init<constant, value = 0x7FF0000000000000>})

// -----

// expected-error@+1 {{'uniform' init needs a bound > 0, got -1}}
func.func private @f(tensor<2xf32> {train.init = #train.init<uniform, bound = -1.0>})

// -----

// expected-error@+1 {{'train.step' must be a unit attribute}}
func.func private @f() attributes {train.step = 1 : i32}

// -----

// expected-error@+1 {{'train.step' may only mark a function}}
module attributes {train.step} {}

// -----

// expected-error@+1 {{'train.plan' must be a #train.plan attribute}}
func.func private @f() attributes {train.plan = "ddp"}

// -----

shard.grid @world(shape = 2)
// expected-error@+1 {{'train.plan' may only be set on a 'train.step' function}}
func.func private @f() attributes {train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated>}

// -----

// expected-error@+1 {{plan refers to grid @nowhere, which is not defined}}
func.func @f(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @nowhere, optimizer_states = replicated, gradients = replicated, parameters = replicated>} {
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{'train.partitioned' is a unit attribute of a function with a 'train.plan'}}
func.func private @f() attributes {train.partitioned}

// -----

// expected-error@+1 {{unknown attribute 'train.stepp' of the train dialect on an operation}}
func.func private @f() attributes {train.stepp}

// -----

// expected-error@+1 {{argument #0: 'train.role' must be a #train.role attribute}}
func.func private @f(tensor<2xf32> {train.role = "param"})

// -----

// expected-error@+1 {{argument #0 has role 'loss'; arguments may have the roles param, opt_state, input, label or hyper}}
func.func private @f(tensor<f32> {train.role = #train.role<loss>})

// -----

// expected-error@+1 {{result #0 has role 'input'; results may have the roles param, opt_state or loss}}
func.func private @f() -> (tensor<2xf32> {train.role = #train.role<input>})

// -----

// expected-error@+1 {{argument #0: 'train.name' must be a string}}
func.func private @f(tensor<2xf32> {train.name = 3 : i32})

// -----

// expected-error@+1 {{argument #0 has the name "fc 1"; names are made of letters, digits, '_' and '.', and do not start with '.'}}
func.func private @f(tensor<2xf32> {train.name = "fc 1"})

// -----

// expected-error@+1 {{result #0: results take no 'train.init'}}
func.func private @f() -> (tensor<2xf32> {train.init = #train.init<zeros>})

// -----

// expected-error@+1 {{argument #0: 'train.init' must be a #train.init attribute}}
func.func private @f(tensor<2xf32> {train.init = 0.0 : f32})

// -----

// expected-error@+1 {{argument #0 has the unknown attribute 'train.rol'; the train dialect defines train.role, train.name and train.init}}
func.func private @f(tensor<2xf32> {train.rol = #train.role<param>})

//===----------------------------------------------------------------------===//
// The step signature
//===----------------------------------------------------------------------===//

// -----

// expected-error@+1 {{argument #0 of a train.step function needs a 'train.role' attribute}}
func.func @f(%x: tensor<2xf32>) -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
  %c = train.softmax_cross_entropy %x, %x : (tensor<2xf32>, tensor<2xf32>) -> tensor<f32>
  return %c : tensor<f32>
}

// -----

// expected-error@+1 {{argument #0 of a train.step function needs a 'train.name' attribute}}
func.func private @f(tensor<2xf32> {train.role = #train.role<param>}) attributes {train.step}

// -----

// expected-error@+1 {{result #0 must be a statically shaped ranked tensor, got 'tensor<?xf32>'}}
func.func private @f() -> (tensor<?xf32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{argument #1 has the name "w" of argument #0; names must be unique}}
func.func private @f(tensor<2xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                     tensor<2xf32> {train.role = #train.role<opt_state>, train.name = "w"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{param argument "w" needs a 'train.init' attribute}}
func.func private @f(tensor<2xf32> {train.role = #train.role<param>, train.name = "w"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{input argument "x" is filled from the data and takes no 'train.init'}}
func.func private @f(tensor<2xf32> {train.role = #train.role<input>, train.name = "x", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{label argument "y" must have at least one dimension (dimension 0 is the batch), got 'tensor<i32>'}}
func.func private @f(tensor<i32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{batch arguments disagree on the batch size: "x" has 8 rows, "y" has 4}}
func.func private @f(tensor<8x2xf32> {train.role = #train.role<input>, train.name = "x"},
                     tensor<4xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{label argument "y" must hold i32 class indices, got 'tensor<4xf32>'}}
func.func private @f(tensor<4xf32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{hyper argument "lr" must be a scalar tensor<f32>, got 'tensor<1xf32>'}}
func.func private @f(tensor<1xf32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{result #1 has the name "loss" of result #0; names must be unique}}
func.func private @f() -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"},
                           tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{loss result "loss" must be a scalar tensor<f32>, got 'tensor<2xf32>'}}
func.func private @f() -> (tensor<2xf32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{param result "w" has no argument of the same name to update}}
func.func private @f() -> (tensor<2xf32> {train.role = #train.role<param>, train.name = "w"},
                           tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{opt_state result "w" updates argument #0, whose role is param}}
func.func private @f(tensor<2xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>})
    -> (tensor<2xf32> {train.role = #train.role<opt_state>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{param result "w" has type 'tensor<3xf32>' but the argument it updates has type 'tensor<2xf32>'}}
func.func private @f(tensor<2xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{a train.step function returns exactly one loss result, found 0}}
func.func private @f(tensor<2xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>})
    -> (tensor<2xf32> {train.role = #train.role<param>, train.name = "w"}) attributes {train.step}

// -----

// expected-error@+1 {{a train.step function returns exactly one loss result, found 2}}
func.func private @f() -> (tensor<f32> {train.role = #train.role<loss>, train.name = "a"},
                           tensor<f32> {train.role = #train.role<loss>, train.name = "b"}) attributes {train.step}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

// -----

func.func @f(%x: tensor<8x12xf32>, %w: tensor<4x16xf32>) {
  // expected-error@+2 {{'train.linear' input feature dimension (12) must equal the weight's in_features (dimension 1 of 'tensor<4x16xf32>')}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = train.linear %x, %w : (tensor<8x12xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %w: tensor<4x16x1xf32>) {
  // expected-error@+2 {{'train.linear' weight must be 2-D [out_features, in_features], got 'tensor<4x16x1xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = train.linear %x, %w : (tensor<8x16xf32>, tensor<4x16x1xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @f(%x: tensor<f32>, %w: tensor<4x16xf32>) {
  // expected-error@+2 {{'train.linear' input must have rank >= 1, got 'tensor<f32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = train.linear %x, %w : (tensor<f32>, tensor<4x16xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %w: tensor<4x16xf32>, %b: tensor<5xf32>) {
  // expected-error@+2 {{'train.linear' bias must be 1-D with 4 (out_features) elements, got 'tensor<5xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = train.linear %x, %w, %b : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<5xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %w: tensor<4x16xf32>) {
  // expected-error@+2 {{inferred type(s) 'tensor<8x4xf32>' are incompatible with return type(s) of operation 'tensor<8x5xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = train.linear %x, %w : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x5xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf64>, %w: tensor<4x16xf64>) {
  // expected-error@+1 {{operand #0 must be ranked tensor of 32-bit float values}}
  %y = train.linear %x, %w : (tensor<8x16xf64>, tensor<4x16xf64>) -> tensor<8x4xf64>
  return
}

// -----

func.func @f(%dy: tensor<8x5xf32>, %w: tensor<4x16xf32>) {
  // expected-error@+2 {{'train.linear_grad_input' grad_output feature dimension (5) must equal the weight's out_features (dimension 0 of 'tensor<4x16xf32>')}}
  // expected-error@+1 {{failed to infer returned types}}
  %dx = train.linear_grad_input %dy, %w : (tensor<8x5xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @f(%dy: tensor<f32>, %w: tensor<4x16xf32>) {
  // expected-error@+2 {{'train.linear_grad_input' grad_output must have rank >= 1, got 'tensor<f32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %dx = train.linear_grad_input %dy, %w : (tensor<f32>, tensor<4x16xf32>) -> tensor<16xf32>
  return
}

// -----

func.func @f(%dy: tensor<8x4xf32>, %x: tensor<6x16xf32>) {
  // expected-error@+2 {{'train.linear_grad_weight' grad_output 'tensor<8x4xf32>' and input 'tensor<6x16xf32>' must have the same batch dimensions}}
  // expected-error@+1 {{failed to infer returned types}}
  %dw = train.linear_grad_weight %dy, %x : (tensor<8x4xf32>, tensor<6x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%dy: tensor<8x4xf32>, %x: tensor<f32>) {
  // expected-error@+2 {{'train.linear_grad_weight' input must have rank >= 1, got 'tensor<f32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %dw = train.linear_grad_weight %dy, %x : (tensor<8x4xf32>, tensor<f32>) -> tensor<4x1xf32>
  return
}

// -----

func.func @f(%dy: tensor<f32>) {
  // expected-error@+2 {{'train.bias_grad' grad_output must have rank >= 1, got 'tensor<f32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %db = train.bias_grad %dy : (tensor<f32>) -> tensor<1xf32>
  return
}

// -----

func.func @f(%x: tensor<8x4xf32>, %y: tensor<8x5xf32>) {
  // expected-error@+1 {{all non-scalar operands/results must have the same shape and base type}}
  %r = "train.relu"(%x) : (tensor<8x4xf32>) -> tensor<8x5xf32>
  return
}

// -----

func.func @f(%logits: tensor<8x10xf32>, %labels: tensor<4xi32>) {
  // expected-error@+2 {{'train.softmax_cross_entropy' labels 'tensor<4xi32>' must have the shape of the logits 'tensor<8x10xf32>' without its last (class) dimension}}
  // expected-error@+1 {{failed to infer returned types}}
  %l = train.softmax_cross_entropy %logits, %labels : (tensor<8x10xf32>, tensor<4xi32>) -> tensor<f32>
  return
}

// -----

func.func @f(%logits: tensor<f32>, %labels: tensor<i32>) {
  // expected-error@+2 {{'train.softmax_cross_entropy' logits must have rank >= 1, got 'tensor<f32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %l = train.softmax_cross_entropy %logits, %labels : (tensor<f32>, tensor<i32>) -> tensor<f32>
  return
}

// -----

func.func @f(%logits: tensor<8x10xf32>, %labels: tensor<8x1xi32>) {
  // expected-error@+2 {{'train.softmax_cross_entropy_grad' labels 'tensor<8x1xi32>' must have the shape of the logits 'tensor<8x10xf32>' without its last (class) dimension}}
  // expected-error@+1 {{failed to infer returned types}}
  %d = train.softmax_cross_entropy_grad %logits, %labels : (tensor<8x10xf32>, tensor<8x1xi32>) -> tensor<8x10xf32>
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %g: tensor<5xf32>, %lr: tensor<f32>) {
  // expected-error@+2 {{'train.sgd' grad type 'tensor<5xf32>' must equal the param type 'tensor<4xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %p1 = train.sgd %p, %g, %lr : (tensor<4xf32>, tensor<5xf32>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %m: tensor<2x2xf32>) {
  // expected-error@+2 {{'train.sgd' momentum buffer type 'tensor<2x2xf32>' must equal the param type 'tensor<4xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %p1, %m1 = train.sgd %p, %g, %lr, %m {momentum = 0.9 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<2x2xf32>) -> (tensor<4xf32>, tensor<2x2xf32>)
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %m: tensor<4xf32>) {
  // expected-error@+1 {{momentum must be finite and >= 0, got -0.5}}
  %p1, %m1 = train.sgd %p, %g, %lr, %m {momentum = -0.5 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error@+1 {{weight_decay must be finite and >= 0, got -1}}
  %p1 = train.sgd %p, %g, %lr {weight_decay = -1.0 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error@+1 {{momentum 0.9 needs a momentum buffer operand}}
  %p1 = train.sgd %p, %g, %lr {momentum = 0.9 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %m: tensor<4xf32>) {
  // expected-error@+1 {{has a momentum buffer but momentum is 0; drop the buffer or set a momentum}}
  %p1, %m1 = train.sgd %p, %g, %lr, %m : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error@+1 {{nesterov needs a non-zero momentum}}
  %p1 = train.sgd %p, %g, %lr {nesterov = true} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return
}
