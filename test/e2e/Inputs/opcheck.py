#!/usr/bin/env python3
"""Gradient and sharding checks of the train dialect's ops, by running them.

  opcheck.py --bin-dir DIR --work DIR [--ranks 1,2] [--jobs J]
             [--mpirun "CMD"] [--perturb F] [CASE ...]
      for each case (all when none is named): writes a forward-only training
      step that applies the op to parameters and batch-derived tensors and
      ends in softmax cross-entropy, compiles it (shard-compile
      --strategy=ddp) for each rank count, runs one SGD step on seeded
      random parameters and data, and checks
        - the step-1 loss against a numpy float64 forward (rtol 1e-5),
        - the gradient of every parameter, recovered from the update as
          (p0 - p1) / lr, against central finite differences of that
          forward (max abs error <= 1e-3 max |grad| + 1e-6 per tensor),
        - the loss and updated parameters of the 2-rank run against the
          1-rank run (rtol 1e-5);
      prints one line per case and exits non-zero when any case fails.
  opcheck.py --list
      prints the case names.
  opcheck.py --check-listed FILE
      fails naming each case that FILE (a lit test) never expects as
      "opcheck CASE: ...", so that a new case cannot go unrun.

A case names its operands: parameters (P) and batch-derived activations
(A, a linear layer of a batch input, so that the gradient reaches
parameters through the op under test), the op's MLIR (`%a` is an operand,
`$a` its type, `$out` the result's type) and the op's definition in numpy,
written from the op's description, independently of the compiler. The
result feeds the logits either as an activation (batch first: flattened,
times a head parameter) or as a linear layer's weight ([classes, k], applied
to a batch input). A case of the generic op set whose step does not
compile is reported as "skipped (op not in this build: ...)" when the
build's train dialect lacks an op the case uses or names in `requires`;
any other failure to compile fails the case.

--perturb F multiplies the numpy op's result by 1 + F: the harness must
then fail (test/e2e/op-gradients.test checks it does).

Needs numpy (Debian's python3-numpy for /usr/bin/python3).
"""

import argparse
import concurrent.futures
import dataclasses
import math
import os
import re
import shlex
import string
import subprocess
import sys
import threading
import zlib
from typing import Callable, Dict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_model import (np, read_safetensors,  # noqa: E402
                             write_asdata, write_safetensors)

BATCH = 4        # the global batch: 2 rows per rank on 2 ranks
CLASSES = 5      # the logits of an activation head
FEATURES = 3     # features of the batch input of an activation
LR = 1024.0      # p1 = p0 - LR g, so g = (p0 - p1) / LR keeps f32's digits
LOSS_RTOL = 1e-5
GRAD_RTOL, GRAD_ATOL = 1e-3, 1e-6
RANKS_RTOL = 1e-5
FD_STEP = 1e-5
FD_MAX_ELEMENTS = 48   # per tensor; more are sampled
SEED = 1


# ---------------------------------------------------------------------------
# The op definitions, in numpy (float64)
# ---------------------------------------------------------------------------

