#!/usr/bin/env python3
"""Checks on the output of training binaries, for the end-to-end tests.

  runs.py losses A.log B.log --rtol R --steps N
      both logs have steps 1..N and their losses agree within relative R
  runs.py params A.safetensors B.safetensors --rtol R [--norm max|frobenius]
      both files hold the same tensors (names, dtypes, shapes) whose
      values agree within relative R, per tensor: max |a-b| / max |a|, or
      ||a-b|| / ||a|| (AdamW turns the reassociation noise of near-zero
      gradient elements into lr-sized steps; the norm is robust to that)
  runs.py falls A.log --window W --factor F
      the mean loss of the last W logged steps is below F times the mean of
      the first W
  runs.py below A.log --entropy-log T.log --margin M --window W
      the mean loss of the last W logged steps is at least M nats below
      the unigram entropy that scripts/tokenize.py printed into T.log
  runs.py traffic A.log --manifest M --strategy S --world W [--shard-group G]
          [--clip] [--forward-only NAME ...] [--keep-gathered]
          [--reduce-bytes B] [--gather-bytes B] [--micro-batches K]
          [--reduce-every-micro-batch]
      the bytes rank 0 sent per step, per collective kind, equal the
      strategy's formula (docs/Strategies.md) for the parameters the
      manifest (the binary's --print-manifest) lists (--strategy mixed:
      each parameter as the manifest places it, for plans with parameter
      groups); gradients are
      reduced and parameters gathered with B bytes per element (default:
      the parameter's own, f32 for mixed precision's master weights);
      with K micro-batches, sharded parameters are gathered in each
      (and with --reduce-every-micro-batch, gradients reduce-scattered in
      each)
  runs.py peak A.log --manifest M
      the peak memory rank 0 measured equals the peak of the compiler's
      memory plan (the manifest's memory record)
  runs.py peak-below A.manifest B.manifest
      A's planned peak memory is below B's
  runs.py predicted-bytes REPORT.json --strategy S --stats STATS.json
      the bytes per step the cost report (--strategy=auto --cost-report=json)
      predicts for strategy S equal those the run's --stats-json measured
  runs.py eval-loss A.log --after N|best B.log --rtol R
      A's in-run evaluation after step N ("eval after step N: loss L ...",
      --eval-every; best: A's lowest) gave the mean loss that B reports,
      within relative R: B's own evaluation after step N, or, in an
      evaluation binary's log (--forward-only), "summary: evaluation: mean
      loss L ..."
  runs.py asdata OUT --rows N --features D --classes C --seed S
      writes a learnable classification data set in the asdata format
  runs.py continues FULL.log PART.log --from C --steps N --rtol R
      PART logs exactly steps C+1..N (a run resumed from step C, or with
      C = 0 one killed after step N), each loss within relative R of
      FULL's (R = 0: the same printed value)
  runs.py same-tensors A.safetensors B.safetensors
      every tensor of A is in B with the same dtype, shape and bytes
  runs.py damage FILE (--flip-byte OFFSET | --truncate-by N)
      flips the low bit of one byte (OFFSET < 0 counts from the end) or
      cuts N bytes off the end: a corrupt or truncated checkpoint file
  runs.py tokens OUT --count N --vocab V [--seed S]
          [--dtype uint16|int32|float32] [--bad-id OFFSET=VALUE] [--odd]
      writes a token file of N ids of a Markov chain over [0, V), as
      little-endian uint16 (nanoGPT's train.bin) or the wrong width; with
      --bad-id one id replaced, with --odd one stray byte appended

Standard library only, so the tests need nothing beyond python3.
"""

import argparse
import json
import math
import random
import re
import os
import struct
import sys

# A step line's loss, time, rate and gradient norm come first; the
# throughput, MFU and memory after them are not read here.
STEP_LINE = re.compile(
    r"^step (\d+) loss (\S+) ms (\S+)(?: lr \S+)?(?: grad_norm (\S+))?(?= |$)")


