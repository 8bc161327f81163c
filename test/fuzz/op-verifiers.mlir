// Ops whose verifiers divided by zero or overflowed on hostile shapes and
// attributes. The slice and attention cases were found by random train ops
// (tools/shard-fuzz/random-ops.py, 9000 of them through shard-opt in the
// shard-fuzz build: UBSan reported both); the group-size cases by reading
// the code next to them. Each is now a diagnostic.
// RUN: shard-opt -split-input-file -verify-diagnostics %s

// A slice whose offset plus rows overflowed int64 in the bounds check.
func.func @f(%x: tensor<8x64xi32>) {
  // expected-error@+1 {{rows [9223372036854775807, 9223372036854775811) lie outside the input's 8 rows}}
  %mb = train.slice_rows %x {offset = 9223372036854775807 : i64} : tensor<8x64xi32> to tensor<4x64xi32>
  return
}

// -----

// A dynamic number of rows.
func.func @f(%x: tensor<?x64xi32>) {
  // expected-error@+1 {{takes a static number of rows of a static batch, got 'tensor<4x64xi32>' of 'tensor<?x64xi32>'}}
  %mb = train.slice_rows %x {offset = 0 : i64} : tensor<?x64xi32> to tensor<4x64xi32>
  return
}

// -----

// Keys and values with no heads: the query heads were divided by zero.
func.func @f(%q: tensor<2x8x4x4xf32>, %k: tensor<2x8x0x4xf32>) {
  // expected-error@+2 {{'train.causal_attention' key 'tensor<2x8x0x4xf32>' has no heads; attention needs at least one key/value head}}
  // expected-error@+1 {{failed to infer returned types}}
  %o, %l = train.causal_attention %q, %k, %k : (tensor<2x8x4x4xf32>, tensor<2x8x0x4xf32>, tensor<2x8x0x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x4x8xf32>)
  return
}

// -----

// A flat-shard collective over an axis of size 0: the shard's size was
// divided by the group's.
shard.grid @world(shape = 0)
func.func @f(%s: tensor<4xf32>) {
  // expected-error@+1 {{grid axis 0 of world has size 0; a group has at least one rank}}
  %x = train.all_gather_shards %s on @world grid_axes = [0] : tensor<4xf32> -> tensor<3x5xf32>
  return
}

// -----

// A group of more ranks than int64 counts.
shard.grid @world(shape = 4294967296x4294967296)
func.func @f(%s: tensor<1xf32>) {
  // expected-error@+1 {{grid axes of world span more than 2^63 ranks}}
  %x = train.all_gather_shards %s on @world grid_axes = [0, 1] : tensor<1xf32> -> tensor<3x5xf32>
  return
}
