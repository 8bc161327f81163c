// --strategy=auto: the cost model estimates every plan the compiler builds
// on the cluster and chooses; the chosen strategy's pipeline runs.

// The example MLP on 2 CPU ranks: DDP fits, so DDP.
// RUN: shard-opt --strategy=auto --world-size=2 --cost-report %examples/mlp.mlir 2>%t.report | FileCheck %s --check-prefix=MLP
// RUN: FileCheck %s --check-prefix=REPORT < %t.report
// MLP: train.plan = #train.plan<strategy = "ddp"
// MLP: train.collective_start all_reduce
// REPORT: cost report: train_step on 1 x 2 cpu-node (2 ranks)
// REPORT: plan{{.*}}memory{{.*}}bytes/step{{.*}}step ms
// REPORT: * ddp bucket=25MiB prefetch=1 offload=none/none checkpoint=none {{.*}}112.4K{{.*}}  planned{{$}}
// REPORT: zero3 {{.*}}reshard=after_forward
// REPORT: (15 of 132 candidates: the chosen plan and the best 3 of each strategy; --cost-report=all lists every one)
// REPORT: chosen: ddp {{.*}}: DDP fits, estimated
// Every candidate, one line each:
// RUN: shard-opt --strategy=auto --world-size=2 --cost-report=all %examples/mlp.mlir 2>&1 >/dev/null | grep -cE '^[ *] (ddp|zero1|zero2|zero3|fsdp) ' | FileCheck %s --check-prefix=ALL
// ALL: {{^}}132{{$}}

// JSON, to a file: every candidate with its memory, traffic and time.
// RUN: shard-opt --strategy=auto --world-size=2 --cost-report=json --cost-report-file=%t.json %examples/mlp.mlir > /dev/null
// RUN: %python -c "import json,sys; d=json.load(open(sys.argv[1])); c=d['candidates'][d['chosen']]; print(c['strategy'], len(d['candidates']), sorted(c['bytes_per_step']))" %t.json | FileCheck %s --check-prefix=JSON
// JSON: ddp 132 ['all_gather', 'all_reduce', 'reduce_scatter']

// A budget below DDP's need: ZeRO-1, whose estimate fits, and whose exact
// memory plan confirms it. DDP's exact plan needs 112.4K per rank at its
// peak (the bucket's pack buffer, in the step's arena, included), ZeRO-1's
// 102.3K; the estimates (108.3K each: a step this small is mostly small
// buffers) put DDP first. Once DDP's compiled step does not fit, its
// variants in bucket size and prefetch depth are not built one by one, and
// ZeRO-1's turn comes. The choice is always one whose exact plan fits.
// RUN: shard-opt --strategy=auto --world-size=2 --memory-budget=112KiB --cost-report %examples/mlp.mlir 2>&1 >/dev/null | FileCheck %s --check-prefix=BUDGET
// RUN: shard-opt --strategy=auto --world-size=2 --memory-budget=125KiB --cost-report %examples/mlp.mlir 2>&1 >/dev/null | FileCheck %s --check-prefix=ROOM
// RUN: shard-opt --strategy=auto --world-size=2 --memory-budget=112KiB --cost-report=json --cost-report-file=%t.budget.json %examples/mlp.mlir > /dev/null
// RUN: %python -c "import json,sys; d=json.load(open(sys.argv[1])); [print(c['plan'], '|', c['overflows'][0]) for c in d['candidates'] if c['plan'].startswith('ddp bucket=25MiB prefetch=2') and c['activation_checkpointing'] == 'none']" %t.budget.json | FileCheck %s --check-prefix=VARIANT
// VARIANT: ddp bucket=25MiB prefetch=2 offload=none/none checkpoint=none | not built: ddp bucket=25MiB prefetch=1 offload=none/none checkpoint=none, which differs only in its schedule and needs no more by the estimate, needs 112.40 KiB (115096 bytes) per rank by the memory plan of its compiled step
// BUDGET: ddp bucket=25MiB {{.*}} does not fit
// BUDGET: * zero1 bucket=25MiB {{.*}} checkpoint=none {{.*}}102.3K{{.*}}  planned{{$}}
// BUDGET: chosen: zero1 {{.*}} DDP does not fit
// ROOM: * ddp bucket=25MiB {{.*}} checkpoint=none {{.*}}112.4K{{.*}}  planned{{$}}
// ROOM: chosen: ddp {{.*}} DDP fits

