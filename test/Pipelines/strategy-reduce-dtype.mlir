// RUN: shard-opt --strategy=zero3 --overlap=false --world-size=2 %S/Inputs/mixed-precision-step.mlir | FileCheck %s --check-prefix=NATIVE
// RUN: shard-opt --strategy=zero3 --overlap=false --world-size=2 --reduce-dtype=f32 %S/Inputs/mixed-precision-step.mlir | FileCheck %s --check-prefix=F32
// RUN: shard-opt --strategy=zero3 --overlap=false --world-size=2 --reduce-dtype=f32 %S/Inputs/mixed-precision-step.mlir | shard-opt > /dev/null
// RUN: shard-opt %S/Inputs/mixed-precision-step.mlir --pass-pipeline='builtin.module(autoshard-strategy{strategy=ddp world-size=2 expose-gradients=true reduce-dtype=f32 overlap=false})' | FileCheck %s --check-prefix=EXPOSED
// RUN: not shard-opt --world-size=1 --strategy=zero3 --overlap=false --reduce-dtype=f16 %S/Inputs/mixed-precision-step.mlir 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not shard-opt %S/Inputs/mixed-precision-step.mlir --pass-pipeline='builtin.module(autoshard-plan{strategy=zero3 world-size=2 reduce-dtype=f16})' 2>&1 | FileCheck %s --check-prefix=BADPASS

// Mixed precision: parameters are gathered in bf16 either way; gradients
// are reduced in their own type (bf16) by default, or cast up and reduced
// in f32 with --reduce-dtype=f32, and the optimizer and the clipping norm
// read the f32 shard.

// NATIVE: bucket_cap_mb = 25>
// NATIVE: %[[WB:.*]] = train.cast %arg0 : tensor<6xf32> to tensor<6xbf16>
// NATIVE-NEXT: train.all_gather_shards %[[WB]] on @world grid_axes = [0] : tensor<6xbf16> -> tensor<3x4xbf16>
// NATIVE: %[[G:.*]] = train.linear_grad_weight
// NATIVE-NEXT: %[[GS:.*]] = train.reduce_scatter_shards %[[G]] on @world grid_axes = [0] reduction = average : tensor<3x4xbf16> -> tensor<6xbf16>
// NATIVE: train.adamw %arg0, %[[GS]]

// F32: bucket_cap_mb = 25, reduce_dtype = f32>
// F32: %[[WB:.*]] = train.cast %arg0 : tensor<6xf32> to tensor<6xbf16>
// F32-NEXT: train.all_gather_shards %[[WB]] on @world grid_axes = [0] : tensor<6xbf16> -> tensor<3x4xbf16>
// F32: %[[G:.*]] = train.linear_grad_weight {{.*}} -> tensor<3x4xbf16>
// F32-NEXT: %[[G32:.*]] = train.cast %[[G]] : tensor<3x4xbf16> to tensor<3x4xf32>
// F32-NEXT: %[[GS:.*]] = train.reduce_scatter_shards %[[G32]] on @world grid_axes = [0] reduction = average : tensor<3x4xf32> -> tensor<6xf32>
// F32-NEXT: train.sum_of_squares %[[GS]] : tensor<6xf32>
// F32: train.adamw %arg0, %[[GS]]

// An exposed gradient keeps its type: the reduced f32 value is cast back.
// EXPOSED: %[[G32:.*]] = train.cast %{{.*}} : tensor<3x4xbf16> to tensor<3x4xf32>
// EXPOSED-NEXT: %[[R:.*]]:2 = train.all_reduce_bucket %{{.*}}, %[[G32]] on @world grid_axes = [0] reduction = average : tensor<f32>, tensor<3x4xf32>
// EXPOSED-NEXT: %[[BACK:.*]] = train.cast %[[R]]#1 : tensor<3x4xf32> to tensor<3x4xbf16>
// EXPOSED: train.adamw %arg0, %[[R]]#1
// EXPOSED: return {{.*}}, %[[BACK]], %[[R]]#0, %{{.*}} :

// BAD: shard-opt: for the --reduce-dtype option: unknown value 'f16'; valid: gradient, f32
// BADPASS: shard-opt: for the --reduce-dtype option: unknown value 'f16'; valid: gradient, f32
