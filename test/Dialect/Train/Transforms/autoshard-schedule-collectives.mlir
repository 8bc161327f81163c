// autoshard-schedule-collectives alone, on hand-written partitioned steps
// (Inputs/): a three-layer MLP under ZeRO-3 on 2 ranks, not yet scheduled,
// at prefetch depths 0, 1 and 2.
// RUN: shard-opt %S/Inputs/zero3-three-layers.mlir --pass-pipeline='builtin.module(autoshard-schedule-collectives{prefetch-depth=1})' | FileCheck %s --check-prefix=DEPTH1
// RUN: shard-opt %S/Inputs/zero3-three-layers.mlir --pass-pipeline='builtin.module(autoshard-schedule-collectives{prefetch-depth=2})' | FileCheck %s --check-prefix=DEPTH2
// RUN: shard-opt %S/Inputs/zero3-three-layers.mlir --pass-pipeline='builtin.module(autoshard-schedule-collectives{prefetch-depth=0})' | FileCheck %s --check-prefix=DEPTH0
// RUN: shard-opt %S/Inputs/zero3-three-layers.mlir --pass-pipeline='builtin.module(autoshard-schedule-collectives)' | shard-opt > /dev/null
// RUN: not shard-opt %S/Inputs/zero3-three-layers.mlir --pass-pipeline='builtin.module(autoshard-schedule-collectives{prefetch-depth=-1})' 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// Offload transfers (a DDP step with its momentum in NVMe files) become
// start/wait pairs too; an invalid pair is an error of the ops' verifiers.
// RUN: shard-opt -allow-unregistered-dialect %S/Inputs/ddp-nvme-momentum.mlir --pass-pipeline='builtin.module(autoshard-schedule-collectives{prefetch-depth=1})' | FileCheck %s --check-prefix=TRANSFERS
// RUN: shard-opt -allow-unregistered-dialect %S/Inputs/ddp-nvme-momentum.mlir --pass-pipeline='builtin.module(autoshard-schedule-collectives{prefetch-depth=0})' | FileCheck %s --check-prefix=TRANSFERS0
// A step that is not partitioned is left alone: the step of
// Inputs/three-reductions.mlir without its train.partitioned attribute.
// RUN: sed -e 's/train.partitioned, //' %S/Inputs/three-reductions.mlir | shard-opt -allow-unregistered-dialect --pass-pipeline='builtin.module(autoshard-schedule-collectives)' | FileCheck %s --check-prefix=UNPARTITIONED

// Depth 1: fc1's gather starts first and is waited at once (nothing to
// overlap it with); fc2's starts as fc1's is waited and runs during fc1's
// compute; fc3's during fc2's. The backward pass gathers fc3 and fc2 again,
// each started as the previous gather is waited. The loss average starts
// when the loss exists and runs during the backward pass; with one
// reduction in flight it is waited when the next, the gradients'
// reduce-scatter, starts after the last gradient.
// DEPTH1: %[[H1:.*]] = train.collective_start all_gather_shards %arg0, %arg1 on @world grid_axes = [0]
// DEPTH1-NEXT: %[[W1:.*]]:2 = train.collective_wait %[[H1]]
// DEPTH1-NEXT: %[[H2:.*]] = train.collective_start all_gather_shards %arg2, %arg3
// DEPTH1-NEXT: train.linear %{{.*}}, %[[W1]]#0, %[[W1]]#1
// DEPTH1-NEXT: train.gelu
// DEPTH1-NEXT: %[[W2:.*]]:2 = train.collective_wait %[[H2]]
// DEPTH1-NEXT: %[[H3:.*]] = train.collective_start all_gather_shards %arg4, %arg5
// DEPTH1-NEXT: train.linear %{{.*}}, %[[W2]]#0, %[[W2]]#1
// DEPTH1-NEXT: train.relu
// DEPTH1-NEXT: %[[W3:.*]]:2 = train.collective_wait %[[H3]]
// DEPTH1-NEXT: %[[H4:.*]] = train.collective_start all_gather_shards %arg4 on
// DEPTH1-NEXT: train.linear %{{.*}}, %[[W3]]#0, %[[W3]]#1
// DEPTH1-NEXT: %[[LOSS:.*]] = train.softmax_cross_entropy
// DEPTH1-NEXT: %[[HL:.*]] = train.collective_start all_reduce %[[LOSS]] on @world grid_axes = [0] reduction = average
// DEPTH1: %[[W4:.*]] = train.collective_wait %[[H4]]
// DEPTH1-NEXT: %[[H5:.*]] = train.collective_start all_gather_shards %arg2 on
// DEPTH1-NEXT: train.linear_grad_input %{{.*}}, %[[W4]]
// DEPTH1: %[[W5:.*]] = train.collective_wait %[[H5]]
// DEPTH1-NEXT: train.linear_grad_input %{{.*}}, %[[W5]]
// DEPTH1: %[[WL:.*]] = train.collective_wait %[[HL]]
// DEPTH1-NEXT: %[[HG:.*]] = train.collective_start reduce_scatter_shards
// DEPTH1-NEXT: train.collective_wait %[[HG]]
// DEPTH1: return {{.*}}, %[[WL]] :

