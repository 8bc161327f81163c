// Bad options of autoshard-plan are errors naming the value and what is valid.

// RUN: not shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=zero9 world-size=2})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STRATEGY
// STRATEGY: error: unknown strategy 'zero9'; valid strategies: ddp, zero1, zero2, zero3, fsdp, hybrid

// RUN: not shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=ddp world-size=0})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=WORLD
// WORLD: error: --world-size must be at least 1, got 0

func.func @step(%l: tensor<f32> {train.role = #train.role<hyper>, train.name = "l", train.init = #train.init<zeros>})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"}) attributes {train.step} {
  return %l : tensor<f32>
}

// RUN: not shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=hybrid world-size=4 shard-group-size=3})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=GROUP
// GROUP: error: --strategy=hybrid needs --shard-group-size dividing the world size 4, got 3

// RUN: not shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=zero3 world-size=4 shard-group-size=2})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOTHYBRID
// NOTHYBRID: error: --shard-group-size is for --strategy=hybrid; 'zero3' shards over the whole world

// RUN: not shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=ddp world-size=2 bucket-cap-mb=0})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BUCKET
// BUCKET: error: --bucket-cap-mb must be at least 1, got 0

// Each preset's plan, and hybrid's 2-D grid.
// RUN: shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=hybrid world-size=8 shard-group-size=4 reshard-after-forward=false bucket-cap-mb=50})' | FileCheck %s --check-prefix=HYBRID
// HYBRID: shard.grid @world(shape = 2x4)
// HYBRID: train.plan = #train.plan<strategy = "hybrid", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [1], unit = block, reshard = after_backward, bucket_cap_mb = 50>
// RUN: shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=zero1 world-size=2})' | FileCheck %s --check-prefix=ZERO1
// ZERO1: #train.plan<strategy = "zero1", grid = @world, optimizer_states = sharded, gradients = replicated, parameters = replicated, shard_axes = [0], unit = param
// RUN: shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=zero2 world-size=2})' | FileCheck %s --check-prefix=ZERO2
// ZERO2: #train.plan<strategy = "zero2", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = replicated, shard_axes = [0], unit = param
// RUN: shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=fsdp world-size=2})' | FileCheck %s --check-prefix=FSDP
// FSDP: #train.plan<strategy = "fsdp", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = block

// Parameter groups: PRESET=REGEX in order, then the persistence threshold
// (small parameters whole, their gradients and states as the plan's). On a
// hybrid plan a non-hybrid sharded group shards over every grid axis.
// RUN: shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=zero3 world-size=4 param-groups={"ddp=wte|wpe","zero1=lm_head\..*"} persistence-threshold=1000})' | FileCheck %s --check-prefix=GROUPS
// GROUPS: bucket_cap_mb = 25, groups = [<names = "wte|wpe", optimizer_states = replicated, gradients = replicated, parameters = replicated, unit = param>, <names = "lm_head\\..*", optimizer_states = sharded, gradients = replicated, parameters = replicated, unit = param>, <max_elements = 1000, optimizer_states = sharded, gradients = sharded, parameters = replicated, unit = param, shard_axes = [0]>]>
// RUN: shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=hybrid world-size=4 shard-group-size=2 param-groups={"zero3=wte"}})' | FileCheck %s --check-prefix=HYBRIDGROUP
// HYBRIDGROUP: groups = [<names = "wte", optimizer_states = sharded, gradients = sharded, parameters = sharded, unit = param, shard_axes = [0, 1]>]

// RUN: not shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=zero3 world-size=2 param-groups={"zero9=wte"}})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=GROUPPRESET
// GROUPPRESET: error: parameter group 'zero9=wte' must be PRESET=REGEX with PRESET one of ddp, zero1, zero2, zero3, fsdp, hybrid
// RUN: not shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=zero3 world-size=2 param-groups={"ddp"}})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=GROUPREGEX
// GROUPREGEX: error: parameter group 'ddp' must be PRESET=REGEX with PRESET one of ddp, zero1, zero2, zero3, fsdp, hybrid
// RUN: not shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=zero3 world-size=2 param-groups={"ddp=wte("}})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BADREGEX
// BADREGEX: error: param_group names "wte(" is not a valid regular expression: parentheses not balanced
// RUN: not shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=zero3 world-size=2 param-groups={"hybrid=wte"}})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=HYBRIDONLY
// HYBRIDONLY: error: parameter group 'hybrid=wte': a hybrid group needs the hybrid strategy's 2-D grid
// RUN: not shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=zero2 world-size=2 persistence-threshold=100})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=THRESHOLD
// THRESHOLD: error: a persistence threshold keeps small parameters whole under a strategy that shards parameters (zero3, fsdp, hybrid); 'zero2' does not shard them
// RUN: not shard-opt %s --pass-pipeline='builtin.module(autoshard-plan{strategy=zero3 world-size=2 persistence-threshold=-1})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NEGTHRESHOLD
// NEGTHRESHOLD: error: --persistence-threshold must be at least 0, got -1