def read_steps(path):
    """Each logged step's loss and gradient norm (None: not logged)."""
    steps = {}
    with open(path) as f:
        for line in f:
            m = STEP_LINE.match(line.strip())
            if m:
                norm = float(m.group(4)) if m.group(4) else None
                steps[int(m.group(1))] = (float(m.group(2)), norm)
    if not steps:
        sys.exit(f"{path}: no 'step N loss L ms T' lines")
    return steps


def read_losses(path):
    return {step: loss for step, (loss, _) in read_steps(path).items()}


def rel_diff(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-30)


EVAL_LINE = re.compile(
    r"^eval after step (\d+): loss (\S+) over \d+ batch(?:es)?,")
EVAL_SUMMARY = re.compile(r"^summary: evaluation: mean loss (\S+) over")


def read_eval_loss(path, after, summary_ok):
    """The in-run evaluation's loss after step `after` ("best": the lowest),
    else (when `summary_ok`) the evaluation summary's mean loss, else
    None."""
    found = summary = None
    with open(path) as f:
        for line in f:
            m = EVAL_LINE.match(line.strip())
            if m and after == "best":
                loss = float(m.group(2))
                found = loss if found is None else min(found, loss)
            elif m and int(m.group(1)) == int(after):
                found = float(m.group(2))
            m = EVAL_SUMMARY.match(line.strip())
            if m:
                summary = float(m.group(1))
    return found if found is not None or not summary_ok else summary


def cmd_eval_loss(args):
    found = read_eval_loss(args.a, args.after, summary_ok=False)
    if found is None:
        sys.exit(f"{args.a}: no 'eval after step {args.after}: loss L' line")
    reference = read_eval_loss(args.b, args.after, summary_ok=True)
    if reference is None:
        sys.exit(f"{args.b}: neither 'eval after step {args.after}: loss L' "
                 "nor 'summary: evaluation: mean loss L'")
    d = rel_diff(found, reference)
    print(f"eval-loss: after step {args.after} {found!r}, reference "
          f"{reference!r}, relative difference {d:.3g}")
    if not (math.isfinite(found) and d <= args.rtol):
        sys.exit(f"evaluation losses differ by {d:.3g} > {args.rtol}")


def cmd_losses(args):
    """The two runs' losses and, where both log them, their gradient norms
    (clipping steps) agree within --rtol at every step."""
    steps_a, steps_b = read_steps(args.a), read_steps(args.b)
    a = {s: loss for s, (loss, _) in steps_a.items()}
    b = {s: loss for s, (loss, _) in steps_b.items()}
    expected = set(range(1, args.steps + 1))
    for path, losses in ((args.a, a), (args.b, b)):
        missing = expected - set(losses)
        if missing:
            sys.exit(f"{path}: steps {sorted(missing)[:5]}... missing")
    worst = max(expected, key=lambda s: rel_diff(a[s], b[s]))
    d = rel_diff(a[worst], b[worst])
    print(f"losses: worst relative difference {d:.3g} at step {worst} "
          f"({a[worst]!r} vs {b[worst]!r})")
    if not all(math.isfinite(a[s]) and math.isfinite(b[s]) for s in expected):
        sys.exit("non-finite loss")
    if d > args.rtol:
        sys.exit(f"losses differ by {d:.3g} > {args.rtol}")
    # An evaluation binary logs no norm: only the runs that both clip are
    # compared.
    norms = [s for s in sorted(expected)
             if steps_a[s][1] is not None and steps_b[s][1] is not None]
    norm_rtol = args.norm_rtol if args.norm_rtol is not None else args.rtol
    if norms:
        worst = max(norms, key=lambda s: rel_diff(steps_a[s][1],
                                                  steps_b[s][1]))
        d = rel_diff(steps_a[worst][1], steps_b[worst][1])
        print(f"gradient norms: worst relative difference {d:.3g} at step "
              f"{worst} ({steps_a[worst][1]!r} vs {steps_b[worst][1]!r})")
        if not all(math.isfinite(steps_a[s][1]) for s in norms):
            sys.exit("non-finite gradient norm")
        if d > norm_rtol:
            sys.exit(f"gradient norms differ by {d:.3g} > {norm_rtol}")


