#!/usr/bin/env python3
"""The cost model's ranking of strategies by step time against measured runs.

Asks `shard-opt --strategy=auto --cost-report=json` for the estimated step
time of every preset (no recomputation, no offload, parameters resharded
after the forward pass) on N ranks of --device, then compiles each preset,
runs it on N CPU ranks and reads the measured steady step time (the
median after the first step) from --stats-json. It prints both, each
preset's rank under each, Kendall's tau between the two orders (1: the same
order, -1: reversed) with the pairs the model orders wrongly, and how many
of the pairs whose measured times differ by more than --margin (one run's
noise, default 5%) the model orders the same way. Equal estimates (ZeRO-1
and ZeRO-2 on a CPU node, where nothing overlaps) are ordered as
--strategy=auto breaks a near-tie: the less sharded first.

The step times are wall-clock on whatever machine runs this, so they are
noise where ranks share few cores; nothing here is a test threshold. The
model's figures for `cpu-node` are measurements on the project's build
machine (data/devices/cpu-node.json); a disagreement says which to
re-measure.

  python3 bench/cost_ranking.py --bin build/bin
  python3 bench/cost_ranking.py --bin build/bin --ranks 4 --steps 10
"""

import argparse
import itertools
import json
import os
import shutil
import sys
import tempfile

from benchlib import (check_tools, mpirun_command,
                      rank_environment, run)

PRESETS = ["ddp", "zero1", "zero2", "zero3", "fsdp"]

