// RUN: shard-gen llama-tiny --micro-batch=8 > %t.mlir
// RUN: shard-opt --strategy=fsdp --world-size=2 --overlap=false %t.mlir | FileCheck %s --check-prefix=FSDP
// RUN: shard-opt --strategy=fsdp --world-size=2 --overlap=false --keep-gathered='model\.layers\.1\..*' %t.mlir | FileCheck %s --check-prefix=KEEP
// RUN: shard-opt --strategy=fsdp --world-size=2 --keep-gathered='model\.layers\.1\..*' --keep-gathered='lm_head\.weight' %t.mlir | shard-opt | FileCheck %s --check-prefix=TWO
// RUN: not shard-opt --strategy=fsdp --world-size=2 --keep-gathered='(' %t.mlir 2>&1 | FileCheck %s --check-prefix=BADREGEX
// RUN: not shard-opt --strategy=fsdp --world-size=2 --keep-gathered='layers' %t.mlir 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not shard-opt --strategy=zero2 --world-size=2 --keep-gathered='lm_head\.weight' %t.mlir 2>&1 | FileCheck %s --check-prefix=WHOLE
// RUN: not shard-opt --strategy=fsdp --world-size=2 --reshard-after-forward=false --keep-gathered='lm_head\.weight' %t.mlir 2>&1 | FileCheck %s --check-prefix=ALREADY
// RUN: not shard-opt --strategy=auto --world-size=2 --keep-gathered='lm_head\.weight' %t.mlir 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: not shard-opt --keep-gathered='lm_head\.weight' %t.mlir 2>&1 | FileCheck %s --check-prefix=NOSTRATEGY
// RUN: not shard-opt %t.mlir --pass-pipeline='builtin.module(autoshard-strategy{strategy=auto world-size=2 keep-gathered={"lm_head.*"}})' 2>&1 | FileCheck %s --check-prefix=AUTOPIPE

// FSDP on the two-block Llama releases every gathered block after the
// forward pass and gathers it again for the backward pass: layer 1 (the
// last block, whose backward runs first) twice. With --keep-gathered on
// it, its gathered copy lives from the forward pass to its last backward
// reader (FSDP2's reshard_after_forward=False on that module): one gather
// per step; layer 0 and the other parameters are still gathered twice.
// FSDP: %[[L1:.*]]:9 = train.all_gather_shards %arg10,
// FSDP: train.softmax_cross_entropy
// FSDP: train.all_gather_shards %arg10,
// FSDP: train.all_gather_shards %arg1,

// KEEP: keep_gathered = "(model\\.layers\\.1\\..*)"
// KEEP: train.all_gather_shards %arg1,
// KEEP: train.all_gather_shards %arg10,
// KEEP: train.softmax_cross_entropy
// KEEP-NOT: train.all_gather_shards %arg10,
// KEEP: train.all_gather_shards %arg1,
// KEEP-NOT: train.all_gather_shards %arg10,

// Several expressions, any match; the plan prints and parses back.
// TWO: keep_gathered = "(model\\.layers\\.1\\..*)|(lm_head\\.weight)"

// BADREGEX: error: --keep-gathered '(' is not a valid regular expression: parentheses not balanced
// NONE: error: --keep-gathered 'layers' selects no parameter that the plan shards; it applies to the sharded parameters of zero3, fsdp and hybrid, named whole, such as 'model.embed_tokens.weight'
// WHOLE: error: --keep-gathered 'lm_head\.weight' selects no parameter that the plan shards ('lm_head.weight' is kept whole anyway); it applies to the sharded parameters of zero3, fsdp and hybrid, named whole
// ALREADY: error: --keep-gathered keeps some parameters gathered through the backward pass; with --reshard-after-forward=false every parameter already is
// AUTO: shard-opt: error: --keep-gathered refines a preset's plan; --strategy=auto chooses the plan itself (give a preset: ddp, zero1, zero2, zero3, fsdp, hybrid)
// NOSTRATEGY: shard-opt: error: --keep-gathered needs --strategy
// AUTOPIPE: error: autoshard-strategy: --keep-gathered refines a preset's plan; --strategy=auto chooses the plan itself (give a preset: ddp, zero1, zero2, zero3, fsdp, hybrid)