DTYPES = {"F32": "f", "I32": "i", "F64": "d", "I64": "q"}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        fmt = DTYPES[info["dtype"]]
        count = (end - begin) // struct.calcsize(fmt)
        values = struct.unpack_from(f"<{count}{fmt}", body, begin)
        tensors[name] = (info["dtype"], tuple(info["shape"]), values)
    return tensors


def cmd_params(args):
    a, b = read_safetensors(args.a), read_safetensors(args.b)
    if set(a) != set(b):
        sys.exit(f"different tensors: {sorted(set(a) ^ set(b))}")
    if not a:
        sys.exit("no tensors")
    worst_name, worst = None, 0.0
    for name in a:
        (da, sa, va), (db, sb, vb) = a[name], b[name]
        if (da, sa) != (db, sb):
            sys.exit(f"{name}: {da}{list(sa)} vs {db}{list(sb)}")
        if args.norm == "frobenius":
            d = (math.sqrt(sum((x - y) ** 2 for x, y in zip(va, vb))) /
                 max(math.sqrt(sum(x * x for x in va)), 1e-30))
        else:
            scale = max(max(abs(x) for x in va), 1e-30)
            d = max(abs(x - y) for x, y in zip(va, vb)) / scale
        if not all(math.isfinite(x) for x in va + vb):
            sys.exit(f"{name}: non-finite values")
        if d >= worst:
            worst_name, worst = name, d
    print(f"params: {len(a)} tensors, worst relative difference {worst:.3g} "
          f"in {worst_name}")
    if worst > args.rtol:
        sys.exit(f"parameters differ by {worst:.3g} > {args.rtol}")


def cmd_falls(args):
    losses = read_losses(args.a)
    steps = sorted(losses)
    if len(steps) < 2 * args.window:
        sys.exit(f"need {2 * args.window} logged steps, have {len(steps)}")
    first = sum(losses[s] for s in steps[:args.window]) / args.window
    last = sum(losses[s] for s in steps[-args.window:]) / args.window
    print(f"falls: mean loss {first:.4f} (first {args.window}) -> "
          f"{last:.4f} (last {args.window})")
    if not last < args.factor * first:
        sys.exit(f"loss did not fall below {args.factor} x {first:.4f}")


def cmd_below(args):
    losses = read_losses(args.a)
    steps = sorted(losses)[-args.window:]
    last = sum(losses[s] for s in steps) / len(steps)
    with open(args.entropy_log) as f:
        m = re.search(r"unigram entropy: ([0-9.]+) nats", f.read())
    if not m:
        sys.exit(f"{args.entropy_log}: no 'unigram entropy: X nats' line")
    entropy = float(m.group(1))
    print(f"below: mean loss of the last {len(steps)} logged steps {last:.4f} "
          f"vs unigram entropy {entropy:.4f} nats")
    if not last <= entropy - args.margin:
        sys.exit(f"loss {last:.4f} is not {args.margin} nats below the "
                 f"unigram entropy {entropy:.4f}")


BYTES_LINE = re.compile(r"bytes sent per step by rank 0: all_reduce (\d+), "
                        r"all_gather (\d+), reduce_scatter (\d+)")
DTYPE_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "i32": 4, "i64": 8, "u16": 2}


def shape_elements(text):
    if text == "scalar":
        return 1
    n = 1
    for d in text.split("x"):
        n *= int(d)
    return n


