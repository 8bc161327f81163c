#!/usr/bin/env python3
"""Offload: exposed transfer time per step, synchronous against asynchronous.

Compiles one model per offload configuration twice: with `--overlap=false`
(every copy and NVMe read or write runs on the main thread where
autoshard-offload placed it) and with the default schedule (transfers are
started on the runtime's offload thread and waited where their result is
read: NVMe reads and copies of offloaded state are prefetched
--prefetch-depth ahead, gradients go to the host as soon as they are
reduced, NVMe writes run while the next update computes). Each binary runs
on N CPU ranks with its NVMe files in a temporary directory, and the
benchmark reads the runtime's own accounting from --stats-json:

  exposed    ms per step the main thread spent in transfers or blocked on
             them (synchronous calls, and asrt_transfer_wait)
  offload    ms per step the offload thread spent transferring
  step       mean ms per step

Both runs move the same bytes (the summary's offload line); the ratios
compare the schedule against none, in the same run. Nothing here is a
test threshold: the machines are shared and noisy. On the CPU backend a
copy is a memcpy and an NVMe read usually hits the page cache, so the
transfers are short; the accounting shows how much of them the schedule
hides, and the offload thread competes with compute for the cores.

  python3 bench/offload.py --bin build/bin
  python3 bench/offload.py --bin build/bin --configs zero3:nvme:cpu
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

from benchlib import (GPT2_4x256, check_tools, mpirun_command,
                      rank_environment, run)

# strategy:optimizer offload:parameter offload
CONFIGS = "ddp:cpu:none,ddp:nvme:none,zero3:nvme:cpu,fsdp:nvme:nvme"


def parse_configs(text):
    configs = []
    for item in text.split(","):
        parts = item.split(":")
        if (len(parts) != 3 or parts[1] not in ("none", "cpu", "nvme") or
                parts[2] not in ("none", "cpu", "nvme") or
                parts == [parts[0], "none", "none"]):
            sys.exit(f"error: --configs entry '{item}' is not "
                     "STRATEGY:OPTIMIZER:PARAMS with OPTIMIZER and PARAMS "
                     "one of none, cpu, nvme (not both none)")
        configs.append(parts)
    return configs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default="build/bin",
                        help="directory with shard-gen and shard-compile")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--configs", default=CONFIGS,
                        help="STRATEGY:OPTIMIZER:PARAMS,... (default "
                             f"{CONFIGS})")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--mpirun", default=shutil.which("mpirun") or "mpirun")
    args = parser.parse_args()
    if args.ranks < 1:
        sys.exit(f"error: --ranks must be at least 1, got {args.ranks}")
    if args.steps < 1:
        sys.exit(f"error: --steps must be at least 1, got {args.steps}")
    configs = parse_configs(args.configs)
    check_tools(args.bin)
    mpirun = mpirun_command(args.mpirun, args.ranks)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env = rank_environment(tmp)
        step = os.path.join(tmp, "model.mlir")
        run([os.path.join(args.bin, "shard-gen")] + GPT2_4x256 +
            [f"--micro-batch={2 * args.ranks}", "-o", step])
        offload_dir = os.path.join(tmp, "nvme")
        os.mkdir(offload_dir)
        for strategy, optimizer, params in configs:
            name = f"{strategy}:{optimizer}:{params}"
            row = {"config": name}
            for overlap in ("false", "true"):
                binary = os.path.join(tmp, f"{strategy}-{optimizer}-"
                                           f"{params}-{overlap}")
                run([os.path.join(args.bin, "shard-compile"),
                     f"--strategy={strategy}", f"--world-size={args.ranks}",
                     f"--offload={optimizer}", f"--offload-params={params}",
                     f"--overlap={overlap}", step, "-o", binary])
                stats = binary + ".json"
                run(mpirun + [binary, "--steps", str(args.steps),
                              "--offload-dir", offload_dir,
                              "--stats-json", stats], env=env)
                with open(stats) as f:
                    s = json.load(f)
                t = s["offload_time"]
                moved = sum(k["bytes_per_step"] for k in s["offload"].values())
                row[overlap] = (s["mean_step_ms"], t["exposed_ms_per_step"],
                                t["offload_thread_ms"] / s["steps"])
                row["bytes"] = moved
            rows.append(row)

    print(f"gpt2 4 layers x 256, {args.ranks} CPU ranks, mean of "
          f"{args.steps} steps, ms per step (rank 0); "
          "config = strategy:optimizer:params offload")
    print(f"{'':20}{'bytes':>10}{'synchronous':>33}{'asynchronous':>33}"
          f"{'async / sync':>24}")
    print(f"{'':30}" + f"{'step':>11}{'exposed':>11}{'offload':>11}" * 2 +
          f"{'step':>12}{'exposed':>12}")
    for row in rows:
        line = f"{row['config']:20}{row['bytes']:>10}"
        for overlap in ("false", "true"):
            line += "".join(f"{v:>11.2f}" for v in row[overlap])
        off, on = row["false"], row["true"]
        line += f"{on[0] / off[0]:>12.2f}"
        line += f"{on[1] / off[1]:>12.2f}" if off[1] > 0 else f"{'-':>12}"
        print(line)


if __name__ == "__main__":
    main()