// Depth 2: two gathers are in flight before the first is waited.
// DEPTH2: %[[H1:.*]] = train.collective_start all_gather_shards %arg0, %arg1
// DEPTH2-NEXT: %[[H2:.*]] = train.collective_start all_gather_shards %arg2, %arg3
// DEPTH2-NEXT: train.collective_wait %[[H1]]
// DEPTH2-NEXT: train.collective_start all_gather_shards %arg4, %arg5
// DEPTH2-NEXT: train.linear

// Depth 0: each gather starts right before its wait.
// DEPTH0: %[[H1:.*]] = train.collective_start all_gather_shards %arg0, %arg1
// DEPTH0-NEXT: train.collective_wait %[[H1]]
// DEPTH0-NEXT: train.linear
// DEPTH0-NEXT: train.gelu
// DEPTH0-NEXT: %[[H2:.*]] = train.collective_start all_gather_shards %arg2, %arg3
// DEPTH0-NEXT: train.collective_wait %[[H2]]

// NEGATIVE: error: prefetch depth must be at least 0, got -1

// UNPARTITIONED: func.func @step
// UNPARTITIONED-NOT: train.collective_start
// UNPARTITIONED: shard.all_reduce

// Copies of reduced gradients to the host (a host optimizer): each starts
// right after its reduction's wait, and at most `depth` of them are in
// flight, each waited when the one `depth` later starts, so that a
// gradient's device buffer dies in the backward pass, not at the
// optimizer. The reductions overlap as without the copies (REDUCE1).
// RUN: shard-opt -allow-unregistered-dialect %S/Inputs/three-reductions-offloaded.mlir --pass-pipeline='builtin.module(autoshard-schedule-collectives{prefetch-depth=1})' | FileCheck %s --check-prefix=COPIES1
// RUN: shard-opt -allow-unregistered-dialect %S/Inputs/three-reductions-offloaded.mlir --pass-pipeline='builtin.module(autoshard-schedule-collectives{prefetch-depth=0})' | FileCheck %s --check-prefix=COPIES0
// COPIES1: %[[H0:.*]] = train.collective_start all_reduce
// COPIES1-NEXT: "test.grad"
// COPIES1-NEXT: %[[R0:.*]] = train.collective_wait %[[H0]]
// COPIES1-NEXT: %[[C0:.*]] = train.transfer_start to_host %[[R0]]
// COPIES1-NEXT: %[[H1:.*]] = train.collective_start all_reduce
// COPIES1-NEXT: "test.grad"
// COPIES1-NEXT: %[[R1:.*]] = train.collective_wait %[[H1]]
// COPIES1-NEXT: %[[W0:.*]] = train.transfer_wait %[[C0]]
// COPIES1-NEXT: %[[C1:.*]] = train.transfer_start to_host %[[R1]]
// COPIES1-NEXT: %[[H2:.*]] = train.collective_start all_reduce
// COPIES1-NEXT: %[[W1:.*]] = train.transfer_wait %[[C1]]
// COPIES1-NEXT: train.add %[[W0]], %[[W1]] {train.on_host}
// COPIES1-NEXT: %[[R2:.*]] = train.collective_wait %[[H2]]
// COPIES1-NEXT: %[[C2:.*]] = train.transfer_start to_host %[[R2]]
// COPIES1-NEXT: train.transfer_wait %[[C2]]
// COPIES0: %[[R0:.*]] = train.collective_wait
// COPIES0-NEXT: %[[C0:.*]] = train.transfer_start to_host %[[R0]]
// COPIES0-NEXT: train.transfer_wait %[[C0]]
// COPIES0-NEXT: "test.grad"
// COPIES0: %[[R1:.*]] = train.collective_wait
// COPIES0-NEXT: %[[C1:.*]] = train.transfer_start to_host %[[R1]]
// COPIES0-NEXT: train.transfer_wait %[[C1]]
// COPIES0-NEXT: "test.grad"