def ceil_div(a, b):
    return -(-a // b)


def read_placements(manifest):
    """(name, full elements, bytes per element, placement, group) per
    parameter, read off the manifest. The placement is "params" when the
    parameter is a shard, "states" when only its optimizer states are,
    "none" otherwise; the group is the number of ranks its shards span
    (the product of the grid axes in their shard_axes mask). A mixed-
    precision ZeRO-1/2 master is a shard too, so --strategy mixed reads
    such a parameter as "params": use it for f32 steps."""
    params, sharded_states, grid = [], {}, []
    with open(manifest) as f:
        for line in f:
            fields = line.split()
            if fields[:1] == ["grid"]:
                grid = [int(d) for d in fields[1].split("x")]
            if fields[:1] != ["arg"]:
                continue
            keys = dict(kv.split("=", 1) for kv in fields[6:] if "=" in kv)
            mask = int(keys.get("shard_axes", "0"))
            if fields[2] == "param":
                numel = shape_elements(keys.get("full", fields[5]))
                params.append((fields[3], numel, DTYPE_BYTES[fields[4]],
                               "params" if "full" in keys else "none", mask))
            elif fields[2] == "opt_state" and "full" in keys:
                sharded_states[fields[3]] = mask
    group = lambda mask: math.prod(d for i, d in enumerate(grid)
                                   if mask >> i & 1)
    placed = []
    for name, numel, b, placement, mask in params:
        if placement == "none":
            for state, state_mask in sharded_states.items():
                if state.startswith(name + "."):
                    placement, mask = "states", state_mask
        placed.append((name, numel, b, placement, group(mask)))
    return placed


def cmd_traffic(args):
    with open(args.a) as f:
        m = BYTES_LINE.search(f.read())
    if not m:
        sys.exit(f"{args.a}: no 'bytes sent per step' line")
    measured = dict(zip(("all_reduce", "all_gather", "reduce_scatter"),
                        map(int, m.groups())))
    params = read_placements(args.manifest)
    if not params:
        sys.exit(f"{args.manifest}: no param arguments")
    world = args.world
    if args.strategy != "mixed":
        # A named strategy places every parameter alike, over the shard
        # group --shard-group (hybrid) or the world.
        placement = {"ddp": "none", "zero1": "states",
                     "zero2": "states"}.get(args.strategy, "params")
        params = [(name, e, b, placement, args.shard_group or world)
                  for name, e, b, _, _ in params]
    ring = lambda size, elements, b: 2 * (size - 1) * ceil_div(elements, size) * b
    shard = lambda n, e, b: (n - 1) * ceil_div(e, n) * b
    red = lambda b: args.reduce_bytes or b  # bytes of a reduced gradient
    gat = lambda b: args.gather_bytes or b  # bytes of a gathered parameter
    # The loss is averaged over the world; the clipping norm over each
    # shard group size the gradients use (one f32 each).
    expected = {"all_reduce": ring(world, 1, 4), "all_gather": 0,
                "reduce_scatter": 0}
    if args.clip:
        for n in sorted({p[4] for p in params if p[3] != "none"}):
            expected["all_reduce"] += ring(n, 1, 4)
    for name, e, b, placement, n in params:
        if placement == "none":
            expected["all_reduce"] += ring(world, e, red(b))
            continue
        scatters = args.micro_batches if args.reduce_every_micro_batch else 1
        expected["reduce_scatter"] += scatters * shard(n, e, red(b))
        expected["all_reduce"] += ring(world // n, ceil_div(e, n), red(b))
        if placement == "states":
            expected["all_gather"] += shard(n, e, gat(b))
            continue
        # Sharded parameters are gathered in every micro-batch.
        gathers = 1 if args.keep_gathered or name in args.forward_only else 2
        expected["all_gather"] += (args.micro_batches * gathers *
                                   shard(n, e, gat(b)))
    print(f"traffic: measured {measured}, formula {expected}")
    if measured != expected:
        sys.exit("bytes on the wire differ from the formula")


PEAK_LINE = re.compile(r"peak memory (\d+) bytes")
HOST_LINE = re.compile(r"host memory peak (\d+) bytes .*, NVMe (\d+) bytes")


def cmd_peak(args):
    with open(args.a) as f:
        log = f.read()
    m = PEAK_LINE.search(log)
    if not m:
        sys.exit(f"{args.a}: no 'peak memory' summary line")
    measured = int(m.group(1))
    keys = None
    with open(args.manifest) as f:
        for line in f:
            fields = line.split()
            if fields[:1] == ["memory"]:
                keys = dict(kv.split("=", 1) for kv in fields[1:])
    if keys is None:
        sys.exit(f"{args.manifest}: no memory record")
    planned = int(keys["peak"])
    print(f"peak: measured {measured}, planned {planned}")
    if measured != planned:
        sys.exit("the measured peak differs from the compiler's plan")
    # Offload: host memory (offloaded state and the host arena) and the
    # bytes of the NVMe files, planned and measured apart from the device.
    host = HOST_LINE.search(log)
    if "host_arena" not in keys:
        if host:
            sys.exit(f"{args.a}: host memory measured but none planned")
        return
    if not host:
        sys.exit(f"{args.a}: no 'host memory peak' summary line")
    planned_host = int(keys["host_persistent"]) + int(keys["host_arena"])
    measured_host, measured_nvme = int(host.group(1)), int(host.group(2))
    print(f"host peak: measured {measured_host}, planned {planned_host}; "
          f"NVMe: measured {measured_nvme}, planned {keys['nvme']}")
    if measured_host != planned_host:
        sys.exit("the measured host peak differs from the compiler's plan")
    if measured_nvme != int(keys["nvme"]):
        sys.exit("the NVMe bytes differ from the compiler's plan")


def planned_peak(manifest):
    with open(manifest) as f:
        for line in f:
            fields = line.split()
            if fields[:1] == ["memory"]:
                return int(dict(kv.split("=", 1) for kv in fields[1:])["peak"])
    sys.exit(f"{manifest}: no memory record")


def cmd_peak_below(args):
    a, b = planned_peak(args.a), planned_peak(args.b)
    print(f"planned peaks: {a} and {b}")
    if a >= b:
        sys.exit(f"{args.a}'s planned peak {a} is not below {args.b}'s {b}")


def cmd_predicted_bytes(args):
    with open(args.report) as f:
        report = json.load(f)
    plans = [c for c in report["candidates"]
             if c["strategy"] == args.strategy and
             c["activation_checkpointing"] == "none" and
             "reshard=after_backward" not in c["plan"]]
    if not plans:
        sys.exit(f"{args.report}: no {args.strategy} candidate")
    predicted = plans[0]["bytes_per_step"]
    with open(args.stats) as f:
        stats = json.load(f)
    measured = {kind: c["bytes_sent_per_step"]
                for kind, c in stats["collectives"].items()}
    print(f"{args.strategy}: predicted {predicted}, measured {measured}")
    if any(predicted[kind] != measured.get(kind, 0) for kind in predicted):
        sys.exit("the cost model's bytes differ from the measured ones")


def cmd_predicted_peak(args):
    """The cost model's device memory (its total: the buckets' pack
    buffers are in the step's arena, which the binary's peak counts) is
    within --rtol of the peak the binary measured."""
    with open(args.report) as f:
        report = json.load(f)
    plans = [c for c in report["candidates"]
             if c["strategy"] == args.strategy and
             c["activation_checkpointing"] == "none" and
             "offload=none/none" in c["plan"] and
             "reshard=after_backward" not in c["plan"]]
    if not plans:
        sys.exit(f"{args.report}: no {args.strategy} candidate")
    memory = plans[0]["memory_bytes"]
    predicted = memory["total"]
    with open(args.stats) as f:
        measured = json.load(f)["peak_bytes"]
    error = predicted / measured - 1
    print(f"{args.strategy}: predicted {predicted}, measured {measured} "
          f"({error:+.2%})")
    if abs(error) > args.rtol:
        sys.exit(f"the cost model's memory is {error:+.2%} off the measured "
                 f"peak, more than {args.rtol:.0%}")


def cmd_plan_report(args):
    """shard-compile --plan-report=json against a run's --stats-json: every
    collective kind's calls and bytes per step, every offload transfer's,
    the device peak (the binary's, both steps' under --with-eval), host
    memory, NVMe bytes and FLOPs, all exactly; each evaluation's bytes
    against the evaluation step's per batch."""
    with open(args.report) as f:
        report = json.load(f)
    with open(args.stats) as f:
        stats = json.load(f)
    steps = stats["steps"]
    train = report["steps"][0]
    errors = []

    def same(what, planned, measured):
        print(f"{what}: planned {planned}, measured {measured}")
        if planned != measured:
            errors.append(what)

    same("strategy", train["strategy"], stats["strategy"])
    same("world size", train["world_size"], stats["world_size"])
    for kind, planned in train["collectives"].items():
        measured = stats["collectives"].get(kind, {"calls": 0, "bytes_sent": 0})
        same(f"{kind} calls", planned["calls"] * steps, measured["calls"])
        same(f"{kind} bytes", planned["bytes"] * steps, measured["bytes_sent"])
    for kind, planned in train["transfers"].items():
        measured = stats["offload"][kind]
        same(f"{kind} calls", planned["calls"] * steps, measured["calls"])
        same(f"{kind} bytes", planned["bytes"] * steps, measured["bytes"])
    same("device peak", report["device_peak"], stats["peak_bytes"])
    same("host peak", train["memory"]["host_peak"], stats["host_peak_bytes"])
    same("NVMe bytes", train["memory"]["nvme"], stats["nvme_bytes"])
    same("FLOPs per step", train["flops"], stats["step_flops"])
    if len(report["steps"]) > 1:
        per_batch = report["steps"][1]["collective_bytes"]
        if not stats.get("evaluations"):
            errors.append("evaluations (none ran)")
        for e in stats.get("evaluations", []):
            same(f"evaluation after step {e['after_step']} bytes",
                 per_batch * e["batches"], e["bytes_sent"])
    if errors:
        sys.exit("the plan report differs from the run: " + ", ".join(errors))


def cmd_gradients_at_peak(args):
    """Under optimizer offload each gradient crosses to the host as soon as
    it is reduced, so the plan's device peak holds less than FRACTION of
    the gradients. Their bytes are the step's copies to the host: in a
    mixed-precision step whose masters live on the host those are the
    gradients and the learning rate."""
    with open(args.report) as f:
        step = json.load(f)["steps"][0]
    at_peak = step["memory"]["at_peak"]["gradients"]
    copied = step["transfers"]["to_host"]["bytes"]
    print(f"gradients at the peak: {at_peak} bytes of {copied} copied to "
          f"the host ({at_peak / copied:.0%})")
    if at_peak >= args.below * copied:
        sys.exit(f"the peak holds {at_peak / copied:.0%} of the gradients, "
                 f"not less than {args.below:.0%}")


def cmd_master_weights(args):
    """The f32 master weights of a mixed-precision step are one category
    in both reports: the plan report's `master_weights` at the peak equals
    the cost report's for the same strategy (no offload, no
    checkpointing), and is not 0."""
    with open(args.plan) as f:
        memory = json.load(f)["steps"][0]["memory"]
    planned = memory["at_peak"]
    with open(args.cost) as f:
        cost = json.load(f)
    plans = [c for c in cost["candidates"]
             if c["strategy"] == args.strategy and
             c["activation_checkpointing"] == "none" and
             "offload=none/none" in c["plan"]]
    if not plans:
        sys.exit(f"{args.cost}: no {args.strategy} candidate")
    # Both reports break the peak down in the same categories, each adding
    # up to its peak.
    est_memory = plans[0]["memory_bytes"]
    for name, (categories, parts, total) in {
            "plan report": (planned, memory["buffers_at_peak"],
                            memory["peak"]),
            "cost report": (est_memory["at_peak"],
                            est_memory["buffers_at_peak"],
                            est_memory["total"])}.items():
        if list(categories) != list(planned):
            sys.exit(f"the {name}'s categories {list(categories)} are not "
                     f"the plan report's {list(planned)}")
        if sum(categories.values()) != total or \
                sum(parts.values()) != categories["buffers"]:
            sys.exit(f"the {name}'s peak by category does not add up: "
                     f"{categories}, {parts}, total {total}")
    print("categories: " + ", ".join(planned))
    estimated = est_memory["at_peak"]["master_weights"]
    print(f"{args.strategy} master weights: planned "
          f"{planned['master_weights']}, estimated {estimated}")
    if planned["master_weights"] != estimated or estimated == 0:
        sys.exit("the two reports count the master weights differently")


def cmd_asdata(args):
    rng = random.Random(args.seed)
    teacher = [[rng.gauss(0, 1) for _ in range(args.features)]
               for _ in range(args.classes)]
    xs, ys = [], []
    for _ in range(args.rows):
        x = [rng.gauss(0, 1) for _ in range(args.features)]
        scores = [sum(t * v for t, v in zip(row, x)) for row in teacher]
        xs.extend(v * args.scale for v in x)
        ys.append(max(range(args.classes), key=lambda c: scores[c]))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "..", "..", "python"))
    import numpy as np
    from autoshard.data import write_batches
    write_batches(args.out, [{
        "x": np.array(xs, np.float64).reshape(args.rows, args.features),
        "y": np.array(ys, np.int32)}])


