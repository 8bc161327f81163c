// The tensors of a training step: tensors whose byte counts overflow int64
// (found by hand while probing the compiler with hostile input; UBSan in the
// shard-fuzz build reported the signed overflow in the lowering's byte
// count, and the shape's element count wraps to 0 in
// ShapedType::getNumElements). A training step's tensors may hold at most
// 2^62 bytes, each and together, so that every byte count, sum and padding
// in the passes fits in int64; and they have static shapes, from which the
// passes size every buffer.
// RUN: shard-opt --strategy=zero3 --world-size=2 --memory-budget=1TiB -split-input-file -verify-diagnostics %s

// expected-error@+1 {{argument #0 of type 'tensor<4611686018427387904x4xf32>' holds more than 2^62 bytes (4 EiB)}}
func.func @step(%w: tensor<4611686018427387904x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"},
                %y: tensor<2xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>} {
  %h = train.linear %x, %w : (tensor<2x4xf32>, tensor<4611686018427387904x4xf32>) -> tensor<2x4611686018427387904xf32>
  %loss = train.softmax_cross_entropy %h, %y : (tensor<2x4611686018427387904xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// 2^64 elements: the element count itself wraps.
// expected-error@+1 {{argument #0 of type 'tensor<4294967296x4294967296xbf16>' holds more than 2^62 bytes (4 EiB)}}
func.func @step(%w: tensor<4294967296x4294967296xbf16> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
  return %l : tensor<f32>
}

// -----

// Each argument fits (2^62 bytes), both together do not.
// expected-error@+1 {{argument #1 of type 'tensor<1152921504606846976xf32>' brings the step's tensors past 2^62 bytes (4 EiB), the most they may hold together}}
func.func @step(%a: tensor<1152921504606846976xf32> {train.role = #train.role<param>, train.name = "a", train.init = #train.init<zeros>},
                %b: tensor<1152921504606846976xf32> {train.role = #train.role<param>, train.name = "b", train.init = #train.init<zeros>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
  return %l : tensor<f32>
}

// -----

// An op's result counts too: here the arguments hold 2^62 - 4 bytes and
// the relu's result as much again.
func.func @step(%a: tensor<1152921504606846975xf32> {train.role = #train.role<param>, train.name = "a", train.init = #train.init<zeros>},
                %l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
  // expected-error@+1 {{'train.relu' op result #0 of type 'tensor<1152921504606846975xf32>' brings the step's tensors past 2^62 bytes}}
  %r = train.relu %a : tensor<1152921504606846975xf32>
  return %l : tensor<f32>
}

// -----

// A tensor of unknown rows in the middle of a step.
func.func @step(%x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"},
                %y: tensor<2xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  // expected-error@+1 {{'train.reshape' op result #0 of type 'tensor<?x4xf32>' has no static shape; a training step's tensors are statically shaped}}
  %r = train.reshape %x : tensor<2x4xf32> to tensor<?x4xf32>
  %q = train.reshape %r : tensor<?x4xf32> to tensor<2x4xf32>
  %loss = train.softmax_cross_entropy %q, %y : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A weight with no rows (found probing the compiler: the lowering divided
// by the zero-wide logits and shard-compile died of SIGFPE).
// expected-error@+1 {{argument #0 of type 'tensor<0x4xf32>' has a dimension of size 0; a training step's tensors have at least one element in every dimension}}
func.func @step(%w: tensor<0x4xf32> {train.role = #train.role<param>, train.name = "w", train.init = #train.init<zeros>},
                %x: tensor<8x4xf32> {train.role = #train.role<input>, train.name = "x"},
                %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.optimizer = #train.sgd<lr = 0.1, momentum = 0.0, weight_decay = 0.0>} {
  %h = train.linear %x, %w : (tensor<8x4xf32>, tensor<0x4xf32>) -> tensor<8x0xf32>
  %loss = train.softmax_cross_entropy %h, %y : (tensor<8x0xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A batch of no rows: compiled, the binary would refuse its own manifest.
// expected-error@+1 {{argument #0 of type 'tensor<0x4xf32>' has a dimension of size 0}}
func.func @step(%x: tensor<0x4xf32> {train.role = #train.role<input>, train.name = "x"},
                %y: tensor<0xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step} {
  %loss = train.softmax_cross_entropy %x, %y : (tensor<0x4xf32>, tensor<0xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