// The chosen plan's trial build, whose exact memory plan confirmed it, is
// the output: the same step as the chosen strategy's own pipeline gives
// (under the budget, with the memory plan it writes), and its warnings
// reach the user once.
// RUN: shard-opt --strategy=auto --world-size=2 --memory-budget=112KiB %examples/mlp.mlir > %t.auto.mlir
// RUN: shard-opt --strategy=zero1 --world-size=2 --memory-budget=112KiB %examples/mlp.mlir > %t.zero1.mlir
// RUN: diff %t.auto.mlir %t.zero1.mlir
// RUN: FileCheck %s --check-prefix=KEPT < %t.auto.mlir
// KEPT: train.memory_plan = {{{.*}}peak =
// RUN: shard-opt --strategy=auto --world-size=2 --activation-checkpointing=blocks %examples/mlp.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=CHOSENWARN --implicit-check-not=warning
// CHOSENWARN-COUNT-1: warning: activation checkpointing 'blocks' recomputes transformer blocks, and this step has none

// A device of the user's own, by path: the CPU node's figures with 224 KiB
// of memory, 112 KiB for each of its 2 ranks, so the choice of the 112KiB
// budget above.
// RUN: %python -c "import json,sys; d=json.load(open(sys.argv[1])); d['name']='small-node'; d['figures']['memory_bytes']['value']=224*1024; json.dump(d,open(sys.argv[2],'w'))" %examples/../data/devices/cpu-node.json %t.small-node.json
// RUN: rm -rf %t.devices && mkdir -p %t.devices && cp %t.small-node.json %t.devices/small-node.json
// RUN: shard-opt --strategy=auto --world-size=2 --device=%t.devices/small-node.json --cost-report %examples/mlp.mlir 2>&1 >/dev/null | FileCheck %s --check-prefix=OWN
// OWN: cost report: train_step on 1 x 2 small-node (2 ranks)
// OWN: * zero1 bucket=25MiB {{.*}} checkpoint=none {{.*}}102.3K{{.*}}  planned{{$}}
// OWN: chosen: zero1 {{.*}} DDP does not fit
// RUN: not shard-opt --strategy=auto --world-size=2 --device=%t.none.json %examples/mlp.mlir 2>&1 | FileCheck %s --check-prefix=OWNMISSING
// OWNMISSING: error: cannot read device file '{{.*}}none.json': No such file or directory
// The file is named after the device it describes.
// RUN: not shard-opt --strategy=auto --world-size=2 --device=%t.small-node.json %examples/mlp.mlir 2>&1 | FileCheck %s --check-prefix=OWNNAME
// OWNNAME: error: {{.*}}small-node.json: the device is named 'small-node' but the file is '{{.*}}.json'; name the file after the device
// When the estimates reject every plan and the exact plans do too, the
// smallest plan's exact need is named.
// RUN: %python -c "import json,sys; d=json.load(open(sys.argv[1])); d['name']='tiny-node'; d['figures']['memory_bytes']['value']=112*1024; json.dump(d,open(sys.argv[2],'w'))" %examples/../data/devices/cpu-node.json %t.devices/tiny-node.json
// RUN: not shard-opt --strategy=auto --world-size=2 --device=%t.devices/tiny-node.json %examples/mlp.mlir 2>&1 | FileCheck %s --check-prefix=TINY --implicit-check-not=warning
// TINY: error: no strategy fits 2 tiny-node ranks: the smallest plan by the estimate, {{.*}} needs {{.*}} per rank
// TINY: note: device memory needs {{.*}} KiB ({{[0-9]+}} bytes) per rank, has 56.00 KiB (57344 bytes)
// TINY: note: the memory plan of the compiled step needs {{.*}} KiB ({{[0-9]+}} bytes) per rank, has 56.00 KiB (57344 bytes)

// Llama 2 7B in bf16 on 64 H100s, one sequence of 4096 tokens each: DDP's
// 16 bytes per parameter do not fit 80 GB; a sharded plan does.
// RUN: shard-gen llama2-7b --micro-batch=64 --precision=bf16 2>/dev/null | shard-opt --strategy=auto --world-size=64 --device=h100-80gb --cost-report=all 2>%t.llama | FileCheck %s --check-prefix=LLAMA
// RUN: FileCheck %s --check-prefix=LLAMAREPORT < %t.llama
// LLAMA: train.plan = #train.plan<strategy = "{{zero1|zero2|zero3|fsdp|hybrid}}"
// LLAMAREPORT: cost report: train_step on 8 x 8 h100-80gb (64 ranks)
// LLAMAREPORT: ddp {{.*}} does not fit
// LLAMAREPORT: chosen: {{.*}} DDP does not fit