// With clipping, the sum of the squares of a reduced gradient that
// autoshard-offload puts after its copies rides with them: right after
// the reduction's wait and the copies' starts. It does not pull the wait
// earlier (the reductions overlap as in COPIES1), and the gradient's device
// buffer dies once its copy and its sum are done, not at the norm's total.
// Without the copies (no host optimizer) such a sum is an ordinary reader:
// the wait goes right before it.
// RUN: shard-opt -allow-unregistered-dialect %S/Inputs/three-reductions-clipped-offloaded.mlir --pass-pipeline='builtin.module(autoshard-schedule-collectives{prefetch-depth=1})' | FileCheck %s --check-prefix=CLIPPED1
// RUN: shard-opt -allow-unregistered-dialect %S/Inputs/three-reductions-clipped-offloaded.mlir --pass-pipeline='builtin.module(autoshard-schedule-collectives{prefetch-depth=0})' | FileCheck %s --check-prefix=CLIPPED0
// RUN: sed -e '/%h[0-9] = /d' -e '/%u[01] = /d' %S/Inputs/three-reductions-clipped-offloaded.mlir | shard-opt -allow-unregistered-dialect --pass-pipeline='builtin.module(autoshard-schedule-collectives{prefetch-depth=1})' | FileCheck %s --check-prefix=NOCOPIES
// CLIPPED1: %[[H0:.*]] = train.collective_start all_reduce
// CLIPPED1-NEXT: "test.grad"
// CLIPPED1-NEXT: %[[R0:.*]] = train.collective_wait %[[H0]]
// CLIPPED1-NEXT: %[[C0:.*]] = train.transfer_start to_host %[[R0]]
// CLIPPED1-NEXT: %[[S0:.*]] = train.sum_of_squares %[[R0]]
// CLIPPED1-NEXT: %[[H1:.*]] = train.collective_start all_reduce
// CLIPPED1-NEXT: "test.grad"
// CLIPPED1-NEXT: %[[R1:.*]] = train.collective_wait %[[H1]]
// CLIPPED1-NEXT: train.transfer_wait %[[C0]]
// CLIPPED1-NEXT: %[[C1:.*]] = train.transfer_start to_host %[[R1]]
// CLIPPED1-NEXT: %[[S1:.*]] = train.sum_of_squares %[[R1]]
// CLIPPED1-NEXT: %[[H2:.*]] = train.collective_start all_reduce
// CLIPPED1-NEXT: %[[T0:.*]] = train.add %[[S0]], %[[S1]]
// CLIPPED1-NEXT: %[[R2:.*]] = train.collective_wait %[[H2]]
// CLIPPED1-NEXT: train.transfer_wait %[[C1]]
// CLIPPED1-NEXT: %[[C2:.*]] = train.transfer_start to_host %[[R2]]
// CLIPPED1-NEXT: %[[S2:.*]] = train.sum_of_squares %[[R2]]
// CLIPPED1-NEXT: %[[T1:.*]] = train.add %[[T0]], %[[S2]]
// CLIPPED1-NEXT: train.clip_coefficient %[[T1]]
// CLIPPED1: return %arg0, %[[T1]]
// CLIPPED0: %[[R0:.*]] = train.collective_wait
// CLIPPED0-NEXT: %[[C0:.*]] = train.transfer_start to_host %[[R0]]
// CLIPPED0-NEXT: train.transfer_wait %[[C0]]
// CLIPPED0-NEXT: train.sum_of_squares %[[R0]]
// CLIPPED0-NEXT: "test.grad"
// CLIPPED0: %[[R1:.*]] = train.collective_wait
// CLIPPED0-NEXT: %[[C1:.*]] = train.transfer_start to_host %[[R1]]
// CLIPPED0-NEXT: train.transfer_wait %[[C1]]
// CLIPPED0-NEXT: train.sum_of_squares %[[R1]]
// CLIPPED0-NEXT: "test.grad"
// NOCOPIES: %[[H0:.*]] = train.collective_start all_reduce
// NOCOPIES-NEXT: %[[R0:.*]] = train.collective_wait %[[H0]]
// NOCOPIES-NEXT: train.sum_of_squares %[[R0]]
// NOCOPIES-NEXT: "test.grad"

