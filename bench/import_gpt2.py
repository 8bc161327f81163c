"""Step time of HuggingFace GPT-2 imported through autoshard.torch, against
shard-gen's GPT-2 of the same config and against PyTorch eager, on the CPU.

Builds GPT2LMHeadModel (transformers, random init) at the config of
shard-gen's GPT-2 below, exports its training step with
autoshard.hf.export_causal_lm, and compiles three things for one CPU rank:

  shard-gen   shard-gen's GPT-2 preset of the same config (fused ops)
  imported    the HF model's step through autoshard-raise (the default)
  unraised    the HF model's step with --raise=false: every ATen op on its
              own generic kernel

and times PyTorch eager doing the same step (forward, loss, backward,
clip_grad_norm_, AdamW) on the same machine with one thread, like the
binaries' one BLAS thread. Runs alternate, --repeats times, each --steps
steps; a binary's time is the runtime's steady ms per step (--stats-json
steady_step_ms: the median after the first step), eager's the median of its
steps after the first. Ratios are against shard-gen's binary in the same
run; nothing here is a test threshold (machines are shared and noisy).

  .venv/bin/python bench/import_gpt2.py --bin build/bin
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from benchlib import check_tools, mpirun_command, rank_environment, run

LAYERS, HIDDEN, HEADS, VOCAB, SEQ = 4, 256, 4, 2048, 128


def eager_times(model, batch, steps):
    import torch
    torch.set_num_threads(1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    times = []
    for _ in range(steps):
        ids = torch.randint(0, VOCAB, (batch, SEQ), generator=g)
        start = time.perf_counter()
        opt.zero_grad()
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times[1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default="build/bin",
                        help="directory with shard-gen and shard-compile")
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mpirun", default=shutil.which("mpirun") or "mpirun")
    args = parser.parse_args()
    if args.steps < 2:
        sys.exit(f"error: --steps must be at least 2 (the first step is "
                 f"not timed), got {args.steps}")
    if args.repeats < 1:
        sys.exit(f"error: --repeats must be at least 1, got {args.repeats}")
    check_tools(args.bin)
    try:
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel
        import autoshard.hf
        import autoshard.torch as at
    except ImportError as e:
        sys.exit(f"error: {e}: run with the Python of scripts/setup.sh's "
                 f".venv (.venv/bin/python bench/import_gpt2.py)")

    torch.manual_seed(0)
    config = GPT2Config(n_layer=LAYERS, n_embd=HIDDEN, n_head=HEADS,
                        vocab_size=VOCAB, n_positions=SEQ, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                        eos_token_id=0)
    model = GPT2LMHeadModel(config)
    mpirun = mpirun_command(args.mpirun, 1)
    optimizer = at.AdamW(lr=1e-3, max_grad_norm=1.0)
    variants = ("shard-gen", "imported", "unraised")
    times = {name: [] for name in variants + ("eager",)}

    with tempfile.TemporaryDirectory() as tmp:
        env = rank_environment(tmp)
        gen = os.path.join(tmp, "gen.mlir")
        run([os.path.join(args.bin, "shard-gen"), "--family=gpt2",
             f"--layers={LAYERS}", f"--hidden={HIDDEN}", f"--heads={HEADS}",
             f"--vocab={VOCAB}", f"--seq={SEQ}", f"--max-positions={SEQ}",
             "--weight-decay=0", "--max-grad-norm=1", "--beta2=0.999",
             f"--micro-batch={args.micro_batch}", "-o", gen])
        step = autoshard.hf.export_causal_lm(
            model, batch=args.micro_batch, seq=SEQ, optimizer=optimizer)
        imported = os.path.join(tmp, "imported.mlir")
        init = os.path.join(tmp, "init.safetensors")
        step.save(imported, init)
        sources = {"shard-gen": (gen, [], []),
                   "imported": (imported, [], ["--load-params", init]),
                   "unraised": (imported, ["--raise=false"],
                                ["--load-params", init])}
        binaries = {}
        for name, (src, flags, _) in sources.items():
            binaries[name] = os.path.join(tmp, name)
            run([os.path.join(args.bin, "shard-compile"), "--strategy=ddp",
                 "--world-size=1", *flags, src, "-o", binaries[name]])
        for _ in range(args.repeats):
            for name in variants:
                stats = os.path.join(tmp, f"{name}.json")
                run(mpirun + [binaries[name], "--steps", str(args.steps),
                              "--seed", "1", "--stats-json", stats,
                              *sources[name][2]], env=env)
                with open(stats) as f:
                    times[name].append(json.load(f)["steady_step_ms"])
            times["eager"].append(eager_times(model, args.micro_batch,
                                              args.steps))

    base = statistics.median(times["shard-gen"])
    print(f"gpt2 {LAYERS} layers x {HIDDEN}, vocab {VOCAB}, seq {SEQ}, "
          f"micro-batch {args.micro_batch}, 1 CPU rank (1 thread), median "
          f"of {args.repeats} runs of {args.steps} steps")
    print(f"{'':12}{'ms/step':>10}{'x shard-gen':>13}")
    for name in variants + ("eager",):
        label = "torch eager" if name == "eager" else name
        median = statistics.median(times[name])
        print(f"{label:12}{median:>10.1f}{median / base:>13.2f}")


if __name__ == "__main__":
    main()
