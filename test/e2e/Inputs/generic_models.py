#!/usr/bin/env python3
"""A generic-op model trains to the fused model's losses under every plan.

  generic_models.py --bin DIR --mpirun CMD --work DIR --model NAME
                    [--strategies ddp,zero3] [--worlds 1,2,4] [--steps N]
                    [--rtol R] [--flag=F ...]

Writes the model twice with shard-gen (the fused presets, and --generic:
the same model and initialisation with the generic tensor ops, as a
PyTorch front end emits it), trains the fused one on one rank as the
reference, then the generic one under every strategy and world size, and
checks that every step's loss (and gradient norm) agrees with the
reference within --rtol. --flag passes extra shard-compile flags for the
generic runs (e.g. --flag=--raise=false). Prints one line per run.
"""

import argparse
import os
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runs  # noqa: E402


def run(cmd, log=None):
    with open(log, "w") if log else open(os.devnull, "w") as out:
        result = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE,
                                text=True)
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(cmd)}\n"
                 f"{result.stderr}")


def worst(reference, log, steps):
    """The worst relative loss and gradient-norm differences of two logs."""
    a, b = runs.read_steps(reference), runs.read_steps(log)
    loss = norm = 0.0
    for s in range(1, steps + 1):
        if s not in a or s not in b:
            sys.exit(f"{log}: step {s} missing")
        loss = max(loss, runs.rel_diff(a[s][0], b[s][0]))
        if a[s][1] is not None and b[s][1] is not None:
            norm = max(norm, runs.rel_diff(a[s][1], b[s][1]))
    return loss, norm


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--mpirun", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--strategies",
                   default="ddp,zero1,zero2,zero3,fsdp,hybrid")
    p.add_argument("--worlds", default="1,2,4")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--flag", action="append", default=[])
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    tool = lambda name: os.path.join(args.bin, name)
    mpirun = shlex.split(args.mpirun)
    base = os.path.join(args.work, args.model)
    gen = [tool("shard-gen"), args.model, f"--micro-batch={args.micro_batch}"]
    run(gen + ["-o", base + ".fused.mlir"])
    run(gen + ["--generic", "-o", base + ".generic.mlir"])

    def train(mlir, strategy, world, flags, name):
        binary = f"{base}.{name}"
        if strategy == "hybrid":
            # Shard groups of half the world (of 1 rank on 1 and 2 ranks):
            # on 4 ranks, 2 groups of 2 that shard within and replicate
            # across.
            flags = [*flags, f"--shard-group-size={max(1, world // 2)}"]
        run([tool("shard-compile"), f"--strategy={strategy}",
             f"--world-size={world}", *flags, mlir, "-o", binary])
        log = binary + ".log"
        run(mpirun + ["-np", str(world), binary, "--steps", str(args.steps),
                      "--seed", "3", "--log-every", "1"], log)
        return log

    reference = train(base + ".fused.mlir", "ddp", 1, [], "fused")
    failures = []
    for strategy in args.strategies.split(","):
        for world in (int(w) for w in args.worlds.split(",")):
            log = train(base + ".generic.mlir", strategy, world, args.flag,
                        f"generic.{strategy}.{world}")
            loss, norm = worst(reference, log, args.steps)
            ok = loss <= args.rtol and norm <= args.rtol
            print(f"{args.model} generic {strategy} on {world}: loss within "
                  f"{loss:.2g}, grad norm within {norm:.2g} of fused: "
                  f"{'ok' if ok else 'MISMATCH'}")
            if not ok:
                failures.append(f"{strategy}/{world}")
    if failures:
        sys.exit(f"{args.model}: generic and fused differ by more than "
                 f"{args.rtol} under {', '.join(failures)}")
    print(f"{args.model}: all runs agree")


if __name__ == "__main__":
    main()
