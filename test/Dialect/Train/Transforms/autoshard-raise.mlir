// RUN: shard-opt %s -split-input-file -allow-unregistered-dialect \
// RUN:   --pass-pipeline='builtin.module(autoshard-raise)' | FileCheck %s

// The models a front end writes with generic ops come out with exactly the
// fused ops of the hand-written forward pass: no generic op of a pattern is
// left, no transpose pair either.
// RUN: shard-gen gpt2-tiny --generic 2>/dev/null \
// RUN:   | shard-opt --pass-pipeline='builtin.module(autoshard-raise)' \
// RUN:   | FileCheck %s --check-prefix=GPT2 \
// RUN:       --implicit-check-not='{{train\.(matmul|softmax|select|full|tanh|pow_scalar|scale|add_scalar|mul|transpose|constant) }}'
// RUN: shard-gen llama-tiny --generic --precision=bf16 2>/dev/null \
// RUN:   | shard-opt --pass-pipeline='builtin.module(autoshard-raise)' \
// RUN:   | FileCheck %s --check-prefix=LLAMA \
// RUN:       --implicit-check-not='{{train\.(matmul|softmax|select|full|silu|rsqrt|reduce_mean|pow_scalar|add_scalar|scale|mul|neg|slice|concat|broadcast_to|transpose|constant) }}'

// Each function gets its operands from "test.src" and hands what it
// computes to "test.use", so that nothing but the pattern is in the way.

// GELU, the chain as GPT-2's NewGELU writes it, and with every commutative
// operand order swapped.

// CHECK-LABEL: func.func @gelu
// CHECK: %[[X:.*]] = "test.src"
// CHECK-NEXT: %[[Y0:.*]] = train.gelu %[[X]] : tensor<8x16xf32>
// CHECK-NEXT: %[[Y1:.*]] = train.gelu %[[X]] : tensor<8x16xf32>
// CHECK-NEXT: "test.use"(%[[Y0]], %[[Y1]])
func.func @gelu() {
  %x = "test.src"() : () -> tensor<8x16xf32>
  %c = train.pow_scalar %x {exponent = 3.0 : f32} : tensor<8x16xf32>
  %s = train.scale %c {factor = 0.044715 : f32} : tensor<8x16xf32>
  %i = train.add %x, %s : tensor<8x16xf32>
  %u = train.scale %i {factor = 0.797884583 : f32} : tensor<8x16xf32>
  %t = train.tanh %u : tensor<8x16xf32>
  %o = train.add_scalar %t {value = 1.0 : f32} : tensor<8x16xf32>
  %h = train.scale %x {factor = 0.5 : f32} : tensor<8x16xf32>
  %y0 = train.mul %h, %o : tensor<8x16xf32>
  %c1 = train.pow_scalar %x {exponent = 3.0 : f32} : tensor<8x16xf32>
  %s1 = train.scale %c1 {factor = 0.0447150017 : f32} : tensor<8x16xf32>
  %i1 = train.add %s1, %x : tensor<8x16xf32>
  %u1 = train.scale %i1 {factor = 0.7978846 : f32} : tensor<8x16xf32>
  %t1 = train.tanh %u1 : tensor<8x16xf32>
  %o1 = train.add_scalar %t1 {value = 1.0 : f32} : tensor<8x16xf32>
  %h1 = train.scale %x {factor = 0.5 : f32} : tensor<8x16xf32>
  %y1 = train.mul %o1, %h1 : tensor<8x16xf32>
  "test.use"(%y0, %y1) : (tensor<8x16xf32>, tensor<8x16xf32>) -> ()
  return
}

// -----

// Not GELU: a coefficient of 0.0447 (another function), and a chain whose
// tanh is read elsewhere (it has to be computed anyway).

// CHECK-LABEL: func.func @gelu_refused
// CHECK-NOT: train.gelu
// CHECK: train.scale %{{.*}} {factor = 4.470000e-02 : f32}
// CHECK: train.tanh
// CHECK: train.mul
// CHECK: %[[T:.*]] = train.tanh
// CHECK: train.mul
// CHECK: "test.use"(%{{.*}}, %{{.*}}, %[[T]])
// CHECK-NOT: train.gelu
func.func @gelu_refused() {
  %x = "test.src"() : () -> tensor<8x16xf32>
  %c = train.pow_scalar %x {exponent = 3.0 : f32} : tensor<8x16xf32>
  %s = train.scale %c {factor = 0.0447 : f32} : tensor<8x16xf32>
  %i = train.add %x, %s : tensor<8x16xf32>
  %u = train.scale %i {factor = 0.797884583 : f32} : tensor<8x16xf32>
  %t = train.tanh %u : tensor<8x16xf32>
  %o = train.add_scalar %t {value = 1.0 : f32} : tensor<8x16xf32>
  %h = train.scale %x {factor = 0.5 : f32} : tensor<8x16xf32>
  %y0 = train.mul %h, %o : tensor<8x16xf32>
  %c1 = train.pow_scalar %x {exponent = 3.0 : f32} : tensor<8x16xf32>
  %s1 = train.scale %c1 {factor = 0.044715 : f32} : tensor<8x16xf32>
  %i1 = train.add %x, %s1 : tensor<8x16xf32>
  %u1 = train.scale %i1 {factor = 0.797884583 : f32} : tensor<8x16xf32>
  %t1 = train.tanh %u1 : tensor<8x16xf32>
  %o1 = train.add_scalar %t1 {value = 1.0 : f32} : tensor<8x16xf32>
  %h1 = train.scale %x {factor = 0.5 : f32} : tensor<8x16xf32>
  %y1 = train.mul %h1, %o1 : tensor<8x16xf32>
  "test.use"(%y0, %y1, %t1) : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> ()
  return
}

// -----

// The exact GELU as a front end writes it: torch's decomposition
// `x * 0.5 * (1 + erf(x * M_SQRT1_2))`, `x * (0.5 * (1 + erf(x / sqrt(2))))`
// (the importer writes the division as a scale by its reciprocal) and
// `x * (erf(x / sqrt(2)) + 1) / 2`, each with the products swapped, in f32
// and bf16. It becomes train.gelu_erf, never the tanh form's train.gelu.

// CHECK-LABEL: func.func @gelu_erf
// CHECK: %[[X:.*]] = "test.src"
// CHECK-NEXT: %[[B:.*]] = "test.src"
// CHECK-NEXT: %[[Y0:.*]] = train.gelu_erf %[[X]] : tensor<8x16xf32>
// CHECK-NEXT: %[[Y1:.*]] = train.gelu_erf %[[X]] : tensor<8x16xf32>
// CHECK-NEXT: %[[Y2:.*]] = train.gelu_erf %[[X]] : tensor<8x16xf32>
// CHECK-NEXT: %[[Y3:.*]] = train.gelu_erf %[[X]] : tensor<8x16xf32>
// CHECK-NEXT: %[[Y4:.*]] = train.gelu_erf %[[X]] : tensor<8x16xf32>
// CHECK-NEXT: %[[Y5:.*]] = train.gelu_erf %[[X]] : tensor<8x16xf32>
// CHECK-NEXT: %[[YB:.*]] = train.gelu_erf %[[B]] : tensor<4x8xbf16>
// CHECK-NEXT: "test.use"(%[[Y0]], %[[Y1]], %[[Y2]], %[[Y3]], %[[Y4]], %[[Y5]], %[[YB]])
func.func @gelu_erf() {
  %x = "test.src"() : () -> tensor<8x16xf32>
  %b = "test.src"() : () -> tensor<4x8xbf16>
  // 0.5 x * (1 + erf(x * 0.7071067811865476)), and swapped.
  %h0 = train.scale %x {factor = 0.5 : f32} : tensor<8x16xf32>
  %s0 = train.scale %x {factor = 0.707106769 : f32} : tensor<8x16xf32>
  %e0 = train.erf %s0 : tensor<8x16xf32>
  %o0 = train.add_scalar %e0 {value = 1.0 : f32} : tensor<8x16xf32>
  %y0 = train.mul %h0, %o0 : tensor<8x16xf32>
  %h1 = train.scale %x {factor = 0.5 : f32} : tensor<8x16xf32>
  %s1 = train.scale %x {factor = 0.7071068 : f32} : tensor<8x16xf32>
  %e1 = train.erf %s1 : tensor<8x16xf32>
  %o1 = train.add_scalar %e1 {value = 1.0 : f32} : tensor<8x16xf32>
  %y1 = train.mul %o1, %h1 : tensor<8x16xf32>
  // x * (0.5 (1 + erf(x / sqrt(2)))), and swapped.
  %s2 = train.scale %x {factor = 0.707106769 : f32} : tensor<8x16xf32>
  %e2 = train.erf %s2 : tensor<8x16xf32>
  %o2 = train.add_scalar %e2 {value = 1.0 : f32} : tensor<8x16xf32>
  %c2 = train.scale %o2 {factor = 0.5 : f32} : tensor<8x16xf32>
  %y2 = train.mul %x, %c2 : tensor<8x16xf32>
  %s3 = train.scale %x {factor = 0.707106769 : f32} : tensor<8x16xf32>
  %e3 = train.erf %s3 : tensor<8x16xf32>
  %o3 = train.add_scalar %e3 {value = 1.0 : f32} : tensor<8x16xf32>
  %c3 = train.scale %o3 {factor = 0.5 : f32} : tensor<8x16xf32>
  %y3 = train.mul %c3, %x : tensor<8x16xf32>
  // (x * (1 + erf(x / sqrt(2)))) / 2, and swapped.
  %s4 = train.scale %x {factor = 0.707106769 : f32} : tensor<8x16xf32>
  %e4 = train.erf %s4 : tensor<8x16xf32>
  %o4 = train.add_scalar %e4 {value = 1.0 : f32} : tensor<8x16xf32>
  %p4 = train.mul %x, %o4 : tensor<8x16xf32>
  %y4 = train.scale %p4 {factor = 0.5 : f32} : tensor<8x16xf32>
  %s5 = train.scale %x {factor = 0.707106769 : f32} : tensor<8x16xf32>
  %e5 = train.erf %s5 : tensor<8x16xf32>
  %o5 = train.add_scalar %e5 {value = 1.0 : f32} : tensor<8x16xf32>
  %p5 = train.mul %o5, %x : tensor<8x16xf32>
  %y5 = train.scale %p5 {factor = 0.5 : f32} : tensor<8x16xf32>
  // bf16.
  %hb = train.scale %b {factor = 0.5 : f32} : tensor<4x8xbf16>
  %sb = train.scale %b {factor = 0.707106769 : f32} : tensor<4x8xbf16>
  %eb = train.erf %sb : tensor<4x8xbf16>
  %ob = train.add_scalar %eb {value = 1.0 : f32} : tensor<4x8xbf16>
  %yb = train.mul %hb, %ob : tensor<4x8xbf16>
  "test.use"(%y0, %y1, %y2, %y3, %y4, %y5, %yb) : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<4x8xbf16>) -> ()
  return
}

