// A bucket cap whose bytes overflow int64 (found by hand while probing the
// options; UBSan in the shard-fuzz build reported autoshard-group-collectives
// shifting bucket_cap_mb by 20 bits past int64). The cap is at most
// 2^63 / 2^20 - 1 = 8796093022207 MiB, in the plan, the pass option and the
// tools' flag.
// RUN: shard-opt --autoshard-group-collectives -split-input-file -verify-diagnostics %s
// RUN: not shard-opt %examples/mlp.mlir --pass-pipeline='builtin.module(autoshard-plan{strategy=ddp world-size=2 bucket-cap-mb=8796093022208})' 2>&1 | FileCheck %s --check-prefix=PASS
// PASS: error: --bucket-cap-mb must be at most 8796093022207 (8 EiB in bytes), got 8796093022208
// RUN: not shard-opt --strategy=ddp --world-size=2 --bucket-cap-mb=8796093022208 %examples/mlp.mlir 2>&1 | FileCheck %s --check-prefix=FLAG
// FLAG: shard-opt: error: --bucket-cap-mb must be at most 8796093022207 (8 EiB in bytes), got 8796093022208
// The largest cap compiles: the seven gradients in one bucket.
// RUN: shard-opt --strategy=ddp --world-size=2 --overlap=false --bucket-cap-mb=8796093022207 %examples/mlp.mlir | FileCheck %s --check-prefix=MAX
// MAX: bucket_cap_mb = 8796093022207
// MAX: train.all_reduce_bucket %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} on @world

shard.grid @world(shape = 2)
// expected-error@+1 {{bucket_cap_mb must be at most 8796093022207 (8 EiB in bytes), got 8796093022208}}
func.func private @f() attributes {train.step, train.plan = #train.plan<strategy = "x", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 8796093022208>}

// -----

shard.grid @world(shape = 2)
// expected-error@+1 {{bucket_cap_mb must be at most 8796093022207 (8 EiB in bytes), got 9223372036854775807}}
func.func private @f() attributes {train.step, train.plan = #train.plan<strategy = "x", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 9223372036854775807>}
