// RUN: shard-opt --strategy=zero2 --overlap=false --world-size=2 %S/Inputs/accumulation-step.mlir | FileCheck %s --check-prefix=STEP
// RUN: shard-opt --strategy=zero2 --overlap=false --world-size=2 --reduce-every=micro-batch %S/Inputs/accumulation-step.mlir | FileCheck %s --check-prefix=MB
// RUN: shard-opt --strategy=zero2 --overlap=false --world-size=2 --reduce-every=micro-batch %S/Inputs/accumulation-step.mlir | shard-opt > /dev/null
// RUN: shard-opt --strategy=zero3 --overlap=false --world-size=2 --reduce-every=micro-batch --reduce-dtype=f32 %S/Inputs/accumulation-step.mlir | FileCheck %s --check-prefix=F32
// RUN: shard-opt --strategy=zero2 --world-size=2 --reduce-every=micro-batch %S/Inputs/accumulation-step.mlir | FileCheck %s --check-prefix=OVERLAP
// RUN: shard-opt --strategy=zero2 --overlap=false --world-size=2 --reduce-dtype=f32 %S/Inputs/accumulation-step.mlir | FileCheck %s --check-prefix=ACC32
// RUN: shard-opt --strategy=ddp --overlap=false --world-size=2 --reduce-dtype=f32 %S/Inputs/accumulation-step.mlir | FileCheck %s --check-prefix=DDP32
// RUN: shard-opt %S/Inputs/accumulation-step.mlir --pass-pipeline='builtin.module(autoshard-strategy{strategy=zero1 world-size=2 expose-gradients=true reduce-dtype=f32 overlap=false})' | FileCheck %s --check-prefix=ZERO1
// RUN: shard-opt %S/Inputs/accumulation-step.mlir --pass-pipeline='builtin.module(autoshard-strategy{strategy=zero2 world-size=2 expose-gradients=true reduce-every=micro-batch overlap=false})' | FileCheck %s --check-prefix=EXPOSED
// RUN: shard-opt --strategy=zero2 --overlap=false --world-size=2 --reduce-every=micro-batch %S/Inputs/mixed-precision-step.mlir | FileCheck %s --check-prefix=ONE
// RUN: not shard-opt --world-size=1 --strategy=zero2 --reduce-every=sometimes %S/Inputs/accumulation-step.mlir 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not shard-opt --strategy=zero1 --world-size=2 --reduce-every=micro-batch %S/Inputs/accumulation-step.mlir 2>&1 | FileCheck %s --check-prefix=WHOLE
// RUN: shard-opt --strategy=zero1 --overlap=false --world-size=2 --reduce-every=micro-batch --param-group=zero2=w %S/Inputs/accumulation-step.mlir | FileCheck %s --check-prefix=GROUP
// RUN: not shard-opt %S/Inputs/accumulation-step.mlir --pass-pipeline='builtin.module(autoshard-plan{strategy=zero2 world-size=2 reduce-every=micro_batch})' 2>&1 | FileCheck %s --check-prefix=BADPASS

// Gradient accumulation under sharded gradients. By default (reduce_every
// = step) the micro-batches' bf16 gradients are summed in full and the
// mean reduce-scattered once, after the last micro-batch: the full sum
// lives across micro-batches. With --reduce-every=micro-batch each
// micro-batch's gradient (its two contributions summed) is reduce-scattered
// as soon as it is complete and its mean share added into an f32 shard
// where the micro-batch ends: twice the reduce-scatter bytes, and no full
// gradient outlives its micro-batch. An exposed gradient is that shard
// cast back to the gradient's type.

// STEP: bucket_cap_mb = 25>
// STEP: %[[G0:.*]] = train.add
// STEP-NEXT: train.slice_rows %arg1 {offset = 2 : i64}
// STEP-NOT: train.reduce_scatter_shards
// STEP: %[[S:.*]] = train.add %[[G0]],
// STEP-NEXT: train.linear_grad_weight
// STEP-NEXT: %[[SUM:.*]] = train.add %[[S]],
// STEP-NEXT: %[[MEAN:.*]] = train.scale %[[SUM]] {factor = 5.000000e-01 : f32} : tensor<4x4xbf16>
// STEP-NEXT: %[[GS:.*]] = train.reduce_scatter_shards %[[MEAN]] on @world grid_axes = [0] reduction = average : tensor<4x4xbf16> -> tensor<8xbf16>
// STEP-NOT: train.reduce_scatter_shards
// STEP: train.adamw %{{.*}}, %[[GS]],

