#!/usr/bin/env python3
"""The PyTorch peer of autoshard's GPT-2 training step: tokens/s and MFU.

  python3 bench/torch_gpt2.py --model gpt2-small --batch 8 [--mode both]
  python3 bench/torch_gpt2.py --model gpt2-tiny --device cpu --mode eager

Builds in plain PyTorch the GPT-2 that `shard-gen` builds (and that
test/e2e/Inputs/reference_model.py checks): learned position table `wpe`,
pre-LN blocks with separate q/k/v projections (all with bias), causal
attention (here through F.scaled_dot_product_attention), GELU in its tanh
form, a final layer norm, and an LM head tied to `wte` (untied with
--no-tie-embeddings: `lm_head.weight`, no bias). Parameter names, shapes and
initialisation are shard-gen's (normal 0.02, the two residual projections
0.02 / sqrt(2 L), biases 0, norm gains 1), so the preset models have
shard-gen's parameter counts, which the script checks.

One training step: forward, mean softmax cross-entropy, backward, global
gradient-norm clipping (shard-gen's GPT-2 presets clip at 1.0) and AdamW
(fused on CUDA; betas 0.9/0.95, eps 1e-8, weight decay 0.1 on matrices
only, as shard-gen). The batch is one random batch on the device, reused
every step, so no data loading is timed. Each --mode (eager, compile:
torch.compile of the model and its loss) builds the model afresh from the
same seed, runs --warmup steps (torch.compile's compilation happens in the
first, and is reported on its own), then times --steps steps one by one
between torch.cuda.synchronize calls and reports the median.

Precision (--precision):
  bf16-autocast  the default and the standard PyTorch peer of
                 `shard-gen --precision=bf16` (f32 master parameters, bf16
                 compute): f32 parameters, torch.autocast(bfloat16) over
                 the forward. Matmuls and attention run in bf16 with f32
                 accumulation; autocast keeps the layer norms, the loss and
                 so the residual stream in f32, and the gradients reaching
                 AdamW are f32.
  bf16-cast      closer to what autoshard's step does: the f32 masters are
                 cast to bf16 once per step and every activation (residual
                 stream and norms included) and the logits are bf16; the
                 gradients flow back through the casts into f32 .grad.
  f32            no casts (matmuls without TF32, torch's default).

Model FLOPs per token (PaLM, arXiv:2204.02311, appendix B; the estimate of
nanoGPT's estimate_mfu):

  6 N + 12 L C S

N: every parameter except the position table `wpe` (a lookup, no
multiply-adds). With tied embeddings `wte` stays in N as the LM head's
matrix; untied, `wte` is the lookup and `lm_head.weight` is counted. L:
layers, C: hidden size, S: sequence length. 6 N is the forward (2 N) and
backward (4 N) of the matmuls with parameters; 12 L C S the attention
scores and their weighted sum (forward and backward) over the whole S x S
square, causal mask or not. Achieved TFLOP/s = that times tokens/s; MFU is
it over the bf16 (f32 for --precision f32) matmul rate measured in the same
run (torch.matmul of two --matmul-size squares) and, labelled nominal, over
the device's data-sheet dense peak (H100/H200: 989.5 TFLOP/s bf16, as
docs/CostModel.md; --nominal-peak to give another).

--json FILE writes every number printed (schema: json_report()).
"""

import argparse
import dataclasses
import datetime
import json
import math
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError:  # pragma: no cover - the message is the point
    sys.exit(f"torch_gpt2.py needs PyTorch, which {sys.executable} cannot "
             "import; run it with a Python that has torch installed")


# ---------------------------------------------------------------------------
# Configuration: shard-gen's GPT-2 presets
# ---------------------------------------------------------------------------

@dataclasses.dataclass
class Config:
    layers: int
    hidden: int
    heads: int
    vocab: int
    seq: int
    max_positions: int
    batch: int
    ffn: int = 0            # 0: 4 * hidden
    tie_embeddings: bool = True
    norm_eps: float = 1e-5

    def __post_init__(self):
        if self.ffn == 0:
            self.ffn = 4 * self.hidden


# shard-gen --list: sizes, default micro-batch and parameter count (tied).
PRESETS = {
    "gpt2-tiny": (Config(2, 64, 4, 256, 64, 128, 8), 124672),
    "gpt2-small": (Config(12, 768, 12, 50257, 1024, 1024, 1), 124439808),
    "gpt2-medium": (Config(24, 1024, 16, 50257, 1024, 1024, 1), 354823168),
    "gpt2-large": (Config(36, 1280, 20, 50257, 1024, 1024, 1), 774030080),
    "gpt2-xl": (Config(48, 1600, 25, 50257, 1024, 1024, 1), 1557611200),
}

