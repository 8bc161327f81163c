// autoshard-offload on partitioned steps (no overlap, so that the copies are
// easy to follow), each hand-written in Inputs/: f32 steps with SGD and
// momentum under DDP, ZeRO-2 and ZeRO-3, and a tiny bf16 language model
// (embedding, RMS norm, head) under ZeRO-3 and ZeRO-1 with AdamW, f32
// masters, the step counter and clipping; ZeRO-2 with clipping over two
// buckets.
// RUN: shard-opt -allow-unregistered-dialect %S/Inputs/zero2-sgd-momentum.mlir --autoshard-offload=optimizer=cpu | FileCheck %s --check-prefix=CPU
// RUN: shard-opt -allow-unregistered-dialect %S/Inputs/ddp-sgd-momentum.mlir --autoshard-offload=optimizer=nvme | FileCheck %s --check-prefix=NVME
// RUN: shard-opt %S/Inputs/zero3-three-layers.mlir --autoshard-offload=params=cpu | FileCheck %s --check-prefix=PARAMS
// RUN: shard-opt %S/Inputs/zero3-bf16-adamw.mlir --autoshard-offload=optimizer=cpu | FileCheck %s --check-prefix=MASTER
// RUN: shard-opt -allow-unregistered-dialect %S/Inputs/zero2-sgd-clipped.mlir --autoshard-offload=optimizer=cpu | FileCheck %s --check-prefix=CLIPPED
// Without offload the clipping norm stays whole.
// RUN: shard-opt -allow-unregistered-dialect %S/Inputs/zero2-sgd-clipped.mlir --autoshard-offload | FileCheck %s --check-prefix=CLIPPED-NONE
// ZeRO-1 under mixed precision shards the masters with the states: they go
// to the host with them, and only bf16 shards come back for the gathers.
// RUN: shard-opt %S/Inputs/zero1-bf16-adamw.mlir --autoshard-offload=optimizer=cpu | FileCheck %s --check-prefix=ZERO1-MASTER
// Its evaluation step (--forward-only: no optimizer, no states) holds
// the same master shards, and optimizer= puts them where training does:
// the step's other arguments stay on the device.
// RUN: shard-opt %S/Inputs/zero1-bf16-eval.mlir --autoshard-offload=optimizer=cpu | FileCheck %s --check-prefix=EVAL-MASTER
// Both none: unchanged.
// RUN: shard-opt -allow-unregistered-dialect %S/Inputs/zero2-sgd-momentum.mlir --autoshard-offload > %t.none.mlir
// RUN: shard-opt -allow-unregistered-dialect %S/Inputs/zero2-sgd-momentum.mlir | diff - %t.none.mlir
// The offloaded ops print and parse back, in generic form too.
// RUN: shard-opt -allow-unregistered-dialect %S/Inputs/ddp-sgd-momentum.mlir --autoshard-offload=optimizer=nvme --mlir-print-op-generic | shard-opt -allow-unregistered-dialect | shard-opt -allow-unregistered-dialect > /dev/null
// Errors: an unknown place, a step without its optimizer update (the
// bf16 model's forward step, before autodiff), a step offloaded twice, parameter
// offload under a plan that shards no parameters; the tools' flags.
// RUN: not shard-opt -allow-unregistered-dialect %S/Inputs/ddp-sgd-momentum.mlir --autoshard-offload=optimizer=disk 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: shard-opt: for the --optimizer option: unknown value 'disk'; valid: none, cpu, nvme
// RUN: not shard-opt -allow-unregistered-dialect %S/Inputs/ddp-sgd-momentum.mlir --autoshard-offload=params=ram 2>&1 | FileCheck %s --check-prefix=UNKNOWN-PARAMS
// UNKNOWN-PARAMS: shard-opt: for the --params option: unknown value 'ram'; valid: none, cpu, nvme
// RUN: not shard-opt %S/Inputs/bf16-lm-forward.mlir --autoshard-offload=optimizer=cpu 2>&1 | FileCheck %s --check-prefix=NO-OPTIMIZER
// NO-OPTIMIZER: error: 'func.func' op has no optimizer update to offload; offload applies to a whole training step (give the step a train.optimizer, or run autoshard-autodiff first)
// RUN: shard-opt -allow-unregistered-dialect %S/Inputs/ddp-sgd-momentum.mlir --autoshard-offload=optimizer=cpu | not shard-opt -allow-unregistered-dialect --autoshard-offload=optimizer=nvme 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: 'func.func' op is already offloaded (argument #2 has train.memory); offload a step once
// RUN: not shard-opt -allow-unregistered-dialect %S/Inputs/ddp-sgd-momentum.mlir --autoshard-offload=params=cpu 2>&1 | FileCheck %s --check-prefix=NOT-SHARDED
// NOT-SHARDED: error: 'func.func' op has no sharded parameters to offload (strategy 'ddp'); parameter offload keeps each rank's shards off the device: use zero3, fsdp or hybrid
// The master shards of ZeRO-1 are not parameters the plan shards.
// RUN: not shard-opt %S/Inputs/zero1-bf16-adamw.mlir --autoshard-offload=params=cpu 2>&1 | FileCheck %s --check-prefix=NOT-SHARDED-ZERO1
// NOT-SHARDED-ZERO1: error: 'func.func' op has no sharded parameters to offload (strategy 'zero1'); parameter offload keeps each rank's shards off the device: use zero3, fsdp or hybrid
// Under mixed precision the sharded parameters are f32 masters, which
// optimizer=cpu has moved: params= moves nothing more, and says so.
// RUN: shard-opt %S/Inputs/zero3-bf16-adamw.mlir '--autoshard-offload=optimizer=cpu params=nvme' 2>&1 >/dev/null | FileCheck %s --check-prefix=PARAMS-NOOP
// PARAMS-NOOP: warning: offload params=nvme moves nothing: every sharded parameter of this step is an f32 master weight, which lives with the optimizer states (optimizer=cpu); its bf16 compute copies are cast from it where they are used
// RUN: not shard-opt --world-size=1 --strategy=zero3 --offload=ssd %examples/mlp.mlir 2>&1 | FileCheck %s --check-prefix=FLAG
// FLAG: shard-opt: for the --offload option: unknown value 'ssd'; valid: none, cpu, nvme
// RUN: not shard-compile --world-size=1 --strategy=zero3 --offload-params=gpu %examples/mlp.mlir -o %t.exe 2>&1 | FileCheck %s --check-prefix=FLAG-PARAMS
// FLAG-PARAMS: shard-compile: for the --offload-params option: unknown value 'gpu'; valid: none, cpu, nvme
// Every preset with both offloads verifies and lowers (overlap on): the
// whole pipeline, from the bf16 model's forward step.
// RUN: shard-compile --strategy=fsdp --world-size=2 --offload=nvme --offload-params=cpu --emit=mlir %S/Inputs/bf16-lm-forward.mlir -o - | FileCheck %s --check-prefix=LOWERED