// Reductions in flight: each starts when its gradient exists; at depth 1
// the previous one is waited when the next starts, at depth 2 one later,
// and the last ones before their reader.
// RUN: shard-opt -allow-unregistered-dialect %S/Inputs/three-reductions.mlir --pass-pipeline='builtin.module(autoshard-schedule-collectives{prefetch-depth=1})' | FileCheck %s --check-prefix=REDUCE1
// RUN: shard-opt -allow-unregistered-dialect %S/Inputs/three-reductions.mlir --pass-pipeline='builtin.module(autoshard-schedule-collectives{prefetch-depth=2})' | FileCheck %s --check-prefix=REDUCE2
// REDUCE1: %[[G0:.*]] = "test.grad"
// REDUCE1-NEXT: %[[H0:.*]] = train.collective_start all_reduce %[[G0]]
// REDUCE1-NEXT: %[[G1:.*]] = "test.grad"
// REDUCE1-NEXT: %[[R0:.*]] = train.collective_wait %[[H0]]
// REDUCE1-NEXT: %[[H1:.*]] = train.collective_start all_reduce %[[G1]]
// REDUCE1-NEXT: %[[G2:.*]] = "test.grad"
// REDUCE1-NEXT: %[[R1:.*]] = train.collective_wait %[[H1]]
// REDUCE1-NEXT: %[[H2:.*]] = train.collective_start all_reduce %[[G2]]
// REDUCE1-NEXT: %[[R2:.*]] = train.collective_wait %[[H2]]
// REDUCE1-NEXT: "test.update"(%[[R0]], %[[R1]], %[[R2]])
// REDUCE2: %[[H0:.*]] = train.collective_start all_reduce
// REDUCE2-NEXT: "test.grad"
// REDUCE2-NEXT: %[[H1:.*]] = train.collective_start all_reduce
// REDUCE2-NEXT: "test.grad"
// REDUCE2-NEXT: train.collective_wait %[[H0]]
// REDUCE2-NEXT: %[[H2:.*]] = train.collective_start all_reduce
// REDUCE2-NEXT: train.collective_wait %[[H1]]
// REDUCE2-NEXT: train.collective_wait %[[H2]]

