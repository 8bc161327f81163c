// RUN: shard-opt %s -split-input-file -verify-diagnostics

// One case per diagnostic of the train dialect: attributes, the step
// signature, and the shape rules of each op.

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

// expected-error@+1 {{unknown init kind 'gaussian'; expected zeros, ones, normal, uniform, constant or load}}
func.func private @f(tensor<2xf32> {train.init = #train.init<gaussian, std = 1.0>})

// -----

// expected-error@+1 {{'normal' init takes 'std', not 'bound'}}
func.func private @f(tensor<2xf32> {train.init = #train.init<normal, bound = 1.0>})

// -----

// expected-error@+1 {{init value must be finite, got inf}}
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
func.func private @f() attributes {train.plan = #train.plan<strategy = "ddp", grid = @world, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>}

// -----

// expected-error@+1 {{plan refers to grid @nowhere, which is not defined}}
func.func @f(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "ddp", grid = @nowhere, optimizer_states = replicated, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
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

// expected-error@+1 {{result #0 has role 'input'; results may have the roles param, opt_state, grad, grad_norm_sq or loss}}
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

// expected-error@+1 {{result #0: results take no 'train.unit'}}
func.func private @f() -> (tensor<2xf32> {train.unit = "h.0"})

// -----

// expected-error@+1 {{argument #0: 'train.unit' must be a string}}
func.func private @f(tensor<2xf32> {train.unit = 0 : i64})

// -----

// expected-error@+1 {{argument #0 is in the unit ".h.0"; units are module paths made of letters, digits, '_' and '.', not starting with '.'}}
func.func private @f(tensor<2xf32> {train.unit = ".h.0"})

// -----

// expected-error@+1 {{argument #0 is in the unit ""; units are module paths}}
func.func private @f(tensor<2xf32> {train.unit = ""})

// -----

// expected-error@+1 {{result #0: results take no 'train.aliases'}}
func.func private @f() -> (tensor<2xf32> {train.aliases = ["lm_head.weight"]})

// -----

// expected-error@+1 {{argument #0: 'train.aliases' must be an array of strings}}
func.func private @f(tensor<2xf32> {train.aliases = "lm_head.weight"})

// -----

// expected-error@+1 {{argument #0: 'train.aliases' must be an array of strings}}
func.func private @f(tensor<2xf32> {train.aliases = ["lm_head.weight", 3 : i64]})

// -----

// expected-error@+1 {{argument #0: 'train.aliases' is empty; a param saved under its name alone has none}}
func.func private @f(tensor<2xf32> {train.aliases = []})

// -----

// expected-error@+1 {{argument #0 has the alias "lm head"; names are made of letters, digits, '_' and '.', and do not start with '.'}}
func.func private @f(tensor<2xf32> {train.aliases = ["lm head"]})

// -----

// expected-error@+1 {{result #0: results take no 'train.weight_decay'}}
func.func private @f() -> (tensor<2xf32> {train.weight_decay = 0.0 : f64})

// -----

// expected-error@+1 {{argument #0: 'train.weight_decay' must be a float (0.0 : f64 turns decay off for the parameter)}}
func.func private @f(tensor<2xf32> {train.weight_decay = 0 : i64})

// -----

// expected-error@+1 {{argument #0: train.weight_decay must be finite and >= 0, got -0.1}}
func.func private @f(tensor<2xf32> {train.weight_decay = -0.1 : f64})

// -----

// expected-error@+1 {{argument #0: train.weight_decay must be finite and >= 0, got inf}}
func.func private @f(tensor<2xf32> {train.weight_decay = 0x7FF0000000000000 : f64})

// -----

// expected-error@+1 {{argument #0 has the unknown attribute 'train.rol'; the train dialect defines train.role, train.name, train.init, train.unit, train.aliases, train.weight_decay, train.shard and train.memory}}
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

// expected-error@+1 {{input argument "x" has 'train.weight_decay'; only param arguments have a weight decay}}
func.func private @f(tensor<2xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>, train.weight_decay = 0.0 : f64},
                     tensor<4x2xf32> {train.role = #train.role<input>, train.name = "x", train.weight_decay = 0.0 : f64})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{opt_state argument "w.exp_avg" has 'train.unit' "h.0"; only param arguments belong to a unit}}
func.func private @f(tensor<2xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>, train.unit = "h.0"},
                     tensor<2xf32> {train.role = #train.role<opt_state>, train.name = "w.exp_avg", train.unit = "h.0"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{opt_state argument "w.exp_avg" has 'train.aliases'; only param arguments are saved under aliases}}
func.func private @f(tensor<2xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                     tensor<2xf32> {train.role = #train.role<opt_state>, train.name = "w.exp_avg", train.aliases = ["m"]})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{param argument "wte" has its own name as an alias}}
func.func private @f(tensor<2xf32> {train.role = #train.role<param>, train.name = "wte", train.init = #train.init<zeros>, train.aliases = ["wte"]})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// An alias may not name another argument, of any role, wherever it is.
// expected-error@+1 {{param argument "wte" has the alias "lm_head", the name of argument #2; each name in a parameter file stands for one tensor}}
func.func private @f(tensor<2xf32> {train.role = #train.role<param>, train.name = "wte", train.init = #train.init<zeros>, train.aliases = ["head", "lm_head"]},
                     tensor<2xf32> {train.role = #train.role<param>, train.name = "wpe", train.init = #train.init<zeros>},
                     tensor<2xf32> {train.role = #train.role<opt_state>, train.name = "lm_head"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{param argument "wte" lists the alias "lm_head" twice}}
func.func private @f(tensor<2xf32> {train.role = #train.role<param>, train.name = "wte", train.init = #train.init<zeros>, train.aliases = ["lm_head", "lm_head"]})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{param argument "wpe" has the alias "lm_head" of param argument "wte"; each name in a parameter file stands for one tensor}}
func.func private @f(tensor<2xf32> {train.role = #train.role<param>, train.name = "wte", train.init = #train.init<zeros>, train.aliases = ["lm_head"]},
                     tensor<2xf32> {train.role = #train.role<param>, train.name = "wpe", train.init = #train.init<zeros>, train.aliases = ["lm_head"]})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{hyper argument "lr" has #train.init<load>, but parameter files hold only params and opt_states; give it a value, such as #train.init<constant, value = ...>}}
func.func private @f(tensor<f32> {train.role = #train.role<hyper>, train.name = "lr", train.init = #train.init<load>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{'load' init takes no value}}
func.func private @f(tensor<2xf32> {train.init = #train.init<load, value = 1.0>})

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

// -----

// expected-error@+1 {{grad_norm_sq result "n" must be a scalar tensor<f32>, got 'tensor<2xf32>'}}
func.func private @f() -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"},
                           tensor<2xf32> {train.role = #train.role<grad_norm_sq>, train.name = "n"}) attributes {train.step}

// -----

// expected-error@+1 {{a train.step function returns at most one grad_norm_sq result, found 2}}
func.func private @f() -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"},
                           tensor<f32> {train.role = #train.role<grad_norm_sq>, train.name = "a"},
                           tensor<f32> {train.role = #train.role<grad_norm_sq>, train.name = "b"}) attributes {train.step}

// -----

// A step whose optimizer autodiff adds returns its loss alone.
// expected-error@+1 {{grad_norm_sq result "n": a step with a 'train.optimizer' returns only its loss; autoshard-autodiff adds the updates}}
func.func private @f() -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"},
                           tensor<f32> {train.role = #train.role<grad_norm_sq>, train.name = "n"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1>}

// -----

// expected-error@+1 {{argument #0 has role 'grad_norm_sq'}}
func.func private @f(tensor<f32> {train.role = #train.role<grad_norm_sq>, train.name = "n"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

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
  // expected-error@+1 {{operand #0 must be ranked tensor of 32-bit float or bfloat16 type values, but got 'tensor<8x16xf64>'}}
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

func.func @f(%x: tensor<8x4xf32>) {
  // expected-error@+1 {{all non-scalar operands/results must have the same shape and base type}}
  %r = "train.gelu"(%x) : (tensor<8x4xf32>) -> tensor<8x5xf32>
  return
}

// -----

func.func @f(%dy: tensor<8x4xf32>, %x: tensor<8x5xf32>) {
  // expected-error@+1 {{all non-scalar operands/results must have the same shape and base type}}
  %r = "train.relu_grad"(%dy, %x) : (tensor<8x4xf32>, tensor<8x5xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @f(%dy: tensor<8x4xf32>, %x: tensor<8x4xbf16>) {
  // expected-error@+1 {{'train.gelu_grad' op requires the same type for all operands and results}}
  %r = "train.gelu_grad"(%dy, %x) : (tensor<8x4xf32>, tensor<8x4xbf16>) -> tensor<8x4xf32>
  return
}

// -----

func.func @f(%g: tensor<8x32xf32>, %u: tensor<8x16xf32>) {
  // expected-error@+1 {{all non-scalar operands/results must have the same shape and base type}}
  %r = "train.swiglu"(%g, %u) : (tensor<8x32xf32>, tensor<8x16xf32>) -> tensor<8x32xf32>
  return
}

// -----

func.func @f(%dy: tensor<8x32xf32>, %g: tensor<8x32xf32>, %u: tensor<8x32xf32>) {
  // expected-error@+1 {{all non-scalar operands/results must have the same shape and base type}}
  %dg, %du = "train.swiglu_grad"(%dy, %g, %u) : (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) -> (tensor<8x32xf32>, tensor<8x16xf32>)
  return
}

// -----

func.func @f(%t: tensor<f32>) {
  // expected-error@+1 {{'train.increment' op operand #0 must be 0D tensor of 32-bit signless integer values, but got 'tensor<f32>'}}
  %r = "train.increment"(%t) : (tensor<f32>) -> tensor<f32>
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

func.func @f(%logits: tensor<8x10xf32>, %labels: tensor<8xi32>) {
  // expected-error@+1 {{'train.softmax_cross_entropy' op has ignore_index = 2147483648, which no i32 label can equal; it must lie in [-2147483648, 2147483647] (torch's is -100)}}
  %l = train.softmax_cross_entropy %logits, %labels {ignore_index = 2147483648 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return
}

// -----

func.func @f(%logits: tensor<8x10xf32>, %labels: tensor<8xi32>) {
  // expected-error@+1 {{'train.softmax_cross_entropy_grad' op has ignore_index = -2147483649, which no i32 label can equal}}
  %d = train.softmax_cross_entropy_grad %logits, %labels {ignore_index = -2147483649 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<8x10xf32>
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

func.func @f(%logp: tensor<8x10xf32>, %labels: tensor<10xi32>) {
  // expected-error@+2 {{'train.nll_loss' labels 'tensor<10xi32>' must have the shape of the input 'tensor<8x10xf32>' without its last (class) dimension}}
  // expected-error@+1 {{failed to infer returned types}}
  %l = train.nll_loss %logp, %labels : (tensor<8x10xf32>, tensor<10xi32>) -> tensor<f32>
  return
}

// -----

func.func @f(%logp: tensor<f32>, %labels: tensor<i32>) {
  // expected-error@+2 {{'train.nll_loss' input must have rank >= 1, got 'tensor<f32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %l = train.nll_loss %logp, %labels : (tensor<f32>, tensor<i32>) -> tensor<f32>
  return
}

// -----

func.func @f(%logp: tensor<8x10xf32>, %labels: tensor<8xi32>) {
  // expected-error@+1 {{'train.nll_loss' op has ignore_index = 2147483648, which no i32 label can equal}}
  %l = train.nll_loss %logp, %labels {ignore_index = 2147483648 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return
}

// -----

func.func @f(%logp: tensor<8x10xf32>, %labels: tensor<8xf32>) {
  // expected-error@+1 {{'train.nll_loss' op operand #1 must be ranked tensor of 32-bit signless integer values, but got 'tensor<8xf32>'}}
  %l = train.nll_loss %logp, %labels : (tensor<8x10xf32>, tensor<8xf32>) -> tensor<f32>
  return
}

// -----

func.func @f(%logp: tensor<8x10xf32>, %labels: tensor<8xi32>) {
  // expected-error@+1 {{'train.nll_loss_grad' op has ignore_index = -2147483649, which no i32 label can equal}}
  %d = train.nll_loss_grad %logp, %labels {ignore_index = -2147483649 : i64} : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<8x10xf32>
  return
}

// -----

func.func @f(%logp: tensor<8x10xf32>, %labels: tensor<8x1xi32>) {
  // expected-error@+2 {{'train.nll_loss_grad' labels 'tensor<8x1xi32>' must have the shape of the input 'tensor<8x10xf32>' without its last (class) dimension}}
  // expected-error@+1 {{failed to infer returned types}}
  %d = train.nll_loss_grad %logp, %labels : (tensor<8x10xf32>, tensor<8x1xi32>) -> tensor<8x10xf32>
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %g: tensor<5xf32>, %lr: tensor<f32>) {
  // expected-error@+2 {{'train.sgd' grad type 'tensor<5xf32>' must have the param's shape 'tensor<4xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %p1 = train.sgd %p, %g, %lr : (tensor<4xf32>, tensor<5xf32>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %m: tensor<2x2xf32>) {
  // expected-error@+2 {{'train.sgd' momentum buffer type 'tensor<2x2xf32>' must equal the param type 'tensor<4xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %p1, %m1 = train.sgd %p, %g, %lr momentum_buffer %m {momentum = 0.9 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<2x2xf32>) -> (tensor<4xf32>, tensor<2x2xf32>)
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %m: tensor<4xf32>) {
  // expected-error@+1 {{momentum must be finite and >= 0, got -0.5}}
  %p1, %m1 = train.sgd %p, %g, %lr momentum_buffer %m {momentum = -0.5 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
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
  %p1, %m1 = train.sgd %p, %g, %lr momentum_buffer %m : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error@+1 {{nesterov needs a non-zero momentum}}
  %p1 = train.sgd %p, %g, %lr {nesterov = true} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return
}

//===----------------------------------------------------------------------===//
// Transformer ops
//===----------------------------------------------------------------------===//

// -----

func.func @f(%x: tensor<8x16xf32>, %w: tensor<4x16xbf16>) {
  // expected-error@+2 {{'train.linear' operands must share one element type, got 'f32' and 'bf16'}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = train.linear %x, %w : (tensor<8x16xf32>, tensor<4x16xbf16>) -> tensor<8x4xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>) {
  // expected-error@+1 {{casts 'f32' to itself; drop the cast}}
  %y = train.cast %x : tensor<8x16xf32> to tensor<8x16xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>) {
  // expected-error@+1 {{cannot view 128 elements ('tensor<8x16xf32>') as 120 ('tensor<8x15xf32>')}}
  %y = train.reshape %x : tensor<8x16xf32> to tensor<8x15xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>) {
  // expected-error@+1 {{changes the element type from 'f32' to 'bf16'; use train.cast}}
  %y = train.reshape %x : tensor<8x16xf32> to tensor<128xbf16>
  return
}

// -----

func.func @f(%ids: tensor<2x8xi32>, %t: tensor<64xf32>) {
  // expected-error@+2 {{'train.embedding' table must be 2-D [num_embeddings, dim], got 'tensor<64xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %x = train.embedding %ids, %t : (tensor<2x8xi32>, tensor<64xf32>) -> tensor<2x8x1xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x4x16xf32>, %ids: tensor<2x8xi32>) {
  // expected-error@+2 {{'train.embedding_grad' grad_output 'tensor<2x4x16xf32>' must have the shape of the ids 'tensor<2x8xi32>' with one more (feature) dimension}}
  // expected-error@+1 {{failed to infer returned types}}
  %d = train.embedding_grad %dy, %ids {num_embeddings = 64 : i64} : (tensor<2x4x16xf32>, tensor<2x8xi32>) -> tensor<64x16xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x16xf32>, %wpe: tensor<4x16xf32>) {
  // expected-error@+2 {{'train.add_position_embedding' sequence length 8 exceeds the table's 4 positions}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = train.add_position_embedding %x, %wpe : (tensor<2x8x16xf32>, tensor<4x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x16xf32>, %wpe: tensor<32x8xf32>) {
  // expected-error@+2 {{'train.add_position_embedding' table 'tensor<32x8xf32>' must have the input's dimension 16}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = train.add_position_embedding %x, %wpe : (tensor<2x8x16xf32>, tensor<32x8xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @f(%x: tensor<16x16xf32>, %wpe: tensor<32x16xf32>) {
  // expected-error@+2 {{'train.add_position_embedding' input must be 3-D [batch, seq, dim], got 'tensor<16x16xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = train.add_position_embedding %x, %wpe : (tensor<16x16xf32>, tensor<32x16xf32>) -> tensor<16x16xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x8x16xf32>) {
  // expected-error@+2 {{'train.add_position_embedding_grad' sequence length 8 exceeds 4 positions}}
  // expected-error@+1 {{failed to infer returned types}}
  %d = train.add_position_embedding_grad %dy {max_positions = 4 : i64} : (tensor<2x8x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x16xf32>, %g: tensor<8xf32>, %b: tensor<16xf32>) {
  // expected-error@+2 {{'train.layer_norm' gamma must be 1-D with 16 elements (the last dimension of the input), got 'tensor<8xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = train.layer_norm %x, %g, %b : (tensor<2x8x16xf32>, tensor<8xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x8x8xf32>, %x: tensor<2x8x16xf32>, %g: tensor<16xf32>) {
  // expected-error@+2 {{'train.layer_norm_grad' grad_output 'tensor<2x8x8xf32>' must have the input's type 'tensor<2x8x16xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %dx, %dg, %db = train.layer_norm_grad %dy, %x, %g : (tensor<2x8x8xf32>, tensor<2x8x16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x8x16xf32>, %w: tensor<16x1xf32>) {
  // expected-error@+2 {{'train.rms_norm' weight must be 1-D with 16 elements (the last dimension of the input), got 'tensor<16x1xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = train.rms_norm %x, %w : (tensor<2x8x16xf32>, tensor<16x1xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x8x16xbf16>, %x: tensor<2x8x16xf32>, %w: tensor<16xf32>) {
  // expected-error@+2 {{'train.rms_norm_grad' grad_output 'tensor<2x8x16xbf16>' must have the input's type 'tensor<2x8x16xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %dx, %dw = train.rms_norm_grad %dy, %x, %w : (tensor<2x8x16xbf16>, tensor<2x8x16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x8x4x5xf32>) {
  // expected-error@+1 {{head_dim 5 must be even: rope rotates pairs}}
  %y = train.rope %x : tensor<2x8x4x5xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x20xf32>) {
  // expected-error@+1 {{input must be 4-D [batch, seq, heads, head_dim], got 'tensor<2x8x20xf32>'}}
  %y = train.rope_grad %x : tensor<2x8x20xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x4xf32>, %k: tensor<2x8x3x4xf32>) {
  // expected-error@+2 {{'train.causal_attention' 4 query heads cannot share 3 key/value heads evenly}}
  // expected-error@+1 {{failed to infer returned types}}
  %o, %l = train.causal_attention %q, %k, %k : (tensor<2x8x4x4xf32>, tensor<2x8x3x4xf32>, tensor<2x8x3x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @f(%q: tensor<2x8x4x4xf32>, %k: tensor<2x6x4x4xf32>) {
  // expected-error@+2 {{'train.causal_attention' query 'tensor<2x8x4x4xf32>' and key 'tensor<2x6x4x4xf32>' must agree on batch, sequence, head_dim and element type}}
  // expected-error@+1 {{failed to infer returned types}}
  %o, %l = train.causal_attention %q, %k, %k : (tensor<2x8x4x4xf32>, tensor<2x6x4x4xf32>, tensor<2x6x4x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @f(%q: tensor<2x8x4x4xf32>, %k: tensor<2x8x2x4xf32>, %v: tensor<2x8x1x4xf32>) {
  // expected-error@+2 {{'train.causal_attention' key 'tensor<2x8x2x4xf32>' and value 'tensor<2x8x1x4xf32>' must have the same type}}
  // expected-error@+1 {{failed to infer returned types}}
  %o, %l = train.causal_attention %q, %k, %v : (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x1x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @f(%q: tensor<2x8x4xf32>) {
  // expected-error@+2 {{'train.causal_attention' query must be 4-D [batch, seq, heads, head_dim], got 'tensor<2x8x4xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %o, %l = train.causal_attention %q, %q, %q : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @f(%do: tensor<2x8x4x4xf32>, %q: tensor<2x8x4x4xf32>, %k: tensor<2x8x2x4xf32>, %o: tensor<2x8x4x4xf32>, %l: tensor<2x8x4xf32>) {
  // expected-error@+2 {{'train.causal_attention_grad' logsumexp must be 'tensor<2x4x8xf32>', got 'tensor<2x8x4xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %dq, %dk, %dv = train.causal_attention_grad %do, %q, %k, %k, %o, %l : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>)
  return
}

// -----

func.func @f(%do: tensor<2x8x4x4xbf16>, %q: tensor<2x8x4x4xf32>, %k: tensor<2x8x2x4xf32>, %o: tensor<2x8x4x4xf32>, %l: tensor<2x4x8xf32>) {
  // expected-error@+2 {{'train.causal_attention_grad' grad_output and result must have the query's type 'tensor<2x8x4x4xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %dq, %dk, %dv = train.causal_attention_grad %do, %q, %k, %k, %o, %l : (tensor<2x8x4x4xbf16>, tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x4x4xf32>, tensor<2x4x8xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>)
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %g: tensor<4xbf16>, %m: tensor<4xf32>, %v: tensor<3xf32>, %lr: tensor<f32>, %t: tensor<i32>) {
  // expected-error@+2 {{'train.adamw' exp_avg_sq type 'tensor<3xf32>' must equal the param type 'tensor<4xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %p1, %m1, %v1 = train.adamw %p, %g, %m, %v, %lr, %t : (tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>, tensor<3xf32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<i32>) {
  // expected-error@+1 {{'train.adamw' op beta2 must lie in [0, 1), got 1}}
  %p1, %m1, %v1 = train.adamw %p, %g, %p, %p, %lr, %t {beta2 = 1.0 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<i32>) {
  // expected-error@+1 {{eps must be finite and > 0, got 0}}
  %p1, %m1, %v1 = train.adamw %p, %g, %p, %p, %lr, %t {eps = 0.0 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<i32>) {
  // expected-error@+1 {{weight_decay must be finite and >= 0, got -0.1}}
  %p1, %m1, %v1 = train.adamw %p, %g, %p, %p, %lr, %t {weight_decay = -0.1 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @f() {
  // expected-error@+1 {{needs at least one input}}
  %s = "train.sum_of_squares"() : () -> tensor<f32>
  return
}

// -----

func.func @f(%s: tensor<f32>) {
  // expected-error@+1 {{max_norm must be finite and > 0, got 0}}
  %c = train.clip_coefficient %s {max_norm = 0.0 : f32} : tensor<f32>
  return
}

//===----------------------------------------------------------------------===//
// Optimizer configurations for autodiff
//===----------------------------------------------------------------------===//

// -----

// expected-error@+1 {{'train.optimizer' must be #train.adamw<...> or #train.sgd<...>}}
func.func private @f() attributes {train.step, train.optimizer = "adam"}

// -----

// expected-error@+1 {{'train.optimizer' may only be set on a 'train.step' function}}
func.func private @f() attributes {train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>}

// -----

// expected-error@+1 {{struct is missing required parameter: lr}}
func.func private @f() attributes {train.step, train.optimizer = #train.adamw<beta1 = 0.9>}

// -----

// expected-error@+1 {{lr must be finite and > 0, got -0.1}}
func.func private @f() attributes {train.optimizer = #train.sgd<lr = -0.1, momentum = 0.0, weight_decay = 0.0>}

// -----

// expected-error@+1 {{momentum must be finite and >= 0, got -1}}
func.func private @f() attributes {train.optimizer = #train.sgd<lr = 0.1, momentum = -1.0, weight_decay = 0.0>}

// -----

// expected-error@+1 {{weight_decay must be finite and >= 0, got -1}}
func.func private @f() attributes {train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = -1.0>}

// -----

// expected-error@+1 {{beta1 must lie in [0, 1), got 1.5}}
func.func private @f() attributes {train.optimizer = #train.adamw<lr = 1.0e-3, beta1 = 1.5, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.1>}

// -----

// expected-error@+1 {{eps must be finite and > 0, got 0}}
func.func private @f() attributes {train.optimizer = #train.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.95, eps = 0.0, weight_decay = 0.1>}

// -----

// expected-error@+1 {{'train.max_grad_norm' must be finite and > 0, got -1}}
func.func private @f() attributes {train.step, train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>, train.max_grad_norm = -1.0 : f32}

// -----

// expected-error@+1 {{'train.max_grad_norm' must be a finite float > 0}}
func.func private @f() attributes {train.step, train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>, train.max_grad_norm = 1 : i64}

// -----

// expected-error@+1 {{'train.max_grad_norm' clips the gradients of a step with a 'train.optimizer'}}
func.func private @f() attributes {train.step, train.max_grad_norm = 1.0 : f32}

// -----

// expected-error@+1 {{param result "w": a step with a 'train.optimizer' returns only its loss; autoshard-autodiff adds the updates}}
func.func private @f(tensor<2xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>})
    -> (tensor<2xf32> {train.role = #train.role<param>, train.name = "w"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>}

// -----

// expected-error@+1 {{grad result "w.gradient" must be named <param>.grad after a param argument}}
func.func private @f(tensor<2xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>})
    -> (tensor<2xf32> {train.role = #train.role<grad>, train.name = "w.gradient"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

// expected-error@+1 {{grad result "w.grad" has type 'tensor<3xf32>' but its param has type 'tensor<2xf32>'}}
func.func private @f(tensor<2xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>})
    -> (tensor<3xf32> {train.role = #train.role<grad>, train.name = "w.grad"},
        tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step}

// -----

func.func @f(%x: tensor<8x64xi32>) {
  // expected-error@+1 {{rows [6, 10) lie outside the input's 8 rows}}
  %mb = train.slice_rows %x {offset = 6 : i64} : tensor<8x64xi32> to tensor<4x64xi32>
  return
}

// -----

func.func @f(%x: tensor<8x64xi32>) {
  // expected-error@+1 {{result 'tensor<4x32xi32>' must be a block of whole rows of 'tensor<8x64xi32>'}}
  %mb = train.slice_rows %x {offset = 0 : i64} : tensor<8x64xi32> to tensor<4x32xi32>
  return
}

// -----

func.func @f(%x: tensor<f32>) {
  // expected-error@+1 {{'train.scale' op factor must be finite, got inf}}
  %y = train.scale %x {factor = 0x7F800000 : f32} : tensor<f32>
  return
}

// -----

// expected-error@+1 {{'train.micro_batches' must be an integer >= 1}}
func.func private @f() attributes {train.step, train.micro_batches = 0 : i64, train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>}

// -----

// expected-error@+1 {{'train.micro_batches' accumulates the gradients of a step with a 'train.optimizer'}}
func.func private @f() attributes {train.step, train.micro_batches = 2 : i64}

//===----------------------------------------------------------------------===//
// Plans and flat shards
//===----------------------------------------------------------------------===//

// -----

shard.grid @world(shape = 2)
// expected-error@+1 {{sharded gradients need sharded optimizer states}}
func.func private @f() attributes {train.step, train.plan = #train.plan<strategy = "x", grid = @world, optimizer_states = replicated, gradients = sharded, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>}

// -----

shard.grid @world(shape = 2)
// expected-error@+1 {{sharded parameters need sharded gradients}}
func.func private @f() attributes {train.step, train.plan = #train.plan<strategy = "x", grid = @world, optimizer_states = sharded, gradients = replicated, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>}

// -----

shard.grid @world(shape = 2x2)
// expected-error@+1 {{shard_axes must be distinct, ascending grid axes}}
func.func private @f() attributes {train.step, train.plan = #train.plan<strategy = "x", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [1, 0], unit = param, reshard = after_forward, bucket_cap_mb = 25>}

// -----

shard.grid @world(shape = 2)
// expected-error@+1 {{bucket_cap_mb must be at least 1, got 0}}
func.func private @f() attributes {train.step, train.plan = #train.plan<strategy = "x", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 0>}

// -----

shard.grid @world(shape = 2)
// expected-error@+1 {{plan shards over axis 1 of @world, which has 1 axis}}
func.func private @f() attributes {train.step, train.plan = #train.plan<strategy = "x", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [1], unit = param, reshard = after_forward, bucket_cap_mb = 25>}

// -----

// expected-error@+1 {{argument #0: 'train.shard' must be a #train.flat_shard attribute}}
func.func private @f(tensor<2xf32> {train.shard = [4, 5]})

// -----

shard.grid @world(shape = 2)
func.func @f(%x: tensor<3x5xf32>) {
  // expected-error@+1 {{a flat shard of 'tensor<3x5xf32>' over 2 ranks is 'tensor<8xf32>', got 'tensor<7xf32>'}}
  %s = train.shard_of %x on @world grid_axes = [0] : tensor<3x5xf32> -> tensor<7xf32>
  return
}

// -----

shard.grid @world(shape = 4)
func.func @f(%s: tensor<4xf32>) {
  // expected-error@+1 {{a flat shard of 'tensor<3x5xbf16>' over 4 ranks is 'tensor<4xbf16>', got 'tensor<4xf32>'}}
  %x = train.all_gather_shards %s on @world grid_axes = [0] : tensor<4xf32> -> tensor<3x5xbf16>
  return
}

// -----

shard.grid @world(shape = 2)
func.func @f(%x: tensor<3x5xf32>) {
  // expected-error@+1 {{grid axis 1 is not an axis of world (rank 1)}}
  %s = train.reduce_scatter_shards %x on @world grid_axes = [1] reduction = average : tensor<3x5xf32> -> tensor<8xf32>
  return
}

// -----

shard.grid @world(shape = ?)
func.func @f(%x: tensor<3x5xf32>) {
  // expected-error@+1 {{grid axis 0 of world is dynamic}}
  %s = train.shard_of %x on @world grid_axes = [0] : tensor<3x5xf32> -> tensor<8xf32>
  return
}

// -----

shard.grid @world(shape = 2)
func.func @f(%x: tensor<3x5xf32>) {
  // expected-error@+1 {{needs at least one grid axis}}
  %s = train.shard_of %x on @world grid_axes = [] : tensor<3x5xf32> -> tensor<15xf32>
  return
}

// -----

func.func private @grid()
func.func @f(%x: tensor<3x5xf32>) {
  // expected-error@+1 {{refers to @grid, which is not a shard.grid}}
  %s = train.shard_of %x on @grid grid_axes = [0] : tensor<3x5xf32> -> tensor<8xf32>
  return
}

// -----

shard.grid @world(shape = 2)
func.func @f(%a: tensor<4xf32>, %b: tensor<2xbf16>) {
  // expected-error@+1 {{operand #1 has element type 'bf16' but operand #0 has 'f32'; one collective moves one element type}}
  %x, %y = train.all_reduce_bucket %a, %b on @world grid_axes = [0] reduction = sum : tensor<4xf32>, tensor<2xbf16> -> tensor<4xf32>, tensor<2xbf16>
  return
}

// -----

shard.grid @world(shape = 2)
func.func @f(%a: tensor<4xf32>) {
  // expected-error@+1 {{needs at least one operand and a result of each operand's type}}
  %x = train.all_reduce_bucket %a on @world grid_axes = [0] reduction = sum : tensor<4xf32> -> tensor<2xf32>
  return
}

// -----

shard.grid @world(shape = 2)
func.func @f(%a: tensor<4xf32>, %b: tensor<2xbf16>) {
  // expected-error@+1 {{operand #1 has element type 'bf16' but operand #0 has 'f32'; one collective moves one element type}}
  %x, %y = train.reduce_scatter_shards %a, %b on @world grid_axes = [0] reduction = sum : tensor<4xf32>, tensor<2xbf16> -> tensor<2xf32>, tensor<1xbf16>
  return
}

// -----

shard.grid @world(shape = 2)
func.func @f(%a: tensor<2xf32>) {
  // expected-error@+1 {{needs one result per operand, and at least one of each; got 1 and 2}}
  %x, %y = train.all_gather_shards %a on @world grid_axes = [0] : tensor<2xf32> -> tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// expected-error@+1 {{param_group names "h.(" is not a valid regular expression}}
func.func private @f() attributes {p = #train.param_group<names = "h.(", optimizer_states = sharded, gradients = sharded, parameters = sharded, unit = param>}

// -----

// expected-error@+1 {{param_group max_elements must be at least 0 (0: any size), got -5}}
func.func private @f() attributes {p = #train.param_group<max_elements = -5, optimizer_states = sharded, gradients = sharded, parameters = sharded, unit = param>}

// -----

// expected-error@+1 {{sharded parameters need sharded gradients}}
func.func private @f() attributes {p = #train.param_group<names = "w", optimizer_states = sharded, gradients = replicated, parameters = sharded, unit = param>}

// -----

// expected-error@+1 {{shard_axes must be distinct, ascending grid axes}}
func.func private @f() attributes {p = #train.param_group<names = "w", optimizer_states = sharded, gradients = sharded, parameters = sharded, unit = param, shard_axes = [1, 0]>}

// -----

shard.grid @world(shape = 2)
// expected-error@+1 {{plan shards over axis 1 of @world, which has 1 axis}}
func.func private @f() attributes {train.step, train.plan = #train.plan<strategy = "x", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25, groups = [<names = "w", optimizer_states = sharded, gradients = sharded, parameters = sharded, unit = param, shard_axes = [1]>]>}

// -----

// expected-error@+1 {{expected 'reduce_dtype', 'reduce_every', 'keep_gathered' or 'groups' (each at most once), got 'reduce'}}
func.func private @f() attributes {p = #train.plan<strategy = "x", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25, reduce = f32>}

// -----

// expected-error@+1 {{unknown reduce_dtype 'f16'; valid: gradient, f32}}
func.func private @f() attributes {p = #train.plan<strategy = "x", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25, reduce_dtype = f16>}

// -----

// expected-error@+1 {{unknown reduce_every 'layer'; valid: step, micro_batch}}
func.func private @f() attributes {p = #train.plan<strategy = "x", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25, reduce_every = layer>}

// -----

// expected-error@+1 {{plan keep_gathered "(" is not a valid regular expression: parentheses not balanced}}
func.func private @f() attributes {p = #train.plan<strategy = "x", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25, keep_gathered = "(">}

// -----

// expected-error@+1 {{expected string}}
func.func private @f() attributes {p = #train.plan<strategy = "x", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25, keep_gathered = lm_head>}

// -----

// expected-error@+1 {{expected 'reduce_dtype', 'reduce_every', 'keep_gathered' or 'groups' (each at most once), got 'reduce_every'}}
func.func private @f() attributes {p = #train.plan<strategy = "x", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25, reduce_every = micro_batch, reduce_every = step>}

// -----

// expected-error@+1 {{reduce_every = micro_batch reduce-scatters sharded gradients every micro-batch, but this plan shards no gradients; use a plan with sharded gradients (zero2, zero3, fsdp, hybrid) or reduce_every = step}}
func.func private @f() attributes {p = #train.plan<strategy = "x", grid = @world, optimizer_states = sharded, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25, reduce_every = micro_batch>}

// -----

shard.grid @world(shape = 2)
func.func @f(%s: tensor<2xf32>) {
  // expected-error@+1 {{all_gather_shards takes no reduction}}
  %h = train.collective_start all_gather_shards %s on @world grid_axes = [0] reduction = sum : tensor<2xf32> -> !train.pending<tensor<4xf32>>
  %w = train.collective_wait %h : !train.pending<tensor<4xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
func.func @f(%s: tensor<4xf32>) {
  // expected-error@+1 {{reduce_scatter_shards needs a reduction}}
  %h = train.collective_start reduce_scatter_shards %s on @world grid_axes = [0] : tensor<4xf32> -> !train.pending<tensor<2xf32>>
  %w = train.collective_wait %h : !train.pending<tensor<2xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
func.func @f(%s: tensor<4xf32>) {
  // expected-error@+1 {{needs exactly one train.collective_wait of its handle}}
  %h = train.collective_start all_reduce %s on @world grid_axes = [0] reduction = sum : tensor<4xf32> -> !train.pending<tensor<4xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
func.func @f(%s: tensor<4xf32>) {
  // expected-error@+1 {{needs at least one operand and one pending result per operand; got 1 and 2}}
  %h = train.collective_start all_reduce %s on @world grid_axes = [0] reduction = sum : tensor<4xf32> -> !train.pending<tensor<4xf32>, tensor<4xf32>>
  %a, %b = train.collective_wait %h : !train.pending<tensor<4xf32>, tensor<4xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
func.func @f(%s: tensor<4xf32>) {
  // expected-error@+1 {{all_reduce yields its operands' types; got 'tensor<2xf32>' for 'tensor<4xf32>'}}
  %h = train.collective_start all_reduce %s on @world grid_axes = [0] reduction = sum : tensor<4xf32> -> !train.pending<tensor<2xf32>>
  %w = train.collective_wait %h : !train.pending<tensor<2xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
func.func @f(%s: tensor<3xf32>) {
  // expected-error@+1 {{a flat shard of 'tensor<3xf32>' over 2 ranks is 'tensor<2xf32>', got 'tensor<3xf32>'}}
  %h = train.collective_start all_gather_shards %s on @world grid_axes = [0] : tensor<3xf32> -> !train.pending<tensor<3xf32>>
  %w = train.collective_wait %h : !train.pending<tensor<3xf32>>
  return
}

// -----

func.func @f(%h: !train.pending<tensor<4xf32>>) {
  // expected-error@+1 {{waits a handle that no train.collective_start returned}}
  %w = train.collective_wait %h : !train.pending<tensor<4xf32>>
  return
}

//===----------------------------------------------------------------------===//
// Float attributes: finite (a NaN or infinity used to pass the verifier
// and poison the step at run time), and in the range the op needs
//===----------------------------------------------------------------------===//

// -----

func.func @f(%x: tensor<2x8x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>) {
  // expected-error@+1 {{'train.layer_norm' op epsilon must be finite and > 0, got 0}}
  %y = train.layer_norm %x, %g, %b {epsilon = 0.0 : f32} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x8x16xf32>, %x: tensor<2x8x16xf32>, %g: tensor<16xf32>) {
  // expected-error@+1 {{'train.layer_norm_grad' op epsilon must be finite and > 0, got nan}}
  %dx, %dg, %db = train.layer_norm_grad %dy, %x, %g {epsilon = 0x7FC00000 : f32} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x8x16xf32>, %w: tensor<16xf32>) {
  // expected-error@+1 {{'train.rms_norm' op epsilon must be finite and > 0, got -1e-05}}
  %y = train.rms_norm %x, %w {epsilon = -1.0e-5 : f32} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x8x16xf32>, %x: tensor<2x8x16xf32>, %w: tensor<16xf32>) {
  // expected-error@+1 {{'train.rms_norm_grad' op epsilon must be finite and > 0, got inf}}
  %dx, %dw = train.rms_norm_grad %dy, %x, %w {epsilon = 0x7F800000 : f32} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x8x4x4xf32>) {
  // expected-error@+1 {{'train.rope' op theta must be finite and > 0, got 0}}
  %y = train.rope %x {theta = 0.0 : f32} : tensor<2x8x4x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x4x4xf32>) {
  // expected-error@+1 {{'train.rope_grad' op theta must be finite and > 0, got nan}}
  %y = train.rope_grad %x {theta = 0x7FC00000 : f32} : tensor<2x8x4x4xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x4xf32>, %k: tensor<2x8x2x4xf32>, %v: tensor<2x8x2x4xf32>) {
  // expected-error@+1 {{'train.causal_attention' op scale must be finite, got nan}}
  %o, %lse = train.causal_attention %q, %k, %v {scale = 0x7FC00000 : f32} : (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @f(%do: tensor<2x8x4x4xf32>, %q: tensor<2x8x4x4xf32>, %k: tensor<2x8x2x4xf32>, %v: tensor<2x8x2x4xf32>, %o: tensor<2x8x4x4xf32>, %lse: tensor<2x4x8xf32>) {
  // expected-error@+1 {{'train.causal_attention_grad' op scale must be finite, got -inf}}
  %dq, %dk, %dv = train.causal_attention_grad %do, %q, %k, %v, %o, %lse {scale = 0xFF800000 : f32} : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x4x4xf32>, tensor<2x4x8xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>)
  return
}

// -----

func.func @f(%x: tensor<f32>) {
  // expected-error@+1 {{'train.scale' op factor must be finite, got nan}}
  %y = train.scale %x {factor = 0x7FC00000 : f32} : tensor<f32>
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<i32>) {
  // expected-error@+1 {{'train.adamw' op beta1 must lie in [0, 1), got nan}}
  %p1, %m1, %v1 = train.adamw %p, %g, %p, %p, %lr, %t {beta1 = 0x7FC00000 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %m: tensor<4xf32>) {
  // expected-error@+1 {{'train.sgd' op momentum must be finite and >= 0, got nan}}
  %p1, %m1 = train.sgd %p, %g, %lr momentum_buffer %m {momentum = 0x7FC00000 : f32} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @f(%s: tensor<f32>) {
  // expected-error@+1 {{'train.clip_coefficient' op max_norm must be finite and > 0, got inf}}
  %c = train.clip_coefficient %s {max_norm = 0x7F800000 : f32} : tensor<f32>
  return
}

// -----

// expected-error@+1 {{beta2 must lie in [0, 1), got 1}}
func.func private @f() attributes {train.optimizer = #train.adamw<lr = 1.0e-3, beta2 = 1.0>}

// -----

// expected-error@+1 {{lr must be finite and > 0, got nan}}
func.func private @f() attributes {train.optimizer = #train.adamw<lr = 0x7FF8000000000000 : f64>}

// -----

// The fused ops of autoshard-fuse follow the shape rules of the ops they
// stand for, under their own name.
func.func @linear_gelu_shape(%x: tensor<8x15xf32>, %w: tensor<4x16xf32>, %b: tensor<4xf32>) {
  // expected-error@+1 {{'train.linear_gelu' input feature dimension (15) must equal the weight's in_features (dimension 1 of 'tensor<4x16xf32>')}}
  %pre, %y = train.linear_gelu %x, %w, %b : (tensor<8x15xf32>, tensor<4x16xf32>, tensor<4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>)
  return
}

// -----

func.func @linear_gelu_result(%x: tensor<8x16xf32>, %w: tensor<4x16xf32>, %b: tensor<4xf32>) {
  // expected-error@+1 {{'train.linear_gelu' op result type 'tensor<8x5xf32>' must be 'tensor<8x4xf32>'}}
  %pre, %y = train.linear_gelu %x, %w, %b : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> (tensor<8x4xf32>, tensor<8x5xf32>)
  return
}

// -----

func.func @linear_grad_gelu_pre(%dy: tensor<8x16xf32>, %w: tensor<16x4xf32>, %pre: tensor<8x5xf32>) {
  // expected-error@+1 {{'train.linear_grad_gelu' op pre_activation type 'tensor<8x5xf32>' must be the input gradient's, 'tensor<8x4xf32>'}}
  %dpre = train.linear_grad_gelu %dy, %w, %pre : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<8x5xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @linear_grad_gelu_bias(%dy: tensor<8x16xf32>, %w: tensor<16x4xf32>, %pre: tensor<8x4xf32>) {
  // expected-error@+1 {{'train.linear_grad_gelu' op bias_grad type 'tensor<16xf32>' must be 'tensor<4xf32>'}}
  %dpre, %db = train.linear_grad_gelu %dy, %w, %pre : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<16xf32>)
  return
}

// -----

func.func @linear_grad_weight_bias_batch(%dy: tensor<8x4xf32>, %x: tensor<6x16xf32>) {
  // expected-error@+1 {{'train.linear_grad_weight_bias' grad_output 'tensor<8x4xf32>' and input 'tensor<6x16xf32>' must have the same batch dimensions}}
  %dw, %db = train.linear_grad_weight_bias %dy, %x : (tensor<8x4xf32>, tensor<6x16xf32>) -> (tensor<4x16xf32>, tensor<4xf32>)
  return
}

// -----

func.func @linear_grad_weight_bias_result(%dy: tensor<8x4xf32>, %x: tensor<8x16xf32>) {
  // expected-error@+1 {{'train.linear_grad_weight_bias' op weight_grad type 'tensor<16x4xf32>' must be 'tensor<4x16xf32>'}}
  %dw, %db = train.linear_grad_weight_bias %dy, %x : (tensor<8x4xf32>, tensor<8x16xf32>) -> (tensor<16x4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adamw_multi_one(%p: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<i32>) {
  // expected-error@+1 {{'train.adamw_multi' op updates 1 tensors; a multi-tensor update has at least 2 (train.adamw updates one)}}
  %r:3 = train.adamw_multi params(%p) grads(%p) exp_avgs(%p) exp_avg_sqs(%p) lr(%lr) step(%t) {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decays = array<f32: 0.0>} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adamw_multi_groups(%p: tensor<4xf32>, %q: tensor<3xf32>, %lr: tensor<f32>, %t: tensor<i32>) {
  // expected-error@+1 {{'train.adamw_multi' op has 2 params but 2 grads, 2 exp_avgs, 2 exp_avg_sqs and 1 weight_decays; every group needs one per param}}
  %r:6 = train.adamw_multi params(%p, %q) grads(%p, %q) exp_avgs(%p, %q) exp_avg_sqs(%p, %q) lr(%lr) step(%t) {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decays = array<f32: 0.0>} : (tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>)
  return
}

// -----

func.func @adamw_multi_results(%p: tensor<4xf32>, %q: tensor<3xf32>, %lr: tensor<f32>, %t: tensor<i32>) {
  // expected-error@+1 {{'train.adamw_multi' op has 2 results; 2 params need 6 (new params, exp_avgs, exp_avg_sqs)}}
  %r:2 = train.adamw_multi params(%p, %q) grads(%p, %q) exp_avgs(%p, %q) exp_avg_sqs(%p, %q) lr(%lr) step(%t) {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decays = array<f32: 0.0, 0.0>} : (tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<3xf32>)
  return
}

// -----

func.func @adamw_multi_state(%p: tensor<4xf32>, %q: tensor<3xf32>, %lr: tensor<f32>, %t: tensor<i32>) {
  // expected-error@+1 {{'train.adamw_multi' exp_avg type 'tensor<3xf32>' must equal the param type 'tensor<4xf32>'}}
  %r:6 = train.adamw_multi params(%p, %q) grads(%p, %q) exp_avgs(%q, %q) exp_avg_sqs(%p, %q) lr(%lr) step(%t) {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decays = array<f32: 0.0, 0.0>} : (tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>)
  return
}

// -----

func.func @adamw_multi_grad_shape(%p: tensor<4xf32>, %q: tensor<3xf32>, %lr: tensor<f32>, %t: tensor<i32>) {
  // expected-error@+1 {{'train.adamw_multi' grad type 'tensor<3xf32>' must have the param's shape 'tensor<4xf32>'}}
  %r:6 = train.adamw_multi params(%p, %q) grads(%q, %q) exp_avgs(%p, %q) exp_avg_sqs(%p, %q) lr(%lr) step(%t) {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decays = array<f32: 0.0, 0.0>} : (tensor<4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>)
  return
}

// -----

func.func @adamw_multi_grad_dtype(%p: tensor<4xf32>, %q: tensor<3xf32>, %gq: tensor<3xbf16>, %lr: tensor<f32>, %t: tensor<i32>) {
  // expected-error@+1 {{'train.adamw_multi' op grads must share one element type, got 'f32' and 'bf16'}}
  %r:6 = train.adamw_multi params(%p, %q) grads(%p, %gq) exp_avgs(%p, %q) exp_avg_sqs(%p, %q) lr(%lr) step(%t) {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decays = array<f32: 0.0, 0.0>} : (tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xbf16>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>)
  return
}

// -----

func.func @adamw_multi_result_type(%p: tensor<4xf32>, %q: tensor<3xf32>, %lr: tensor<f32>, %t: tensor<i32>) {
  // expected-error@+1 {{'train.adamw_multi' op result type 'tensor<3xf32>' of tensor 0 must be its param's type 'tensor<4xf32>'}}
  %r:6 = train.adamw_multi params(%p, %q) grads(%p, %q) exp_avgs(%p, %q) exp_avg_sqs(%p, %q) lr(%lr) step(%t) {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decays = array<f32: 0.0, 0.0>} : (tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<f32>, tensor<i32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>)
  return
}

// -----

func.func @adamw_multi_weight_decay(%p: tensor<4xf32>, %q: tensor<3xf32>, %lr: tensor<f32>, %t: tensor<i32>) {
  // expected-error@+1 {{'train.adamw_multi' op weight_decays must be finite and >= 0, got -1}}
  %r:6 = train.adamw_multi params(%p, %q) grads(%p, %q) exp_avgs(%p, %q) exp_avg_sqs(%p, %q) lr(%lr) step(%t) {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decays = array<f32: 0.0, -1.0>} : (tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>)
  return
}

// -----

func.func @adamw_multi_reads_update(%p: tensor<4xf32>, %q: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<i32>) {
  // expected-error@+1 {{'train.adamw_multi' op tensor 1 reads a value that tensor 0 updates}}
  %r:6 = train.adamw_multi params(%p, %q) grads(%p, %q) exp_avgs(%q, %q) exp_avg_sqs(%q, %q) lr(%lr) step(%t) {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decays = array<f32: 0.0, 0.0>} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adamw_multi_beta(%p: tensor<4xf32>, %q: tensor<3xf32>, %lr: tensor<f32>, %t: tensor<i32>) {
  // expected-error@+1 {{'train.adamw_multi' op beta1 must lie in [0, 1), got 1.5}}
  %r:6 = train.adamw_multi params(%p, %q) grads(%p, %q) exp_avgs(%p, %q) exp_avg_sqs(%p, %q) lr(%lr) step(%t) {beta1 = 1.5 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decays = array<f32: 0.0, 0.0>} : (tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>)
  return
}