// ZeRO-2: the momentum shards live in host memory and SGD runs there. The
// reduced gradient shards cross as soon as they are final, right after
// their reduction and in the order the updates read them, so that their
// device buffers die there and not at the optimizer; this rank's
// parameter shard crosses right after it is taken, the learning rate
// right before the first update (once for all); the new shard goes back
// to the device for the gather.
// CPU: %arg2: tensor<8xf32> {train.memory = #train.memory<host>, train.name = "w.momentum"
// CPU: -> (tensor<4x4xf32> {train.name = "w", train.role = #train.role<param>},
// CPU-SAME: tensor<8xf32> {train.memory = #train.memory<host>, train.name = "w.momentum"
// CPU: %[[GRADS:.*]]:2 = train.reduce_scatter_shards
// CPU-NEXT: %[[GH:.*]] = train.to_host %[[GRADS]]#1 : tensor<8xf32>
// CPU-NEXT: %[[GBH:.*]] = train.to_host %[[GRADS]]#0 : tensor<2xf32>
// CPU-NEXT: %[[SHARD:.*]] = train.shard_of %arg0
// CPU-NEXT: %[[PH:.*]] = train.to_host %[[SHARD]] : tensor<8xf32>
// CPU-NEXT: %[[LR:.*]] = train.to_host %arg5 : tensor<f32>
// CPU-NEXT: %[[NEW:.*]], %{{.*}} = train.sgd %[[PH]], %[[GH]], %[[LR]] momentum_buffer %arg2 {momentum = {{.*}}, train.on_host}
// CPU: train.sgd %{{.*}}, %[[GBH]], %[[LR]] momentum_buffer %arg3 {{.*}}train.on_host
// CPU: %[[BACK:.*]] = train.to_device %[[NEW]] : tensor<8xf32>
// CPU: train.all_gather_shards %[[BACK]],
// CPU-NOT: train.to_host
// CPU: return