// Depth 1: a gradient goes to the host as soon as it is reduced; the first
// parameter's host copy starts at the top of the step; the next update's
// parameter copy and NVMe read start while the current update waits and
// runs; the new parameter goes back to the device and the new momentum
// to its file right after the update; one NVMe write is in flight, waited
// when the next starts.
// The gradients' copies start right after the reduction's wait, in the
// order the updates read them, so the first update waits only for its
// own; the copies are not readers that end the reduction's overlap: its
// wait stays where the updates need it.
// TRANSFERS-LABEL: func.func @step
// TRANSFERS-NEXT: %[[P0:.*]] = train.transfer_start to_host %arg0 : tensor<4x4xf32>
// TRANSFERS: %[[R0:.*]] = train.transfer_start nvme_read %arg2 : tensor<4x4xf32>
// TRANSFERS-NEXT: %[[G:.*]]:3 = train.collective_wait
// TRANSFERS-NEXT: %[[GH:.*]] = train.transfer_start to_host %[[G]]#2 : tensor<4x4xf32>
// TRANSFERS-NEXT: train.transfer_start to_host %[[G]]#1 : tensor<4xf32>
// TRANSFERS-NEXT: %[[PW:.*]] = train.transfer_wait %[[P0]]
// TRANSFERS-NEXT: %[[LR:.*]] = train.transfer_wait
// TRANSFERS-NEXT: %[[MW:.*]] = train.transfer_wait %[[R0]]
// TRANSFERS-NEXT: train.transfer_start to_host %arg1 : tensor<4xf32>
// TRANSFERS-NEXT: %[[GW:.*]] = train.transfer_wait %[[GH]]
// TRANSFERS-NEXT: %[[NEW:.*]], %[[M1:.*]] = train.sgd %[[PW]], %[[GW]], %[[LR]] momentum_buffer %[[MW]]
// TRANSFERS-NEXT: train.transfer_start to_device %[[NEW]]
// TRANSFERS-NEXT: %[[W0:.*]] = train.transfer_start nvme_write %[[M1]] to %arg2
// TRANSFERS-NEXT: train.transfer_start nvme_read %arg3
// TRANSFERS: train.sgd
// TRANSFERS: train.transfer_wait %[[W0]]
// TRANSFERS-NEXT: train.transfer_start nvme_write
// TRANSFERS: return

// Depth 0: each transfer starts right before its wait, and each NVMe write
// is waited right after it starts; a gradient's copy to the host starts
// and is waited right after its reduction, as without overlap.
// TRANSFERS0: %[[G:.*]]:3 = train.collective_wait
// TRANSFERS0-NEXT: %[[GW:.*]] = train.transfer_start to_host %[[G]]#2
// TRANSFERS0-NEXT: train.transfer_wait %[[GW]]
// TRANSFERS0-NEXT: %[[GB:.*]] = train.transfer_start to_host %[[G]]#1
// TRANSFERS0-NEXT: train.transfer_wait %[[GB]]
// TRANSFERS0: %[[R:.*]] = train.transfer_start nvme_read %arg2
// TRANSFERS0-NEXT: train.transfer_wait %[[R]]
// TRANSFERS0: %[[W:.*]] = train.transfer_start nvme_write
// TRANSFERS0-NEXT: train.transfer_wait %[[W]]

// Gathers of shards read from NVMe and copied to the device are prefetched
// as gathers of device shards are: fc2's starts as fc1's is waited and
// runs during fc1's compute (the read and copy it waits for run further
// ahead); every value is defined before its use (re-verified).
// RUN: shard-opt -allow-unregistered-dialect %S/Inputs/zero3-params-nvme.mlir --pass-pipeline='builtin.module(autoshard-schedule-collectives{prefetch-depth=1})' | FileCheck %s --check-prefix=HOSTGATHER
// RUN: shard-opt -allow-unregistered-dialect %S/Inputs/zero3-params-nvme.mlir --pass-pipeline='builtin.module(autoshard-schedule-collectives{prefetch-depth=1})' | shard-opt -allow-unregistered-dialect > /dev/null
// HOSTGATHER: train.transfer_start nvme_read %arg0
// HOSTGATHER: %[[G1:.*]] = train.collective_start all_gather_shards
// HOSTGATHER-NEXT: %[[P1:.*]] = train.collective_wait %[[G1]]
// HOSTGATHER: %[[G2:.*]] = train.collective_start all_gather_shards
// HOSTGATHER-NEXT: %[[H1:.*]] = "test.layer"(%arg3, %[[P1]])
// HOSTGATHER-NEXT: %[[P2:.*]] = train.collective_wait %[[G2]]
// HOSTGATHER: %[[G3:.*]] = train.collective_start all_gather_shards
// HOSTGATHER-NEXT: %[[H2:.*]] = "test.layer"(%[[H1]], %[[P2]])
// HOSTGATHER-NEXT: %[[P3:.*]] = train.collective_wait %[[G3]]
// HOSTGATHER-NEXT: "test.layer"(%[[H2]], %[[P3]])