// MB: bucket_cap_mb = 25, reduce_every = micro_batch>
// MB: train.slice_rows %arg1 {offset = 0 : i64}
// MB: %[[A0:.*]] = train.linear_grad_weight
// MB-NEXT: %[[B0:.*]] = train.linear_grad_weight
// MB-NEXT: %[[G0:.*]] = train.add %[[A0]], %[[B0]] : tensor<4x4xbf16>
// MB-NEXT: %[[R0:.*]] = train.reduce_scatter_shards %[[G0]] on @world grid_axes = [0] reduction = average : tensor<4x4xbf16> -> tensor<8xbf16>
// MB-NEXT: %[[U0:.*]] = train.cast %[[R0]] : tensor<8xbf16> to tensor<8xf32>
// MB-NEXT: %[[H0:.*]] = train.scale %[[U0]] {factor = 5.000000e-01 : f32} : tensor<8xf32>
// MB-NEXT: train.slice_rows %arg1 {offset = 2 : i64}
// MB: %[[A1:.*]] = train.linear_grad_weight
// MB-NEXT: %[[B1:.*]] = train.linear_grad_weight
// MB-NEXT: %[[G1:.*]] = train.add %[[A1]], %[[B1]] : tensor<4x4xbf16>
// MB-NEXT: %[[R1:.*]] = train.reduce_scatter_shards %[[G1]] {{.*}} -> tensor<8xbf16>
// MB-NOT: tensor<4x4xbf16>
// MB: %[[U1:.*]] = train.cast %[[R1]] : tensor<8xbf16> to tensor<8xf32>
// MB-NEXT: %[[H1:.*]] = train.scale %[[U1]] {factor = 5.000000e-01 : f32} : tensor<8xf32>
// MB-NEXT: %[[GS:.*]] = train.add %[[H0]], %[[H1]] : tensor<8xf32>
// MB-NEXT: train.sum_of_squares %[[GS]] : tensor<8xf32>
// MB: train.adamw %{{.*}}, %[[GS]],

// With f32 reduction each micro-batch's gradient is cast up before its
// reduce-scatter and the shard accumulates in f32.
// F32: reduce_dtype = f32, reduce_every = micro_batch>
// F32: %[[G0:.*]] = train.add %{{.*}} : tensor<4x4xbf16>
// F32-NEXT: %[[C0:.*]] = train.cast %[[G0]] : tensor<4x4xbf16> to tensor<4x4xf32>
// F32-NEXT: %[[R0:.*]] = train.reduce_scatter_shards %[[C0]] {{.*}} : tensor<4x4xf32> -> tensor<8xf32>
// F32-NEXT: %[[H0:.*]] = train.scale %[[R0]] {factor = 5.000000e-01 : f32} : tensor<8xf32>
// F32-NEXT: train.slice_rows %arg1 {offset = 2 : i64}
// F32: %[[G1:.*]] = train.add %{{.*}} : tensor<4x4xbf16>
// F32-NEXT: %[[C1:.*]] = train.cast %[[G1]] : tensor<4x4xbf16> to tensor<4x4xf32>
// F32-NEXT: %[[R1:.*]] = train.reduce_scatter_shards %[[C1]]
// F32: %[[H1:.*]] = train.scale %[[R1]] {factor = 5.000000e-01 : f32} : tensor<8xf32>
// F32-NEXT: %[[GS:.*]] = train.add %[[H0]], %[[H1]] : tensor<8xf32>
// F32: train.adamw %arg0, %[[GS]],