// DDP with NVMe: each momentum buffer is read from its file right before its
// update; right after it, the new buffer is written back and the new
// parameter copied to the device, so that their host buffers are free for
// the next update.
// NVME: %arg2: tensor<4x4xf32> {train.memory = #train.memory<nvme>, train.name = "w.momentum"
// NVME: %[[M:.*]] = train.nvme_read %arg2 : tensor<4x4xf32>
// NVME-NEXT: %[[P:.*]], %[[M1:.*]] = train.sgd %{{.*}} momentum_buffer %[[M]] {{.*}}train.on_host
// NVME-NEXT: %[[W:.*]] = train.nvme_write %[[M1]] to %arg2 : tensor<4x4xf32>
// NVME-NEXT: %[[PD:.*]] = train.to_device %[[P]] : tensor<4x4xf32>
// NVME-NEXT: train.to_host %arg1
// NVME: return %[[PD]], {{.*}}, %[[W]],

// ZeRO-3 parameter offload: each gather reads a device copy of the host
// shard made right before it, the backward pass's gathers included; the
// optimizer (on the device) reads one more, and the new shard goes back.
// PARAMS: %arg0: tensor<8xf32> {train.init = {{.*}}, train.memory = #train.memory<host>, train.name = "fc1.weight"
// PARAMS: %[[D0:.*]] = train.to_device %arg0 : tensor<8xf32>
// PARAMS-NEXT: %[[D1:.*]] = train.to_device %arg1 : tensor<2xf32>
// PARAMS-NEXT: train.all_gather_shards %[[D0]], %[[D1]]
// PARAMS: train.to_device %arg4 : tensor<4xf32>
// PARAMS-NEXT: train.to_device %arg5 : tensor<1xf32>
// PARAMS-NEXT: train.all_gather_shards
// PARAMS: %[[B4:.*]] = train.to_device %arg4 : tensor<4xf32>
// PARAMS-NEXT: train.all_gather_shards %[[B4]] on
// PARAMS: %[[O0:.*]] = train.to_device %arg0 : tensor<8xf32>
// PARAMS-NEXT: %[[N0:.*]], %{{.*}} = train.sgd %[[O0]],
// PARAMS-NOT: train.on_host
// PARAMS: train.to_host %[[N0]] : tensor<8xf32>

