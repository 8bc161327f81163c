// RUN: shard-opt %examples/mlp.mlir --autoshard-autodiff --autoshard-plan-memory | FileCheck %s --check-prefix=ONE
// RUN: shard-opt --strategy=zero3 --world-size=2 --overlap=false %examples/mlp.mlir --autoshard-plan-memory | FileCheck %s --check-prefix=ZERO3
// RUN: shard-opt --strategy=ddp --world-size=2 %examples/mlp.mlir --autoshard-plan-memory | shard-opt > /dev/null
// RUN: not shard-opt --strategy=ddp --world-size=2 %examples/mlp.mlir --autoshard-plan-memory='budget=100KiB' 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not shard-opt --strategy=ddp --world-size=2 %examples/mlp.mlir --autoshard-plan-memory='budget=lots' 2>&1 | FileCheck %s --check-prefix=BADBUDGET
// RUN: not shard-opt --strategy=ddp --world-size=2 --memory-budget=100KiB %examples/mlp.mlir 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not shard-opt %examples/mlp.mlir --pass-pipeline='builtin.module(autoshard-autodiff,autoshard-plan{strategy=ddp world-size=2},autoshard-plan-memory)' 2>&1 | FileCheck %s --check-prefix=UNPARTITIONED

// The example MLP: 6922 parameters (fc1 64x32+64, fc2 64x64+64, fc3 10x64+10)
// in f32 are 27688 bytes, and SGD's momentum buffers as many; the global
// batch is 64 rows of 32 f32 features and 64 i32 labels, 8448 bytes; the lr
// hyperparameter and the loss result 4 bytes each. On one rank all of it
// persists; the step's own buffers (activations, the gradients) come on top,
// in an arena slightly larger than their live peak (64-byte alignment and
// packing).
// ONE: train.memory_plan = {
// ONE-SAME: arena = 84544
// ONE-SAME: batch = 8448
// ONE-SAME: live = 84520
// ONE-SAME: optimizer_states = 27688
// ONE-SAME: other = 8
// ONE-SAME: parameters = 27688
// ONE-SAME: peak = 148376
// ONE-SAME: persistent = 63832

// ZeRO-3 on 2 ranks: parameters and momentum are flat shards, 1024+32+2048+
// 32+320+5 = 3461 elements (13844 bytes) each; half the batch (4224 bytes).
// The peak is at the gradients' reduce-scatter: one bucket of every
// gradient, packed into a buffer of the step's arena (6922 padded to 2 x
// 3461 elements, 27688 bytes), while the full gradients are alive.
// ZERO3: train.memory_plan = {
// ZERO3-SAME: batch = 4224
// ZERO3-SAME: communication = 27688
// ZERO3-SAME: optimizer_states = 13844
// ZERO3-SAME: parameters = 13844
// ZERO3-SAME: persistent = 31920

// DDP on 2 ranks: each gradient is all-reduced in place (it is read by
// nothing but its bucket), so the reduced gradients need no buffers of
// their own; the bucket packs into a buffer of the arena, counted at the
// peak like any other.
// BUDGET: error: 'func.func' op needs 112.40 KiB (115096 bytes) per rank at its peak, over the memory budget of 100.00 KiB (102400 bytes)
// BUDGET: note: at the peak: parameters 27.04 KiB (27688 bytes), gradients 27.04 KiB (27688 bytes), optimizer_states 27.04 KiB (27688 bytes), activations 4 B, buffers 31.28 KiB (32028 bytes) = communication 27.05 KiB (27696 bytes) + batch 4.12 KiB (4224 bytes) + other 108 B{{$}}
// BUDGET: note: largest step tensors at the peak: bucket pack buffer 27.05 KiB (27696 bytes), gradient of fc2.weight 16.00 KiB (16384 bytes)
// BUDGET: note: to fit: shard more

// BADBUDGET: error: memory budget 'lots' is not a positive size; write bytes or a size with a unit, such as 80GiB or 1.5GB

// UNPARTITIONED: error: 'func.func' op has a plan but is not partitioned; its memory is planned after autoshard-partition