// -----

// Not the exact GELU: x / 1.414 (a scale of 0.7072, off by 1.5e-4), a half
// of another tensor than the erf's, 1 - erf instead of 1 + erf, and a
// chain whose erf is read elsewhere (it has to be computed anyway).

// CHECK-LABEL: func.func @gelu_erf_refused
// CHECK-NOT: train.gelu
// CHECK: train.scale %{{.*}} {factor = 0.70719999 : f32}
// CHECK: train.erf
// CHECK: train.mul
// CHECK: train.erf
// CHECK: train.mul
// CHECK: train.erf
// CHECK: train.mul
// CHECK: %[[E:.*]] = train.erf
// CHECK: train.mul
// CHECK: "test.use"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[E]])
// CHECK-NOT: train.gelu
func.func @gelu_erf_refused() {
  %x = "test.src"() : () -> tensor<8x16xf32>
  %z = "test.src"() : () -> tensor<8x16xf32>
  %h0 = train.scale %x {factor = 0.5 : f32} : tensor<8x16xf32>
  %s0 = train.scale %x {factor = 0.7072 : f32} : tensor<8x16xf32>
  %e0 = train.erf %s0 : tensor<8x16xf32>
  %o0 = train.add_scalar %e0 {value = 1.0 : f32} : tensor<8x16xf32>
  %y0 = train.mul %h0, %o0 : tensor<8x16xf32>
  %h1 = train.scale %z {factor = 0.5 : f32} : tensor<8x16xf32>
  %s1 = train.scale %x {factor = 0.707106769 : f32} : tensor<8x16xf32>
  %e1 = train.erf %s1 : tensor<8x16xf32>
  %o1 = train.add_scalar %e1 {value = 1.0 : f32} : tensor<8x16xf32>
  %y1 = train.mul %h1, %o1 : tensor<8x16xf32>
  %h2 = train.scale %x {factor = 0.5 : f32} : tensor<8x16xf32>
  %s2 = train.scale %x {factor = 0.707106769 : f32} : tensor<8x16xf32>
  %e2 = train.erf %s2 : tensor<8x16xf32>
  %n2 = train.neg %e2 : tensor<8x16xf32>
  %o2 = train.add_scalar %n2 {value = 1.0 : f32} : tensor<8x16xf32>
  %y2 = train.mul %h2, %o2 : tensor<8x16xf32>
  %h3 = train.scale %x {factor = 0.5 : f32} : tensor<8x16xf32>
  %s3 = train.scale %x {factor = 0.707106769 : f32} : tensor<8x16xf32>
  %e3 = train.erf %s3 : tensor<8x16xf32>
  %o3 = train.add_scalar %e3 {value = 1.0 : f32} : tensor<8x16xf32>
  %y3 = train.mul %h3, %o3 : tensor<8x16xf32>
  "test.use"(%y0, %y1, %y2, %y3, %e3) : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> ()
  return
}

// -----

// RMSNorm, the gain on either side and the products in either order; the
// epsilon is the chain's.

// CHECK-LABEL: func.func @rms_norm
// CHECK: %[[X:.*]] = "test.src"
// CHECK-NEXT: %[[W:.*]] = "test.src"
// CHECK-NEXT: %[[Y0:.*]] = train.rms_norm %[[X]], %[[W]] {epsilon = 9.99999997E-7 : f32} : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: %[[Y1:.*]] = train.rms_norm %[[X]], %[[W]] : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: "test.use"(%[[Y0]], %[[Y1]])
func.func @rms_norm() {
  %x = "test.src"() : () -> tensor<8x16xf32>
  %w = "test.src"() : () -> tensor<16xf32>
  %sq = train.pow_scalar %x {exponent = 2.0 : f32} : tensor<8x16xf32>
  %m = train.reduce_mean %sq {dims = array<i64: 1>, keepdim} : tensor<8x16xf32> -> tensor<8x1xf32>
  %e = train.add_scalar %m {value = 1.0e-6 : f32} : tensor<8x1xf32>
  %r = train.rsqrt %e : tensor<8x1xf32>
  %n = train.mul %x, %r : tensor<8x16xf32>, tensor<8x1xf32> -> tensor<8x16xf32>
  %y0 = train.mul %w, %n : tensor<16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %sq1 = train.pow_scalar %x {exponent = 2.0 : f32} : tensor<8x16xf32>
  %m1 = train.reduce_mean %sq1 {dims = array<i64: 1>, keepdim} : tensor<8x16xf32> -> tensor<8x1xf32>
  %e1 = train.add_scalar %m1 {value = 1.0e-5 : f32} : tensor<8x1xf32>
  %r1 = train.rsqrt %e1 : tensor<8x1xf32>
  %n1 = train.mul %r1, %x : tensor<8x1xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %y1 = train.mul %n1, %w : tensor<8x16xf32>, tensor<16xf32> -> tensor<8x16xf32>
  "test.use"(%y0, %y1) : (tensor<8x16xf32>, tensor<8x16xf32>) -> ()
  return
}

// -----

// RMSNorm with the square written x * x (a front end's `x * x` or
// `x.square()` decomposed), either order of the products.

// CHECK-LABEL: func.func @rms_norm_square_by_mul
// CHECK: %[[X:.*]] = "test.src"
// CHECK-NEXT: %[[W:.*]] = "test.src"
// CHECK-NEXT: %[[Y0:.*]] = train.rms_norm %[[X]], %[[W]] {epsilon = 9.99999997E-7 : f32} : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: %[[Y1:.*]] = train.rms_norm %[[X]], %[[W]] : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: "test.use"(%[[Y0]], %[[Y1]])
func.func @rms_norm_square_by_mul() {
  %x = "test.src"() : () -> tensor<8x16xf32>
  %w = "test.src"() : () -> tensor<16xf32>
  %sq = train.mul %x, %x : tensor<8x16xf32>
  %m = train.reduce_mean %sq {dims = array<i64: 1>, keepdim} : tensor<8x16xf32> -> tensor<8x1xf32>
  %e = train.add_scalar %m {value = 1.0e-6 : f32} : tensor<8x1xf32>
  %r = train.rsqrt %e : tensor<8x1xf32>
  %n = train.mul %x, %r : tensor<8x16xf32>, tensor<8x1xf32> -> tensor<8x16xf32>
  %y0 = train.mul %w, %n : tensor<16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %sq1 = train.mul %x, %x : tensor<8x16xf32>
  %m1 = train.reduce_mean %sq1 {dims = array<i64: 1>, keepdim} : tensor<8x16xf32> -> tensor<8x1xf32>
  %e1 = train.add_scalar %m1 {value = 1.0e-5 : f32} : tensor<8x1xf32>
  %r1 = train.rsqrt %e1 : tensor<8x1xf32>
  %n1 = train.mul %r1, %x : tensor<8x1xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %y1 = train.mul %n1, %w : tensor<8x16xf32>, tensor<16xf32> -> tensor<8x16xf32>
  "test.use"(%y0, %y1) : (tensor<8x16xf32>, tensor<8x16xf32>) -> ()
  return
}