# shard-gen's GPT-2 optimizer (gpt2-tiny uses lr 1e-3; the rate does not
# change the step's cost).
LR, BETAS, ADAM_EPS, WEIGHT_DECAY = 6e-4, (0.9, 0.95), 1e-8, 0.1

# Data-sheet dense peaks, TFLOP/s, as docs/CostModel.md (SXM parts).
NOMINAL_PEAKS = [("H200", {"bf16": 989.5, "f32": 67.0}),
                 ("H100", {"bf16": 989.5, "f32": 67.0}),
                 ("A100", {"bf16": 312.0, "f32": 19.5})]


# ---------------------------------------------------------------------------
# The model, named as shard-gen names its parameters
# ---------------------------------------------------------------------------

def cast(t, dtype):
    """A bf16-cast step reads every parameter through one cast."""
    return t if dtype is None or t is None else t.to(dtype)


class Linear(nn.Module):
    """y = x W^T + b with W [out, in]; weight and bias cast on use."""

    def __init__(self, n_in, n_out, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_out, n_in))
        self.bias = nn.Parameter(torch.zeros(n_out)) if bias else None

    def forward(self, x, dtype=None):
        return F.linear(x, cast(self.weight, dtype), cast(self.bias, dtype))


class LayerNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.bias = nn.Parameter(torch.zeros(n))
        self.eps = eps

    def forward(self, x, dtype=None):
        return F.layer_norm(x, x.shape[-1:], cast(self.weight, dtype),
                            cast(self.bias, dtype), self.eps)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.heads = cfg.heads
        C = cfg.hidden
        self.q_proj, self.k_proj, self.v_proj = (Linear(C, C) for _ in "qkv")
        self.c_proj = Linear(C, C)

    def forward(self, x, dtype=None):
        B, T, C = x.shape
        # [B, T, C] -> [B, heads, T, head_dim], the layout SDPA takes.
        q, k, v = (p(x, dtype).view(B, T, self.heads, C // self.heads)
                   .transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(o.transpose(1, 2).reshape(B, T, C), dtype)


class Mlp(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = Linear(cfg.hidden, cfg.ffn)
        self.c_proj = Linear(cfg.ffn, cfg.hidden)

    def forward(self, x, dtype=None):
        return self.c_proj(F.gelu(self.c_fc(x, dtype), approximate="tanh"),
                           dtype)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = LayerNorm(cfg.hidden, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.ln_2 = LayerNorm(cfg.hidden, cfg.norm_eps)
        self.mlp = Mlp(cfg)

    def forward(self, x, dtype=None):
        x = x + self.attn(self.ln_1(x, dtype), dtype)
        return x + self.mlp(self.ln_2(x, dtype), dtype)


class GPT2(nn.Module):
    """forward(input_ids, labels) -> mean cross-entropy (f32 scalar).

    cast_dtype: None (f32, or autocast chooses) or torch.bfloat16 (every
    parameter read through a cast: the bf16-cast precision)."""

    def __init__(self, cfg, cast_dtype=None):
        super().__init__()
        self.cfg = cfg
        self.cast_dtype = cast_dtype
        self.wte = nn.Parameter(torch.empty(cfg.vocab, cfg.hidden))
        self.wpe = nn.Parameter(torch.empty(cfg.max_positions, cfg.hidden))
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln_f = LayerNorm(cfg.hidden, cfg.norm_eps)
        self.lm_head = (None if cfg.tie_embeddings else
                        Linear(cfg.hidden, cfg.vocab, bias=False))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self):
        residual_std = 0.02 / math.sqrt(2 * self.cfg.layers)
        for name, p in self.named_parameters():
            if name.endswith(("attn.c_proj.weight", "mlp.c_proj.weight")):
                p.normal_(0.0, residual_std)
            elif p.dim() >= 2:
                p.normal_(0.0, 0.02)
            # Vectors keep their construction value: gains 1, biases 0.

    def forward(self, input_ids, labels):
        dt = self.cast_dtype
        T = input_ids.shape[1]
        wte = cast(self.wte, dt)
        x = F.embedding(input_ids, wte) + cast(self.wpe, dt)[:T]
        for block in self.h:
            x = block(x, dt)
        x = self.ln_f(x, dt)
        logits = (F.linear(x, wte) if self.lm_head is None
                  else self.lm_head(x, dt))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               labels.reshape(-1))
        return loss.float()


def flop_parameters(model):
    """N of 6 N + 12 L C S: the parameters that multiply activations."""
    n = sum(p.numel() for p in model.parameters()) - model.wpe.numel()
    if model.lm_head is not None:  # untied: wte is only a lookup
        n -= model.wte.numel()
    return n


def flops_per_token(cfg, n):
    return 6 * n + 12 * cfg.layers * cfg.hidden * cfg.seq


def make_optimizer(model, fused):
    """AdamW as shard-gen's step: decay on matrices only."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": WEIGHT_DECAY},
              {"params": no_decay, "weight_decay": 0.0}]
    kwargs = {"fused": True} if fused else {}
    return torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=ADAM_EPS,
                             **kwargs)


# ---------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------

def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_matmul_peak(device, dtype, n, reps, batches):
    """Median over `batches` of the rate of `reps` back-to-back n^3 GEMMs,
    TFLOP/s: the sustained rate this device gives torch.matmul."""
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    c = torch.empty(n, n, device=device, dtype=dtype)
    for _ in range(3):
        torch.matmul(a, b, out=c)
    rates = []
    for _ in range(batches):
        synchronize(device)
        start = time.perf_counter()
        for _ in range(reps):
            torch.matmul(a, b, out=c)
        synchronize(device)
        rates.append(2.0 * n ** 3 * reps / (time.perf_counter() - start)
                     / 1e12)
    del a, b, c
    return statistics.median(rates)


@dataclasses.dataclass
class ModeResult:
    mode: str
    step_s: list            # every timed step, seconds
    warmup_s: list          # every warm-up step; the first holds compilation
    loss_first: float       # the first warm-up step's loss
    loss_last: float        # the last timed step's loss
    peak_memory_bytes: int  # CUDA only, else None

    @property
    def median_s(self):
        return statistics.median(self.step_s)


def run_mode(mode, cfg, args, device):
    torch.manual_seed(args.seed)
    cast_dtype = torch.bfloat16 if args.precision == "bf16-cast" else None
    with torch.device(device):  # initialised where it trains
        model = GPT2(cfg, cast_dtype)
    optimizer = make_optimizer(model, fused=device.type == "cuda")
    forward = model
    if mode == "compile":
        kwargs = {} if args.compile_mode == "default" else {
            "mode": args.compile_mode}
        forward = torch.compile(model, **kwargs)

    gen = torch.Generator(device=device).manual_seed(args.seed + 1)
    tokens = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq + 1),
                           device=device, generator=gen)
    input_ids, labels = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    if args.precision == "bf16-autocast":
        def autocast():
            return torch.autocast(device.type, dtype=torch.bfloat16)
    else:
        def autocast():
            return torch.autocast(device.type, enabled=False)

    def step():
        with autocast():
            loss = forward(input_ids, labels)
        loss.backward()
        if args.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(),
                                           args.max_grad_norm, foreach=True)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        # A copy: a CUDA graph (--compile-mode reduce-overhead) reuses the
        # output's memory in the next step.
        return loss.detach().clone()

    def timed_steps(count):
        times, losses = [], []
        for _ in range(count):
            synchronize(device)
            start = time.perf_counter()
            losses.append(step())
            synchronize(device)
            times.append(time.perf_counter() - start)
        return times, losses

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    warmup_s, warm_losses = timed_steps(args.warmup)
    step_s, losses = timed_steps(args.steps)
    result = ModeResult(
        mode, step_s, warmup_s,
        loss_first=float((warm_losses or losses)[0]),
        loss_last=float(losses[-1]),
        peak_memory_bytes=(torch.cuda.max_memory_allocated(device)
                           if device.type == "cuda" else None))
    return result


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(
        description="PyTorch GPT-2 training-step throughput and MFU, the "
        "peer of autoshard's GPU benchmark",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", choices=sorted(PRESETS), default="gpt2-small",
                   help="a shard-gen preset; the size flags override it")
    for name, help_text in [
            ("layers", "transformer blocks"), ("hidden", "model width"),
            ("heads", "attention heads"), ("vocab", "vocabulary size"),
            ("seq", "tokens per sequence"),
            ("max-positions", "rows of the position table wpe"),
            ("ffn", "MLP inner size (default 4 x hidden)"),
            ("batch", "sequences per step (the preset's: shard-gen's "
             "--micro-batch default)")]:
        p.add_argument(f"--{name}", type=int, default=None, help=help_text)
    p.add_argument("--tie-embeddings", action=argparse.BooleanOptionalAction,
                   default=True, help="LM head tied to wte, as shard-gen")
    p.add_argument("--mode", choices=["eager", "compile", "both"],
                   default="both")
    p.add_argument("--compile-mode", default="default",
                   help="torch.compile mode (default, reduce-overhead, "
                   "max-autotune, ...)")
    p.add_argument("--precision", default="bf16-autocast",
                   choices=["bf16-autocast", "bf16-cast", "f32"])
    p.add_argument("--device", default="cuda",
                   help="cuda, cuda:N or cpu")
    p.add_argument("--warmup", type=int, default=3,
                   help="untimed steps per mode (compilation is in the "
                   "first)")
    p.add_argument("--steps", type=int, default=20,
                   help="timed steps per mode; the median is reported")
    p.add_argument("--max-grad-norm", type=float, default=1.0,
                   help="global gradient-norm clipping (0: none), as "
                   "shard-gen's GPT-2 presets")
    p.add_argument("--matmul-size", type=int, default=None,
                   help="side of the square GEMM of the measured peak "
                   "(default 8192 on CUDA, 1024 on CPU)")
    p.add_argument("--matmul-reps", type=int, default=10,
                   help="GEMMs per timed batch of the peak (5 batches)")
    p.add_argument("--nominal-peak", type=float, default=None,
                   help="data-sheet dense TFLOP/s of the device in the "
                   "compute dtype (default: known for H200, H100, A100)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="FILE",
                   help="also write the results as JSON")
    args = p.parse_args(argv)
    if args.steps < 1 or args.warmup < 0:
        p.error("--steps must be >= 1 and --warmup >= 0")
    if args.mode in ("compile", "both") and args.warmup < 1:
        p.error("--mode compile needs --warmup >= 1: the first step "
                "compiles, and compilation is not timed")
    return args


def make_config(args):
    preset, preset_params = PRESETS[args.model]
    cfg = dataclasses.replace(preset)
    for field in ("layers", "hidden", "heads", "vocab", "seq",
                  "max_positions", "ffn", "batch"):
        value = getattr(args, field)
        if value is not None:
            setattr(cfg, field, value)
    if args.ffn is None and args.hidden is not None:
        cfg.ffn = 4 * cfg.hidden
    if args.max_positions is None and cfg.seq > cfg.max_positions:
        cfg.max_positions = cfg.seq
    cfg.tie_embeddings = args.tie_embeddings
    problems = [f"--{f.replace('_', '-')} {getattr(cfg, f)} must be >= 1"
                for f in ("layers", "hidden", "heads", "vocab", "seq",
                          "max_positions", "ffn", "batch")
                if getattr(cfg, f) < 1]
    if not problems and cfg.hidden % cfg.heads:
        problems.append(f"--hidden {cfg.hidden} is not a multiple of "
                        f"--heads {cfg.heads}")
    if not problems and cfg.seq > cfg.max_positions:
        problems.append(f"--seq {cfg.seq} exceeds --max-positions "
                        f"{cfg.max_positions}")
    if problems:
        sys.exit("error: " + "; ".join(problems))
    # The preset's count is shard-gen's; only the unchanged model has it.
    sizes_changed = any(getattr(cfg, f) != getattr(preset, f)
                        for f in ("layers", "hidden", "heads", "vocab",
                                  "max_positions", "ffn"))
    if sizes_changed:
        return cfg, None
    # Untying adds lm_head.weight [vocab, hidden] (shard-gen
    # --tie-embeddings=false).
    return cfg, preset_params + (0 if cfg.tie_embeddings
                                 else cfg.vocab * cfg.hidden)


def pick_device(name):
    try:
        device = torch.device(name)
    except RuntimeError as e:
        sys.exit(f"error: --device {name}: {e}")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            built = (f"built with CUDA {torch.version.cuda}"
                     if torch.version.cuda else "built without CUDA")
            sys.exit(f"error: --device {name}, but torch {torch.__version__} "
                     f"({built}) sees no CUDA device; run on a GPU machine "
                     "or pass --device cpu (with --model gpt2-tiny for a "
                     "quick run)")
        index = device.index if device.index is not None else 0
        if index >= torch.cuda.device_count():
            sys.exit(f"error: --device {name}, but only "
                     f"{torch.cuda.device_count()} CUDA device(s) exist")
        device = torch.device("cuda", index)
        torch.cuda.set_device(device)
    elif device.type != "cpu":
        sys.exit(f"error: --device {name}: only cuda and cpu are supported")
    return device


def device_name(device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform
    return f"CPU ({platform.processor() or platform.machine()}, " \
           f"{torch.get_num_threads()} threads)"


def nominal_peak(args, name, dtype_key):
    if args.nominal_peak is not None:
        return args.nominal_peak
    for marker, peaks in NOMINAL_PEAKS:
        if marker in name:
            return peaks[dtype_key]
    return None


PRECISION_LINES = {
    "bf16-autocast": "bf16 autocast over f32 master parameters (the "
                     "standard PyTorch peer of shard-gen --precision=bf16; "
                     "norms, loss and residual stream stay f32)",
    "bf16-cast": "f32 masters cast to bf16 once per step, every activation "
                 "bf16 (as autoshard's --precision=bf16)",
    "f32": "f32 (no TF32)",
}


def json_report(args, cfg, device, name, n_all, n_flop, fpt, peak,
                nominal, results):
    """{tool, date, torch, device{kind, name}, model{...}, precision,
    optimizer{...}, flops_per_token, flops_formula, flop_parameters_note,
    matmul_peak{dtype, size, tflops}, nominal_peak_tflops (null when
    unknown), modes{eager|compile: {step_ms_median, step_ms[], warmup_ms[],
    compile_s (compile only: first warm-up step less the median step),
    tokens_per_s, tflops, mfu_measured, mfu_nominal (null when unknown),
    peak_memory_bytes (null on CPU), loss_first, loss_last}}}"""
    modes = {}
    for r in results:
        tokens_per_s = cfg.batch * cfg.seq / r.median_s
        tflops = fpt * tokens_per_s / 1e12
        modes[r.mode] = {
            "step_ms_median": r.median_s * 1e3,
            "step_ms": [t * 1e3 for t in r.step_s],
            "warmup_ms": [t * 1e3 for t in r.warmup_s],
            "compile_s": (r.warmup_s[0] - r.median_s
                          if r.mode == "compile" else None),
            "tokens_per_s": tokens_per_s,
            "tflops": tflops,
            "mfu_measured": tflops / peak,
            "mfu_nominal": tflops / nominal if nominal else None,
            "peak_memory_bytes": r.peak_memory_bytes,
            "loss_first": r.loss_first,
            "loss_last": r.loss_last,
        }
    return {
        "tool": "bench/torch_gpt2.py",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"),
        "torch": torch.__version__,
        "device": {"kind": device.type, "name": name},
        "model": {"preset": args.model, **dataclasses.asdict(cfg),
                  "parameters": n_all, "flop_parameters": n_flop},
        "precision": args.precision,
        "optimizer": {"name": "AdamW", "fused": device.type == "cuda",
                      "lr": LR, "betas": list(BETAS), "eps": ADAM_EPS,
                      "weight_decay": WEIGHT_DECAY,
                      "max_grad_norm": args.max_grad_norm},
        "flops_per_token": fpt,
        "flops_formula": "6*N + 12*L*C*S",
        "flop_parameters_note": (
            "N: every parameter but wpe; wte counted once, as the LM head"
            if cfg.tie_embeddings else
            "N: every parameter but the lookup tables wte and wpe"),
        "matmul_peak": {"dtype": "f32" if args.precision == "f32"
                        else "bf16",
                        "size": args.matmul_size, "tflops": peak},
        "nominal_peak_tflops": nominal,
        "modes": modes,
    }


def tflops_text(x):
    return f"{x:.1f}" if x >= 10 else f"{x:.3g}"


def print_report(report, cfg, warmup):
    m, d = report["model"], report["device"]
    preset = (m["preset"] if m["shard_gen_parameters"] is not None
              else f"{m['preset']} with other sizes")
    print(f"torch_gpt2.py: {preset}: {cfg.layers} layers "
          f"x {cfg.hidden}, {cfg.heads} heads, ffn {cfg.ffn}, vocab "
          f"{cfg.vocab}, seq {cfg.seq}, batch {cfg.batch} "
          f"({cfg.batch * cfg.seq} tokens/step), "
          f"{'tied' if cfg.tie_embeddings else 'untied'} LM head")
    print(f"device {d['name']}, torch {report['torch']}")
    print(f"precision: {PRECISION_LINES[report['precision']]}")
    o = report["optimizer"]
    print("step: forward, cross-entropy, backward, "
          + (f"clip grad norm {o['max_grad_norm']:g}, "
             if o["max_grad_norm"] > 0 else "")
          + f"AdamW{' (fused)' if o['fused'] else ''}, weight decay "
          f"{o['weight_decay']:g} on matrices")
    n, fpt = m["flop_parameters"], report["flops_per_token"]
    same = (" (shard-gen's count)" if m["shard_gen_parameters"] is not None
            else "")
    print(f"parameters {m['parameters']:,}{same}; FLOPs/token = 6*N + 12*L*C*S "
          f"= 6*{n:,} + 12*{cfg.layers}*{cfg.hidden}*{cfg.seq} = {fpt:,} "
          f"({report['flop_parameters_note']})")
    mp, nominal = report["matmul_peak"], report["nominal_peak_tflops"]
    print(f"measured {mp['dtype']} matmul peak: {mp['size']}^3 "
          f"torch.matmul, {tflops_text(mp['tflops'])} TFLOP/s; nominal dense peak: "
          + (f"{nominal:g} TFLOP/s" if nominal else "unknown "
             "(--nominal-peak)"))
    print(f"median of {len(next(iter(report['modes'].values()))['step_ms'])}"
          f" timed steps after {warmup} warm-up steps per mode")
    print()
    header = (f"{'mode':<9}{'step ms':>10}{'tokens/s':>12}{'TFLOP/s':>10}"
              f"{'MFU':>8}{'MFU nom':>9}{'peak MiB':>10}{'loss first':>12}"
              f"{'last':>8}{'compile s':>11}")
    print(header)
    for mode, r in report["modes"].items():
        mem = (f"{r['peak_memory_bytes'] / 2**20:.0f}"
               if r["peak_memory_bytes"] is not None else "-")
        nom = f"{100 * r['mfu_nominal']:.1f}%" if r["mfu_nominal"] else "-"
        comp = f"{r['compile_s']:.1f}" if r["compile_s"] is not None else "-"
        print(f"{mode:<9}{r['step_ms_median']:>10.2f}"
              f"{r['tokens_per_s']:>12,.0f}{tflops_text(r['tflops']):>10}"
              f"{100 * r['mfu_measured']:>7.1f}%{nom:>9}{mem:>10}"
              f"{r['loss_first']:>12.4f}{r['loss_last']:>8.4f}{comp:>11}")
    print("MFU: achieved TFLOP/s over the measured matmul peak; MFU nom: "
          "over the nominal peak")


def main(argv=None):
    args = parse_args(argv)
    cfg, expected_params = make_config(args)
    device = pick_device(args.device)
    name = device_name(device)
    if args.matmul_size is None:
        args.matmul_size = 8192 if device.type == "cuda" else 1024

    with torch.device("meta"):  # only counts: no memory, no init
        probe = GPT2(cfg, None)
    n_all = sum(p.numel() for p in probe.parameters())
    n_flop = flop_parameters(probe)
    del probe
    if expected_params is not None and n_all != expected_params:
        sys.exit(f"error: the model has {n_all} parameters where shard-gen "
                 f"{args.model} has {expected_params}: it is not the same "
                 "model")
    fpt = flops_per_token(cfg, n_flop)

    dtype_key = "f32" if args.precision == "f32" else "bf16"
    if dtype_key == "f32":
        torch.set_float32_matmul_precision("highest")  # no TF32, as autoshard
    peak = measure_matmul_peak(
        device, torch.float32 if dtype_key == "f32" else torch.bfloat16,
        args.matmul_size, args.matmul_reps, batches=5)
    nominal = nominal_peak(args, name, dtype_key)

    def report_of(results):
        report = json_report(args, cfg, device, name, n_all, n_flop, fpt,
                             peak, nominal, results)
        report["model"]["shard_gen_parameters"] = expected_params
        return report

    def write_json(report):
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=2)
                f.write("\n")

    modes = ["eager", "compile"] if args.mode == "both" else [args.mode]
    results = []
    for mode in modes:
        results.append(run_mode(mode, cfg, args, device))
        # Written after each mode, so that a mode that fails or runs out of
        # time later (torch.compile) leaves the earlier ones' numbers.
        write_json(report_of(results))
        if mode == "compile":
            torch.compiler.reset()  # drops the compiled model's graphs
        if device.type == "cuda":  # the next mode starts from free memory
            torch.cuda.empty_cache()

    print_report(report_of(results), cfg, args.warmup)


if __name__ == "__main__":
    main()
