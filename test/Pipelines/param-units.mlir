// Blocks come from train.unit, never from names: parameters named w0, w1, w2
// in units enc.a (w0, w1) and enc.b (w2), and a root-unit parameter whose
// name looks like a block's ("h.0.decoy"). FSDP gathers, activation
// checkpointing and the cost model follow the attributes; renaming every
// parameter changes no plan; without attributes the step is one root unit.
// RUN: shard-opt %s --pass-pipeline='builtin.module(autoshard-autodiff,autoshard-plan{strategy=fsdp world-size=2},autoshard-partition)' | FileCheck %s --check-prefix=FSDP
// RUN: shard-opt --strategy=fsdp --overlap=false --world-size=2 %s | FileCheck %s --check-prefix=GROUPED
// RUN: shard-opt %s --pass-pipeline='builtin.module(autoshard-autodiff,autoshard-checkpoint-activations)' | FileCheck %s --check-prefix=CKPT

// Renaming: the same plans and the same cost-model report, byte for byte,
// once the names are mapped back.
// RUN: sed -e 's/"w\([0-9]\)"/"layers.\1.x"/' -e 's/"h\.0\.decoy"/"zz"/' %s > %t.renamed.mlir
// RUN: shard-opt --strategy=fsdp --activation-checkpointing=blocks --world-size=2 %s > %t.plan
// RUN: shard-opt --strategy=fsdp --activation-checkpointing=blocks --world-size=2 %t.renamed.mlir | sed -e 's/"layers\.\([0-9]\)\.x/"w\1/g' -e 's/"zz/"h.0.decoy/g' | diff %t.plan -
// RUN: shard-opt --strategy=auto --world-size=2 --cost-report=json --cost-report-file=%t.json %s > %t.auto
// RUN: shard-opt --strategy=auto --world-size=2 --cost-report=json --cost-report-file=%t.renamed.json %t.renamed.mlir | sed -e 's/"layers\.\([0-9]\)\.x/"w\1/g' -e 's/"zz/"h.0.decoy/g' | diff %t.auto -
// RUN: diff %t.json %t.renamed.json

// No train.unit: one root unit, gathered as a whole; nothing to recompute;
// the cost model's estimates change with the units.
// RUN: sed -e 's/, train.unit = "[^"]*"//' %s > %t.nounits.mlir
// RUN: shard-opt --strategy=fsdp --overlap=false --world-size=2 %t.nounits.mlir | FileCheck %s --check-prefix=ROOT
// RUN: shard-opt %t.nounits.mlir --pass-pipeline='builtin.module(autoshard-autodiff,autoshard-checkpoint-activations)' 2>&1 | FileCheck %s --check-prefix=NOCKPT
// RUN: shard-opt --strategy=auto --world-size=2 --cost-report=json --cost-report-file=%t.nounits.json %t.nounits.mlir > /dev/null
// RUN: %python -c "import json,sys; a,b=[json.load(open(f))['candidates'] for f in sys.argv[1:]]; print([sorted({x['strategy'] for x,y in zip(a,b) if x['step_ms']!=y['step_ms'] and x['activation_checkpointing']==m}) for m in ('none','blocks')])" %t.json %t.nounits.json | FileCheck %s --check-prefix=COST

// FSDP-LABEL: func.func @step
// FSDP-SAME: %[[W0:[^:]+]]: tensor<15xf32>
// FSDP-SAME: %[[W1:[^:]+]]: tensor<18xf32>
// FSDP-SAME: %[[W2:[^:]+]]: tensor<12xf32>
// FSDP-SAME: %[[W3:[^:]+]]: tensor<6xf32>
// FSDP-NEXT: train.relu
// FSDP-NEXT: %[[F0:.*]] = train.all_gather_shards %[[W0]] {{.*}} -> tensor<6x5xf32>
// FSDP-NEXT: %[[F1:.*]] = train.all_gather_shards %[[W1]] {{.*}} -> tensor<6x6xf32>
// FSDP-NEXT: train.linear %{{.*}}, %[[F0]]
// FSDP-NEXT: train.relu
// FSDP-NEXT: train.linear %{{.*}}, %[[F1]]
// FSDP-NEXT: train.relu
// FSDP-NEXT: %[[F2:.*]] = train.all_gather_shards %[[W2]] {{.*}} -> tensor<4x6xf32>
// FSDP-NEXT: train.linear %{{.*}}, %[[F2]]
// FSDP-NEXT: train.relu
// FSDP-NEXT: %[[F3:.*]] = train.all_gather_shards %[[W3]] {{.*}} -> tensor<3x4xf32>
// FSDP-NEXT: train.linear %{{.*}}, %[[F3]]