_erf = np.vectorize(math.erf)


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) *
                                  (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def linear(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def rms_norm(x, w, eps=1e-5):
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * w


def log_softmax(x):
    shifted = x - x.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def softmax(x):
    return np.exp(log_softmax(x))


def cross_entropy(logits, labels):
    picked = np.take_along_axis(log_softmax(logits), labels[:, None], -1)
    return -picked.mean()


def pad(x, dim, low, high):
    widths = [(0, 0)] * x.ndim
    widths[dim] = (low, high)
    return np.pad(x, widths)


def rope(x, theta=10000.0):
    """Rotate-half RoPE of x [B, T, H, D]: the pair (i, i + D/2) at position
    t turns by t * theta^(-2i/D)."""
    d = x.shape[-1]
    angles = (np.arange(x.shape[1])[:, None] *
              theta ** (-2.0 * np.arange(d // 2) / d))     # [T, D/2]
    cos, sin = np.cos(angles)[None, :, None], np.sin(angles)[None, :, None]
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def causal_attention(q, k, v, scale=None):
    """q [B, T, H, D], k and v [B, T, Hkv, D]: query head h attends to key
    head h / (H / Hkv) over positions j <= t."""
    heads, d = q.shape[2], q.shape[3]
    group = heads // k.shape[2]
    k, v = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
    s = (1 / math.sqrt(d) if scale is None else scale) * np.einsum(
        "bthd,bjhd->bhtj", q, k)
    t = q.shape[1]
    s = np.where(np.tril(np.ones((t, t), bool)), s, -np.inf)
    return np.einsum("bhtj,bjhd->bthd", softmax(s), v)


def matmul(a, b, transpose_a=False, transpose_b=False):
    if transpose_a:
        a = np.swapaxes(a, -1, -2)
    if transpose_b:
        b = np.swapaxes(b, -1, -2)
    return a @ b


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Operand:
    """A parameter (`param`) or a batch-derived activation (`act`: the
    linear layer of a batch input [*shape[:-1], FEATURES] by parameters
    NAME.w and NAME.b), with values in [lo, hi]."""
    kind: str
    shape: tuple
    lo: float
    hi: float


def fnv1a64(data, h=0xcbf29ce484222325):
    for byte in data:
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def philox4x32_10(counters, k0, k1):
    """Philox-4x32-10 (Salmon et al., SC'11) of uint64 arrays holding 32-bit
    words, counters[0..3], under the key words k0, k1."""
    m32 = np.uint64(0xFFFFFFFF)
    c0, c1, c2, c3 = counters
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & m32,
                          (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & m32)
    return c0, c1, c2, c3


def dropout_keep(shape, p, stream, seed=0, step=0):
    """train.dropout's mask of a whole-batch tensor, as docs/RuntimeABI.md
    defines it: element i is kept iff the uniform (top 24 bits) of word i of
    Philox(counter = (i / 4, seed), key = FNV-1a("train.dropout", step,
    stream)) is >= p. opcheck's binaries run step 0 of --seed 0."""
    le64 = lambda v: v.to_bytes(8, "little")
    key = fnv1a64(le64(stream), fnv1a64(le64(step),
                                        fnv1a64(b"train.dropout")))
    n = int(np.prod(shape))
    blocks = np.arange((n + 3) // 4, dtype=np.uint64)
    const = lambda v: np.full_like(blocks, v)
    words = philox4x32_10(
        (blocks & np.uint64(0xFFFFFFFF), blocks >> np.uint64(32),
         const(seed & 0xFFFFFFFF), const(seed >> 32)),
        key & 0xFFFFFFFF, key >> 32)
    words = np.stack(words, axis=1).reshape(-1)[:n]
    uniform = (words >> np.uint64(8)).astype(np.float64) / 16777216.0
    return (uniform >= float(np.float32(p))).reshape(shape)


def dropout(x, p, stream):
    scale = float(np.float32(1.0) / (np.float32(1.0) - np.float32(p)))
    return np.where(dropout_keep(x.shape, p, stream), x * scale, 0.0)


def P(*shape, lo=-1.0, hi=1.0):
    return Operand("param", shape, lo, hi)


def A(*shape, lo=-1.0, hi=1.0):
    assert shape[0] == BATCH and len(shape) >= 2, shape
    return Operand("act", shape, lo, hi)


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    operands: Dict[str, Operand]
    mlir: str              # lines defining %r
    forward: Callable      # numpy: the operands, in order -> r
    head: str = "act"      # "act": r is [BATCH, ...]; "weight": r is [C, k];
                           # "loss": r is the step's loss, the op reads the
                           # labels %y ($y), forward takes them last
    new: bool = True       # uses the generic op set, which a build may lack
    requires: tuple = ()   # ops a new case needs beyond those it names
    labels: tuple = ()     # the batch's labels, when not random

    def ops(self):
        return sorted(set(re.findall(r"train\.(\w+)", self.mlir)) |
                      set(self.requires))


CASES = []


def case(name, operands, mlir, forward, head="act", new=True, requires=(),
         labels=()):
    assert name not in {c.name for c in CASES}, name
    assert not labels or len(labels) == BATCH, labels
    CASES.append(Case(name, operands, mlir, forward, head, new, requires,
                      tuple(labels)))


def tensor_type(shape, elem="f32"):
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


# The ops the dialect had before the generic op set.
case("gelu", {"a": A(4, 8, lo=-3, hi=3)},
     "%r = train.gelu %a : $a", lambda a: gelu_tanh(a), new=False)
case("relu", {"a": A(4, 8)},
     "%r = train.relu %a : $a", lambda a: np.maximum(a, 0), new=False)
case("add", {"a": A(4, 8), "b": A(4, 8)},
     "%r = train.add %a, %b : $a", lambda a, b: a + b, new=False)
case("add_params", {"a": P(5, 8), "b": P(5, 8)},
     "%r = train.add %a, %b : $a", lambda a, b: a + b, head="weight",
     new=False)
case("scale", {"a": A(4, 8)},
     "%r = train.scale %a {factor = -0.375 : f32} : $a",
     lambda a: -0.375 * a, new=False)
case("reshape", {"a": A(4, 2, 4)},
     "%r = train.reshape %a : $a to $out", lambda a: a.reshape(4, 8),
     new=False)
case("reshape_param", {"a": P(40)},
     "%r = train.reshape %a : $a to $out", lambda a: a.reshape(5, 8),
     head="weight", new=False)
case("linear", {"a": A(4, 8), "w": P(6, 8), "b": P(6)},
     "%r = train.linear %a, %w, %b : ($a, $w, $b) -> $out",
     lambda a, w, b: linear(a, w, b), new=False)
case("linear_3d", {"a": A(4, 3, 8), "w": P(2, 8)},
     "%r = train.linear %a, %w : ($a, $w) -> $out",
     lambda a, w: linear(a, w), new=False)
case("layer_norm", {"a": A(4, 3, 8, lo=-2, hi=2), "g": P(8, lo=0.5, hi=1.5),
                    "b": P(8, lo=-0.5, hi=0.5)},
     "%r = train.layer_norm %a, %g, %b : ($a, $g, $b) -> $out",
     lambda a, g, b: layer_norm(a, g, b), new=False)
case("rms_norm", {"a": A(4, 8, lo=-2, hi=2), "w": P(8, lo=0.5, hi=1.5)},
     "%r = train.rms_norm %a, %w {epsilon = 1.0e-3 : f32} : ($a, $w) -> $out",
     lambda a, w: rms_norm(a, w, 1e-3), new=False)
case("swiglu", {"g": A(4, 8, lo=-3, hi=3), "u": A(4, 8)},
     "%r = train.swiglu %g, %u : $g", lambda g, u: g * sigmoid(g) * u,
     new=False)

# The fused layer ops a front end's chains are raised to, compiled into a
# step: their gradient rules (the kernels' own are checked in
# runtime/tests/cpu), and their batch split.
case("rope", {"a": A(4, 3, 2, 4, lo=-2, hi=2)},
     "%r = train.rope %a {theta = 100.0 : f32} : $a",
     lambda a: rope(a, 100.0), new=False)
case("causal_attention", {"q": A(4, 3, 2, 4, lo=-2, hi=2),
                          "k": A(4, 3, 2, 4, lo=-2, hi=2),
                          "v": A(4, 3, 2, 4)},
     "%r, %lse = train.causal_attention %q, %k, %v "
     ": ($q, $k, $v) -> ($out, tensor<4x2x3xf32>)",
     causal_attention, new=False)
case("causal_attention_gqa", {"q": A(4, 3, 4, 2, lo=-2, hi=2),
                              "k": A(4, 3, 2, 2, lo=-2, hi=2),
                              "v": A(4, 3, 2, 2)},
     "%r, %lse = train.causal_attention %q, %k, %v {scale = 0.75 : f32} "
     ": ($q, $k, $v) -> ($out, tensor<4x4x3xf32>)",
     lambda q, k, v: causal_attention(q, k, v, 0.75), new=False)
case("add_position_embedding", {"a": A(4, 3, 8), "p": P(5, 8)},
     "%r = train.add_position_embedding %a, %p : ($a, $p) -> $out",
     lambda a, p: a + p[:a.shape[1]], new=False)

# Unary ops, on an activation, over a range where the op is smooth.
UNARY = {
    "neg": (lambda x: -x, -2, 2),
    "exp": (np.exp, -2, 2),
    "log": (np.log, 0.5, 3),
    "tanh": (np.tanh, -2, 2),
    "sigmoid": (sigmoid, -3, 3),
    "rsqrt": (lambda x: 1 / np.sqrt(x), 0.5, 3),
    "sqrt": (np.sqrt, 0.5, 3),
    "sin": (np.sin, -3, 3),
    "cos": (np.cos, -3, 3),
    "silu": (lambda x: x * sigmoid(x), -3, 3),
    "gelu_erf": (gelu_erf, -3, 3),
    "reciprocal": (lambda x: 1 / x, 0.5, 3),
    "abs": (np.abs, -2, 2),
    "erf": (_erf, -2, 2),
}
for op, (fn, lo, hi) in UNARY.items():
    case(op, {"a": A(4, 8, lo=lo, hi=hi)},
         f"%r = train.{op} %a : $a", lambda a, fn=fn: fn(a))
# The exact GELU as torch decomposes it, x * 0.5 * (1 + erf(x * M_SQRT1_2))
# (raised to gelu_erf by shard-compile's pipeline; the tanh form's gelu
# would miss the numpy loss).
case("gelu_erf_chain", {"a": A(4, 8, lo=-3, hi=3)},
     "%h = train.scale %a {factor = 0.5 : f32} : $a\n"
     "%s = train.scale %a {factor = 0.707106769 : f32} : $a\n"
     "%e = train.erf %s : $a\n"
     "%o = train.add_scalar %e {value = 1.0 : f32} : $a\n"
     "%r = train.mul %h, %o : $a", gelu_erf)
case("tanh_param", {"a": P(5, 8, lo=-2, hi=2)},
     "%r = train.tanh %a : $a", np.tanh, head="weight")
case("exp_3d", {"a": A(4, 2, 3)},
     "%r = train.exp %a : $a", np.exp)
case("pow_scalar", {"a": A(4, 8, lo=-2, hi=2)},
     "%r = train.pow_scalar %a {exponent = 3.0 : f32} : $a",
     lambda a: a ** 3)
case("pow_scalar_frac", {"a": A(4, 8, lo=0.5, hi=3)},
     "%r = train.pow_scalar %a {exponent = -1.5 : f32} : $a",
     lambda a: a ** -1.5)
case("add_scalar", {"a": A(4, 8)},
     "%r = train.add_scalar %a {value = 1.0 : f32} : $a", lambda a: a + 1.0)

# Dropout: the numpy mask is drawn independently of the runtime's Philox;
# on 2 ranks rank 1's rows draw the whole batch's elements 16 and on.
case("dropout", {"a": A(4, 8)},
     "%r = train.dropout %a {p = 0.375 : f32, stream = 3 : i64} : $a",
     lambda a: dropout(a, 0.375, 3))
case("dropout_3d", {"a": A(4, 2, 3)},
     "%r = train.dropout %a {p = 0.5 : f32, stream = 0 : i64} : $a",
     lambda a: dropout(a, 0.5, 0))

# Binary ops: same shapes, the right operand broadcast (a parameter over the
# batch), the left one broadcast. The ranges keep div's denominator and
# pow's base positive.
BINARY = {
    "add": (np.add, (-1, 1), (-1, 1)),
    "sub": (np.subtract, (-1, 1), (-1, 1)),
    "mul": (np.multiply, (-1, 1), (-1, 1)),
    "div": (np.divide, (-1, 1), (0.5, 2)),
    "maximum": (np.maximum, (-1, 1), (-1, 1)),
    "minimum": (np.minimum, (-1, 1), (-1, 1)),
    "pow": (np.power, (0.5, 2), (-1.5, 1.5)),
}
# The broadcasting train.add came with the other binary ops: a build
# without train.sub has only the same-shape add.
for op, (fn, (alo, ahi), (blo, bhi)) in BINARY.items():
    requires = ("sub",) if op == "add" else ()
    case(f"{op}_same", {"a": A(4, 8, lo=alo, hi=ahi),
                        "b": A(4, 8, lo=blo, hi=bhi)},
         f"%r = train.{op} %a, %b : $a", fn, requires=requires)
    case(f"{op}_bcast_rhs", {"a": A(4, 3, 8, lo=alo, hi=ahi),
                             "b": P(8, lo=blo, hi=bhi)},
         f"%r = train.{op} %a, %b : $a, $b -> $out", fn, requires=requires)
    case(f"{op}_bcast_lhs", {"a": P(3, 1, lo=alo, hi=ahi),
                             "b": A(4, 3, 8, lo=blo, hi=bhi)},
         f"%r = train.{op} %a, %b : $a, $b -> $out", fn, requires=requires)
case("mul_bcast_both", {"a": A(4, 1, 8), "b": P(3, 1)},
     "%r = train.mul %a, %b : $a, $b -> $out", lambda a, b: a * b)
case("sub_bcast_rows", {"a": A(4, 3, 8), "b": A(4, 1, 8)},
     "%r = train.sub %a, %b : $a, $b -> $out", lambda a, b: a - b)
case("mul_full", {"a": A(4, 8)},
     "%c = train.full {value = 0.5 : f32} : tensor<f32>\n"
     "%r = train.mul %a, %c : $a, tensor<f32> -> $out", lambda a: a * 0.5)
case("div_params", {"a": P(5, 8), "b": P(8, lo=0.5, hi=2)},
     "%r = train.div %a, %b : $a, $b -> $out", lambda a, b: a / b,
     head="weight")

# compare + select: the gradient reaches the chosen branch only.
COMPARE = {"lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal}
for pred, fn in COMPARE.items():
    case(f"select_{pred}", {"a": A(4, 8), "b": A(4, 8)},
         f"%m = train.compare {pred}, %a, %b : ($a, $b) -> tensor<4x8xi1>\n"
         "%r = train.select %m, %a, %b : (tensor<4x8xi1>, $a, $b) -> $out",
         lambda a, b, fn=fn: np.where(fn(a, b), a, b))
# eq and ne of a value with itself: all true, all false.
case("select_eq", {"a": A(4, 8), "b": A(4, 8)},
     "%m = train.compare eq, %a, %a : ($a, $a) -> tensor<4x8xi1>\n"
     "%r = train.select %m, %a, %b : (tensor<4x8xi1>, $a, $b) -> $out",
     lambda a, b: a)
case("select_ne", {"a": A(4, 8), "b": A(4, 8)},
     "%m = train.compare ne, %a, %a : ($a, $a) -> tensor<4x8xi1>\n"
     "%r = train.select %m, %a, %b : (tensor<4x8xi1>, $a, $b) -> $out",
     lambda a, b: b)
# A scalar threshold and a scalar branch (a mask from a parameter that
# only the mask reads would get no gradient: an unused parameter).
case("select_full", {"a": A(4, 8)},
     "%c = train.full {value = 0.25 : f32} : tensor<f32>\n"
     "%m = train.compare gt, %a, %c : ($a, tensor<f32>) -> tensor<4x8xi1>\n"
     "%r = train.select %m, %a, %c : (tensor<4x8xi1>, $a, tensor<f32>) "
     "-> $out",
     lambda a: np.where(a > 0.25, a, 0.25))

# Reductions over inner dims.
REDUCE = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max}
for op, fn in REDUCE.items():
    case(f"{op}", {"a": A(4, 3, 8)},
         f"%r = train.{op} %a {{dims = array<i64: 1>}} : $a -> $out",
         lambda a, fn=fn: fn(a, axis=1))
    case(f"{op}_keepdim", {"a": A(4, 3, 8)},
         f"%r = train.{op} %a {{dims = array<i64: 2>, keepdim}} : $a -> $out",
         lambda a, fn=fn: fn(a, axis=2, keepdims=True))
    case(f"{op}_dims", {"a": A(4, 3, 2, 5)},
         f"%r = train.{op} %a {{dims = array<i64: 1, 3>}} : $a -> $out",
         lambda a, fn=fn: fn(a, axis=(1, 3)))
case("reduce_sum_param", {"a": P(5, 3, 8)},
     "%r = train.reduce_sum %a {dims = array<i64: 1>} : $a -> $out",
     lambda a: a.sum(1), head="weight")

case("softmax", {"a": A(4, 8, lo=-2, hi=2)},
     "%r = train.softmax %a : $a", softmax)
case("softmax_3d", {"a": A(4, 3, 5, lo=-2, hi=2)},
     "%r = train.softmax %a : $a", softmax)
case("log_softmax", {"a": A(4, 8, lo=-2, hi=2)},
     "%r = train.log_softmax %a : $a", log_softmax)
case("log_softmax_3d", {"a": A(4, 3, 5, lo=-2, hi=2)},
     "%r = train.log_softmax %a : $a", log_softmax)

# Layout ops.
case("transpose", {"a": A(4, 3, 5)},
     "%r = train.transpose %a {permutation = array<i64: 0, 2, 1>} "
     ": $a -> $out", lambda a: a.transpose(0, 2, 1))
case("transpose_4d", {"a": A(4, 2, 3, 5)},
     "%r = train.transpose %a {permutation = array<i64: 0, 3, 1, 2>} "
     ": $a -> $out", lambda a: a.transpose(0, 3, 1, 2))
case("transpose_param", {"a": P(8, 5)},
     "%r = train.transpose %a {permutation = array<i64: 1, 0>} : $a -> $out",
     lambda a: a.T, head="weight")
# A weight whose rows (classes) are all equal gives the loss no gradient
# (softmax is shift-invariant): a new leading dim is scaled per class, and
# a repeated inner dim keeps the classes apart.
case("broadcast_to_param", {"a": P(8), "m": P(5, 8)},
     "%b = train.broadcast_to %a : $a -> $m\n"
     "%r = train.mul %b, %m : $m",
     lambda a, m: np.broadcast_to(a, (5, 8)) * m, head="weight")
case("broadcast_to_mid", {"a": P(5, 1, 4)},
     "%r = train.broadcast_to %a : $a -> tensor<5x3x4xf32>",
     lambda a: np.broadcast_to(a, (5, 3, 4)), head="weight")
case("broadcast_to_col", {"a": P(5, 1)},
     "%r = train.broadcast_to %a : $a -> tensor<5x8xf32>",
     lambda a: np.broadcast_to(a, (5, 8)), head="weight")
case("broadcast_to_act", {"a": A(4, 1, 8)},
     "%r = train.broadcast_to %a : $a -> tensor<4x3x8xf32>",
     lambda a: np.broadcast_to(a, (4, 3, 8)))
case("slice", {"a": A(4, 8)},
     "%r = train.slice %a {dim = 1 : i64, start = 2 : i64, end = 6 : i64} "
     ": $a -> $out", lambda a: a[:, 2:6])
case("slice_3d", {"a": A(4, 5, 3)},
     "%r = train.slice %a {dim = 1 : i64, start = 1 : i64, end = 4 : i64} "
     ": $a -> $out", lambda a: a[:, 1:4])
case("slice_param", {"a": P(7, 8)},
     "%r = train.slice %a {dim = 0 : i64, start = 1 : i64, end = 6 : i64} "
     ": $a -> $out", lambda a: a[1:6], head="weight")
case("pad", {"a": A(4, 8)},
     "%r = train.pad %a {dim = 1 : i64, low = 2 : i64, high = 1 : i64} "
     ": $a -> $out", lambda a: pad(a, 1, 2, 1))
case("pad_param", {"a": P(3, 8)},
     "%r = train.pad %a {dim = 0 : i64, low = 1 : i64, high = 1 : i64} "
     ": $a -> $out", lambda a: pad(a, 0, 1, 1), head="weight")
case("concat", {"a": A(4, 8), "b": A(4, 2)},
     "%r = train.concat %a, %b {dim = 1 : i64} : ($a, $b) -> $out",
     lambda a, b: np.concatenate([a, b], 1))
# A parameter joins a batch-derived tensor once broadcast against the batch
# by a binary op (here scaled per row); a broadcast_to of a parameter to
# the global batch size would not be batch-derived, so it could not be
# split across ranks.
case("concat_param", {"a": A(4, 3, 8), "s": A(4, 1, 1), "p": P(2, 8)},
     "%pb = train.mul %s, %p : $s, $p -> tensor<4x2x8xf32>\n"
     "%r = train.concat %a, %pb {dim = 1 : i64} "
     ": ($a, tensor<4x2x8xf32>) -> $out",
     lambda a, s, p: np.concatenate([a, s * p], 1))
case("concat_params", {"a": P(3, 8), "b": P(2, 8)},
     "%r = train.concat %a, %b {dim = 0 : i64} : ($a, $b) -> $out",
     lambda a, b: np.concatenate([a, b], 0), head="weight")

# Matrix products.
case("matmul", {"a": A(4, 8), "w": P(8, 3)},
     "%r = train.matmul %a, %w : ($a, $w) -> $out", matmul)
case("matmul_3d_param", {"a": A(4, 2, 8), "w": P(8, 3)},
     "%r = train.matmul %a, %w : ($a, $w) -> $out", matmul)
case("matmul_bcast_batch", {"a": A(4, 2, 3, 5), "w": P(2, 5, 3)},
     "%r = train.matmul %a, %w : ($a, $w) -> $out", matmul)
case("matmul_batched", {"a": A(4, 3, 5), "b": A(4, 5, 2)},
     "%r = train.matmul %a, %b : ($a, $b) -> $out", matmul)
# The dialect names the transposes transpose_lhs and transpose_rhs (an
# unknown unit attribute such as {transpose_a} is kept as a discardable
# attribute and ignored: the shapes here are not square, so it cannot pass).
case("matmul_transpose_lhs", {"a": A(4, 5, 3), "b": A(4, 5, 2)},
     "%r = train.matmul %a, %b {transpose_lhs} : ($a, $b) -> $out",
     lambda a, b: matmul(a, b, transpose_a=True))
case("matmul_transpose_rhs", {"a": A(4, 3, 5), "w": P(2, 5)},
     "%r = train.matmul %a, %w {transpose_rhs} : ($a, $w) -> $out",
     lambda a, w: matmul(a, w, transpose_b=True))
case("matmul_transpose_both", {"a": A(4, 5, 3), "b": A(4, 2, 5)},
     "%r = train.matmul %a, %b {transpose_lhs, transpose_rhs} "
     ": ($a, $b) -> $out",
     lambda a, b: matmul(a, b, transpose_a=True, transpose_b=True))
case("matmul_params", {"a": P(5, 4), "b": P(4, 8)},
     "%r = train.matmul %a, %b : ($a, $b) -> $out", matmul, head="weight")

# Losses: the op is the step's loss, over [BATCH, classes] scores.
def nll_loss(a, labels, ignore_index=None):
    counted = labels != ignore_index
    picked = a[np.arange(len(labels))[counted], labels[counted]]
    return -picked.mean()


case("nll_loss", {"a": A(4, 5, lo=-3, hi=0)},
     "%r = train.nll_loss %a, %y : ($a, $y) -> tensor<f32>", nll_loss,
     head="loss")
# Each rank of two ignores one of its two rows: the mean of the ranks'
# means is the global one.
case("nll_loss_ignore", {"a": A(4, 5, lo=-3, hi=0)},
     "%r = train.nll_loss %a, %y {ignore_index = -100 : i64} "
     ": ($a, $y) -> tensor<f32>",
     lambda a, y: nll_loss(a, y, ignore_index=-100), head="loss",
     labels=(3, -100, -100, 1))
# What torch's F.nll_loss(F.log_softmax(x, -1), t) imports as (raised to
# softmax_cross_entropy by shard-compile's pipeline).
case("log_softmax_nll_loss", {"a": A(4, 5, lo=-2, hi=2)},
     "%p = train.log_softmax %a : $a\n"
     "%r = train.nll_loss %p, %y : ($a, $y) -> tensor<f32>",
     lambda a, y: nll_loss(log_softmax(a), y), head="loss")

CASE_BY_NAME = {c.name: c for c in CASES}


# ---------------------------------------------------------------------------
# The step, its values and its numpy loss
# ---------------------------------------------------------------------------

class Step:
    """One case's training step: the parameters and batch inputs it takes,
    their values, its MLIR and its loss in numpy."""

    def __init__(self, case, perturb=0.0, seed=SEED):
        self.case, self.perturb = case, perturb
        rng = np.random.default_rng([seed, zlib.crc32(case.name.encode())])
        f32 = lambda a: np.asarray(a, np.float32).astype(np.float64)
        uniform = lambda lo, hi, shape: f32(rng.uniform(lo, hi, shape))
        self.params, self.inputs = {}, {}
        for name, op in case.operands.items():
            if op.kind == "param":
                self.params[name] = uniform(op.lo, op.hi, op.shape)
                continue
            # |x . w| <= half of the half-width: the bias keeps the centre.
            centre, half = (op.hi + op.lo) / 2, (op.hi - op.lo) / 2
            self.inputs[f"{name}.x"] = uniform(-1, 1, op.shape[:-1] +
                                               (FEATURES,))
            self.params[f"{name}.w"] = f32(
                rng.uniform(-1, 1, (op.shape[-1], FEATURES)) *
                (half / (2 * FEATURES)))
            self.params[f"{name}.b"] = uniform(centre - half / 2,
                                               centre + half / 2,
                                               (op.shape[-1],))
        if case.head == "loss":
            # The first operand's last dimension is the classes.
            self.classes = next(iter(case.operands.values())).shape[-1]
            self.labels = (np.array(case.labels, np.int32) if case.labels
                           else rng.integers(0, self.classes, BATCH)
                           .astype(np.int32))
            self.out_shape = ()
            return
        r = self.op_result(self.params, self.inputs)
        self.out_shape = r.shape
        if case.head == "act":
            assert r.shape[0] == BATCH, (case.name, r.shape)
            k = int(np.prod(r.shape[1:]))
            self.classes = CLASSES
            self.params["head.w"] = uniform(-1, 1, (CLASSES, k))
        else:
            assert r.ndim >= 1 and r.shape[0] >= 2, (case.name, r.shape)
            k = int(np.prod(r.shape[1:]))
            self.classes = r.shape[0]
            self.inputs["head.x"] = uniform(-1, 1, (BATCH, k))
        self.k = k
        self.labels = rng.integers(0, self.classes, BATCH).astype(np.int32)

    def operand_values(self, params, inputs):
        values = {}
        for name, op in self.case.operands.items():
            if op.kind == "param":
                values[name] = params[name]
            else:
                values[name] = linear(inputs[f"{name}.x"],
                                      params[f"{name}.w"],
                                      params[f"{name}.b"])
        return values

    def op_result(self, params, inputs):
        operands = list(self.operand_values(params, inputs).values())
        if self.case.head == "loss":
            operands.append(self.labels)
        r = np.asarray(self.case.forward(*operands), np.float64)
        return r * (1 + self.perturb)

    def loss(self, params):
        r = self.op_result(params, self.inputs)
        if self.case.head == "loss":
            return float(r)
        if self.case.head == "act":
            logits = linear(r.reshape(BATCH, self.k), params["head.w"])
        else:
            logits = linear(self.inputs["head.x"],
                            r.reshape(self.classes, self.k))
        return cross_entropy(logits, self.labels)

    def finite_differences(self, name, rng):
        """{flat index: d loss / d params[name][index]} by central
        differences, on at most FD_MAX_ELEMENTS sampled elements."""
        p = self.params[name]
        count = p.size
        picked = (range(count) if count <= FD_MAX_ELEMENTS else
                  sorted(rng.choice(count, FD_MAX_ELEMENTS, replace=False)))
        grads = {}
        for i in picked:
            values = dict(self.params)
            flat = p.copy().reshape(-1)
            flat[i] = p.flat[i] + FD_STEP
            values[name] = flat.reshape(p.shape)
            up = self.loss(values)
            flat[i] = p.flat[i] - FD_STEP
            values[name] = flat.reshape(p.shape)
            down = self.loss(values)
            grads[int(i)] = (up - down) / (2 * FD_STEP)
        return grads

    def mlir(self):
        """The step: the activations' linear layers, the case's op, the
        head and the loss."""
        case = self.case

        def arg(name, shape, role, elem="f32"):
            attrs = f'train.role = #train.role<{role}>, train.name = "{name}"'
            if role == "param":
                attrs += ", train.init = #train.init<zeros>"  # loaded
            return f"%{ssa(name)}: {tensor_type(shape, elem)} {{{attrs}}}"

        args = ([arg(n, v.shape, "param") for n, v in self.params.items()] +
                [arg(n, v.shape, "input") for n, v in self.inputs.items()] +
                [arg("y", (BATCH,), "label", "i32")])
        lines, types = [], {}
        for name, op in case.operands.items():
            types[name] = tensor_type(op.shape)
            if op.kind == "act":
                x = self.inputs[f"{name}.x"].shape
                w = self.params[f"{name}.w"].shape
                lines.append(
                    f"%{name} = train.linear %{name}_x, %{name}_w, %{name}_b "
                    f": ({tensor_type(x)}, {tensor_type(w)}, "
                    f"{tensor_type(w[:1])}) -> {types[name]}")
        out = tensor_type(self.out_shape)
        labels = tensor_type((BATCH,), "i32")
        lines += string.Template(case.mlir).substitute(
            types, out=out, y=labels).split("\n")
        if case.head == "loss":
            lines.append("return %r : tensor<f32>")
            return self.function(args, lines)
        rows = BATCH if case.head == "act" else self.classes
        flat, r = tensor_type((rows, self.k)), "%r"
        if self.out_shape != (rows, self.k):
            lines.append(f"%rf = train.reshape %r : {out} to {flat}")
            r = "%rf"
        logits = tensor_type((BATCH, self.classes))
        if case.head == "act":
            head = tensor_type(self.params["head.w"].shape)
            lines.append(f"%logits = train.linear {r}, %head_w : "
                         f"({flat}, {head}) -> {logits}")
        else:
            x = tensor_type(self.inputs["head.x"].shape)
            lines.append(f"%logits = train.linear %head_x, {r} : "
                         f"({x}, {flat}) -> {logits}")
        lines.append(f"%loss = train.softmax_cross_entropy %logits, %y : "
                     f"({logits}, {tensor_type((BATCH,), 'i32')}) -> "
                     "tensor<f32>")
        lines.append("return %loss : tensor<f32>")
        return self.function(args, lines)

    def function(self, args, lines):
        case = self.case
        return (f"// opcheck {case.name}: one SGD step of the op under "
                "test\n"
                "func.func @train_step(\n    " + ",\n    ".join(args) +
                ")\n    -> (tensor<f32> {train.role = #train.role<loss>, "
                'train.name = "loss"})\n    attributes {train.step, '
                f"train.optimizer = #train.sgd<lr = {LR}>}} {{\n" +
                "".join(f"  {line}\n" for line in lines) + "}\n")


def ssa(name):
    """The SSA name of a parameter or input ("a.w" -> a_w)."""
    return name.replace(".", "_")


STEP_LINE = re.compile(r"^step 1 loss (\S+) ", re.M)
_known_ops = {}
_known_ops_lock = threading.Lock()


def op_known(bin_dir, op):
    """Whether the build's train dialect registers train.`op` (shard-opt
    parses it in generic form: an unknown op is an unregistered operation,
    a known one fails its own verifier)."""
    with _known_ops_lock:
        if op not in _known_ops:
            proc = subprocess.run(
                [os.path.join(bin_dir, "shard-opt"), "-"],
                input=f'"train.{op}"() : () -> ()\n', capture_output=True,
                text=True, timeout=60)
            _known_ops[op] = "unregistered operation" not in proc.stderr
        return _known_ops[op]


class CaseError(Exception):
    pass


class Skipped(Exception):
    pass


def run(cmd, what, env=None):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env=env)
    if proc.returncode != 0:
        raise CaseError(f"{what} failed (exit {proc.returncode}): "
                        f"{shlex.join(cmd)}\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def launcher_for(mpirun, tmpdir):
    """The mpirun command with TMPDIR set to `tmpdir`: OpenMPI 4.1's mpirun
    fails to start when two create their session directory in one TMPDIR
    at the same moment, and the jobs run in parallel. A TMPDIR that the
    command sets with `env` (lit's %mpirun) is replaced."""
    words, assigns = shlex.split(mpirun), []
    if words[:1] == ["env"]:
        words = words[1:]
        while words and re.match(r"\w+=", words[0]):
            if not words[0].startswith("TMPDIR="):
                assigns.append(words[0])
            words = words[1:]
    os.makedirs(tmpdir, exist_ok=True)
    return ["env", f"TMPDIR={tmpdir}"] + assigns + words


# ---------------------------------------------------------------------------
# Checking one case
# ---------------------------------------------------------------------------

def run_binary(args, step, work, ranks, init, data):
    binary = os.path.join(work, f"step.np{ranks}")
    src = os.path.join(work, "step.mlir")
    proc = subprocess.run(
        [os.path.join(args.bin_dir, "shard-compile"), "--strategy=ddp",
         f"--world-size={ranks}", src, "-o", binary],
        capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        missing = [op for op in step.case.ops() if step.case.new and
                   not op_known(args.bin_dir, op)]
        if missing:
            raise Skipped(" ".join(f"train.{op}" for op in missing))
        raise CaseError(f"shard-compile --world-size={ranks} failed:\n"
                        f"{proc.stderr.strip()}")
    out = os.path.join(work, f"after.np{ranks}.safetensors")
    if os.path.exists(out):
        os.remove(out)
    log = run(launcher_for(args.mpirun, os.path.join(work, f"tmp{ranks}")) +
              ["-np", str(ranks), binary, "--steps", "1", "--log-every", "1",
               "--threads", "1", "--load-params", init, "--data", data,
               "--data-format", "asdata", "--save-params", out],
              f"the {ranks}-rank binary")
    m = STEP_LINE.search(log)
    if not m:
        raise CaseError(f"the {ranks}-rank run logged no step 1 loss:\n{log}")
    params, _ = read_safetensors(out)
    return float(m.group(1)), params


def rel(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-30)


def check_case(args, case):
    """The case's report line; raises CaseError on a mismatch."""
    step = Step(case, args.perturb)
    work = os.path.join(args.work, case.name)
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "step.mlir"), "w") as f:
        f.write(step.mlir())
    init = os.path.join(work, "init.safetensors")
    data = os.path.join(work, "batch.asdata")
    write_safetensors(init, step.params)
    write_asdata(data, [(n, v) for n, v in step.inputs.items()] +
                 [("y", step.labels)])

    runs = {}
    for ranks in args.ranks:
        runs[ranks] = run_binary(args, step, work, ranks, init, data)
    problems = []
    first = args.ranks[0]
    loss, after = runs[first]
    want = step.loss(step.params)
    if not rel(loss, want) <= LOSS_RTOL:
        problems.append(f"loss {loss!r} on {first} rank(s), numpy {want!r} "
                        f"(relative error {rel(loss, want):.3g} > "
                        f"{LOSS_RTOL})")
    rng = np.random.default_rng([SEED, zlib.crc32(case.name.encode()), 1])
    worst = reaching = 0.0
    for name, p0 in step.params.items():
        grad = ((p0 - after[name]) / LR).reshape(-1)
        fd = step.finite_differences(name, rng)
        idx = np.array(sorted(fd))
        ref = np.array([fd[i] for i in idx])
        scale = np.abs(ref).max()
        if not name.startswith("head."):
            reaching = max(reaching, scale)
        err = np.abs(grad[idx] - ref).max()
        # The relative error of a tensor whose gradient is 0 within the
        # absolute tolerance (attention's key bias: softmax ignores a shift
        # of every score of a row) is rounding over nothing; it is checked
        # against GRAD_ATOL alone.
        if scale > GRAD_ATOL:
            worst = max(worst, err / scale)
        if not err <= GRAD_RTOL * scale + GRAD_ATOL:
            i = int(idx[np.argmax(np.abs(grad[idx] - ref))])
            problems.append(
                f"gradient of {name} {list(p0.shape)}: max abs error "
                f"{err:.3g} > {GRAD_RTOL} x max |grad| {scale:.3g} + "
                f"{GRAD_ATOL} (element {i}: binary {grad[i]:.6g}, finite "
                f"differences {fd[i]:.6g})")
    if reaching < 1e-4:
        problems.append(f"no gradient reaches the op's operands (finite "
                        f"differences at most {reaching:.3g}): the case "
                        "checks nothing")
    line = f"opcheck {case.name}: loss ok, grad ok (max rel err {worst:.2g})"
    for ranks in args.ranks[1:]:
        loss_n, after_n = runs[ranks]
        if not rel(loss_n, loss) <= RANKS_RTOL:
            problems.append(f"loss {loss_n!r} on {ranks} ranks, {loss!r} on "
                            f"{first}")
        for name, p in after.items():
            d = np.abs(after_n[name] - p).max() / max(np.abs(p).max(), 1e-30)
            if not d <= RANKS_RTOL:
                problems.append(f"{name} after the step on {ranks} ranks "
                                f"differs from {first} by {d:.3g} (relative "
                                f"to its max) > {RANKS_RTOL}")
        line += f", {ranks} ranks ok"
    if problems:
        raise CaseError("\n  ".join(problems))
    return line


def check(args, case):
    try:
        return True, check_case(args, case)
    except Skipped as e:
        return True, f"opcheck {case.name}: skipped (op not in this build: " \
                     f"{e})"
    except CaseError as e:
        return False, f"opcheck {case.name}: FAIL: {e}"
    except Exception as e:  # a harness bug: say which case hit it
        return False, f"opcheck {case.name}: FAIL: {type(e).__name__}: {e}"


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__[__doc__.index("\n"):])
    parser.add_argument("cases", nargs="*", metavar="CASE")
    parser.add_argument("--list", action="store_true",
                        help="print the case names and exit")
    parser.add_argument("--check-listed", metavar="FILE",
                        help="fail unless FILE expects every case's line")
    parser.add_argument("--bin-dir", help="where shard-compile is")
    parser.add_argument("--work", help="a directory for each case's files")
    parser.add_argument("--ranks", default="1,2",
                        help="rank counts; the first is checked against "
                             "numpy, the others against it (default 1,2)")
    # mpirun's start is mostly waiting, so more cases than cores overlap.
    parser.add_argument("--jobs", type=int, default=4,
                        help="cases checked at once (default 4)")
    parser.add_argument("--mpirun", default="mpirun --oversubscribe" + (
        " --allow-run-as-root" if os.geteuid() == 0 else ""),
                        help="the launcher, before -np N")
    parser.add_argument("--perturb", type=float, default=0.0,
                        help="multiply the numpy op's result by 1 + F (a "
                             "wrong reference, to see the checks fail)")
    args = parser.parse_args()
    if args.list:
        print("\n".join(c.name for c in CASES))
        return 0
    if args.check_listed:
        with open(args.check_listed) as f:
            named = set(re.findall(r"opcheck (\w+):", f.read()))
        unlisted = [c.name for c in CASES if c.name not in named]
        if unlisted:
            print(f"{args.check_listed} expects no line of the cases "
                  f"{' '.join(unlisted)}", file=sys.stderr)
            return 1
        print(f"opcheck: {args.check_listed} expects all {len(CASES)} cases")
        return 0
    if not args.bin_dir or not args.work:
        parser.error("--bin-dir and --work are required")
    unknown = [c for c in args.cases if c not in CASE_BY_NAME]
    if unknown:
        parser.error(f"unknown cases {unknown}; --list shows them")
    args.ranks = [int(r) for r in args.ranks.split(",")]
    args.bin_dir = os.path.abspath(args.bin_dir)
    args.work = os.path.abspath(args.work)
    cases = [CASE_BY_NAME[c] for c in args.cases] if args.cases else CASES
    failed = []
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for case, (ok, line) in zip(cases, pool.map(
                lambda c: check(args, c), cases)):
            print(line, flush=True)
            if not ok:
                failed.append(case.name)
    if failed:
        print(f"opcheck: {len(failed)} of {len(cases)} cases failed: "
              f"{' '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