// GPT-3 on 8 H100s: only an offloaded ZeRO-3 fits (the Adam states and
// fp32 masters off the device); the compiler's exact plan confirms the fit.
// RUN: shard-gen gpt3-175b --micro-batch=8 --precision=bf16 2>/dev/null | shard-opt --strategy=auto --world-size=8 --device=h100-80gb --cost-report=all 2>%t.gpt3 | FileCheck %s --check-prefix=GPT3
// RUN: FileCheck %s --check-prefix=GPT3REPORT < %t.gpt3
// GPT3: train.memory = #train.memory<{{host|nvme}}>
// GPT3: train.plan = #train.plan<strategy = "zero3"
// GPT3REPORT: zero3 {{.*}} offload=none/none checkpoint=blocks {{.*}} does not fit
// GPT3REPORT: chosen: zero3 {{.*}} offload={{cpu|nvme}}/{{none|cpu|nvme}} checkpoint={{.*}}: estimated {{.*}} and no plan fits without offload

// GPT-3 on 2 CPU nodes (no host link to offload over) fits no plan: an
// error with what the smallest needs.
// RUN: shard-gen gpt3-175b --micro-batch=8 --precision=bf16 2>/dev/null | not shard-opt --strategy=auto --world-size=2 --device=cpu-node 2>&1 | FileCheck %s --check-prefix=NOFIT
// NOFIT: error: no strategy fits 2 cpu-node ranks: the smallest plan by the estimate, zero3 {{.*}} checkpoint=blocks, needs {{.*}} TiB
// NOFIT: note: device memory needs {{.*}} per rank, has 11.77 GiB
// NOFIT: note: to fit: a smaller micro-batch or a device with more memory{{.*}} (more ranks on one 'cpu-node' share its memory and add none); the search tried every activation checkpointing mode and no offload ('cpu-node' has no host link to offload to)
// NOFIT-NOT: ranks of 'cpu-node'

// Bad options name what would be valid.
// RUN: not shard-opt --strategy=auto --world-size=2 --device=tpu %examples/mlp.mlir 2>&1 | FileCheck %s --check-prefix=DEVICE
// DEVICE: error: unknown device 'tpu'; known devices: a100-40gb, a100-80gb, b200-180gb, cpu-node, gb200-186gb, h100-80gb, h200-141gb, l4-24gb, l40s-48gb
// RUN: not shard-opt --strategy=auto --world-size=8 --nodes=3 --device=h100-80gb %examples/mlp.mlir 2>&1 | FileCheck %s --check-prefix=NODES
// NODES: error: 3 nodes do not divide the world size 8
// RUN: not shard-opt --world-size=1 --strategy=auto --cost-report=xml %examples/mlp.mlir 2>&1 | FileCheck %s --check-prefix=REPORTKIND
// REPORTKIND: shard-opt: error: unknown --cost-report 'xml'; valid: text, all, json
// RUN: not shard-opt --world-size=1 --strategy=zero3 --device=h100-80gb %examples/mlp.mlir 2>&1 | FileCheck %s --check-prefix=NOTAUTO
// NOTAUTO: shard-opt: error: --device, --nodes, --ranks-per-node, --cost-report and --cost-report-file are for --strategy=auto

// Under gradient accumulation, plans that shard gradients are also tried
// reducing every micro-batch; --reduce-every=micro-batch pins that, which
// leaves no DDP plan to choose.
// RUN: shard-opt --strategy=auto --world-size=2 --device=h100-80gb --cost-report=all %S/Inputs/accumulation-step.mlir 2>&1 >/dev/null | FileCheck %s --check-prefix=ACCUM
// ACCUM-DAG: zero2 bucket=25MiB prefetch=1 offload=none/none checkpoint=none
// ACCUM-DAG: zero2 bucket=25MiB prefetch=1 reduce-every=micro-batch offload=none/none checkpoint=none
// RUN: shard-opt --strategy=auto --world-size=2 --device=h100-80gb --reduce-every=micro-batch --cost-report=all %S/Inputs/accumulation-step.mlir 2>&1 >/dev/null | FileCheck %s --check-prefix=PINNED
// PINNED-NOT: {{^[ *] ddp }}
// PINNED: chosen: {{.*}}reduce-every=micro-batch{{.*}}; DDP is not among the candidates
// RUN: not shard-opt %S/Inputs/accumulation-step.mlir --pass-pipeline='builtin.module(autoshard-auto-strategy{world-size=2 reduce-every=often})' 2>&1 | FileCheck %s --check-prefix=AUTOEVERY
// AUTOEVERY: shard-opt: for the --reduce-every option: unknown value 'often'; valid: step, micro-batch

