#!/usr/bin/env python3
"""How long `shard-opt --strategy=P` takes on a large model, and how it scales.

For each layer count (default 12, 96 and 960 blocks of gpt3-175b) this
generates the training step with shard-gen, then times, as whole processes:

  parse+print   shard-opt with no passes: parse, verify and print the step
                (the cost of the IR's size alone; the baseline)
  <preset>      shard-opt --strategy=<preset> --world-size=N: the default
                strategy pipeline (autodiff, plan, partition,
                group-collectives, schedule-collectives), with the verifier
                after every pass, and printing

Each time is the median of --repeat runs. The first table gives each
preset's wall time as a ratio to the baseline at the model's own depth, and
the scaling ratios time(96)/time(12) and time(960)/time(96): linear scaling
gives a 960/96 ratio near 10 (the baseline's own ratio shows what the parser
and printer alone do on the same inputs). The second gives the same for the
CPU time the process used (user + system), which on a shared machine does
not count the time spent waiting for a core. Peak resident memory is the
largest of the runs. Nothing here is a pass/fail threshold: machines are
shared and noisy.

Wall time on large inputs also grows with cache and TLB misses, which are
the machine's, not the algorithm's. With --instructions PRESET[,PRESET]
the benchmark also counts the instructions each of those presets executes
under valgrind (callgrind), which is deterministic: its 960/96 ratio is the
algorithmic scaling.

With --auto-model M the benchmark also times `--strategy=auto` (the cost
model's search, with the exact memory plans it builds) against a plain
`--strategy=zero3` compile of the same step, at --auto-world-size ranks of
--auto-device, and prints the ratio; --auto-instructions counts the
instructions of both under callgrind too.

  python3 bench/strategy_pipeline.py --bin build/bin
  python3 bench/strategy_pipeline.py --bin build/bin --layers 2,4 --repeat 1
  python3 bench/strategy_pipeline.py --bin build/bin --presets zero3 \
      --layers 96 --auto-model llama2-70b
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PRESETS = ["ddp", "zero1", "zero2", "zero3", "fsdp", "hybrid"]


def run_timed(cmd):
    """Runs cmd; returns (wall seconds, CPU seconds, peak RSS in MiB)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    stderr = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"error: {' '.join(cmd)} failed with exit code {code}:\n"
                 f"{stderr}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def count_instructions(cmd, tmp):
    """Instructions cmd executes, counted by callgrind."""
    out = os.path.join(tmp, "callgrind.out")
    proc = subprocess.run(["valgrind", "--tool=callgrind",
                           f"--callgrind-out-file={out}"] + cmd,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    if proc.returncode != 0:
        sys.exit(f"error: valgrind {' '.join(cmd)} failed:\n{proc.stderr}")
    for line in proc.stderr.splitlines():
        if "Collected :" in line:
            return int(line.split(":")[-1])
    sys.exit("error: no instruction count in callgrind's output")


def measure(cmd, repeat):
    """(median wall seconds, median CPU seconds, peak MiB) of repeat runs."""
    runs = [run_timed(cmd) for _ in range(repeat)]
    return (statistics.median(w for w, _, _ in runs),
            statistics.median(c for _, c, _ in runs),
            max(m for _, _, m in runs))


def print_times(rows, layers, ref, column, title):
    """One table of the times in `column` of each row's measurements."""
    print(title)
    header = f"{'':12}" + "".join(f"{str(n) + ' layers':>14}" for n in layers)
    for a, b in zip(layers, layers[1:]):
        header += f"{f'{b}/{a}':>9}"
    header += f"{'x base@' + str(ref):>12}{'peak MiB':>10}"
    print(header)
    base = rows["parse+print"][ref][column]
    for name, by_layers in rows.items():
        line = f"{name:12}" + "".join(
            f"{by_layers[n][column]:>13.3f}s" for n in layers)
        for a, b in zip(layers, layers[1:]):
            line += f"{by_layers[b][column] / by_layers[a][column]:>9.2f}"
        line += f"{by_layers[ref][column] / base:>12.2f}"
        line += f"{max(m for _, _, m in by_layers.values()):>10.0f}"
        print(line)


def strategy_flags(preset, world):
    flags = [f"--strategy={preset}", f"--world-size={world}"]
    if preset == "hybrid":
        # Shard within groups of half the world, replicate across two groups.
        flags.append(f"--shard-group-size={max(1, world // 2)}")
    return flags


def time_auto(shard_gen, shard_opt, args):
    """Prints auto's compile time against a plain zero3 compile."""
    world = args.auto_world_size
    with tempfile.TemporaryDirectory() as tmp:
        step = os.path.join(tmp, f"{args.auto_model}.mlir")
        subprocess.run([shard_gen, args.auto_model, "--precision=bf16",
                        f"--micro-batch={world}", "-o", step],
                       check=True, stderr=subprocess.DEVNULL)
        times, instructions = {}, {}
        for name in ("zero3", "auto"):
            cmd = [shard_opt, f"--strategy={name}", f"--world-size={world}",
                   step, "-o", os.devnull]
            if name == "auto":
                cmd.insert(2, f"--device={args.auto_device}")
            times[name] = measure(cmd, args.repeat)
            if args.auto_instructions:
                instructions[name] = count_instructions(cmd, tmp)
    print(f"--strategy=auto against zero3 on {args.auto_model} (bf16) at "
          f"world size {world} of {args.auto_device}: median of "
          f"{args.repeat} runs")
    print(f"{'':12}{'wall':>10}{'cpu':>10}{'peak MiB':>10}")
    for name, (wall, cpu, peak) in times.items():
        print(f"{name:12}{wall:>9.3f}s{cpu:>9.3f}s{peak:>10.0f}")
    print(f"{'auto/zero3':12}"
          f"{times['auto'][0] / times['zero3'][0]:>10.2f}"
          f"{times['auto'][1] / times['zero3'][1]:>10.2f}")
    if instructions:
        print()
        print("instructions executed (callgrind), millions")
        for name, count in instructions.items():
            print(f"{name:12}{count / 1e6:>10.0f}")
        print(f"{'auto/zero3':12}"
              f"{instructions['auto'] / instructions['zero3']:>10.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default="build/bin",
                        help="directory with shard-gen and shard-opt")
    parser.add_argument("--model", default="gpt3-175b")
    parser.add_argument("--world-size", type=int, default=8)
    parser.add_argument("--layers", default="12,96,960",
                        help="comma-separated layer counts; the ratios use "
                             "consecutive pairs")
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--instructions", default="",
                        help="comma-separated presets whose instructions "
                             "to count under valgrind (slow: ~1 minute per "
                             "preset at 960 layers)")
    parser.add_argument("--auto-model", default="",
                        help="also time --strategy=auto against zero3 on "
                             "this model (bf16)")
    parser.add_argument("--auto-instructions", action="store_true",
                        help="also count the instructions of the two "
                             "--auto-model compiles under valgrind")
    parser.add_argument("--auto-world-size", type=int, default=64)
    parser.add_argument("--auto-device", default="h100-80gb")
    args = parser.parse_args()

    layers = [int(x) for x in args.layers.split(",")]
    presets = args.presets.split(",")
    counted = [p for p in args.instructions.split(",") if p]
    for preset in presets + counted:
        if preset not in PRESETS:
            sys.exit(f"error: unknown preset '{preset}'; valid presets: "
                     f"{', '.join(PRESETS)}")
    if args.world_size < 2 or args.world_size % 2:
        sys.exit("error: --world-size must be even and at least 2 (hybrid "
                 f"uses two groups), got {args.world_size}")
    shard_gen = os.path.join(args.bin, "shard-gen")
    shard_opt = os.path.join(args.bin, "shard-opt")
    for tool in (shard_gen, shard_opt):
        if not os.access(tool, os.X_OK):
            sys.exit(f"error: {tool} is not an executable; pass the build's "
                     "bin directory with --bin")
    if (counted or args.auto_instructions) and shutil.which("valgrind") is None:
        sys.exit("error: --instructions needs valgrind (apt install valgrind)")

    rows = {"parse+print": {}}
    rows.update({p: {} for p in presets})
    instructions = {p: {} for p in counted}
    with tempfile.TemporaryDirectory() as tmp:
        for n in layers:
            step = os.path.join(tmp, f"{args.model}-{n}.mlir")
            subprocess.run([shard_gen, args.model, f"--layers={n}",
                            f"--micro-batch={args.world_size}", "-o", step],
                           check=True, stderr=subprocess.DEVNULL)
            rows["parse+print"][n] = measure([shard_opt, step, "-o",
                                              os.devnull], args.repeat)
            for preset in presets:
                cmd = ([shard_opt] + strategy_flags(preset, args.world_size) +
                       [step, "-o", os.devnull])
                rows[preset][n] = measure(cmd, args.repeat)
            for preset in counted:
                cmd = ([shard_opt] + strategy_flags(preset, args.world_size) +
                       [step, "-o", os.devnull])
                instructions[preset][n] = count_instructions(cmd, tmp)

    ref = layers[len(layers) // 2] if len(layers) > 2 else layers[-1]
    print_times(rows, layers, ref, 0,
                f"shard-opt on {args.model} at world size {args.world_size}: "
                f"median of {args.repeat} runs, whole process")
    print()
    print_times(rows, layers, ref, 1, "CPU time (user + system), median")

    if args.auto_model:
        print()
        time_auto(shard_gen, shard_opt, args)
    if not counted:
        return
    print()
    print("instructions executed (callgrind), millions")
    header = f"{'':12}" + "".join(f"{str(n) + ' layers':>14}" for n in layers)
    for a, b in zip(layers, layers[1:]):
        header += f"{f'{b}/{a}':>9}"
    print(header)
    for preset, by_layers in instructions.items():
        line = f"{preset:12}" + "".join(
            f"{by_layers[n] / 1e6:>14.0f}" for n in layers)
        for a, b in zip(layers, layers[1:]):
            line += f"{by_layers[b] / by_layers[a]:>9.2f}"
        print(line)


if __name__ == "__main__":
    main()