// -----

// Not RMSNorm: the mean of x * y (another tensor: not a square), of y * y
// (the square of something other than the normalised x), and a square
// x * x read elsewhere.

// CHECK-LABEL: func.func @rms_norm_square_by_mul_refused
// CHECK-NOT: train.rms_norm
// CHECK: %[[X:.*]] = "test.src"
// CHECK-NEXT: %[[Y:.*]] = "test.src"
// CHECK-NEXT: "test.src"
// CHECK-NEXT: train.mul %[[X]], %[[Y]] : tensor<8x16xf32>
// CHECK: train.rsqrt
// CHECK: train.mul %[[Y]], %[[Y]] : tensor<8x16xf32>
// CHECK: train.rsqrt
// CHECK: %[[SQ:.*]] = train.mul %[[X]], %[[X]] : tensor<8x16xf32>
// CHECK: train.rsqrt
// CHECK: "test.use"(%{{.*}}, %{{.*}}, %{{.*}}, %[[SQ]])
// CHECK-NOT: train.rms_norm
func.func @rms_norm_square_by_mul_refused() {
  %x = "test.src"() : () -> tensor<8x16xf32>
  %y = "test.src"() : () -> tensor<8x16xf32>
  %w = "test.src"() : () -> tensor<16xf32>
  %sq0 = train.mul %x, %y : tensor<8x16xf32>
  %m0 = train.reduce_mean %sq0 {dims = array<i64: 1>, keepdim} : tensor<8x16xf32> -> tensor<8x1xf32>
  %e0 = train.add_scalar %m0 {value = 1.0e-5 : f32} : tensor<8x1xf32>
  %r0 = train.rsqrt %e0 : tensor<8x1xf32>
  %n0 = train.mul %x, %r0 : tensor<8x16xf32>, tensor<8x1xf32> -> tensor<8x16xf32>
  %y0 = train.mul %w, %n0 : tensor<16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %sq1 = train.mul %y, %y : tensor<8x16xf32>
  %m1 = train.reduce_mean %sq1 {dims = array<i64: 1>, keepdim} : tensor<8x16xf32> -> tensor<8x1xf32>
  %e1 = train.add_scalar %m1 {value = 1.0e-5 : f32} : tensor<8x1xf32>
  %r1 = train.rsqrt %e1 : tensor<8x1xf32>
  %n1 = train.mul %x, %r1 : tensor<8x16xf32>, tensor<8x1xf32> -> tensor<8x16xf32>
  %y1 = train.mul %w, %n1 : tensor<16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %sq2 = train.mul %x, %x : tensor<8x16xf32>
  %m2 = train.reduce_mean %sq2 {dims = array<i64: 1>, keepdim} : tensor<8x16xf32> -> tensor<8x1xf32>
  %e2 = train.add_scalar %m2 {value = 1.0e-5 : f32} : tensor<8x1xf32>
  %r2 = train.rsqrt %e2 : tensor<8x1xf32>
  %n2 = train.mul %x, %r2 : tensor<8x16xf32>, tensor<8x1xf32> -> tensor<8x16xf32>
  %y2 = train.mul %w, %n2 : tensor<16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  "test.use"(%y0, %y1, %y2, %sq2) : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> ()
  return
}

// -----

// Not RMSNorm: the mean square read elsewhere; a mean over the first
// dimension; a gain that is a whole tensor rather than one per feature.

// CHECK-LABEL: func.func @rms_norm_refused
// CHECK-NOT: train.rms_norm
// CHECK-COUNT-3: train.rsqrt
// CHECK-NOT: train.rms_norm
func.func @rms_norm_refused() {
  %x = "test.src"() : () -> tensor<8x16xf32>
  %w = "test.src"() : () -> tensor<16xf32>
  %w2 = "test.src"() : () -> tensor<8x16xf32>
  %sq = train.pow_scalar %x {exponent = 2.0 : f32} : tensor<8x16xf32>
  %m = train.reduce_mean %sq {dims = array<i64: 1>, keepdim} : tensor<8x16xf32> -> tensor<8x1xf32>
  %e = train.add_scalar %m {value = 1.0e-5 : f32} : tensor<8x1xf32>
  %r = train.rsqrt %e : tensor<8x1xf32>
  %n = train.mul %x, %r : tensor<8x16xf32>, tensor<8x1xf32> -> tensor<8x16xf32>
  %y0 = train.mul %w, %n : tensor<16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %sq1 = train.pow_scalar %x {exponent = 2.0 : f32} : tensor<8x16xf32>
  %m1 = train.reduce_mean %sq1 {dims = array<i64: 0>, keepdim} : tensor<8x16xf32> -> tensor<1x16xf32>
  %e1 = train.add_scalar %m1 {value = 1.0e-5 : f32} : tensor<1x16xf32>
  %r1 = train.rsqrt %e1 : tensor<1x16xf32>
  %n1 = train.mul %x, %r1 : tensor<8x16xf32>, tensor<1x16xf32> -> tensor<8x16xf32>
  %y1 = train.mul %w, %n1 : tensor<16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %sq2 = train.pow_scalar %x {exponent = 2.0 : f32} : tensor<8x16xf32>
  %m2 = train.reduce_mean %sq2 {dims = array<i64: 1>, keepdim} : tensor<8x16xf32> -> tensor<8x1xf32>
  %e2 = train.add_scalar %m2 {value = 1.0e-5 : f32} : tensor<8x1xf32>
  %r2 = train.rsqrt %e2 : tensor<8x1xf32>
  %n2 = train.mul %x, %r2 : tensor<8x16xf32>, tensor<8x1xf32> -> tensor<8x16xf32>
  %y2 = train.mul %w2, %n2 : tensor<8x16xf32>
  "test.use"(%y0, %y1, %y2, %m) : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x1xf32>) -> ()
  return
}

// -----

// Rotary embeddings on [B, H, T, D] heads with f32 tables of theta 10000
// (the default, not printed): the fused op between transposes to and from
// [B, T, H, D], which cancel with the front end's own.

