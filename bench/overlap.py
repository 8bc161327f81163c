#!/usr/bin/env python3
"""Exposed communication per step, with and without overlap.

Compiles one model for each strategy twice, with `--overlap=false` (every
collective runs where the partitioner placed it, and the main thread
waits for it) and with the default schedule (reductions start early, at
most --prefetch-depth in flight; parameter gathers are prefetched). Each
binary runs on N CPU ranks, and the benchmark reads the runtime's own
accounting from --stats-json:

  exposed    ms per step that the main thread was blocked on communication
             (blocking collectives, and asrt_wait on asynchronous ones)
  comm       ms per step that the communication thread spent in MPI
  step       mean ms per step

The ratios compare overlap against no overlap in the same run. Bytes on
the wire are the same for both: the schedule changes when collectives
run, not what they send. Nothing here is a test threshold: the machines
are shared and noisy. On a CPU with fewer cores than ranks times two
threads, the communication thread competes with compute for the cores,
so overlap cannot pay there. It pays where communication has its own
engine (NCCL on GPUs).

  python3 bench/overlap.py --bin build/bin
  python3 bench/overlap.py --bin build/bin --ranks 2 --strategies ddp,fsdp
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

from benchlib import (GPT2_4x256, check_tools, mpirun_command,
                      rank_environment, run)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default="build/bin",
                        help="directory with shard-gen and shard-compile")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--strategies", default="ddp,zero2,zero3,fsdp")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--mpirun", default=shutil.which("mpirun") or "mpirun")
    args = parser.parse_args()
    if args.ranks < 2:
        sys.exit(f"error: --ranks must be at least 2, got {args.ranks}")
    if args.steps < 1:
        sys.exit(f"error: --steps must be at least 1, got {args.steps}")
    check_tools(args.bin)
    mpirun = mpirun_command(args.mpirun, args.ranks)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env = rank_environment(tmp)
        step = os.path.join(tmp, "model.mlir")
        run([os.path.join(args.bin, "shard-gen")] + GPT2_4x256 +
            [f"--micro-batch={2 * args.ranks}", "-o", step])
        for strategy in args.strategies.split(","):
            row = {"strategy": strategy}
            for overlap in ("false", "true"):
                binary = os.path.join(tmp, f"{strategy}-{overlap}")
                run([os.path.join(args.bin, "shard-compile"),
                     f"--strategy={strategy}", f"--world-size={args.ranks}",
                     f"--overlap={overlap}", step, "-o", binary])
                stats = os.path.join(tmp, f"{strategy}-{overlap}.json")
                run(mpirun + [binary, "--steps", str(args.steps),
                              "--stats-json", stats], env=env)
                with open(stats) as f:
                    s = json.load(f)
                comm = s["communication"]
                row[overlap] = (s["mean_step_ms"],
                                comm["exposed_ms_per_step"],
                                comm["async_comm_ms_per_step"] +
                                comm["blocking_wait_ms"] / s["steps"])
            rows.append(row)

    print(f"gpt2 4 layers x 256, {args.ranks} CPU ranks, mean of "
          f"{args.steps} steps, ms per step (rank 0)")
    print(f"{'':10}{'no overlap':>32}{'overlap':>32}{'overlap / none':>24}")
    print(f"{'':10}" + f"{'step':>10}{'exposed':>11}{'comm':>11}" * 2 +
          f"{'step':>12}{'exposed':>12}")
    for row in rows:
        line = f"{row['strategy']:10}"
        for overlap in ("false", "true"):
            line += "".join(f"{v:>10.1f}" + ("" if i == 2 else " ")
                            for i, v in enumerate(row[overlap]))
        off, on = row["false"], row["true"]
        line += f"{on[0] / off[0]:>12.2f}"
        line += f"{on[1] / off[1]:>12.2f}" if off[1] > 0 else f"{'-':>12}"
        print(line)


if __name__ == "__main__":
    main()
