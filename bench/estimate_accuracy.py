#!/usr/bin/env python3
"""How close --strategy=auto's memory estimate is to the compiler's exact
plan: for each model and world size, every candidate the cost report lists
(presets, reshard points, checkpointing, offload; the schedule's defaults),
the estimated device bytes per rank against the peak of the memory plan
that shard-compile builds for the same options (--plan-report=json's
device_peak). Prints one row per candidate, the ratio estimate/plan, and
the worst ratio of the grid; with --max-error, fails when a ratio is
further from 1 than that.

    bench/estimate_accuracy.py --bin build/bin --models gpt2-small:bf16 \\
        --world-sizes 1,8,64 [--max-error 0.05]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def plan_flags(plan, strategy):
    """shard-compile's flags for a cost report's plan line, such as
    "zero3 reshard=after_forward bucket=25MiB prefetch=1 offload=cpu/none
    checkpoint=blocks"."""
    flags = ["--strategy=" + strategy]
    group = re.search(r"\(G=(\d+)\)", plan)
    if group:
        flags.append("--shard-group-size=" + group.group(1))
    fields = dict(f.split("=", 1) for f in plan.split() if "=" in f
                  and not f.startswith(strategy))
    if fields.get("reshard") == "after_backward":
        flags.append("--reshard-after-forward=false")
    if "bucket" in fields:
        flags.append("--bucket-cap-mb=" + fields["bucket"].removesuffix("MiB"))
    if "prefetch" in fields:
        flags.append("--prefetch-depth=" + fields["prefetch"])
    if "offload" in fields:
        optimizer, params = fields["offload"].split("/")
        flags += ["--offload=" + optimizer, "--offload-params=" + params]
    if "checkpoint" in fields:
        flags.append("--activation-checkpointing=" + fields["checkpoint"])
    if "reduce-every" in fields:
        flags.append("--reduce-every=" + fields["reduce-every"])
    persist = re.search(r"persist<=(\d+)", plan)
    if persist:
        flags.append("--persistence-threshold=" + persist.group(1))
    return flags


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--models", default="gpt2-small:bf16,gpt2-small:f32",
                        help="shard-gen presets with :PRECISION")
    parser.add_argument("--micro-batch", type=int, default=0,
                        help="rows per rank (default: 1)")
    parser.add_argument("--world-sizes", default="1,8")
    parser.add_argument("--device", default="h100-80gb")
    parser.add_argument("--max-error", type=float, default=None,
                        help="fail when |estimate/plan - 1| exceeds this")
    parser.add_argument("--plans", default="",
                        help="only plans whose line matches this regex")
    parser.add_argument("--max-grad-norm", default="",
                        help="shard-gen's clipping (0: none; default: "
                             "shard-gen's)")
    parser.add_argument("--categories", action="store_true",
                        help="under each row, the peak by category: "
                             "estimate and plan")
    args = parser.parse_args()
    benchlib.check_tools(args.bin, ("shard-gen", "shard-opt", "shard-compile"))
    tool = lambda name: os.path.join(args.bin, name)  # noqa: E731

    worst = None
    rows = 0
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.models.split(","):
            model, _, precision = spec.partition(":")
            for world in [int(w) for w in args.world_sizes.split(",")]:
                step = os.path.join(tmp, f"{model}-{precision}-{world}.mlir")
                rows_per_rank = args.micro_batch or 1
                benchlib.run([tool("shard-gen"), model,
                              "--precision=" + (precision or "f32"),
                              f"--micro-batch={rows_per_rank * world}",
                              *(["--max-grad-norm=" + args.max_grad_norm]
                                if args.max_grad_norm else []),
                              "-o", step])
                report = os.path.join(tmp, "report.json")
                # The report lists every candidate, whether or not it fits.
                subprocess.run([tool("shard-opt"), "--strategy=auto",
                                f"--world-size={world}",
                                "--device=" + args.device,
                                "--cost-report=json",
                                "--cost-report-file=" + report, step,
                                "-o", os.devnull],
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
                with open(report) as f:
                    candidates = json.load(f)["candidates"]
                print(f"{model} {precision or 'f32'}, {world} ranks of "
                      f"{args.device}, {rows_per_rank} row(s) per rank")
                for c in candidates:
                    plan = c["plan"]
                    # The schedule's defaults: the searched bucket caps and
                    # prefetch depths do not change the peak much.
                    if ("bucket=25MiB" not in plan or "prefetch=1" not in plan
                            or "persist" in plan
                            or (args.plans and not re.search(args.plans,
                                                             plan))):
                        continue
                    planned = os.path.join(tmp, "plan.json")
                    proc = subprocess.run(
                        [tool("shard-compile"), f"--world-size={world}",
                         *plan_flags(plan, c["strategy"]), step,
                         "--emit=llvm", "-o", os.devnull,
                         "--plan-report=json", "--plan-report-file=" + planned],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        text=True)
                    if proc.returncode != 0:
                        print(f"  {plan:<78} does not compile: "
                              f"{proc.stderr.strip().splitlines()[0]}")
                        continue
                    with open(planned) as f:
                        planned_report = json.load(f)
                    exact = planned_report["device_peak"]
                    estimate = c["memory_bytes"]["total"]
                    # Both reports break the peak down in one vocabulary,
                    # each adding up to its own figure.
                    est_peak = c["memory_bytes"]["at_peak"]
                    plan_memory = planned_report["steps"][0]["memory"]
                    plan_peak = plan_memory["at_peak"]
                    if list(est_peak) != list(plan_peak):
                        sys.exit(f"error: the reports' categories differ: "
                                 f"{list(est_peak)} against "
                                 f"{list(plan_peak)}")
                    for name, peak, total in (
                            ("cost report", est_peak, estimate),
                            ("plan report", plan_peak,
                             plan_memory["peak"])):
                        if sum(peak.values()) != total:
                            sys.exit(f"error: {plan}: the {name}'s peak by "
                                     f"category adds up to "
                                     f"{sum(peak.values())}, not {total}")
                    ratio = estimate / exact
                    rows += 1
                    if worst is None or abs(ratio - 1) > abs(worst[0] - 1):
                        worst = (ratio, f"{model} {precision} x{world}: {plan}")
                    print(f"  {plan:<78} estimate {estimate:>14} plan "
                          f"{exact:>14} ratio {ratio:.3f}")
                    if args.categories:
                        print("    " + ", ".join(
                            f"{k} {est_peak[k] / 2**30:.2f}/"
                            f"{plan_peak[k] / 2**30:.2f}"
                            for k in est_peak
                            if est_peak[k] or plan_peak[k]) +
                            " GiB (estimate/plan)")
    if worst is None:
        sys.exit("error: no candidate compiled")
    print(f"worst ratio of {rows} plans: {worst[0]:.3f} ({worst[1]})")
    if args.max_error is not None and abs(worst[0] - 1) > args.max_error:
        sys.exit(f"error: the estimate is {abs(worst[0] - 1):.1%} off the "
                 f"exact plan, more than --max-error {args.max_error:.1%}")


if __name__ == "__main__":
    main()