// CHECK-LABEL: func.func @rope
// CHECK: %[[X:.*]] = "test.src"() : () -> tensor<1x4x2x4xf32>
// CHECK-NEXT: %[[R:.*]] = train.rope %[[X]] : tensor<1x4x2x4xf32>
// CHECK-NEXT: "test.use"(%[[R]])
func.func @rope() {
  %x0 = "test.src"() : () -> tensor<1x4x2x4xf32>
  %x = train.transpose %x0 {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %cos = train.constant dense<[[1.0, 1.0, 1.0, 1.0], [0.540302277, 0.999949992, 0.540302277, 0.999949992], [-0.416146845, 0.999800026, -0.416146845, 0.999800026], [-0.989992499, 0.999550045, -0.989992499, 0.999550045]]> : tensor<4x4xf32>
  %sin = train.constant dense<[[0.0, 0.0, 0.0, 0.0], [0.841470957, 0.00999983307, 0.841470957, 0.00999983307], [0.909297407, 0.0199986659, 0.909297407, 0.0199986659], [0.141120002, 0.029995501, 0.141120002, 0.029995501]]> : tensor<4x4xf32>
  %lo = train.slice %x {dim = 3 : i64, start = 0 : i64, end = 2 : i64} : tensor<1x2x4x4xf32> -> tensor<1x2x4x2xf32>
  %hi = train.slice %x {dim = 3 : i64, start = 2 : i64, end = 4 : i64} : tensor<1x2x4x4xf32> -> tensor<1x2x4x2xf32>
  %nhi = train.neg %hi : tensor<1x2x4x2xf32>
  %rot = train.concat %nhi, %lo {dim = 3 : i64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %a = train.mul %x, %cos : tensor<1x2x4x4xf32>, tensor<4x4xf32> -> tensor<1x2x4x4xf32>
  %b = train.mul %rot, %sin : tensor<1x2x4x4xf32>, tensor<4x4xf32> -> tensor<1x2x4x4xf32>
  %y = train.add %a, %b : tensor<1x2x4x4xf32>
  %y0 = train.transpose %y {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x2x4x4xf32> -> tensor<1x4x2x4xf32>
  "test.use"(%y0) : (tensor<1x4x2x4xf32>) -> ()
  return
}

// -----

// bf16 heads with f32 tables of theta 500000 behind a cast, [1, 1, T, D] as
// Hugging Face unsqueezes them, and the operands in the other orders: theta
// is recovered from the tables.

// CHECK-LABEL: func.func @rope_bf16
// CHECK: %[[X:.*]] = "test.src"() : () -> tensor<1x2x4x8xbf16>
// CHECK-NEXT: %[[T:.*]] = train.transpose %[[X]] {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x2x4x8xbf16> -> tensor<1x4x2x8xbf16>
// CHECK-NEXT: %[[R:.*]] = train.rope %[[T]] {theta = 5.000000e+05 : f32} : tensor<1x4x2x8xbf16>
// CHECK-NEXT: %[[Y:.*]] = train.transpose %[[R]] {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xbf16> -> tensor<1x2x4x8xbf16>
// CHECK-NEXT: "test.use"(%[[Y]])
func.func @rope_bf16() {
  %x = "test.src"() : () -> tensor<1x2x4x8xbf16>
  %cos32 = train.constant dense<[[[[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [0.540302277, 0.99929297, 0.999998987, 1.0, 0.540302277, 0.99929297, 0.999998987, 1.0], [-0.416146845, 0.997172892, 0.999996006, 1.0, -0.416146845, 0.997172892, 0.999996006, 1.0], [-0.989992499, 0.993642807, 0.999991, 1.0, -0.989992499, 0.993642807, 0.999991, 1.0]]]]> : tensor<1x1x4x8xf32>
  %sin32 = train.constant dense<[[[[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.841470957, 0.0375971682, 0.0014142131, 5.31829573e-05, 0.841470957, 0.0375971682, 0.0014142131, 5.31829573e-05], [0.909297407, 0.0751411691, 0.0028284234, 0.000106365915, 0.909297407, 0.0751411691, 0.0028284234, 0.000106365915], [0.141120002, 0.112578921, 0.00424262788, 0.000159548872, 0.141120002, 0.112578921, 0.00424262788, 0.000159548872]]]]> : tensor<1x1x4x8xf32>
  %cos = train.cast %cos32 : tensor<1x1x4x8xf32> to tensor<1x1x4x8xbf16>
  %sin = train.cast %sin32 : tensor<1x1x4x8xf32> to tensor<1x1x4x8xbf16>
  %lo = train.slice %x {dim = 3 : i64, start = 0 : i64, end = 4 : i64} : tensor<1x2x4x8xbf16> -> tensor<1x2x4x4xbf16>
  %hi = train.slice %x {dim = 3 : i64, start = 4 : i64, end = 8 : i64} : tensor<1x2x4x8xbf16> -> tensor<1x2x4x4xbf16>
  %nhi = train.neg %hi : tensor<1x2x4x4xbf16>
  %rot = train.concat %nhi, %lo {dim = 3 : i64} : (tensor<1x2x4x4xbf16>, tensor<1x2x4x4xbf16>) -> tensor<1x2x4x8xbf16>
  %a = train.mul %cos, %x : tensor<1x1x4x8xbf16>, tensor<1x2x4x8xbf16> -> tensor<1x2x4x8xbf16>
  %b = train.mul %sin, %rot : tensor<1x1x4x8xbf16>, tensor<1x2x4x8xbf16> -> tensor<1x2x4x8xbf16>
  %y = train.add %b, %a : tensor<1x2x4x8xbf16>
  "test.use"(%y) : (tensor<1x2x4x8xbf16>) -> ()
  return
}

// -----

// Not rotate-half rotary embeddings: interleaved tables (GPT-J's pairs
// (2i, 2i+1), which this rotation does not pair); tables that are no
// constants; a rotated half read elsewhere.

// CHECK-LABEL: func.func @rope_refused
// CHECK-NOT: train.rope
// CHECK-COUNT-3: train.concat
// CHECK-NOT: train.rope
func.func @rope_refused() {
  %x = "test.src"() : () -> tensor<1x2x4x4xf32>
  %cos = train.constant dense<[[1.0, 1.0, 1.0, 1.0], [0.540302277, 0.540302277, 0.999949992, 0.999949992], [-0.416146845, -0.416146845, 0.999800026, 0.999800026], [-0.989992499, -0.989992499, 0.999550045, 0.999550045]]> : tensor<4x4xf32>
  %sin = train.constant dense<[[0.0, 0.0, 0.0, 0.0], [0.841470957, 0.841470957, 0.00999983307, 0.00999983307], [0.909297407, 0.909297407, 0.0199986659, 0.0199986659], [0.141120002, 0.141120002, 0.029995501, 0.029995501]]> : tensor<4x4xf32>
  %lo = train.slice %x {dim = 3 : i64, start = 0 : i64, end = 2 : i64} : tensor<1x2x4x4xf32> -> tensor<1x2x4x2xf32>
  %hi = train.slice %x {dim = 3 : i64, start = 2 : i64, end = 4 : i64} : tensor<1x2x4x4xf32> -> tensor<1x2x4x2xf32>
  %nhi = train.neg %hi : tensor<1x2x4x2xf32>
  %rot = train.concat %nhi, %lo {dim = 3 : i64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %a = train.mul %x, %cos : tensor<1x2x4x4xf32>, tensor<4x4xf32> -> tensor<1x2x4x4xf32>
  %b = train.mul %rot, %sin : tensor<1x2x4x4xf32>, tensor<4x4xf32> -> tensor<1x2x4x4xf32>
  %y0 = train.add %a, %b : tensor<1x2x4x4xf32>

  %cos1 = "test.src"() : () -> tensor<4x4xf32>
  %sin1 = "test.src"() : () -> tensor<4x4xf32>
  %lo1 = train.slice %x {dim = 3 : i64, start = 0 : i64, end = 2 : i64} : tensor<1x2x4x4xf32> -> tensor<1x2x4x2xf32>
  %hi1 = train.slice %x {dim = 3 : i64, start = 2 : i64, end = 4 : i64} : tensor<1x2x4x4xf32> -> tensor<1x2x4x2xf32>
  %nhi1 = train.neg %hi1 : tensor<1x2x4x2xf32>
  %rot1 = train.concat %nhi1, %lo1 {dim = 3 : i64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %a1 = train.mul %x, %cos1 : tensor<1x2x4x4xf32>, tensor<4x4xf32> -> tensor<1x2x4x4xf32>
  %b1 = train.mul %rot1, %sin1 : tensor<1x2x4x4xf32>, tensor<4x4xf32> -> tensor<1x2x4x4xf32>
  %y1 = train.add %a1, %b1 : tensor<1x2x4x4xf32>

  %cos2 = train.constant dense<[[1.0, 1.0, 1.0, 1.0], [0.540302277, 0.999949992, 0.540302277, 0.999949992], [-0.416146845, 0.999800026, -0.416146845, 0.999800026], [-0.989992499, 0.999550045, -0.989992499, 0.999550045]]> : tensor<4x4xf32>
  %sin2 = train.constant dense<[[0.0, 0.0, 0.0, 0.0], [0.841470957, 0.00999983307, 0.841470957, 0.00999983307], [0.909297407, 0.0199986659, 0.909297407, 0.0199986659], [0.141120002, 0.029995501, 0.141120002, 0.029995501]]> : tensor<4x4xf32>
  %lo2 = train.slice %x {dim = 3 : i64, start = 0 : i64, end = 2 : i64} : tensor<1x2x4x4xf32> -> tensor<1x2x4x2xf32>
  %hi2 = train.slice %x {dim = 3 : i64, start = 2 : i64, end = 4 : i64} : tensor<1x2x4x4xf32> -> tensor<1x2x4x2xf32>
  %nhi2 = train.neg %hi2 : tensor<1x2x4x2xf32>
  %rot2 = train.concat %nhi2, %lo2 {dim = 3 : i64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %a2 = train.mul %x, %cos2 : tensor<1x2x4x4xf32>, tensor<4x4xf32> -> tensor<1x2x4x4xf32>
  %b2 = train.mul %rot2, %sin2 : tensor<1x2x4x4xf32>, tensor<4x4xf32> -> tensor<1x2x4x4xf32>
  %y2 = train.add %a2, %b2 : tensor<1x2x4x4xf32>
  "test.use"(%y0, %y1, %y2, %rot2) : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> ()
  return
}

// -----

// SwiGLU, silu on either side; not when the activation is read elsewhere.

// CHECK-LABEL: func.func @swiglu
// CHECK: %[[G:.*]] = "test.src"
// CHECK-NEXT: %[[U:.*]] = "test.src"
// CHECK-NEXT: %[[Y0:.*]] = train.swiglu %[[G]], %[[U]] : tensor<8x32xf32>
// CHECK-NEXT: %[[Y1:.*]] = train.swiglu %[[G]], %[[U]] : tensor<8x32xf32>
// CHECK-NEXT: %[[S:.*]] = train.silu %[[G]]
// CHECK-NEXT: %[[Y2:.*]] = train.mul %[[S]], %[[U]]
// CHECK-NEXT: "test.use"(%[[Y0]], %[[Y1]], %[[Y2]], %[[S]])
func.func @swiglu() {
  %g = "test.src"() : () -> tensor<8x32xf32>
  %u = "test.src"() : () -> tensor<8x32xf32>
  %s0 = train.silu %g : tensor<8x32xf32>
  %y0 = train.mul %s0, %u : tensor<8x32xf32>
  %s1 = train.silu %g : tensor<8x32xf32>
  %y1 = train.mul %u, %s1 : tensor<8x32xf32>
  %s2 = train.silu %g : tensor<8x32xf32>
  %y2 = train.mul %s2, %u : tensor<8x32xf32>
  "test.use"(%y0, %y1, %y2, %s2) : (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) -> ()
  return
}

// -----

// Causal attention on heads the front end transposed to [B, H, T, D] and
// back: the fused op reads and writes [B, T, H, D] directly, and the default
// scale 1/sqrt(8) is left implicit.

// CHECK-LABEL: func.func @attention
// CHECK: %[[Q:.*]] = "test.src"() : () -> tensor<2x4x2x8xf32>
// CHECK-NEXT: %[[K:.*]] = "test.src"() : () -> tensor<2x4x2x8xf32>
// CHECK-NEXT: %[[V:.*]] = "test.src"() : () -> tensor<2x4x2x8xf32>
// CHECK-NEXT: %[[O:.*]], %{{.*}} = train.causal_attention %[[Q]], %[[K]], %[[V]] : (tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) -> (tensor<2x4x2x8xf32>, tensor<2x2x4xf32>)
// CHECK-NEXT: "test.use"(%[[O]])
func.func @attention() {
  %q0 = "test.src"() : () -> tensor<2x4x2x8xf32>
  %k0 = "test.src"() : () -> tensor<2x4x2x8xf32>
  %v0 = "test.src"() : () -> tensor<2x4x2x8xf32>
  %q = train.transpose %q0 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %k = train.transpose %k0 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %v = train.transpose %v0 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %s = train.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %ss = train.scale %s {factor = 0.353553385 : f32} : tensor<2x2x4x4xf32>
  %mask = train.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %ninf = train.full {value = 0xFF800000 : f32} : tensor<f32>
  %m = train.select %mask, %ss, %ninf : (tensor<4x4xi1>, tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %p = train.softmax %m : tensor<2x2x4x4xf32>
  %o = train.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %o0 = train.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x2x4x8xf32> -> tensor<2x4x2x8xf32>
  "test.use"(%o0) : (tensor<2x4x2x8xf32>) -> ()
  return
}

// -----

// Grouped-query attention: keys and values repeated from one KV head to two
// query heads (repeat_kv) are read un-repeated; a scale other than
// 1/sqrt(D) is kept.

// CHECK-LABEL: func.func @attention_gqa
// CHECK: %[[Q:.*]] = "test.src"() : () -> tensor<1x2x4x8xbf16>
// CHECK-NEXT: %[[K:.*]] = "test.src"() : () -> tensor<1x1x4x8xbf16>
// CHECK-NEXT: %[[V:.*]] = "test.src"() : () -> tensor<1x1x4x8xbf16>
// CHECK-DAG: %[[QT:.*]] = train.transpose %[[Q]] {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x2x4x8xbf16> -> tensor<1x4x2x8xbf16>
// CHECK-DAG: %[[KT:.*]] = train.transpose %[[K]] {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x1x4x8xbf16> -> tensor<1x4x1x8xbf16>
// CHECK-DAG: %[[VT:.*]] = train.transpose %[[V]] {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x1x4x8xbf16> -> tensor<1x4x1x8xbf16>
// CHECK: %[[O:.*]], %{{.*}} = train.causal_attention %[[QT]], %[[KT]], %[[VT]] {scale = 5.000000e-01 : f32} : (tensor<1x4x2x8xbf16>, tensor<1x4x1x8xbf16>, tensor<1x4x1x8xbf16>) -> (tensor<1x4x2x8xbf16>, tensor<1x2x4xf32>)
// CHECK-NEXT: %[[Y:.*]] = train.transpose %[[O]] {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xbf16> -> tensor<1x2x4x8xbf16>
// CHECK-NEXT: "test.use"(%[[Y]])
// CHECK-NOT: train.broadcast_to
func.func @attention_gqa() {
  %q = "test.src"() : () -> tensor<1x2x4x8xbf16>
  %k0 = "test.src"() : () -> tensor<1x1x4x8xbf16>
  %v0 = "test.src"() : () -> tensor<1x1x4x8xbf16>
  %k1 = train.reshape %k0 : tensor<1x1x4x8xbf16> to tensor<1x1x1x4x8xbf16>
  %k2 = train.broadcast_to %k1 : tensor<1x1x1x4x8xbf16> -> tensor<1x1x2x4x8xbf16>
  %k = train.reshape %k2 : tensor<1x1x2x4x8xbf16> to tensor<1x2x4x8xbf16>
  %v1 = train.reshape %v0 : tensor<1x1x4x8xbf16> to tensor<1x1x1x4x8xbf16>
  %v2 = train.broadcast_to %v1 : tensor<1x1x1x4x8xbf16> -> tensor<1x1x2x4x8xbf16>
  %v = train.reshape %v2 : tensor<1x1x2x4x8xbf16> to tensor<1x2x4x8xbf16>
  %s = train.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>) -> tensor<1x2x4x4xbf16>
  %ss = train.scale %s {factor = 0.5 : f32} : tensor<1x2x4x4xbf16>
  %mask = train.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %ninf = train.full {value = 0xFF800000 : f32} : tensor<bf16>
  %m = train.select %mask, %ss, %ninf : (tensor<4x4xi1>, tensor<1x2x4x4xbf16>, tensor<bf16>) -> tensor<1x2x4x4xbf16>
  %p = train.softmax %m : tensor<1x2x4x4xbf16>
  %o = train.matmul %p, %v : (tensor<1x2x4x4xbf16>, tensor<1x2x4x8xbf16>) -> tensor<1x2x4x8xbf16>
  "test.use"(%o) : (tensor<1x2x4x8xbf16>) -> ()
  return
}

// -----

// Not causal attention: a mask that hides the diagonal too (j < i), one
// that hides nothing, and probabilities read elsewhere (a model that
// returns its attention weights).

// CHECK-LABEL: func.func @attention_refused
// CHECK-NOT: train.causal_attention
// CHECK-COUNT-3: train.softmax
// CHECK-NOT: train.causal_attention
func.func @attention_refused() {
  %q = "test.src"() : () -> tensor<1x2x4x8xf32>
  %k = "test.src"() : () -> tensor<1x2x4x8xf32>
  %v = "test.src"() : () -> tensor<1x2x4x8xf32>
  %ninf = train.full {value = 0xFF800000 : f32} : tensor<f32>
  %strict = train.constant dense<[[false, false, false, false], [true, false, false, false], [true, true, false, false], [true, true, true, false]]> : tensor<4x4xi1>
  %s0 = train.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %m0 = train.select %strict, %s0, %ninf : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p0 = train.softmax %m0 : tensor<1x2x4x4xf32>
  %o0 = train.matmul %p0, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %all = train.constant dense<true> : tensor<4x4xi1>
  %s1 = train.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %m1 = train.select %all, %s1, %ninf : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p1 = train.softmax %m1 : tensor<1x2x4x4xf32>
  %o1 = train.matmul %p1, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %causal = train.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %s2 = train.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %m2 = train.select %causal, %s2, %ninf : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p2 = train.softmax %m2 : tensor<1x2x4x4xf32>
  %o2 = train.matmul %p2, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  "test.use"(%o0, %o1, %o2, %p2) : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) -> ()
  return
}

// -----

// Causal attention as masked_fill writes it (nanoGPT's
// `att.masked_fill(bias[:, :, :T, :T] == 0, -inf)`): the mask [1, 1, T, T]
// marks the hidden positions j > i, the fill is the select's true value.

// CHECK-LABEL: func.func @attention_masked_fill
// CHECK: %[[Q:.*]] = "test.src"() : () -> tensor<2x4x2x8xf32>
// CHECK-NEXT: %[[K:.*]] = "test.src"() : () -> tensor<2x4x2x8xf32>
// CHECK-NEXT: %[[V:.*]] = "test.src"() : () -> tensor<2x4x2x8xf32>
// CHECK-NEXT: %[[O:.*]], %{{.*}} = train.causal_attention %[[Q]], %[[K]], %[[V]] : (tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) -> (tensor<2x4x2x8xf32>, tensor<2x2x4xf32>)
// CHECK-NEXT: "test.use"(%[[O]])
func.func @attention_masked_fill() {
  %q0 = "test.src"() : () -> tensor<2x4x2x8xf32>
  %k0 = "test.src"() : () -> tensor<2x4x2x8xf32>
  %v0 = "test.src"() : () -> tensor<2x4x2x8xf32>
  %q = train.transpose %q0 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %k = train.transpose %k0 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %v = train.transpose %v0 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %s = train.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %ss = train.scale %s {factor = 0.353553385 : f32} : tensor<2x2x4x4xf32>
  %hidden = train.constant dense<[[[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]]]> : tensor<1x1x4x4xi1>
  %ninf = train.full {value = 0xFF800000 : f32} : tensor<f32>
  %m = train.select %hidden, %ninf, %ss : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = train.softmax %m : tensor<2x2x4x4xf32>
  %o = train.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %o0 = train.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x2x4x8xf32> -> tensor<2x4x2x8xf32>
  "test.use"(%o0) : (tensor<2x4x2x8xf32>) -> ()
  return
}

// -----

// Keys transposed explicitly, as `q @ k.transpose(-2, -1)` exports (nanoGPT,
// minGPT): a transpose of the last two dimensions feeds the product instead
// of transpose_rhs. In @attention_key_transpose the canonicalizer has
// composed it with the heads' transpose first ([0, 2, 3, 1] from k0
// [B, T, H, D]); in @attention_key_transpose_heads the keys come in heads'
// layout and only the swap is left. Both raise, and no transpose of the keys
// is left.

// CHECK-LABEL: func.func @attention_key_transpose
// CHECK: %[[Q:.*]] = "test.src"() : () -> tensor<2x4x2x8xf32>
// CHECK-NEXT: %[[K:.*]] = "test.src"() : () -> tensor<2x4x2x8xf32>
// CHECK-NEXT: %[[V:.*]] = "test.src"() : () -> tensor<2x4x2x8xf32>
// CHECK-NEXT: %[[O:.*]], %{{.*}} = train.causal_attention %[[Q]], %[[K]], %[[V]] : (tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) -> (tensor<2x4x2x8xf32>, tensor<2x2x4xf32>)
// CHECK-NEXT: "test.use"(%[[O]])
func.func @attention_key_transpose() {
  %q0 = "test.src"() : () -> tensor<2x4x2x8xf32>
  %k0 = "test.src"() : () -> tensor<2x4x2x8xf32>
  %v0 = "test.src"() : () -> tensor<2x4x2x8xf32>
  %q = train.transpose %q0 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %k = train.transpose %k0 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %v = train.transpose %v0 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %kt = train.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : tensor<2x2x4x8xf32> -> tensor<2x2x8x4xf32>
  %s = train.matmul %q, %kt : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %ss = train.scale %s {factor = 0.353553385 : f32} : tensor<2x2x4x4xf32>
  %hidden = train.constant dense<[[[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]]]> : tensor<1x1x4x4xi1>
  %ninf = train.full {value = 0xFF800000 : f32} : tensor<f32>
  %m = train.select %hidden, %ninf, %ss : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = train.softmax %m : tensor<2x2x4x4xf32>
  %o = train.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %o0 = train.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x2x4x8xf32> -> tensor<2x4x2x8xf32>
  "test.use"(%o0) : (tensor<2x4x2x8xf32>) -> ()
  return
}

// CHECK-LABEL: func.func @attention_key_transpose_heads
// CHECK: %[[Q:.*]] = "test.src"() : () -> tensor<1x2x4x8xf32>
// CHECK-NEXT: %[[K:.*]] = "test.src"() : () -> tensor<1x2x4x8xf32>
// CHECK-NEXT: %[[V:.*]] = "test.src"() : () -> tensor<1x2x4x8xf32>
// CHECK-DAG: %[[QT:.*]] = train.transpose %[[Q]] {permutation = array<i64: 0, 2, 1, 3>}
// CHECK-DAG: %[[KT:.*]] = train.transpose %[[K]] {permutation = array<i64: 0, 2, 1, 3>}
// CHECK-DAG: %[[VT:.*]] = train.transpose %[[V]] {permutation = array<i64: 0, 2, 1, 3>}
// CHECK: train.causal_attention %[[QT]], %[[KT]], %[[VT]] :
// CHECK-NOT: permutation = array<i64: 0, 1, 3, 2>
func.func @attention_key_transpose_heads() {
  %q = "test.src"() : () -> tensor<1x2x4x8xf32>
  %k = "test.src"() : () -> tensor<1x2x4x8xf32>
  %v = "test.src"() : () -> tensor<1x2x4x8xf32>
  %kt = train.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
  %s = train.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %ss = train.scale %s {factor = 0.353553385 : f32} : tensor<1x2x4x4xf32>
  %mask = train.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %ninf = train.full {value = 0xFF800000 : f32} : tensor<f32>
  %m = train.select %mask, %ss, %ninf : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = train.softmax %m : tensor<1x2x4x4xf32>
  %o = train.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  "test.use"(%o) : (tensor<1x2x4x8xf32>) -> ()
  return
}

// -----

// The scale on q before the product (`q = q * D**-0.5; q @ k.T`): the same
// scale 1/sqrt(8) on the scores, left implicit; q's transpose cancels with
// the fused op's. With a scale on the scores too, the fused op takes the
// product of both.

// CHECK-LABEL: func.func @attention_scaled_query
// CHECK: %[[Q:.*]] = "test.src"() : () -> tensor<2x4x2x8xf32>
// CHECK-NEXT: %[[K:.*]] = "test.src"() : () -> tensor<2x4x2x8xf32>
// CHECK-NEXT: %[[V:.*]] = "test.src"() : () -> tensor<2x4x2x8xf32>
// CHECK-NEXT: %[[O0:.*]], %{{.*}} = train.causal_attention %[[Q]], %[[K]], %[[V]] : (tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) -> (tensor<2x4x2x8xf32>, tensor<2x2x4xf32>)
// CHECK-NEXT: %[[O1:.*]], %{{.*}} = train.causal_attention %[[Q]], %[[K]], %[[V]] {scale = 0.176776692 : f32} :
// CHECK-NEXT: "test.use"(%[[O0]], %[[O1]])
func.func @attention_scaled_query() {
  %q0 = "test.src"() : () -> tensor<2x4x2x8xf32>
  %k0 = "test.src"() : () -> tensor<2x4x2x8xf32>
  %v0 = "test.src"() : () -> tensor<2x4x2x8xf32>
  %mask = train.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %ninf = train.full {value = 0xFF800000 : f32} : tensor<f32>
  %q = train.transpose %q0 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %k = train.transpose %k0 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %v = train.transpose %v0 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %qs = train.scale %q {factor = 0.353553385 : f32} : tensor<2x2x4x8xf32>
  %s = train.matmul %qs, %k {transpose_rhs} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %m = train.select %mask, %s, %ninf : (tensor<4x4xi1>, tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %p = train.softmax %m : tensor<2x2x4x4xf32>
  %o = train.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %o0 = train.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x2x4x8xf32> -> tensor<2x4x2x8xf32>
  %qs1 = train.scale %q {factor = 0.353553385 : f32} : tensor<2x2x4x8xf32>
  %s1 = train.matmul %qs1, %k {transpose_rhs} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %ss1 = train.scale %s1 {factor = 0.5 : f32} : tensor<2x2x4x4xf32>
  %m1 = train.select %mask, %ss1, %ninf : (tensor<4x4xi1>, tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %p1 = train.softmax %m1 : tensor<2x2x4x4xf32>
  %o1 = train.matmul %p1, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %o2 = train.transpose %o1 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x2x4x8xf32> -> tensor<2x4x2x8xf32>
  "test.use"(%o0, %o2) : (tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) -> ()
  return
}

// -----

// A scale on q other than 1/sqrt(D) (0.5 for D = 8), and a scaled q read
// elsewhere, stay q's: the fused op reads the scaled q with a scale of 1.

// CHECK-LABEL: func.func @attention_scaled_query_kept
// CHECK: %[[Q:.*]] = "test.src"() : () -> tensor<1x2x4x8xf32>
// CHECK: %[[QS:.*]] = train.scale %[[Q]] {factor = 5.000000e-01 : f32}
// CHECK: %[[QT:.*]] = train.transpose %[[QS]]
// CHECK: train.causal_attention %[[QT]], %{{.*}}, %{{.*}} {scale = 1.000000e+00 : f32}
// CHECK: %[[QS1:.*]] = train.scale %[[Q]] {factor = 0.353553385 : f32}
// CHECK: %[[QT1:.*]] = train.transpose %[[QS1]]
// CHECK: train.causal_attention %[[QT1]], %{{.*}}, %{{.*}} {scale = 1.000000e+00 : f32}
// CHECK: "test.use"(%{{.*}}, %{{.*}}, %[[QS1]])
func.func @attention_scaled_query_kept() {
  %q = "test.src"() : () -> tensor<1x2x4x8xf32>
  %k = "test.src"() : () -> tensor<1x2x4x8xf32>
  %v = "test.src"() : () -> tensor<1x2x4x8xf32>
  %mask = train.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %ninf = train.full {value = 0xFF800000 : f32} : tensor<f32>
  %qs0 = train.scale %q {factor = 0.5 : f32} : tensor<1x2x4x8xf32>
  %s0 = train.matmul %qs0, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %m0 = train.select %mask, %s0, %ninf : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p0 = train.softmax %m0 : tensor<1x2x4x4xf32>
  %o0 = train.matmul %p0, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %qs1 = train.scale %q {factor = 0.353553385 : f32} : tensor<1x2x4x8xf32>
  %s1 = train.matmul %qs1, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %m1 = train.select %mask, %s1, %ninf : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p1 = train.softmax %m1 : tensor<1x2x4x4xf32>
  %o1 = train.matmul %p1, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  "test.use"(%o0, %o1, %qs1) : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> ()
  return
}

// -----

// Not causal attention in masked_fill's spelling: the fill where the
// lower-triangular mask is true (that hides the past, not the future), a
// mask that hides the diagonal too (j >= i), and a fill of -1e4 (softmax
// gives such positions a weight that is not exactly 0).

// CHECK-LABEL: func.func @attention_masked_fill_refused
// CHECK-NOT: train.causal_attention
// CHECK-COUNT-3: train.softmax
// CHECK-NOT: train.causal_attention
func.func @attention_masked_fill_refused() {
  %q = "test.src"() : () -> tensor<1x2x4x8xf32>
  %k = "test.src"() : () -> tensor<1x2x4x8xf32>
  %v = "test.src"() : () -> tensor<1x2x4x8xf32>
  %ninf = train.full {value = 0xFF800000 : f32} : tensor<f32>
  %causal = train.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %s0 = train.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %m0 = train.select %causal, %ninf, %s0 : (tensor<4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p0 = train.softmax %m0 : tensor<1x2x4x4xf32>
  %o0 = train.matmul %p0, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %diagonal = train.constant dense<[[true, true, true, true], [false, true, true, true], [false, false, true, true], [false, false, false, true]]> : tensor<4x4xi1>
  %s1 = train.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %m1 = train.select %diagonal, %ninf, %s1 : (tensor<4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p1 = train.softmax %m1 : tensor<1x2x4x4xf32>
  %o1 = train.matmul %p1, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %hidden = train.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
  %small = train.full {value = -1.0e4 : f32} : tensor<f32>
  %s2 = train.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %m2 = train.select %hidden, %small, %s2 : (tensor<4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p2 = train.softmax %m2 : tensor<1x2x4x4xf32>
  %o2 = train.matmul %p2, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  "test.use"(%o0, %o1, %o2) : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> ()
  return
}

// -----

// Linear layers: x . w^T + b with the bias on either side, and x . w^T.
// Not a bias: a [1, out] addend (it stays an add after the product). Not a
// linear layer: a product by an [in, out] weight, a batched weight, and a
// product read elsewhere before its bias (the bias add stays).

// CHECK-LABEL: func.func @linear
// CHECK: %[[X:.*]] = "test.src"() : () -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[W:.*]] = "test.src"() : () -> tensor<4x16xf32>
// CHECK-NEXT: %[[B:.*]] = "test.src"() : () -> tensor<4xf32>
// CHECK-NEXT: %[[B2:.*]] = "test.src"() : () -> tensor<1x4xf32>
// CHECK-NEXT: %[[WT:.*]] = "test.src"() : () -> tensor<16x4xf32>
// CHECK-NEXT: %[[W3:.*]] = "test.src"() : () -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[Y0:.*]] = train.linear %[[X]], %[[W]], %[[B]] : (tensor<2x8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT: %[[Y1:.*]] = train.linear %[[X]], %[[W]], %[[B]] :
// CHECK-NEXT: %[[Y2:.*]] = train.linear %[[X]], %[[W]] : (tensor<2x8x16xf32>, tensor<4x16xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT: %[[P3:.*]] = train.linear %[[X]], %[[W]] :
// CHECK-NEXT: %[[Y3:.*]] = train.add %[[P3]], %[[B2]]
// CHECK-NEXT: %[[Y4:.*]] = train.matmul %[[X]], %[[WT]] :
// CHECK-NEXT: %[[Y5:.*]] = train.matmul %[[X]], %[[W3]] {transpose_rhs}
// CHECK-NEXT: %[[P6:.*]] = train.linear %[[X]], %[[W]] :
// CHECK-NEXT: %[[Y6:.*]] = train.add %[[P6]], %[[B]]
// CHECK-NEXT: "test.use"(%[[Y0]], %[[Y1]], %[[Y2]], %[[Y3]], %[[Y4]], %[[Y5]], %[[Y6]], %[[P6]])
func.func @linear() {
  %x = "test.src"() : () -> tensor<2x8x16xf32>
  %w = "test.src"() : () -> tensor<4x16xf32>
  %b = "test.src"() : () -> tensor<4xf32>
  %b2 = "test.src"() : () -> tensor<1x4xf32>
  %wt = "test.src"() : () -> tensor<16x4xf32>
  %w3 = "test.src"() : () -> tensor<2x4x16xf32>
  %p0 = train.matmul %x, %w {transpose_rhs} : (tensor<2x8x16xf32>, tensor<4x16xf32>) -> tensor<2x8x4xf32>
  %y0 = train.add %p0, %b : tensor<2x8x4xf32>, tensor<4xf32> -> tensor<2x8x4xf32>
  %p1 = train.matmul %x, %w {transpose_rhs} : (tensor<2x8x16xf32>, tensor<4x16xf32>) -> tensor<2x8x4xf32>
  %y1 = train.add %b, %p1 : tensor<4xf32>, tensor<2x8x4xf32> -> tensor<2x8x4xf32>
  %y2 = train.matmul %x, %w {transpose_rhs} : (tensor<2x8x16xf32>, tensor<4x16xf32>) -> tensor<2x8x4xf32>
  %p3 = train.matmul %x, %w {transpose_rhs} : (tensor<2x8x16xf32>, tensor<4x16xf32>) -> tensor<2x8x4xf32>
  %y3 = train.add %p3, %b2 : tensor<2x8x4xf32>, tensor<1x4xf32> -> tensor<2x8x4xf32>
  %y4 = train.matmul %x, %wt : (tensor<2x8x16xf32>, tensor<16x4xf32>) -> tensor<2x8x4xf32>
  %y5 = train.matmul %x, %w3 {transpose_rhs} : (tensor<2x8x16xf32>, tensor<2x4x16xf32>) -> tensor<2x8x4xf32>
  %p6 = train.matmul %x, %w {transpose_rhs} : (tensor<2x8x16xf32>, tensor<4x16xf32>) -> tensor<2x8x4xf32>
  %y6 = train.add %p6, %b : tensor<2x8x4xf32>, tensor<4xf32> -> tensor<2x8x4xf32>
  "test.use"(%y0, %y1, %y2, %y3, %y4, %y5, %y6, %p6) : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> ()
  return
}

// -----

// HuggingFace's Conv1D: x . w with a weight stored [in, out] (a step
// argument, or its bf16 cast), with or without a bias: train.linear of the
// transposed weight. An [in, out] matrix that is not a weight (computed)
// stays a matmul (above).

// CHECK-LABEL: func.func @conv1d
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xf32>, %[[W:.*]]: tensor<16x4xf32>, %[[B:.*]]: tensor<4xf32>)
// CHECK-NEXT: %[[WT0:.*]] = train.transpose %[[W]] {permutation = array<i64: 1, 0>} : tensor<16x4xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[Y0:.*]] = train.linear %[[X]], %[[WT0]], %[[B]] : (tensor<2x8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT: %[[WT1:.*]] = train.transpose %[[W]] {permutation = array<i64: 1, 0>}
// CHECK-NEXT: %[[Y1:.*]] = train.linear %[[X]], %[[WT1]] : (tensor<2x8x16xf32>, tensor<4x16xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT: "test.use"(%[[Y0]], %[[Y1]])
func.func @conv1d(%x: tensor<2x8x16xf32>, %w: tensor<16x4xf32>, %b: tensor<4xf32>) {
  %p0 = train.matmul %x, %w : (tensor<2x8x16xf32>, tensor<16x4xf32>) -> tensor<2x8x4xf32>
  %y0 = train.add %p0, %b : tensor<2x8x4xf32>, tensor<4xf32> -> tensor<2x8x4xf32>
  %y1 = train.matmul %x, %w : (tensor<2x8x16xf32>, tensor<16x4xf32>) -> tensor<2x8x4xf32>
  "test.use"(%y0, %y1) : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> ()
  return
}

// -----

// A linear layer on a view(-1, in) of the activations, viewed back (what
// torch.export records for HF Conv1D and for nn.Linear after a flatten):
// train.linear on the activations themselves. Not when a view mixes the
// features into the rows, nor when the flattened result has another reader.

// CHECK-LABEL: func.func @flattened_linear
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xf32>, %[[W:.*]]: tensor<4x16xf32>, %[[B:.*]]: tensor<4xf32>)
// CHECK-NEXT: %[[Y0:.*]] = train.linear %[[X]], %[[W]], %[[B]] : (tensor<2x8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT: %[[MIXED:.*]] = train.reshape %[[X]] : tensor<2x8x16xf32> to tensor<32x8xf32>
// CHECK-NEXT: %[[W8:.*]] = "test.src"() : () -> tensor<4x8xf32>
// CHECK-NEXT: %[[P1:.*]] = train.linear %[[MIXED]], %[[W8]]
// CHECK-NEXT: %[[Y1:.*]] = train.reshape %[[P1]] : tensor<32x4xf32> to tensor<2x16x4xf32>
// CHECK-NEXT: %[[FLAT:.*]] = train.reshape %[[X]] : tensor<2x8x16xf32> to tensor<16x16xf32>
// CHECK-NEXT: %[[P2:.*]] = train.linear %[[FLAT]], %[[W]]
// CHECK-NEXT: %[[Y2:.*]] = train.reshape %[[P2]] : tensor<16x4xf32> to tensor<2x8x4xf32>
// CHECK-NEXT: "test.use"(%[[Y0]], %[[Y1]], %[[Y2]], %[[P2]])
func.func @flattened_linear(%x: tensor<2x8x16xf32>, %w: tensor<4x16xf32>, %b: tensor<4xf32>) {
  %f0 = train.reshape %x : tensor<2x8x16xf32> to tensor<16x16xf32>
  %p0 = train.linear %f0, %w, %b : (tensor<16x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<16x4xf32>
  %y0 = train.reshape %p0 : tensor<16x4xf32> to tensor<2x8x4xf32>
  %f1 = train.reshape %x : tensor<2x8x16xf32> to tensor<32x8xf32>
  %w8 = "test.src"() : () -> tensor<4x8xf32>
  %p1 = train.linear %f1, %w8 : (tensor<32x8xf32>, tensor<4x8xf32>) -> tensor<32x4xf32>
  %y1 = train.reshape %p1 : tensor<32x4xf32> to tensor<2x16x4xf32>
  %f2 = train.reshape %x : tensor<2x8x16xf32> to tensor<16x16xf32>
  %p2 = train.linear %f2, %w : (tensor<16x16xf32>, tensor<4x16xf32>) -> tensor<16x4xf32>
  %y2 = train.reshape %p2 : tensor<16x4xf32> to tensor<2x8x4xf32>
  "test.use"(%y0, %y1, %y2, %p2) : (tensor<2x8x4xf32>, tensor<2x16x4xf32>, tensor<2x8x4xf32>, tensor<16x4xf32>) -> ()
  return
}

// -----

// GPT-2's learned positions, wpe(arange(T)) added to the tokens' embeddings:
// raised on either side of the add, with ids [T] or [1, T]; not with ids
// other than 0..T-1.

// CHECK-LABEL: func.func @position_embedding
// CHECK: %[[X:.*]] = "test.src"() : () -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[WPE:.*]] = "test.src"() : () -> tensor<16x8xf32>
// CHECK-NEXT: %[[Y0:.*]] = train.add_position_embedding %[[X]], %[[WPE]] : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[Y1:.*]] = train.add_position_embedding %[[X]], %[[WPE]]
// CHECK-NEXT: %[[IDS:.*]] = train.constant dense<[1, 2, 3, 4]>
// CHECK-NEXT: %[[P:.*]] = train.embedding %[[IDS]], %[[WPE]]
// CHECK-NEXT: %[[Y2:.*]] = train.add %[[X]], %[[P]]
// CHECK-NEXT: %[[Y3:.*]] = train.add_position_embedding %[[X]], %[[WPE]]
// CHECK-NEXT: "test.use"(%[[Y0]], %[[Y1]], %[[Y2]], %[[Y3]])
func.func @position_embedding() {
  %x = "test.src"() : () -> tensor<2x4x8xf32>
  %wpe = "test.src"() : () -> tensor<16x8xf32>
  %ids = train.constant dense<[0, 1, 2, 3]> : tensor<4xi32>
  %p0 = train.embedding %ids, %wpe : (tensor<4xi32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %y0 = train.add %x, %p0 : tensor<2x4x8xf32>, tensor<4x8xf32> -> tensor<2x4x8xf32>
  %p1 = train.embedding %ids, %wpe : (tensor<4xi32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %y1 = train.add %p1, %x : tensor<4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %shifted = train.constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  %p2 = train.embedding %shifted, %wpe : (tensor<4xi32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %y2 = train.add %x, %p2 : tensor<2x4x8xf32>, tensor<4x8xf32> -> tensor<2x4x8xf32>
  // torch's arange(T).unsqueeze(0): ids [1, T], positions [1, T, C].
  %ids1 = train.constant dense<[[0, 1, 2, 3]]> : tensor<1x4xi32>
  %p3 = train.embedding %ids1, %wpe : (tensor<1x4xi32>, tensor<16x8xf32>) -> tensor<1x4x8xf32>
  %y3 = train.add %x, %p3 : tensor<2x4x8xf32>, tensor<1x4x8xf32> -> tensor<2x4x8xf32>
  "test.use"(%y0, %y1, %y2, %y3) : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> ()
  return
}

// -----

// log_softmax + nll_loss is the cross-entropy, with the loss's ignore
// index. Log-probabilities that something else reads too (here returned),
// or a log_softmax over another dimension (a transpose away from the loss)
// stay generic.

// CHECK-LABEL: func.func @softmax_cross_entropy
// CHECK: %[[X:.*]] = "test.src"() : () -> tensor<2x4x10xf32>
// CHECK-NEXT: %[[T:.*]] = "test.src"() : () -> tensor<2x4xi32>
// CHECK-NEXT: %[[L0:.*]] = train.softmax_cross_entropy %[[X]], %[[T]] : (tensor<2x4x10xf32>, tensor<2x4xi32>) -> tensor<f32>
// CHECK-NEXT: %[[L1:.*]] = train.softmax_cross_entropy %[[X]], %[[T]] {ignore_index = -100 : i64} : (tensor<2x4x10xf32>, tensor<2x4xi32>) -> tensor<f32>
// CHECK-NEXT: "test.use"(%[[L0]], %[[L1]])
func.func @softmax_cross_entropy() {
  %x = "test.src"() : () -> tensor<2x4x10xf32>
  %t = "test.src"() : () -> tensor<2x4xi32>
  %p0 = train.log_softmax %x : tensor<2x4x10xf32>
  %l0 = train.nll_loss %p0, %t : (tensor<2x4x10xf32>, tensor<2x4xi32>) -> tensor<f32>
  %p1 = train.log_softmax %x : tensor<2x4x10xf32>
  %l1 = train.nll_loss %p1, %t {ignore_index = -100 : i64} : (tensor<2x4x10xf32>, tensor<2x4xi32>) -> tensor<f32>
  "test.use"(%l0, %l1) : (tensor<f32>, tensor<f32>) -> ()
  return
}

// CHECK-LABEL: func.func @nll_loss_refused
// CHECK: %[[P:.*]] = train.log_softmax
// CHECK-NEXT: %[[L0:.*]] = train.nll_loss %[[P]]
// CHECK: %[[Q:.*]] = train.log_softmax
// CHECK-NEXT: %[[QT:.*]] = train.transpose %[[Q]]
// CHECK-NEXT: %[[L1:.*]] = train.nll_loss %[[QT]]
// CHECK-NEXT: "test.use"(%[[L0]], %[[P]], %[[L1]])
// CHECK-NOT: softmax_cross_entropy
func.func @nll_loss_refused() {
  %x = "test.src"() : () -> tensor<4x10xf32>
  %t = "test.src"() : () -> tensor<4xi32>
  %u = "test.src"() : () -> tensor<10xi32>
  %p = train.log_softmax %x : tensor<4x10xf32>
  %l0 = train.nll_loss %p, %t : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  // log_softmax(x, dim=0) on x [10, 4] as a front end writes it: over the
  // last dimension of the transpose; the loss reads it transposed back.
  %y = "test.src"() : () -> tensor<10x4xf32>
  %yt = train.transpose %y {permutation = array<i64: 1, 0>} : tensor<10x4xf32> -> tensor<4x10xf32>
  %q = train.log_softmax %yt : tensor<4x10xf32>
  %qt = train.transpose %q {permutation = array<i64: 1, 0>} : tensor<4x10xf32> -> tensor<10x4xf32>
  %l1 = train.nll_loss %qt, %u : (tensor<10x4xf32>, tensor<10xi32>) -> tensor<f32>
  "test.use"(%l0, %p, %l1) : (tensor<f32>, tensor<4x10xf32>, tensor<f32>) -> ()
  return
}

// GPT-2: learned positions, per block three biased projections read by one
// attention, the output projection, and the MLP's linear-GELU-linear; the
// tied lm_head. No constant is left.
// GPT2-LABEL: func.func @train_step
// GPT2: train.embedding
// GPT2-NEXT: train.add_position_embedding
// GPT2-COUNT-2: train.causal_attention
// GPT2-NOT: train.causal_attention
// GPT2: train.gelu
// GPT2: train.softmax_cross_entropy

// Llama: RMSNorm, rotary q and k, grouped-query attention on the two KV
// heads, SwiGLU; no table or mask constant is left.
// LLAMA-LABEL: func.func @train_step
// LLAMA: train.rms_norm
// LLAMA: train.rope %{{.*}} : tensor<8x64x4x16xbf16>
// LLAMA: train.rope %{{.*}} : tensor<8x64x2x16xbf16>
// LLAMA: train.causal_attention %{{.*}} : (tensor<8x64x4x16xbf16>, tensor<8x64x2x16xbf16>, tensor<8x64x2x16xbf16>)
// LLAMA: train.rms_norm
// LLAMA: train.swiglu
// LLAMA: train.causal_attention
// LLAMA-NOT: train.causal_attention
// LLAMA: train.rms_norm
// LLAMA: train.softmax_cross_entropy