def cmd_continues(args):
    full, part = read_losses(args.a), read_losses(args.b)
    expected = list(range(args.start + 1, args.steps + 1))
    if sorted(part) != expected:
        sys.exit(f"{args.b}: logs steps {sorted(part)}, expected "
                 f"{args.start + 1}..{args.steps}")
    missing = [s for s in expected if s not in full]
    if missing:
        sys.exit(f"{args.a}: steps {missing} missing")
    worst = max(expected, key=lambda s: rel_diff(full[s], part[s]))
    d = rel_diff(full[worst], part[worst])
    print(f"continues: steps {expected[0]}..{expected[-1]}, worst relative "
          f"difference {d:.3g} at step {worst} ({full[worst]!r} vs "
          f"{part[worst]!r})")
    if d > args.rtol:
        sys.exit(f"losses differ by {d:.3g} > {args.rtol}")


def read_raw_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    return {name: (info["dtype"], tuple(info["shape"]),
                   body[info["data_offsets"][0]:info["data_offsets"][1]])
            for name, info in header.items() if name != "__metadata__"}


def write_raw_safetensors(path, tensors, metadata=None):
    """Writes {name: (dtype, shape, bytes)}, as read_raw_safetensors returns
    them, as a safetensors file: what an exporter (safetensors.torch's
    save_file) writes, or a run's file edited."""
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, data) in sorted(tensors.items()):
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name in sorted(tensors):
            f.write(tensors[name][2])


