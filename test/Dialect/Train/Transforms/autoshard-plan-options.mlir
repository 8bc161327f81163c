// Bad options of autoshard-plan are errors naming the value and what is valid.

// RUN: not shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=zero9 world-size=2})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STRATEGY
// STRATEGY: error: unknown strategy 'zero9'; valid strategies: ddp, zero1, zero2, zero3, fsdp, hybrid

// RUN: not shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=ddp world-size=0})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=WORLD
// WORLD: error: world size must be at least 1, got 0

func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
  return %l : tensor<f32>
}
