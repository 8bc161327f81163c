"""Step time of a model written with generic ops, raised and not, against
the fused model.

Writes one model with shard-gen twice: the fused preset, and --generic (the
same model and initialisation as a PyTorch front end emits it: matmul,
softmax attention with a constant causal mask, the elementwise GELU /
RMSNorm / RoPE chains). Compiles three binaries for one CPU rank:

  fused     the preset's fused ops
  raised    the generic model through autoshard-raise (the default), which
            rewrites its patterns into the fused ops
  generic   the generic model with --raise=false: every generic op on its
            own kernel

and runs them in turn, --repeats times, each for --steps steps, reading the
runtime's steady ms per step from --stats-json (steady_step_ms: the
median after the first step), at each of --threads (the binaries'
--threads: BLAS and the generic kernels' threads). The ratios are against
the fused binary's median at the same thread count, and against the same
binary's at the first thread count, in the same run; nothing here is a
test threshold (machines are shared and noisy).

  python3 bench/generic_ops.py --bin build/bin
  python3 bench/generic_ops.py --bin build/bin --threads 1,2
  python3 bench/generic_ops.py --bin build/bin --family llama --repeats 5
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

from benchlib import (GPT2_4x256, check_tools, mpirun_command,
                      rank_environment, run)

LLAMA_4x256 = ["--family=llama", "--layers=4", "--hidden=256", "--heads=4",
               "--kv-heads=2", "--ffn=688", "--vocab=2048", "--seq=128"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default="build/bin",
                        help="directory with shard-gen and shard-compile")
    parser.add_argument("--family", choices=("gpt2", "llama"), default="gpt2")
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", default="1",
                        help="comma-separated --threads values to run at")
    parser.add_argument("--mpirun", default=shutil.which("mpirun") or "mpirun")
    args = parser.parse_args()
    try:
        thread_counts = [int(t) for t in args.threads.split(",")]
    except ValueError:
        thread_counts = []
    if not thread_counts or min(thread_counts) < 1:
        sys.exit(f"error: --threads must be a list of integers >= 1, "
                 f"got '{args.threads}'")
    if args.steps < 2:
        sys.exit(f"error: --steps must be at least 2 (the first step is "
                 f"not timed), got {args.steps}")
    if args.repeats < 1:
        sys.exit(f"error: --repeats must be at least 1, got {args.repeats}")
    check_tools(args.bin)
    model = GPT2_4x256 if args.family == "gpt2" else LLAMA_4x256
    mpirun = mpirun_command(args.mpirun, 1)
    variants = (("fused", [], []), ("raised", ["--generic"], []),
                ("generic", ["--generic"], ["--raise=false"]))
    times = {(name, t): [] for name, _, _ in variants for t in thread_counts}

    with tempfile.TemporaryDirectory() as tmp:
        env = rank_environment(tmp)
        binaries = {}
        for name, gen_flags, compile_flags in variants:
            step = os.path.join(tmp, f"{name}.mlir")
            run([os.path.join(args.bin, "shard-gen")] + model +
                [f"--micro-batch={args.micro_batch}", *gen_flags, "-o", step])
            binaries[name] = os.path.join(tmp, name)
            run([os.path.join(args.bin, "shard-compile"), "--strategy=ddp",
                 "--world-size=1", *compile_flags, step, "-o",
                 binaries[name]])
        # Interleaved, so that a burst of load on the shared machine falls on
        # every variant alike.
        for _ in range(args.repeats):
            for threads in thread_counts:
                for name, _, _ in variants:
                    stats = os.path.join(tmp, f"{name}.json")
                    run(mpirun + [binaries[name], "--steps", str(args.steps),
                                  "--seed", "1", "--threads", str(threads),
                                  "--stats-json", stats], env=env)
                    with open(stats) as f:
                        s = json.load(f)
                    times[(name, threads)].append(s["steady_step_ms"])

    medians = {key: statistics.median(t) for key, t in times.items()}
    first = thread_counts[0]
    print(f"{args.family} 4 layers x 256, micro-batch {args.micro_batch}, "
          f"1 CPU rank, median of {args.repeats} runs of {args.steps} steps")
    print(f"{'':10}{'threads':>8}{'ms/step':>10}{'x fused':>10}"
          f"{f'x {first} thr':>10}")
    for threads in thread_counts:
        for name, _, _ in variants:
            median = medians[(name, threads)]
            print(f"{name:10}{threads:>8}{median:>10.1f}"
                  f"{median / medians[('fused', threads)]:>10.2f}"
                  f"{median / medians[(name, first)]:>10.2f}")


if __name__ == "__main__":
    main()
