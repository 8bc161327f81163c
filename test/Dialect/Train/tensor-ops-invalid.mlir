// RUN: shard-opt %s -split-input-file -verify-diagnostics

// One case per diagnostic of the generic tensor ops (TrainTensorOps.td).

func.func @f(%x: tensor<4xf32>) {
  // expected-error@+1 {{'train.pow_scalar' op exponent must be finite, got nan}}
  %0 = train.pow_scalar %x {exponent = 0x7FC00000 : f32} : tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error@+1 {{'train.add_scalar' op value must be finite, got inf}}
  %0 = train.add_scalar %x {value = 0x7F800000 : f32} : tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error@+1 {{'train.unary_grad' op alpha must be finite, got nan}}
  %0 = train.unary_grad pow_scalar, %x, %x {alpha = 0x7FC00000 : f32} : tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error@+1 {{'train.exp' op requires the same type for all operands and results}}
  %0 = "train.exp"(%x) : (tensor<4xf32>) -> tensor<4xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x3xf32>) {
  // expected-error@+2 {{'train.mul' operand shapes do not broadcast: 'tensor<4x8xf32>' and 'tensor<4x3xf32>' (aligned at the right, each pair of dimensions must be equal or one of them 1)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.mul %a, %b : tensor<4x8xf32>, tensor<4x3xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<8xbf16>) {
  // expected-error@+2 {{'train.add' operands must share one element type, got 'f32' and 'bf16'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.add %a, %b : tensor<4x8xf32>, tensor<8xbf16> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error@+2 {{'train.sub' op inferred type(s) 'tensor<4x8xf32>' are incompatible with return type(s) of operation 'tensor<8xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.sub %a, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<3xf32>) {
  // expected-error@+2 {{'train.compare' operand shapes do not broadcast}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.compare lt, %a, %b : (tensor<4x8xf32>, tensor<3xf32>) -> tensor<4x8xi1>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error@+1 {{'train.compare' op result #0 must be ranked tensor of 1-bit signless integer values}}
  %0 = "train.compare"(%a, %b) {predicate = 0 : i32} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%m: tensor<4x1xi1>, %a: tensor<4x8xf32>, %b: tensor<3xf32>) {
  // expected-error@+2 {{'train.select' operand shapes do not broadcast}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.select %m, %a, %b : (tensor<4x1xi1>, tensor<4x8xf32>, tensor<3xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%m: tensor<4x8xi1>, %a: tensor<4x8xf32>, %b: tensor<f32>) {
  %bb = train.full {value = 0.0 : f32} : tensor<bf16>
  // expected-error@+2 {{'train.select' operands must share one element type, got 'f32' and 'bf16'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.select %m, %a, %bb : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<bf16>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f() {
  // expected-error@+1 {{'train.full' op value is NaN; a constant must be a number or an infinity}}
  %0 = train.full {value = 0x7FC00000 : f32} : tensor<f32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{'train.reduce_sum' reduces no dimension; list them in dims}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.reduce_sum %x {dims = array<i64>} : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{'train.reduce_mean' dims must be distinct and ascending, got [1, 0]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.reduce_mean %x {dims = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<f32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{'train.reduce_max' dim 2 is outside [0, 2) (negative dimensions are normalised by the front end)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.reduce_max %x {dims = array<i64: 2>} : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<f32>) {
  // expected-error@+1 {{'train.softmax' op needs at least one dimension to normalise}}
  %0 = train.softmax %x : tensor<f32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{'train.transpose' permutation has 3 entries for an input of rank 2}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.transpose %x {permutation = array<i64: 0, 1, 2>} : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{'train.transpose' permutation [1, 1] is not a permutation of 0..1}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.transpose %x {permutation = array<i64: 1, 1>} : tensor<4x8xf32> -> tensor<8x8xf32>
  return
}

// -----

func.func @f(%x: tensor<3x8xf32>) {
  // expected-error@+1 {{'train.broadcast_to' op cannot broadcast 'tensor<3x8xf32>' to 'tensor<4x8xf32>': aligned at the right, each input dimension must equal the result's or be 1}}
  %0 = train.broadcast_to %x : tensor<3x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<8xf32>) {
  // expected-error@+1 {{'train.broadcast_to' op changes the element type from 'f32' to 'bf16'; use train.cast}}
  %0 = train.broadcast_to %x : tensor<8xf32> -> tensor<4x8xbf16>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{'train.slice' range [6, 10) is not within [0, 8] of dimension 1}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.slice %x {dim = 1 : i64, start = 6 : i64, end = 10 : i64} : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{'train.slice' dim -1 is outside [0, 2)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.slice %x {dim = -1 : i64, start = 0 : i64, end = 4 : i64} : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{'train.pad' low (-1) and high (0) must be >= 0; a negative pad is a train.slice}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.pad %x {dim = 1 : i64, low = -1 : i64, high = 0 : i64} : tensor<4x8xf32> -> tensor<4x7xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'train.pad' op value must be finite, got -inf}}
  %0 = train.pad %x {dim = 1 : i64, low = 1 : i64, high = 0 : i64, value = 0xFF800000 : f32} : tensor<4x8xf32> -> tensor<4x9xf32>
  return
}

// -----

func.func @f(%y: tensor<4x8xi32>) {
  // expected-error@+1 {{'train.pad' op pads an i32 tensor with value = 5.000000e-01, which is not an integer in the int32 range}}
  %0 = train.pad %y {dim = 1 : i64, low = 0 : i64, high = 1 : i64, value = 0.5 : f32} : tensor<4x8xi32> -> tensor<4x9xi32>
  return
}

// -----

func.func @f(%y: tensor<4x8xi32>) {
  // expected-error@+1 {{'train.pad' op pads an i32 tensor with value = 4.294967e+09, which is not an integer in the int32 range}}
  %0 = train.pad %y {dim = 1 : i64, low = 0 : i64, high = 1 : i64, value = 4294967296.0 : f32} : tensor<4x8xi32> -> tensor<4x9xi32>
  return
}

// -----

func.func @f(%m: tensor<4x8xi1>) {
  // expected-error@+1 {{'train.slice' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 32-bit signless integer values, but got 'tensor<4x8xi1>'}}
  %0 = train.slice %m {dim = 1 : i64, start = 0 : i64, end = 4 : i64} : tensor<4x8xi1> -> tensor<4x4xi1>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<3x2xf32>) {
  // expected-error@+2 {{'train.concat' input 'tensor<3x2xf32>' does not match 'tensor<4x8xf32>' in every dimension but the joined one (1)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.concat %a, %b {dim = 1 : i64} : (tensor<4x8xf32>, tensor<3x2xf32>) -> tensor<4x10xf32>
  return
}

// -----

func.func @f() {
  // expected-error@+2 {{'train.concat' needs at least one input}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = "train.concat"() {dim = 0 : i64} : () -> tensor<4xf32>
  return
}

// -----

func.func @f(%a: tensor<8xf32>, %b: tensor<8x3xf32>) {
  // expected-error@+2 {{'train.matmul' operands must have rank >= 2 (a vector is a train.reshape to a matrix), got 'tensor<8xf32>' and 'tensor<8x3xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.matmul %a, %b : (tensor<8xf32>, tensor<8x3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x3xf32>) {
  // expected-error@+2 {{'train.matmul' contracts 8 columns of 'tensor<4x8xf32>' with 4 rows of 'tensor<4x3xf32>' (after transpose_lhs/rhs)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.matmul %a, %b : (tensor<4x8xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4x8xf32>, %b: tensor<3x8x3xf32>) {
  // expected-error@+2 {{'train.matmul' batch dimensions of 'tensor<2x4x8xf32>' and 'tensor<3x8x3xf32>' do not broadcast}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.matmul %a, %b : (tensor<2x4x8xf32>, tensor<3x8x3xf32>) -> tensor<2x4x3xf32>
  return
}

// -----

func.func @f() {
  // expected-error@+1 {{'train.constant' op result #0 must be ranked tensor of 32-bit float or bfloat16 type or 32-bit signless integer or 1-bit signless integer values, but got 'tensor<2xi64>'}}
  %0 = train.constant dense<[1, 2]> : tensor<2xi64>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error@+1 {{'train.dropout' op p must lie in [0, 1), got 1}}
  %0 = train.dropout %x {p = 1.0 : f32, stream = 0 : i64} : tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error@+1 {{'train.dropout' op has row_offset = -2; it must be >= 0}}
  %0 = train.dropout %x {p = 0.1 : f32, stream = 0 : i64, row_offset = -2 : i64} : tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<f32>) {
  // expected-error@+1 {{'train.dropout' op needs a tensor of rank >= 1 (dimension 0 is the batch), got 'tensor<f32>'}}
  %0 = train.dropout %x {p = 0.1 : f32, stream = 0 : i64} : tensor<f32>
  return
}

// -----

// Every elementwise function refuses an integer tensor (a front end's ids
// or positions must be cast first); one case per op of Train_UnaryOp, since
// each op is its own ODS definition.
func.func @f(%x: tensor<4xi32>) {
  // expected-error@+1 {{'train.neg' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = "train.neg"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @f(%x: tensor<4xi32>) {
  // expected-error@+1 {{'train.exp' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = "train.exp"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @f(%x: tensor<4xi32>) {
  // expected-error@+1 {{'train.log' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = "train.log"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @f(%x: tensor<4xi32>) {
  // expected-error@+1 {{'train.tanh' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = "train.tanh"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @f(%x: tensor<4xi32>) {
  // expected-error@+1 {{'train.sigmoid' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = "train.sigmoid"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @f(%x: tensor<4xi32>) {
  // expected-error@+1 {{'train.rsqrt' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = "train.rsqrt"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @f(%x: tensor<4xi32>) {
  // expected-error@+1 {{'train.sqrt' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = "train.sqrt"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @f(%x: tensor<4xi32>) {
  // expected-error@+1 {{'train.sin' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = "train.sin"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @f(%x: tensor<4xi32>) {
  // expected-error@+1 {{'train.cos' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = "train.cos"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @f(%x: tensor<4xi32>) {
  // expected-error@+1 {{'train.silu' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = "train.silu"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @f(%x: tensor<4xi32>) {
  // expected-error@+1 {{'train.gelu_erf' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = "train.gelu_erf"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @f(%x: tensor<4xi32>) {
  // expected-error@+1 {{'train.reciprocal' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = "train.reciprocal"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @f(%x: tensor<4xi32>) {
  // expected-error@+1 {{'train.abs' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = "train.abs"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

// The shape rule of every broadcasting binary op (sub, mul and add above).
func.func @f(%a: tensor<4x8xf32>, %b: tensor<2x8xf32>) {
  // expected-error@+2 {{'train.div' operand shapes do not broadcast: 'tensor<4x8xf32>' and 'tensor<2x8xf32>' (aligned at the right, each pair of dimensions must be equal or one of them 1)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.div %a, %b : tensor<4x8xf32>, tensor<2x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<2x8xf32>) {
  // expected-error@+2 {{'train.maximum' operand shapes do not broadcast: 'tensor<4x8xf32>' and 'tensor<2x8xf32>' (aligned at the right, each pair of dimensions must be equal or one of them 1)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.maximum %a, %b : tensor<4x8xf32>, tensor<2x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<2x8xf32>) {
  // expected-error@+2 {{'train.minimum' operand shapes do not broadcast: 'tensor<4x8xf32>' and 'tensor<2x8xf32>' (aligned at the right, each pair of dimensions must be equal or one of them 1)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.minimum %a, %b : tensor<4x8xf32>, tensor<2x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<2x8xf32>) {
  // expected-error@+2 {{'train.pow' operand shapes do not broadcast: 'tensor<4x8xf32>' and 'tensor<2x8xf32>' (aligned at the right, each pair of dimensions must be equal or one of them 1)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = train.pow %a, %b : tensor<4x8xf32>, tensor<2x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<f32>) {
  // expected-error@+1 {{'train.log_softmax' op needs at least one dimension to normalise}}
  %0 = train.log_softmax %x : tensor<f32>
  return
}

// -----

func.func @f(%dy: tensor<f32>, %p: tensor<f32>) {
  // expected-error@+1 {{'train.softmax_grad' op needs at least one dimension to normalise}}
  %0 = train.softmax_grad %dy, %p {log} : tensor<f32>
  return
}

// -----

func.func @f(%dy: tensor<4x8xf32>, %p: tensor<4x8xbf16>) {
  // expected-error@+1 {{'train.softmax_grad' op requires the same type for all operands and results}}
  %0 = "train.softmax_grad"(%dy, %p) : (tensor<4x8xf32>, tensor<4x8xbf16>) -> tensor<4x8xf32>
  return
}