// Mixed precision: the f32 master shards go to the host with the Adam
// states; their bf16 compute copies are cast there and cross to the
// device for the gather. The step counter is incremented on the host. The
// gradient shards cross right after their reduction, and the clipping
// norm sums their squares right after the copies (one reduction: its
// whole sum), so that their device buffers die there; the clipping
// coefficient crosses right after it is computed.
// MASTER: %arg0: tensor<16xf32> {train.init = {{.*}}, train.memory = #train.memory<host>, train.name = "embed.weight"
// MASTER: %[[C:.*]] = train.cast %arg0 {train.on_host} : tensor<16xf32> to tensor<16xbf16>
// MASTER: %[[CD:.*]] = train.to_device %[[C]] : tensor<16xbf16>
// MASTER-NEXT: train.all_gather_shards %[[CD]]
// MASTER: %[[GRADS:.*]]:3 = train.reduce_scatter_shards
// MASTER-NEXT: %[[G:.*]] = train.to_host %[[GRADS]]#2 : tensor<16xbf16>
// MASTER-NEXT: train.to_host %[[GRADS]]#1
// MASTER-NEXT: train.to_host %[[GRADS]]#0
// MASTER-NEXT: %[[SS:.*]] = train.sum_of_squares %[[GRADS]]#2, %[[GRADS]]#1, %[[GRADS]]#0
// MASTER-NEXT: %[[NORM:.*]] = shard.all_reduce %[[SS]]
// MASTER-NEXT: %[[CLIP:.*]] = train.clip_coefficient %[[NORM]]
// MASTER-NEXT: %[[SCALE:.*]] = train.to_host %[[CLIP]] : tensor<f32>
// MASTER-NEXT: %[[STEP:.*]] = train.increment %arg6 {train.on_host} : tensor<i32>
// MASTER-NEXT: %[[LR:.*]] = train.to_host %arg5 : tensor<f32>
// MASTER-NEXT: train.adamw %arg0, %[[G]], %arg7, %arg8, %[[LR]], %[[STEP]] grad_scale %[[SCALE]] {{.*}}train.on_host
// The next updates reuse the host copies of the scalars.
// MASTER: train.adamw %arg1, %{{.*}}, %arg9, %arg10, %[[LR]], %[[STEP]] grad_scale %[[SCALE]] {{.*}}train.on_host

// Clipping over two buckets: the norm's squares are summed where each
// bucket's gradient shards cross to the host, right after their copies;
// the partial sums are added up where the norm was, in the order of the
// reductions, with the squares of a tensor that stays on the device; the
// total is summed over the shard axis once.
// CLIPPED: %[[SB:.*]] = train.reduce_scatter_shards
// CLIPPED-NEXT: %[[HB:.*]] = train.to_host %[[SB]] : tensor<2xf32>
// CLIPPED-NEXT: %[[PB:.*]] = train.sum_of_squares %[[SB]] : tensor<2xf32>
// CLIPPED-NEXT: "test.grad"
// CLIPPED-NEXT: %[[SW:.*]] = train.reduce_scatter_shards
// CLIPPED-NEXT: %[[HW:.*]] = train.to_host %[[SW]] : tensor<8xf32>
// CLIPPED-NEXT: %[[PW:.*]] = train.sum_of_squares %[[SW]] : tensor<8xf32>
// CLIPPED-NEXT: %[[OTHER:.*]] = "test.grad"
// CLIPPED-NEXT: %[[PO:.*]] = train.sum_of_squares %[[OTHER]] : tensor<2xf32>
// CLIPPED-NEXT: %[[ADD:.*]] = train.add %[[PB]], %[[PW]] : tensor<f32>
// CLIPPED-NEXT: %[[TOTAL:.*]] = train.add %[[ADD]], %[[PO]] : tensor<f32>
// CLIPPED-NEXT: %[[NORM:.*]] = shard.all_reduce %[[TOTAL]] on @world grid_axes = [0] : tensor<f32> -> tensor<f32>
// CLIPPED-NEXT: %[[CLIP:.*]] = train.clip_coefficient %[[NORM]]
// CLIPPED-NOT: train.sum_of_squares
// CLIPPED-NOT: shard.all_reduce
// CLIPPED: train.sgd %{{.*}}, %[[HW]], %{{.*}} grad_scale %{{.*}} {train.on_host}
// CLIPPED: train.sgd %{{.*}}, %[[HB]], %{{.*}} grad_scale %{{.*}} {train.on_host}
// CLIPPED: return %{{.*}}, %{{.*}}, %{{.*}}, %[[NORM]] :
// CLIPPED-NONE: train.reduce_scatter_shards
// CLIPPED-NONE-NOT: train.sum_of_squares
// CLIPPED-NONE: train.reduce_scatter_shards
// CLIPPED-NONE-NOT: train.sum_of_squares
// CLIPPED-NONE: train.sum_of_squares %{{.*}}, %{{.*}}, %{{.*}} : tensor<8xf32>, tensor<2xf32>, tensor<2xf32>
// CLIPPED-NONE-NOT: train.add