# How much each preset shards, as --strategy=auto ranks them when it breaks
# a near-tie (lib/Pipelines/AutoStrategy.cpp: the least sharded first).
SHARDING = {"ddp": 0, "zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3}


def order_key(times, s):
    """Where preset `s` stands in the order of `times`: by time, and among
    equal times (ZeRO-1 and ZeRO-2 move the same bytes in the same calls,
    which the model prices alike) by sharding, as --strategy=auto would
    prefer them."""
    return (times[s], SHARDING[s])


def compare(times, x, y):
    """-1, 0 or 1 as x comes before, with or after y in the order of
    `times`."""
    a, b = order_key(times, x), order_key(times, y)
    return (a > b) - (a < b)


def estimated_times(report):
    """Estimated ms per step of each preset's plain plan."""
    times = {}
    for c in report["candidates"]:
        plan = c["plan"]
        if (c["strategy"] in PRESETS and
                c["activation_checkpointing"] == "none" and
                "offload=none/none" in plan and
                "reshard=after_backward" not in plan):
            times.setdefault(c["strategy"], c["step_ms"]["total"])
    return times


def distinguishable_pairs(estimated, measured, keys, margin):
    """The pairs whose measured times differ by more than `margin` (a
    fraction), and those of them the estimate orders the same way."""
    pairs = agreed = 0
    for x, y in itertools.combinations(keys, 2):
        lo, hi = sorted((measured[x], measured[y]))
        if hi <= lo * (1 + margin):
            continue
        pairs += 1
        if compare(estimated, x, y) * compare(measured, x, y) > 0:
            agreed += 1
    return pairs, agreed


def kendall_tau(a, b, keys):
    """Kendall's tau of two orders of `keys` (order_key's), and the pairs
    that disagree."""
    concordant = discordant = 0
    wrong = []
    for x, y in itertools.combinations(keys, 2):
        s = compare(a, x, y) * compare(b, x, y)
        if s > 0:
            concordant += 1
        elif s < 0:
            discordant += 1
            wrong.append((x, y))
    pairs = concordant + discordant
    return ((concordant - discordant) / pairs if pairs else 1.0), wrong


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default="build/bin",
                        help="directory with shard-gen, shard-opt and "
                             "shard-compile")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--device", default="cpu-node")
    parser.add_argument("--hidden", type=int, default=256,
                        help="the GPT-2's width (4 layers, 4 heads)")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--rows-per-rank", type=int, default=2,
                        help="sequences per rank and step: fewer make the "
                             "step communication-bound")
    parser.add_argument("--strategies", default=",".join(PRESETS))
    parser.add_argument("--margin", type=float, default=0.05,
                        help="measured times closer than this fraction are "
                             "within noise (default 0.05)")
    parser.add_argument("--mpirun", default=shutil.which("mpirun") or "mpirun")
    args = parser.parse_args()
    if not 0 <= args.margin < 1:
        sys.exit(f"error: --margin must be in [0, 1), got {args.margin}")
    if args.ranks < 2:
        sys.exit(f"error: --ranks must be at least 2, got {args.ranks}")
    if args.steps < 2:
        sys.exit(f"error: --steps must be at least 2 (the first step warms "
                 f"up), got {args.steps}")
    strategies = args.strategies.split(",")
    for s in strategies:
        if s not in PRESETS:
            sys.exit(f"error: unknown strategy '{s}' in --strategies; "
                     f"valid: {', '.join(PRESETS)}")
    check_tools(args.bin, ("shard-gen", "shard-opt", "shard-compile"))
    mpirun = mpirun_command(args.mpirun, args.ranks)

    with tempfile.TemporaryDirectory() as tmp:
        env = rank_environment(tmp)
        step = os.path.join(tmp, "model.mlir")
        run([os.path.join(args.bin, "shard-gen"), "--family=gpt2",
             "--layers=4", f"--hidden={args.hidden}", "--heads=4",
             "--vocab=2048", f"--seq={args.seq}",
             f"--max-positions={args.seq}",
             f"--micro-batch={args.rows_per_rank * args.ranks}", "-o", step])
        report_file = os.path.join(tmp, "report.json")
        run([os.path.join(args.bin, "shard-opt"), "--strategy=auto",
             f"--world-size={args.ranks}", f"--device={args.device}",
             "--cost-report=json", f"--cost-report-file={report_file}", step,
             "-o", os.devnull])
        with open(report_file) as f:
            estimated = estimated_times(json.load(f))
        measured = {}
        for strategy in strategies:
            if strategy not in estimated:
                sys.exit(f"error: the cost report has no plain {strategy} "
                         "plan")
            binary = os.path.join(tmp, strategy)
            run([os.path.join(args.bin, "shard-compile"),
                 f"--strategy={strategy}", f"--world-size={args.ranks}",
                 step, "-o", binary])
            stats = binary + ".json"
            run(mpirun + [binary, "--steps", str(args.steps),
                          "--stats-json", stats], env=env)
            with open(stats) as f:
                # The median after the first step: the steady state the
                # model estimates, less sensitive to one noisy step.
                measured[strategy] = json.load(f)["steady_step_ms"]

    def ranks(times):
        order = sorted(strategies, key=lambda s: order_key(times, s))
        return {s: order.index(s) + 1 for s in strategies}

    est_rank, meas_rank = ranks(estimated), ranks(measured)
    tau, wrong = kendall_tau(estimated, measured, strategies)
    print(f"gpt2 4 layers x {args.hidden}, seq {args.seq}, "
          f"{args.rows_per_rank} rows per rank, {args.ranks} ranks: estimated "
          f"on {args.device} against measured here, median of steps 2.."
          f"{args.steps}")
    print(f"{'':8}{'estimated ms':>14}{'rank':>6}{'measured ms':>14}"
          f"{'rank':>6}")
    for s in strategies:
        print(f"{s:8}{estimated[s]:>14.2f}{est_rank[s]:>6}"
              f"{measured[s]:>14.2f}{meas_rank[s]:>6}")
    print(f"Kendall's tau {tau:+.2f}" +
          ("" if not wrong else "; ordered wrongly: " +
           ", ".join(f"{x}/{y}" for x, y in wrong)))
    pairs, agreed = distinguishable_pairs(estimated, measured, strategies,
                                          args.margin)
    print(f"pairs measured more than {args.margin:.0%} apart: {pairs}, "
          f"ordered the same by the estimate: {agreed}")


if __name__ == "__main__":
    main()
