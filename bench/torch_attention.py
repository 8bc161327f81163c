#!/usr/bin/env python3
"""PyTorch's causal attention kernels, one by one, at a GPT's shape.

  python3 bench/torch_attention.py --batch 8 --heads 12 --seq 1024 --head-dim 64
  python3 bench/torch_attention.py --device cpu --batch 1 --seq 64 --reps 2

The yardstick for autoshard's own attention kernels (flash, wmma, gemm:
docs/CudaBackend.md): issue 7 asks for cuDNN's fused scaled-dot-product
attention or an own kernel *if it measures better*. The device check
(scripts/gpu-check.sh) times ours per call from --device-op-times and this
script times each of F.scaled_dot_product_attention's backends at the same
shape, so that the table says which is fastest on the GPU at hand.

For each backend (--backends; default flash, cudnn, efficient, math) under
torch.nn.attention.sdpa_kernel: the forward of a training step (inputs that
require gradients, so the kernel keeps what its backward needs), and the
backward from that forward's graph, each timed with CUDA events over --reps
calls after --warmup calls; the median call is reported, with the
attention FLOPs (4 B H S^2 D forward, twice that backward, over the whole
S x S square as the model FLOPs count it) per second. q, k and v are views
of one [B, S, 3, H, D] tensor, as a fused QKV projection would leave them;
autoshard's kernels read the same [B, S, H, D] layout. A backend that
cannot run the shape or dtype is reported with PyTorch's reason, not
timed.

--json FILE writes everything printed. Exit status 0 when at least one
backend ran, 1 when none did, 2 for a bad command line.
"""

import argparse
import json
import statistics
import sys
import time
import warnings

try:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:  # pragma: no cover - the message is the point
    sys.exit(f"torch_attention.py needs PyTorch 2.3 or later, which "
             f"{sys.executable} cannot import")

BACKENDS = {
    "flash": "FLASH_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "math": "MATH",
}


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Times F.scaled_dot_product_attention's backends "
                    "(causal, forward and backward) at one shape.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    p.add_argument("--device", default="cuda")
    p.add_argument("--backends", default=",".join(BACKENDS),
                   help="comma-separated, of " + ", ".join(BACKENDS))
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    for name in ("batch", "heads", "seq", "head_dim", "reps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, "
                    f"not {getattr(args, name)}")
    if args.warmup < 0:
        p.error(f"--warmup must not be negative, not {args.warmup}")
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = [b for b in args.backends if b not in BACKENDS]
    if unknown or not args.backends:
        p.error(f"--backends: unknown {', '.join(unknown) or '(none given)'}; "
                f"choose from {', '.join(BACKENDS)}")
    return args


class Timer:
    """Milliseconds of one call: CUDA events on a GPU, the clock on a CPU."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"

    def __call__(self, fn):
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end)
        begin = time.perf_counter()
        fn()
        return (time.perf_counter() - begin) * 1e3


def time_backend(name, args, device, dtype):
    """{fwd_ms, bwd_ms, fwd_tflops, bwd_tflops} or {error}."""
    b, h, s, d = args.batch, args.heads, args.seq, args.head_dim
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    qkv = torch.randn(b, s, 3, h, d, generator=gen).to(device, dtype)
    qkv.requires_grad_(True)
    dout = torch.randn(b, h, s, d, generator=gen).to(device, dtype)
    timer = Timer(device)

    def views():
        q, k, v = qkv.unbind(2)  # [B, S, H, D] each
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def forward():
        q, k, v = views()
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    try:
        with warnings.catch_warnings(record=True) as caught, \
                sdpa_kernel(getattr(SDPBackend, BACKENDS[name])):
            warnings.simplefilter("always")
            for _ in range(args.warmup):
                out = forward()
                out.backward(dout)
            fwd, bwd = [], []
            for _ in range(args.reps):
                qkv.grad = None
                box = {}
                fwd.append(timer(lambda: box.setdefault("out", forward())))
                bwd.append(timer(lambda: box["out"].backward(dout)))
    except RuntimeError as e:
        # No kernel for this shape, dtype or device: PyTorch's warnings
        # name the constraint that failed, its error only that none ran.
        why = [str(w.message) for w in caught
               if "scaled_dot_product" in str(w.message) or
               "attention" in str(w.message).lower()]
        reason = " ".join(" ".join(why[:2] + [str(e)]).split())
        return {"error": reason[:400]}
    if device.type == "cuda":
        torch.cuda.synchronize()
    flops = 4.0 * b * h * s * s * d
    fwd_ms, bwd_ms = statistics.median(fwd), statistics.median(bwd)
    return {"fwd_ms": fwd_ms, "bwd_ms": bwd_ms,
            "fwd_tflops": flops / (fwd_ms * 1e-3) / 1e12,
            "bwd_tflops": 2 * flops / (bwd_ms * 1e-3) / 1e12}


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("torch_attention.py: no CUDA device (torch.cuda.is_available() "
              "is False); pass --device cpu to time the CPU's kernels",
              file=sys.stderr)
        return 1
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    torch.backends.cuda.matmul.allow_tf32 = False
    name = (torch.cuda.get_device_name(device) if device.type == "cuda"
            else "cpu")
    print(f"causal attention, {args.dtype}, batch {args.batch} x heads "
          f"{args.heads} x seq {args.seq} x head_dim {args.head_dim} on "
          f"{name} (torch {torch.__version__}); median of {args.reps} calls")
    print(f"  {'backend':12}{'fwd ms':>10}{'bwd ms':>10}{'fwd TF/s':>10}"
          f"{'bwd TF/s':>10}")
    results = {}
    for backend in args.backends:
        r = time_backend(backend, args, device, dtype)
        results[backend] = r
        if "error" in r:
            print(f"  {backend:12}not run: {r['error']}")
        else:
            print(f"  {backend:12}{r['fwd_ms']:10.3f}{r['bwd_ms']:10.3f}"
                  f"{r['fwd_tflops']:10.1f}{r['bwd_tflops']:10.1f}")
    report = {"device": name, "torch": torch.__version__,
              "dtype": args.dtype, "batch": args.batch, "heads": args.heads,
              "seq": args.seq, "head_dim": args.head_dim, "reps": args.reps,
              "backends": results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if any("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