// GROUPED: train.all_gather_shards %{{.*}}, %{{.*}} on @world grid_axes = [0] : tensor<15xf32>, tensor<18xf32> -> tensor<6x5xf32>, tensor<6x6xf32>
// GROUPED: train.all_gather_shards %{{.*}} on @world grid_axes = [0] : tensor<12xf32> -> tensor<4x6xf32>
// GROUPED: train.all_gather_shards %{{.*}} on @world grid_axes = [0] : tensor<6xf32> -> tensor<3x4xf32>

// enc.b is recomputed from its input, then enc.a; the decoy's linear (root
// unit) and the first relu (before any unit) are not.
// CKPT: train.softmax_cross_entropy_grad
// CKPT-NOT: {train.recompute}
// CKPT: train.linear %{{.*}}, %arg2 {train.recompute}
// CKPT: train.linear %{{.*}}, %arg0 {train.recompute}
// CKPT-NEXT: train.relu {{.*}} {train.recompute}
// CKPT-NEXT: train.linear %{{.*}}, %arg1 {train.recompute}
// CKPT-NOT: %arg3 {train.recompute}
// CKPT: return

// ROOT: train.all_gather_shards %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} on @world grid_axes = [0] : tensor<15xf32>, tensor<18xf32>, tensor<12xf32>, tensor<6xf32> -> tensor<6x5xf32>, tensor<6x6xf32>, tensor<4x6xf32>, tensor<3x4xf32>

// NOCKPT: warning: activation checkpointing 'blocks' recomputes transformer blocks, and this step has none
// NOCKPT-NOT: train.recompute

// Without checkpointing only FSDP's block gathers depend on the units; with
// `blocks` every plan's recomputed FLOPs do.
// COST: {{\[}}['fsdp'], ['ddp', 'fsdp', 'zero1', 'zero2', 'zero3']]

func.func @step(
    %w0: tensor<6x5xf32> {train.role = #train.role<param>, train.name = "w0", train.init = #train.init<normal, std = 0.5>, train.unit = "enc.a"},
    %w1: tensor<6x6xf32> {train.role = #train.role<param>, train.name = "w1", train.init = #train.init<normal, std = 0.5>, train.unit = "enc.a"},
    %w2: tensor<4x6xf32> {train.role = #train.role<param>, train.name = "w2", train.init = #train.init<normal, std = 0.5>, train.unit = "enc.b"},
    %w3: tensor<3x4xf32> {train.role = #train.role<param>, train.name = "h.0.decoy", train.init = #train.init<normal, std = 0.5>},
    %x: tensor<8x5xf32> {train.role = #train.role<input>, train.name = "x"},
    %y: tensor<8xi32> {train.role = #train.role<label>, train.name = "y"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step,
                train.optimizer = #train.sgd<lr = 1.0e-1>} {
  %xr = train.relu %x : tensor<8x5xf32>
  %h0 = train.linear %xr, %w0 : (tensor<8x5xf32>, tensor<6x5xf32>) -> tensor<8x6xf32>
  %a0 = train.relu %h0 : tensor<8x6xf32>
  %h1 = train.linear %a0, %w1 : (tensor<8x6xf32>, tensor<6x6xf32>) -> tensor<8x6xf32>
  %a1 = train.relu %h1 : tensor<8x6xf32>
  %h2 = train.linear %a1, %w2 : (tensor<8x6xf32>, tensor<4x6xf32>) -> tensor<8x4xf32>
  %a2 = train.relu %h2 : tensor<8x4xf32>
  %logits = train.linear %a2, %w3 : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  %loss = train.softmax_cross_entropy %logits, %y : (tensor<8x3xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