// Reduced once per step in f32, the micro-batches' bf16 gradients are
// accumulated in f32 (FSDP2 accumulates in its reduce dtype): each micro-
// batch's sum is cast up as soon as it is complete and added into an f32
// sum, whose mean the reduction reads; no bf16 sum spans micro-batches.
// ACC32: reduce_dtype = f32>
// ACC32: %[[G0:.*]] = train.add %{{.*}} : tensor<4x4xbf16>
// ACC32-NEXT: %[[C0:.*]] = train.cast %[[G0]] : tensor<4x4xbf16> to tensor<4x4xf32>
// ACC32-NEXT: train.slice_rows %arg1 {offset = 2 : i64}
// ACC32-NOT: train.reduce_scatter_shards
// ACC32: %[[G1:.*]] = train.add %{{.*}} : tensor<4x4xbf16>
// ACC32-NEXT: %[[C1:.*]] = train.cast %[[G1]] : tensor<4x4xbf16> to tensor<4x4xf32>
// ACC32-NEXT: %[[SUM:.*]] = train.add %[[C0]], %[[C1]] : tensor<4x4xf32>
// ACC32-NEXT: %[[MEAN:.*]] = train.scale %[[SUM]] {factor = 5.000000e-01 : f32} : tensor<4x4xf32>
// ACC32-NEXT: %[[GS:.*]] = train.reduce_scatter_shards %[[MEAN]] {{.*}} : tensor<4x4xf32> -> tensor<8xf32>
// ACC32-NOT: train.reduce_scatter_shards
// ACC32: train.adamw %{{.*}}, %[[GS]],

// DDP averages the f32 mean over the grid (in one bucket with the loss).
// DDP32: %[[C0:.*]] = train.cast %{{.*}} : tensor<4x4xbf16> to tensor<4x4xf32>
// DDP32-NEXT: train.slice_rows %arg1 {offset = 2 : i64}
// DDP32: %[[C1:.*]] = train.cast %{{.*}} : tensor<4x4xbf16> to tensor<4x4xf32>
// DDP32-NEXT: %[[SUM:.*]] = train.add %[[C0]], %[[C1]] : tensor<4x4xf32>
// DDP32-NEXT: %[[MEAN:.*]] = train.scale %[[SUM]]
// DDP32: %[[R:.*]]:2 = train.all_reduce_bucket %[[MEAN]], %{{.*}} : tensor<4x4xf32>, tensor<f32> -> tensor<4x4xf32>, tensor<f32>
// DDP32: train.adamw %arg0, %[[R]]#0,

// ZeRO-1 reduce-scatters the f32 mean at the optimizer; the exposed
// gradient is the shard cast back to bf16.
// ZERO1: %[[MEAN:.*]] = train.scale %{{.*}} {factor = 5.000000e-01 : f32} : tensor<4x4xf32>
// ZERO1: %[[GS:.*]] = train.reduce_scatter_shards %[[MEAN]] {{.*}} : tensor<4x4xf32> -> tensor<8xf32>
// ZERO1: %[[BACK:.*]] = train.cast %[[GS]] : tensor<8xf32> to tensor<8xbf16>
// ZERO1: train.adamw %{{.*}}, %[[GS]],
// ZERO1: return {{.*}}%[[BACK]]

// Overlapped, the first micro-batch's reduce-scatter is waited for where
// that micro-batch ends, before the next one computes.
// OVERLAP: %[[T0:.*]] = train.collective_start reduce_scatter_shards
// OVERLAP-NEXT: %[[R0:.*]] = train.collective_wait %[[T0]]
// OVERLAP-NEXT: %[[U0:.*]] = train.cast %[[R0]]
// OVERLAP-NEXT: train.scale %[[U0]]
// OVERLAP-NEXT: train.slice_rows %arg1 {offset = 2 : i64}

// EXPOSED: %[[GS:.*]] = train.add %{{.*}}, %{{.*}} : tensor<8xf32>
// EXPOSED-NEXT: %[[BACK:.*]] = train.cast %[[GS]] : tensor<8xf32> to tensor<8xbf16>
// EXPOSED: train.adamw %{{.*}}, %[[GS]],
// EXPOSED: return {{.*}}%[[BACK]]

// A step without micro-batches reduces as it would anyway.
// ONE: %[[G:.*]] = train.linear_grad_weight
// ONE-NEXT: %[[GS:.*]] = train.reduce_scatter_shards %[[G]]
// ONE: train.adamw %{{.*}}, %[[GS]],

// BAD: shard-opt: for the --reduce-every option: unknown value 'sometimes'; valid: step, micro-batch
// WHOLE: error: --reduce-every=micro-batch reduce-scatters sharded gradients every micro-batch; 'zero1' keeps gradients whole (use zero2, zero3, fsdp or hybrid, or a parameter group of one of them)
// GROUP: reduce_every = micro_batch, groups = [<names = "w"
// GROUP-COUNT-2: train.reduce_scatter_shards
// BADPASS: shard-opt: for the --reduce-every option: unknown value 'micro_batch'; valid: step, micro-batch