// A strategy option other than its default pins that dimension of the
// search instead of being dropped: the reshard point, the checkpointing
// mode, the persistence threshold (plans that shard parameters) and the
// offload tiers (on a device that can offload).
// RUN: shard-opt --strategy=auto --world-size=4 --reshard-after-forward=false --cost-report=all %examples/mlp.mlir 2>&1 >/dev/null | FileCheck %s --check-prefix=PINRESHARD
// PINRESHARD-NOT: reshard=after_forward
// PINRESHARD: chosen:
// RUN: shard-opt --strategy=auto --world-size=4 --activation-checkpointing=selective --cost-report=all %examples/mlp.mlir 2>&1 >/dev/null | FileCheck %s --check-prefix=PINCKPT
// PINCKPT-NOT: checkpoint={{none|blocks}}
// PINCKPT: chosen: {{.*}} checkpoint=selective
// RUN: shard-opt --strategy=auto --world-size=4 --persistence-threshold=100 --cost-report=all %examples/mlp.mlir 2>&1 >/dev/null | FileCheck %s --check-prefix=PINPERSIST
// PINPERSIST: chosen: {{zero3|fsdp}} persist<=100 {{.*}} DDP is not among the candidates
// RUN: shard-opt --strategy=auto --world-size=2 --offload=cpu --device=h100-80gb --cost-report=all %examples/mlp.mlir 2>&1 >/dev/null | FileCheck %s --check-prefix=PINOFFLOAD
// PINOFFLOAD-NOT: offload=none/
// PINOFFLOAD: chosen: {{.*}} offload=cpu/{{.*}} DDP without offload is not among the candidates{{$}}
// RUN: not shard-opt --strategy=auto --world-size=2 --offload=cpu %examples/mlp.mlir 2>&1 | FileCheck %s --check-prefix=NOOFFLOAD
// NOOFFLOAD: error: offload=cpu: 'cpu-node' cannot offload: offload moves state from a GPU to its host's memory or NVMe (give a GPU device, such as --device=h100-80gb, or no offload)
// RUN: not shard-opt %examples/mlp.mlir --pass-pipeline='builtin.module(autoshard-auto-strategy{world-size=2 offload-params=disk})' 2>&1 | FileCheck %s --check-prefix=BADTIER
// BADTIER: shard-opt: for the --offload-params option: unknown value 'disk'; valid: none, cpu, nvme
// RUN: not shard-opt %examples/mlp.mlir --pass-pipeline='builtin.module(autoshard-auto-strategy{world-size=2 activation-checkpointing=all})' 2>&1 | FileCheck %s --check-prefix=BADCKPT
// RUN: not shard-opt --strategy=auto --world-size=2 --persistence-threshold=-1 %examples/mlp.mlir 2>&1 | FileCheck %s --check-prefix=BADPERSIST
// BADPERSIST: shard-opt: error: --persistence-threshold must be at least 0, got -1
// BADCKPT: shard-opt: for the --activation-checkpointing option: unknown value 'all'; valid: none, blocks, selective

// The plot script draws the JSON report, as SVG and as PNG.
// RUN: %python %S/../../scripts/cost_plot.py %t.json %t.png
// RUN: %python -c "import sys; sys.exit(open(sys.argv[1], 'rb').read(8) != bytes([137, 80, 78, 71, 13, 10, 26, 10]))" %t.png
// RUN: %python %S/../../scripts/cost_plot.py %t.json %t.svg
// RUN: FileCheck %s --check-prefix=PLOT < %t.svg
// PLOT: <svg
// PLOT: train_step on 1 x 2 cpu-node: estimated memory per rank and step time
// PLOT: memory per rank (GiB)
// PLOT: step time (ms)