def cmd_same_tensors(args):
    a, b = read_raw_safetensors(args.a), read_raw_safetensors(args.b)
    if not a:
        sys.exit(f"{args.a}: no tensors")
    for name, (dtype, shape, data) in sorted(a.items()):
        if name not in b:
            sys.exit(f"{name}: in {args.a} but not in {args.b}")
        if b[name][:2] != (dtype, shape):
            sys.exit(f"{name}: {dtype}{list(shape)} vs "
                     f"{b[name][0]}{list(b[name][1])}")
        if b[name][2] != data:
            first = next(i for i, (x, y) in enumerate(zip(data, b[name][2]))
                         if x != y)
            sys.exit(f"{name}: bytes differ from byte {first}")
    print(f"same-tensors: {len(a)} tensors of {args.a} are bit-identical in "
          f"{args.b}")


def cmd_damage(args):
    with open(args.a, "r+b") as f:
        size = f.seek(0, 2)
        if args.truncate_by is not None:
            f.truncate(size - args.truncate_by)
            return
        offset = args.flip_byte % size
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ 1]))


def cmd_tokens(args):
    rng = random.Random(args.seed)
    follow = list(range(args.vocab))
    rng.shuffle(follow)
    ids = [rng.randrange(args.vocab)]
    while len(ids) < args.count:
        ids.append(follow[ids[-1]] if rng.random() < 0.9
                   else rng.randrange(args.vocab))
    for spec in args.bad_id:
        offset, value = map(int, spec.split("="))
        ids[offset] = value
    fmt = {"uint16": "H", "int32": "i", "float32": "f"}[args.dtype]
    with open(args.out, "wb") as f:
        f.write(struct.pack(f"<{len(ids)}{fmt}", *ids))
        if args.odd:
            f.write(b"\0")


