// RUN: shard-opt --strategy=ddp --world-size=2 \
// RUN:   --pass-pipeline='builtin.module(autoshard-lower-to-llvm)' %examples/mlp.mlir | FileCheck %s
// RUN: shard-opt --strategy=ddp --world-size=2 --overlap=false \
// RUN:   --pass-pipeline='builtin.module(autoshard-lower-to-llvm)' %examples/mlp.mlir | FileCheck %s --check-prefix=SYNC

// The lowering pipeline leaves only the LLVM dialect: the manifest global,
// declarations of the runtime's functions and the step itself.

// CHECK-NOT: train.
// CHECK-NOT: shard.
// CHECK-NOT: func.
// CHECK-DAG: llvm.mlir.global external constant @autoshard_manifest
// The manifest counts this rank's FLOPs: 32 rows through fc1 (32->64), fc2
// (64->64) and fc3 (64->10), 2 FLOPs per multiply-add: 434,176 forward;
// backward the input gradients of fc3 and fc2 and every weight gradient,
// 737,280.
// CHECK-DAG: grid 2\0Aflops 1171456\0A
// CHECK-DAG: llvm.func @asrt_linear_fwd(!llvm.ptr, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64)
// CHECK-DAG: llvm.func @asrt_bucket_begin(!llvm.ptr, i32, i32, i32, i32)
// CHECK-DAG: llvm.func @asrt_bucket_add(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64)
// CHECK: llvm.func @autoshard_step(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// The loss and the six gradients are averaged in one bucket, started
// asynchronously and waited before the clipping norm reads it. The bucket
// packs into a buffer of the step's arena: the 6922 gradient elements and
// the loss, each padded to a multiple of the 2 ranks, 27696 bytes.
// CHECK: llvm.call @asrt_bucket_begin(
// CHECK-COUNT-7: llvm.call @asrt_bucket_add(
// CHECK: %[[BYTES:.*]] = llvm.mlir.constant(27696 : i64) : i64
// CHECK-NEXT: llvm.call @asrt_bucket_pack_buffer(%{{.*}}, %{{.*}}, %[[BYTES]]) : (!llvm.ptr, !llvm.ptr, i64) -> ()
// CHECK-NEXT: %[[H:.*]] = llvm.call @asrt_bucket_start(%{{.*}}) : (!llvm.ptr) -> i64
// The wait is an op of its own, after its trace site (asrt_op_site).
// CHECK-NEXT: %[[SITE:.*]] = llvm.mlir.constant({{[0-9]+}} : i32) : i32
// CHECK-NEXT: llvm.call @asrt_op_site(%{{.*}}, %[[SITE]]) : (!llvm.ptr, i32) -> ()
// CHECK-NEXT: llvm.call @asrt_wait(%{{.*}}, %[[H]]) : (!llvm.ptr, i64) -> ()
// CHECK-NOT: asrt_all_reduce
// CHECK: llvm.return

// Without overlap the bucket runs where it is issued.
// SYNC: llvm.call @asrt_bucket_begin(
// SYNC-COUNT-7: llvm.call @asrt_bucket_add(
// SYNC: llvm.call @asrt_bucket_pack_buffer(
// SYNC-NEXT: llvm.call @asrt_bucket_end(
// SYNC-NOT: asrt_bucket_start