// The manifest marks the NVMe masters and states, and the memory record
// counts them apart from device memory; the step reads each from its file
// and copies the compute copies to the device.
// Per rank: nvme = 3 x 34 f32 shard elements (masters, exp_avg,
// exp_avg_sq) + the i32 step = 412 bytes; persistent = ids and labels
// (2 x 32) + lr, loss and the gradient norm (3 x 4) = 76.
// LOWERED: arg 0 param embed.weight f32 16 full=8x4 shard_axes=1 memory=nvme init=normal:0.02
// LOWERED-SAME: memory peak={{[0-9]+}} persistent=76 {{.*}} host_persistent=0 host_arena={{[1-9][0-9]*}} nvme=412
// With overlap (the default) the transfers are asynchronous.
// LOWERED: llvm.call @asrt_host_arena
// LOWERED: llvm.call @asrt_transfer_start
// LOWERED: llvm.call @asrt_transfer_wait
// LOWERED-NOT: llvm.call @asrt_nvme_read
// Without overlap they are synchronous calls.
// RUN: shard-compile --strategy=fsdp --world-size=2 --offload=nvme --offload-params=cpu --overlap=false --emit=mlir %S/Inputs/bf16-lm-forward.mlir -o - | FileCheck %s --check-prefix=SYNC
// SYNC: llvm.call @asrt_nvme_read
// SYNC: llvm.call @asrt_copy_to_device
// SYNC: llvm.call @asrt_nvme_write
// SYNC-NOT: asrt_transfer_start

// ZERO1-MASTER-LABEL: func.func @train_step
// ZERO1-MASTER-SAME: %[[NORM:[^:]+]]: tensor<2xf32> {train.init = #train.init<ones>, train.memory = #train.memory<host>, train.name = "norm.weight", train.role = #train.role<param>, train.shard = #train.flat_shard<shape = [4], grid_axes = [0]>}
// ZERO1-MASTER: %[[CAST:.*]] = train.cast %[[NORM]] {train.on_host} : tensor<2xf32> to tensor<2xbf16>
// ZERO1-MASTER: %[[DEV:.*]] = train.to_device %[[CAST]] : tensor<2xbf16>
// ZERO1-MASTER: train.all_gather_shards {{.*}}%[[DEV]], {{.*}} on @world grid_axes = [0] : {{.*}} -> {{.*}}tensor<4xbf16>
// ZERO1-MASTER: train.adamw %[[NORM]], {{.*}} {{{.*}}train.on_host

// EVAL-MASTER-LABEL: func.func @train_step
// EVAL-MASTER-SAME: %[[NORM:[^:]+]]: tensor<2xf32> {train.init = #train.init<ones>, train.memory = #train.memory<host>, train.name = "norm.weight", train.role = #train.role<param>, train.shard = #train.flat_shard<shape = [4], grid_axes = [0]>}
// EVAL-MASTER-SAME: %{{[^:]+}}: tensor<2x4xi32> {train.name = "input_ids", train.role = #train.role<input>}
// EVAL-MASTER: %[[CAST:.*]] = train.cast %[[NORM]] {train.on_host} : tensor<2xf32> to tensor<2xbf16>
// EVAL-MASTER: %[[DEV:.*]] = train.to_device %[[CAST]] : tensor<2xbf16>
// EVAL-MASTER: train.all_gather_shards {{.*}}%[[DEV]], {{.*}} on @world grid_axes = [0] : {{.*}} -> {{.*}}tensor<4xbf16>
// EVAL-MASTER-NOT: train.adamw