# Checkpoint and data-file commands (test/e2e/checkpoint-*.test,
# bad-data.test).
CHECKPOINT_COMMANDS = {"continues": cmd_continues,
                       "same-tensors": cmd_same_tensors,
                       "damage": cmd_damage, "tokens": cmd_tokens}


def add_checkpoint_commands(sub):
    p = sub.add_parser("continues")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--from", dest="start", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--rtol", type=float, required=True)
    p = sub.add_parser("same-tensors")
    p.add_argument("a")
    p.add_argument("b")
    p = sub.add_parser("damage")
    p.add_argument("a")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--flip-byte", type=int)
    g.add_argument("--truncate-by", type=int)
    p = sub.add_parser("tokens")
    p.add_argument("out")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=["uint16", "int32", "float32"],
                   default="uint16")
    p.add_argument("--bad-id", action="append", default=[])
    p.add_argument("--odd", action="store_true")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("losses")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--rtol", type=float, required=True)
    p.add_argument("--norm-rtol", type=float, default=None,
                   help="for the gradient norms (default --rtol): a norm "
                        "sums every gradient's rounding")
    p.add_argument("--steps", type=int, required=True)
    p = sub.add_parser("params")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--rtol", type=float, required=True)
    p.add_argument("--norm", choices=["max", "frobenius"], default="max",
                   help="per tensor: max |a-b| / max |a|, or "
                        "||a-b|| / ||a||")
    p = sub.add_parser("falls")
    p.add_argument("a")
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--factor", type=float, required=True)
    p = sub.add_parser("below")
    p.add_argument("a")
    p.add_argument("--entropy-log", required=True)
    p.add_argument("--margin", type=float, required=True)
    p.add_argument("--window", type=int, default=5)
    p = sub.add_parser("traffic")
    p.add_argument("a")
    p.add_argument("--manifest", required=True)
    p.add_argument("--strategy", required=True,
                   choices=["ddp", "zero1", "zero2", "zero3", "fsdp",
                            "hybrid", "mixed"])
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--shard-group", type=int, default=0)
    p.add_argument("--clip", action="store_true")
    p.add_argument("--forward-only", nargs="*", default=[])
    p.add_argument("--keep-gathered", action="store_true")
    p.add_argument("--micro-batches", type=int, default=1)
    p.add_argument("--reduce-every-micro-batch", action="store_true")
    p.add_argument("--reduce-bytes", type=int, default=0)
    p.add_argument("--gather-bytes", type=int, default=0)
    p = sub.add_parser("peak")
    p.add_argument("a")
    p.add_argument("--manifest", required=True)
    p = sub.add_parser("predicted-peak")
    p.add_argument("report")
    p.add_argument("--strategy", required=True)
    p.add_argument("--stats", required=True)
    p.add_argument("--rtol", type=float, required=True)
    p = sub.add_parser("peak-below")
    p.add_argument("a")
    p.add_argument("b")
    p = sub.add_parser("predicted-bytes")
    p.add_argument("report")
    p.add_argument("--strategy", required=True)
    p.add_argument("--stats", required=True)
    p = sub.add_parser("eval-loss")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--after", required=True)
    p.add_argument("--rtol", type=float, required=True)
    p = sub.add_parser("plan-report")
    p.add_argument("report")
    p.add_argument("stats")
    p = sub.add_parser("gradients-at-peak")
    p.add_argument("report")
    p.add_argument("--below", type=float, required=True)
    p = sub.add_parser("master-weights")
    p.add_argument("plan")
    p.add_argument("cost")
    p.add_argument("--strategy", required=True)
    p = sub.add_parser("asdata")
    p.add_argument("out")
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--features", type=int, required=True)
    p.add_argument("--classes", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scale", type=float, default=1.0,
                   help="multiplies every feature (1e20: gradients whose "
                        "squared norm overflows f32 while the loss does "
                        "not)")
    add_checkpoint_commands(sub)
    args = parser.parse_args()
    if args.cmd in CHECKPOINT_COMMANDS:
        return CHECKPOINT_COMMANDS[args.cmd](args)
    {"losses": cmd_losses, "params": cmd_params, "falls": cmd_falls,
     "below": cmd_below, "traffic": cmd_traffic, "peak": cmd_peak,
     "peak-below": cmd_peak_below, "predicted-peak": cmd_predicted_peak, "predicted-bytes": cmd_predicted_bytes,
     "eval-loss": cmd_eval_loss, "plan-report": cmd_plan_report,
     "gradients-at-peak": cmd_gradients_at_peak,
     "master-weights": cmd_master_weights,
     "asdata": cmd_asdata}[args.cmd](args)


if __name__ == "__main__":
    main()
