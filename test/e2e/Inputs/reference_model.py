#!/usr/bin/env python3
"""Independent numpy reference of the GPT-2 and Llama training steps.

  reference_model.py selfcheck [--seed S]
      proves the reference itself: five-point central finite differences
      against the hand-written backward for every parameter tensor of a
      tiny GPT-2 and a tiny Llama (with grouped-query attention), plus the
      ops' forwards against their definitions, causality, the RoPE pairing
      and the AdamW recurrence; prints the worst errors
  reference_model.py compare --family gpt2|llama --layers .. --hidden ..
          ... --binary PATH --workdir DIR [--mpirun "CMD"]
      writes random params and a random batch, runs one step of a compiled
      training binary on them (--load-params, --data, --save-grads,
      --save-params), and checks its loss, gradients and AdamW update
      against this reference; exits non-zero naming the tensor that differs.
      The reference AdamW is fed the binary's gradients once they have
      passed the gradient check (see cmd_compare for why).

The reference computes in float64 from the float32 values the binary reads.
Its forward and backward are written out by hand, op by op, so that they
share nothing with the compiler's autodiff; the op semantics are those of
runtime/include/autoshard/rt/abi.h. Needs numpy (Debian's python3-numpy
for /usr/bin/python3); everything else is the standard library.
"""

import argparse
import dataclasses
import json
import math
import os
import re
import shlex
import struct
import subprocess
import sys
import time

try:
    import numpy as np
except ImportError:  # pragma: no cover - the message is the point
    sys.exit(f"reference_model.py needs numpy, which {sys.executable} cannot "
             "import; install Debian's python3-numpy and run it with "
             "/usr/bin/python3")

# The batch files are written by the autoshard package's asdata writer
# (python/autoshard/data.py); the model and its gradients are this file's own.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "python"))
from autoshard.data import write_batches  # noqa: E402

LN_EPS = 1e-5
RMS_EPS = 1e-5
ROPE_THETA = 10000.0
CLIP_EPS = 1e-6  # torch.nn.utils.clip_grad_norm_ and asrt_clip_coefficient


# ---------------------------------------------------------------------------
# Configuration and parameters
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Config:
    family: str          # "gpt2" or "llama"
    layers: int
    hidden: int          # C
    heads: int           # H
    kv_heads: int        # Hkv (== H for gpt2)
    ffn: int             # F (4C for gpt2 unless told otherwise)
    vocab: int           # V
    max_positions: int   # P, rows of gpt2's wpe (unused by llama)
    seq: int             # T
    batch: int           # B, rows of the global batch

    @property
    def head_dim(self):
        return self.hidden // self.heads

    def validate(self):
        problems = []
        if self.family not in ("gpt2", "llama"):
            problems.append(f"family '{self.family}' is neither gpt2 nor "
                            "llama")
        for name in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab",
                     "seq", "batch"):
            if getattr(self, name) < 1:
                problems.append(f"{name} = {getattr(self, name)} must be >= 1")
        if self.heads >= 1 and self.hidden % self.heads:
            problems.append(f"hidden {self.hidden} is not a multiple of heads "
                            f"{self.heads}")
        if self.kv_heads >= 1 and self.heads % self.kv_heads:
            problems.append(f"heads {self.heads} is not a multiple of "
                            f"kv_heads {self.kv_heads}")
        if self.family == "gpt2":
            if self.kv_heads != self.heads:
                problems.append(f"gpt2 has no grouped-query attention: "
                                f"kv_heads {self.kv_heads} != heads "
                                f"{self.heads}")
            if self.seq > self.max_positions:
                problems.append(f"seq {self.seq} exceeds max_positions "
                                f"{self.max_positions}")
        if self.family == "llama" and self.heads >= 1 and self.head_dim % 2:
            problems.append(f"RoPE needs an even head_dim, got "
                            f"{self.head_dim} (hidden {self.hidden} / heads "
                            f"{self.heads})")
        if problems:
            raise ValueError("invalid model config: " + "; ".join(problems))
        return self


def param_shapes(cfg):
    """Parameter names (the safetensors names) and shapes, in model order."""
    C, V, F = cfg.hidden, cfg.vocab, cfg.ffn
    shapes = {}
    if cfg.family == "gpt2":
        shapes["wte"] = (V, C)
        shapes["wpe"] = (cfg.max_positions, C)
        for i in range(cfg.layers):
            p = f"h.{i}."
            shapes[p + "ln_1.weight"] = (C,)
            shapes[p + "ln_1.bias"] = (C,)
            for proj in ("q_proj", "k_proj", "v_proj", "c_proj"):
                shapes[p + f"attn.{proj}.weight"] = (C, C)
                shapes[p + f"attn.{proj}.bias"] = (C,)
            shapes[p + "ln_2.weight"] = (C,)
            shapes[p + "ln_2.bias"] = (C,)
            shapes[p + "mlp.c_fc.weight"] = (F, C)
            shapes[p + "mlp.c_fc.bias"] = (F,)
            shapes[p + "mlp.c_proj.weight"] = (C, F)
            shapes[p + "mlp.c_proj.bias"] = (C,)
        shapes["ln_f.weight"] = (C,)
        shapes["ln_f.bias"] = (C,)
    else:
        HD, KD = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
        shapes["model.embed_tokens.weight"] = (V, C)
        for i in range(cfg.layers):
            p = f"model.layers.{i}."
            shapes[p + "input_layernorm.weight"] = (C,)
            shapes[p + "self_attn.q_proj.weight"] = (HD, C)
            shapes[p + "self_attn.k_proj.weight"] = (KD, C)
            shapes[p + "self_attn.v_proj.weight"] = (KD, C)
            shapes[p + "self_attn.o_proj.weight"] = (C, HD)
            shapes[p + "post_attention_layernorm.weight"] = (C,)
            shapes[p + "mlp.gate_proj.weight"] = (F, C)
            shapes[p + "mlp.up_proj.weight"] = (F, C)
            shapes[p + "mlp.down_proj.weight"] = (C, F)
        shapes["model.norm.weight"] = (C,)
        shapes["lm_head.weight"] = (V, C)
    return shapes


def is_norm_gain(name):
    return name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight",
                          "layernorm.weight", "model.norm.weight"))


def init_params(cfg, rng, std=0.1):
    """Random params, rounded to float32 (what the binary will read).

    Norm gains are 1 + N(0, std) and everything else N(0, std): large enough
    that every op works away from its linear regime, small enough that the
    softmaxes stay soft."""
    params = {}
    for name, shape in param_shapes(cfg).items():
        x = rng.normal(0.0, std, size=shape)
        if is_norm_gain(name):
            x += 1.0
        params[name] = x.astype(np.float32).astype(np.float64)
    return params


def random_batch(cfg, rng):
    """input_ids and labels [B, T] (int32): label row b is input row b
    shifted by one token, as in language-model data."""
    tokens = rng.integers(0, cfg.vocab, size=(cfg.batch, cfg.seq + 1))
    return (tokens[:, :-1].astype(np.int32), tokens[:, 1:].astype(np.int32))


# ---------------------------------------------------------------------------
# Ops: forward returns (output, cache); backward maps output grads to input
# grads. Shapes in comments; "..." is any number of leading dims.
# ---------------------------------------------------------------------------

def linear_fwd(x, w, b=None):
    """y[..., out] = x[..., in] w[out, in]^T (+ b)"""
    y = x @ w.T
    if b is not None:
        y = y + b
    return y


def linear_bwd(dy, x, w, has_bias):
    dx = dy @ w
    rows_dy = dy.reshape(-1, dy.shape[-1])
    rows_x = x.reshape(-1, x.shape[-1])
    dw = rows_dy.T @ rows_x
    db = rows_dy.sum(axis=0) if has_bias else None
    return dx, dw, db


def layer_norm_fwd(x, gamma, beta, eps=LN_EPS):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # biased
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = (x - mean) * rstd
    return xhat * gamma + beta, (xhat, rstd, gamma)


def layer_norm_bwd(dy, cache):
    xhat, rstd, gamma = cache
    cols = xhat.shape[-1]
    dgamma = (dy * xhat).reshape(-1, cols).sum(axis=0)
    dbeta = dy.reshape(-1, cols).sum(axis=0)
    g = dy * gamma
    dx = rstd * (g - g.mean(axis=-1, keepdims=True)
                 - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    return dx, dgamma, dbeta


def rms_norm_fwd(x, weight, eps=RMS_EPS):
    r = 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    return x * r * weight, (x, r, weight)


def rms_norm_bwd(dy, cache):
    x, r, weight = cache
    cols = x.shape[-1]
    dweight = (dy * x * r).reshape(-1, cols).sum(axis=0)
    g = dy * weight
    # y_i = x_i r w_i with r = (mean(x^2) + eps)^-1/2, dr/dx_j = -r^3 x_j / n
    dx = r * g - x * (r ** 3) * (g * x).mean(axis=-1, keepdims=True)
    return dx, dweight


GELU_K = math.sqrt(2.0 / math.pi)
GELU_A = 0.044715


def gelu_fwd(x):
    t = np.tanh(GELU_K * (x + GELU_A * x ** 3))
    return 0.5 * x * (1.0 + t), (x, t)


def gelu_bwd(dy, cache):
    x, t = cache
    du = GELU_K * (1.0 + 3.0 * GELU_A * x * x)
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du)


def swiglu_fwd(gate, up):
    """silu(gate) * up"""
    s = 1.0 / (1.0 + np.exp(-gate))
    return gate * s * up, (gate, up, s)


def swiglu_bwd(dy, cache):
    gate, up, s = cache
    dsilu = s * (1.0 + gate * (1.0 - s))
    return dy * up * dsilu, dy * gate * s


def rope_tables(seq, head_dim, theta=ROPE_THETA):
    """cos, sin [T, D/2]: pair i at position t turns by t theta^(-2i/D)."""
    half = head_dim // 2
    inv_freq = theta ** (-2.0 * np.arange(half) / head_dim)
    angles = np.arange(seq)[:, None] * inv_freq[None, :]
    return np.cos(angles), np.sin(angles)


def rope_fwd(x, cos, sin):
    """x [B, T, heads, D]; rotate-half pairs (x[i], x[i + D/2])."""
    half = x.shape[-1] // 2
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)


def rope_bwd(dy, cos, sin):
    """The transpose (= inverse) rotation."""
    half = dy.shape[-1] // 2
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    da, db = dy[..., :half], dy[..., half:]
    return np.concatenate([da * c + db * s, -da * s + db * c], axis=-1)


def attention_fwd(q, k, v):
    """Causal attention. q [B, T, H, D]; k, v [B, T, Hkv, D]; query head h
    reads key/value head h // (H / Hkv); scale 1 / sqrt(D)."""
    B, T, H, D = q.shape
    group = H // k.shape[2]
    kx = np.repeat(k, group, axis=2)  # head h -> kv head h // group
    vx = np.repeat(v, group, axis=2)
    scale = 1.0 / math.sqrt(D)
    s = scale * np.einsum("bthd,bshd->bhts", q, kx)
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    s = np.where(future, -np.inf, s)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    out = np.einsum("bhts,bshd->bthd", p, vx)
    return out, (q, kx, vx, p, scale, group)


def attention_bwd(dout, cache):
    q, kx, vx, p, scale, group = cache
    B, T, H, D = q.shape
    dp = np.einsum("bthd,bshd->bhts", dout, vx)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    dq = scale * np.einsum("bhts,bshd->bthd", ds, kx)
    dkx = scale * np.einsum("bhts,bthd->bshd", ds, q)
    dvx = np.einsum("bhts,bthd->bshd", p, dout)
    # Query heads sharing a kv head are adjacent after np.repeat.
    dk = dkx.reshape(B, T, H // group, group, D).sum(axis=3)
    dv = dvx.reshape(B, T, H // group, group, D).sum(axis=3)
    return dq, dk, dv


def cross_entropy_fwd(logits, labels):
    """Mean over rows of -log softmax(logits)[label]. logits [N, V]."""
    m = logits.max(axis=-1, keepdims=True)
    e = np.exp(logits - m)
    z = e.sum(axis=-1, keepdims=True)
    logp = logits - m - np.log(z)
    rows = np.arange(logits.shape[0])
    loss = -logp[rows, labels].mean()
    return loss, (e / z, labels)


def cross_entropy_bwd(cache):
    probs, labels = cache
    d = probs.copy()
    d[np.arange(d.shape[0]), labels] -= 1.0
    return d / d.shape[0]


def embedding_bwd(dy, ids, num_embeddings):
    table = np.zeros((num_embeddings, dy.shape[-1]))
    np.add.at(table, ids.reshape(-1), dy.reshape(-1, dy.shape[-1]))
    return table


# ---------------------------------------------------------------------------
# Models: loss_and_grads(cfg, params, ids, labels) -> (loss, {name: grad});
# the family functions return (logits, None) when labels is None.
# ---------------------------------------------------------------------------

def gpt2_loss_and_grads(cfg, P, ids, labels, need_grads=True):
    B, T = ids.shape
    H, D, C = cfg.heads, cfg.head_dim, cfg.hidden
    x = P["wte"][ids] + P["wpe"][:T]
    caches = []
    for i in range(cfg.layers):
        p = f"h.{i}."
        h1, ln1 = layer_norm_fwd(x, P[p + "ln_1.weight"], P[p + "ln_1.bias"])
        q, k, v = (linear_fwd(h1, P[p + f"attn.{proj}.weight"],
                              P[p + f"attn.{proj}.bias"]).reshape(B, T, H, D)
                   for proj in ("q_proj", "k_proj", "v_proj"))
        o, att = attention_fwd(q, k, v)
        o = o.reshape(B, T, C)
        x = x + linear_fwd(o, P[p + "attn.c_proj.weight"],
                           P[p + "attn.c_proj.bias"])
        h2, ln2 = layer_norm_fwd(x, P[p + "ln_2.weight"], P[p + "ln_2.bias"])
        f = linear_fwd(h2, P[p + "mlp.c_fc.weight"], P[p + "mlp.c_fc.bias"])
        g, act = gelu_fwd(f)
        x = x + linear_fwd(g, P[p + "mlp.c_proj.weight"],
                           P[p + "mlp.c_proj.bias"])
        caches.append((h1, ln1, att, o, h2, ln2, act, g))
    xf, lnf = layer_norm_fwd(x, P["ln_f.weight"], P["ln_f.bias"])
    logits = xf.reshape(B * T, C) @ P["wte"].T  # tied, no bias
    if labels is None:
        return logits, None
    loss, xent = cross_entropy_fwd(logits, labels.reshape(-1))
    if not need_grads:
        return loss, None

    G = {}
    dlogits = cross_entropy_bwd(xent)
    G["wte"] = dlogits.T @ xf.reshape(B * T, C)
    dx, G["ln_f.weight"], G["ln_f.bias"] = layer_norm_bwd(
        (dlogits @ P["wte"]).reshape(B, T, C), lnf)
    for i in reversed(range(cfg.layers)):
        p = f"h.{i}."
        h1, ln1, att, o, h2, ln2, act, g = caches[i]
        # x = x + c_proj(gelu(c_fc(ln_2(x))))
        dg, G[p + "mlp.c_proj.weight"], G[p + "mlp.c_proj.bias"] = linear_bwd(
            dx, g, P[p + "mlp.c_proj.weight"], True)
        df = gelu_bwd(dg, act)
        dh2, G[p + "mlp.c_fc.weight"], G[p + "mlp.c_fc.bias"] = linear_bwd(
            df, h2, P[p + "mlp.c_fc.weight"], True)
        dln, G[p + "ln_2.weight"], G[p + "ln_2.bias"] = layer_norm_bwd(
            dh2, ln2)
        dx = dx + dln
        # x = x + c_proj(attention(q, k, v of ln_1(x)))
        do, G[p + "attn.c_proj.weight"], G[p + "attn.c_proj.bias"] = (
            linear_bwd(dx, o, P[p + "attn.c_proj.weight"], True))
        dq, dk, dv = attention_bwd(do.reshape(B, T, H, D), att)
        dh1 = np.zeros_like(h1)
        for proj, d in (("q_proj", dq), ("k_proj", dk), ("v_proj", dv)):
            dpart, G[p + f"attn.{proj}.weight"], G[p + f"attn.{proj}.bias"] = (
                linear_bwd(d.reshape(B, T, C), h1,
                           P[p + f"attn.{proj}.weight"], True))
            dh1 += dpart
        dln, G[p + "ln_1.weight"], G[p + "ln_1.bias"] = layer_norm_bwd(
            dh1, ln1)
        dx = dx + dln
    G["wte"] += embedding_bwd(dx, ids, cfg.vocab)
    G["wpe"] = np.zeros_like(P["wpe"])
    G["wpe"][:T] = dx.sum(axis=0)
    return loss, G


def llama_loss_and_grads(cfg, P, ids, labels, need_grads=True):
    B, T = ids.shape
    H, Hkv, D, C = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.hidden
    cos, sin = rope_tables(T, D)
    x = P["model.embed_tokens.weight"][ids]
    caches = []
    for i in range(cfg.layers):
        p = f"model.layers.{i}."
        h1, n1 = rms_norm_fwd(x, P[p + "input_layernorm.weight"])
        q, k, v = (linear_fwd(h1, P[p + f"self_attn.{proj}.weight"])
                   .reshape(B, T, heads, D)
                   for proj, heads in (("q_proj", H), ("k_proj", Hkv),
                                       ("v_proj", Hkv)))
        o, att = attention_fwd(rope_fwd(q, cos, sin), rope_fwd(k, cos, sin), v)
        o = o.reshape(B, T, H * D)
        x = x + linear_fwd(o, P[p + "self_attn.o_proj.weight"])
        h2, n2 = rms_norm_fwd(x, P[p + "post_attention_layernorm.weight"])
        gate = linear_fwd(h2, P[p + "mlp.gate_proj.weight"])
        up = linear_fwd(h2, P[p + "mlp.up_proj.weight"])
        s, glu = swiglu_fwd(gate, up)
        x = x + linear_fwd(s, P[p + "mlp.down_proj.weight"])
        caches.append((h1, n1, att, o, h2, n2, glu, s))
    xf, nf = rms_norm_fwd(x, P["model.norm.weight"])
    logits = linear_fwd(xf.reshape(B * T, C), P["lm_head.weight"])
    if labels is None:
        return logits, None
    loss, xent = cross_entropy_fwd(logits, labels.reshape(-1))
    if not need_grads:
        return loss, None

    G = {}
    dlogits = cross_entropy_bwd(xent)
    dxf, G["lm_head.weight"], _ = linear_bwd(
        dlogits, xf.reshape(B * T, C), P["lm_head.weight"], False)
    dx, G["model.norm.weight"] = rms_norm_bwd(dxf.reshape(B, T, C), nf)
    for i in reversed(range(cfg.layers)):
        p = f"model.layers.{i}."
        h1, n1, att, o, h2, n2, glu, s = caches[i]
        # x = x + down(silu(gate(h2)) * up(h2)), h2 = rms(x)
        ds, G[p + "mlp.down_proj.weight"], _ = linear_bwd(
            dx, s, P[p + "mlp.down_proj.weight"], False)
        dgate, dup = swiglu_bwd(ds, glu)
        dh2a, G[p + "mlp.gate_proj.weight"], _ = linear_bwd(
            dgate, h2, P[p + "mlp.gate_proj.weight"], False)
        dh2b, G[p + "mlp.up_proj.weight"], _ = linear_bwd(
            dup, h2, P[p + "mlp.up_proj.weight"], False)
        dn, G[p + "post_attention_layernorm.weight"] = rms_norm_bwd(
            dh2a + dh2b, n2)
        dx = dx + dn
        # x = x + o_proj(attention(rope(q), rope(k), v)), of h1 = rms(x)
        do, G[p + "self_attn.o_proj.weight"], _ = linear_bwd(
            dx, o, P[p + "self_attn.o_proj.weight"], False)
        dqr, dkr, dv = attention_bwd(do.reshape(B, T, H, D), att)
        dq, dk = rope_bwd(dqr, cos, sin), rope_bwd(dkr, cos, sin)
        dh1 = np.zeros_like(h1)
        for proj, d, heads in (("q_proj", dq, H), ("k_proj", dk, Hkv),
                               ("v_proj", dv, Hkv)):
            dpart, G[p + f"self_attn.{proj}.weight"], _ = linear_bwd(
                d.reshape(B, T, heads * D), h1,
                P[p + f"self_attn.{proj}.weight"], False)
            dh1 += dpart
        dn, G[p + "input_layernorm.weight"] = rms_norm_bwd(dh1, n1)
        dx = dx + dn
    G["model.embed_tokens.weight"] = embedding_bwd(dx, ids, cfg.vocab)
    return loss, G


def model_logits(cfg, params, ids):
    """Logits [B*T, V] (no loss, no backward)."""
    fn = gpt2_loss_and_grads if cfg.family == "gpt2" else llama_loss_and_grads
    return fn(cfg, params, ids, None, False)[0]


def loss_and_grads(cfg, params, ids, labels, need_grads=True):
    expected = param_shapes(cfg)
    for name, shape in expected.items():
        if name not in params:
            raise KeyError(f"param '{name}' is missing")
        if tuple(params[name].shape) != shape:
            raise ValueError(f"param '{name}' has shape "
                             f"{list(params[name].shape)}, expected "
                             f"{list(shape)}")
    if ids.shape != (cfg.batch, cfg.seq) or labels.shape != ids.shape:
        raise ValueError(f"batch shapes {ids.shape} / {labels.shape}, "
                         f"expected {(cfg.batch, cfg.seq)}")
    fn = gpt2_loss_and_grads if cfg.family == "gpt2" else llama_loss_and_grads
    loss, grads = fn(cfg, params, ids, labels, need_grads)
    if grads is not None:
        assert set(grads) == set(expected), set(grads) ^ set(expected)
    return loss, grads


# ---------------------------------------------------------------------------
# AdamW with global-norm clipping (torch.optim.AdamW semantics)
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class AdamW:
    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    max_grad_norm: float = 0.0  # <= 0: no clipping


def clip_coefficient(grads, max_norm):
    """min(1, max_norm / (global norm + 1e-6)), and the global norm."""
    norm = math.sqrt(sum(float((g * g).sum()) for g in grads.values()))
    if max_norm <= 0:
        return 1.0, norm
    return min(1.0, max_norm / (norm + CLIP_EPS)), norm


def adamw_step(opt, params, grads, state=None):
    """One AdamW step on every param. Weight decay applies to params of rank
    >= 2 only (not biases or norm gains). state is (t, m, v) or None for a
    fresh optimizer; returns (new params, new state, clip coefficient)."""
    t, m, v = state if state else (0, {}, {})
    t += 1
    coef, _ = clip_coefficient(grads, opt.max_grad_norm)
    new_params, new_m, new_v = {}, {}, {}
    for name, p in params.items():
        g = coef * grads[name]
        decay = opt.weight_decay if p.ndim >= 2 else 0.0
        mm = opt.beta1 * m.get(name, 0.0) + (1.0 - opt.beta1) * g
        vv = opt.beta2 * v.get(name, 0.0) + (1.0 - opt.beta2) * g * g
        m_hat = mm / (1.0 - opt.beta1 ** t)
        v_hat = vv / (1.0 - opt.beta2 ** t)
        new_params[name] = (p * (1.0 - opt.lr * decay)
                            - opt.lr * m_hat / (np.sqrt(v_hat) + opt.eps))
        new_m[name], new_v[name] = mm, vv
    return new_params, (t, new_m, new_v), coef


# ---------------------------------------------------------------------------
# Files: safetensors and asdata (docs/RuntimeABI.md)
# ---------------------------------------------------------------------------

SAFETENSORS_DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2",
                      "I32": "<i4", "I64": "<i8", "U16": "<u2"}


def write_safetensors(path, tensors, metadata=None):
    """Writes float tensors as F32 (name order as given)."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, value in tensors.items():
        data = np.ascontiguousarray(value, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(value)),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the format's recommended alignment
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path):
    """(tensors as float64 or int arrays, metadata); F32, BF16 and the
    dtypes of SAFETENSORS_DTYPES."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: {len(data)} bytes, too short for "
                         "safetensors")
    (n,) = struct.unpack_from("<Q", data, 0)
    if 8 + n > len(data):
        raise ValueError(f"{path}: header of {n} bytes runs past the end of "
                         f"the {len(data)}-byte file")
    header = json.loads(data[8:8 + n])
    body = memoryview(data)[8 + n:]
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        count = int(np.prod(shape, dtype=np.int64))
        dtype = info["dtype"]
        raw = body[begin:end]
        if dtype == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            values = bits.view(np.float32)
        elif dtype in SAFETENSORS_DTYPES:
            values = np.frombuffer(raw, dtype=SAFETENSORS_DTYPES[dtype])
        else:
            raise ValueError(f"{path}: tensor '{name}' has dtype {dtype}, "
                             "which this reader does not know")
        if values.size != count:
            raise ValueError(f"{path}: tensor '{name}' {dtype}{list(shape)} "
                             f"has {values.size} elements, expected {count}")
        if values.dtype.kind == "f":
            values = values.astype(np.float64)
        tensors[name] = values.reshape(shape)
    return tensors, metadata


def write_asdata(path, fields):
    """fields: [(name, float or integer array [rows, ...])], all with the
    same rows, written as one batch (floats as f32, integers as i32)."""
    write_batches(path, [dict(fields)])


# ---------------------------------------------------------------------------
# selfcheck
# ---------------------------------------------------------------------------

SELFCHECK_CONFIGS = (
    Config("gpt2", layers=2, hidden=8, heads=2, kv_heads=2, ffn=32, vocab=11,
           max_positions=7, seq=5, batch=3),
    Config("llama", layers=2, hidden=16, heads=4, kv_heads=2, ffn=12,
           vocab=13, max_positions=0, seq=6, batch=2),
)


def relative_error(a, b, scale):
    return float(np.max(np.abs(a - b))) / scale if a.size else 0.0


def gradient_scales(grads, floor_fraction):
    """Per tensor, the scale errors are measured against: max |g|, but at
    least floor_fraction of the largest |g| of any tensor. The floor matters
    for gradients that vanish in exact arithmetic (GPT-2's k_proj.bias:
    adding a constant to every score of a softmax row changes nothing),
    where only rounding noise remains."""
    top = max(float(np.max(np.abs(g))) for g in grads.values())
    return {n: max(float(np.max(np.abs(g))), floor_fraction * top, 1e-300)
            for n, g in grads.items()}


def finite_difference_check(cfg, rng, samples, step):
    params = init_params(cfg, rng)
    ids, labels = random_batch(cfg, rng)
    _, grads = loss_and_grads(cfg, params, ids, labels)
    scales = gradient_scales(grads, 1e-3)
    results = []
    for name, g in grads.items():
        if not np.any(g):
            raise AssertionError(f"{cfg.family}: the gradient of {name} is "
                                 "identically zero")
        flat = np.abs(g).reshape(-1)
        picks = {int(np.argmax(flat))}
        picks.update(int(i) for i in
                     rng.choice(flat.size, min(samples, flat.size),
                                replace=False))
        worst = 0.0
        for index in sorted(picks):
            where = np.unravel_index(index, g.shape)
            saved = params[name][where]
            f = {}
            for k in (-2, -1, 1, 2):
                params[name][where] = saved + k * step
                f[k], _ = loss_and_grads(cfg, params, ids, labels, False)
            params[name][where] = saved
            # Five-point central difference: truncation error O(step^4).
            numeric = (8 * (f[1] - f[-1]) - (f[2] - f[-2])) / (12 * step)
            worst = max(worst, abs(numeric - g[where]) / scales[name])
        results.append((name, len(picks), worst))
    return results


def check_causality(cfg, rng):
    """Changing the token at position t moves no logit before t, and the
    logits of every position from t on."""
    params = init_params(cfg, rng)
    ids, _ = random_batch(cfg, rng)
    t = cfg.seq // 2
    changed = ids.copy()
    changed[:, t] = (changed[:, t] + 1) % cfg.vocab
    a = model_logits(cfg, params, ids).reshape(cfg.batch, cfg.seq, -1)
    b = model_logits(cfg, params, changed).reshape(cfg.batch, cfg.seq, -1)
    before = float(np.max(np.abs(a[:, :t] - b[:, :t])))
    after = float(np.min(np.max(np.abs(a[:, t:] - b[:, t:]), axis=(0, 2))))
    if before > 1e-12 or after < 1e-6:
        raise AssertionError(f"{cfg.family}: causality violated: changing "
                             f"token {t} moved earlier logits by {before:.3g}"
                             f" and some later position's by only "
                             f"{after:.3g}")
    return before, after


def check_ops():
    """Forwards of the ops against their definitions, element by element
    (finite differences prove only that each backward fits its forward)."""
    rng = np.random.default_rng(2)
    worst = 0.0
    x = rng.normal(size=(3, 6))
    w, b = rng.normal(size=6), rng.normal(size=6)
    ln, _ = layer_norm_fwd(x, w, b)
    rms, _ = rms_norm_fwd(x, w)
    gelu, _ = gelu_fwd(x)
    for r in range(3):
        row = list(x[r])
        mean = sum(row) / 6
        var = sum((v - mean) ** 2 for v in row) / 6
        ms = sum(v * v for v in row) / 6
        for c in range(6):
            v = row[c]
            worst = max(
                worst,
                abs(ln[r, c] - ((v - mean) / math.sqrt(var + LN_EPS) * w[c]
                                + b[c])),
                abs(rms[r, c] - v / math.sqrt(ms + RMS_EPS) * w[c]),
                abs(gelu[r, c] - 0.5 * v * (1 + math.tanh(
                    math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))))
    # Causal attention with 4 query heads on 2 kv heads.
    B, T, H, Hkv, D = 2, 4, 4, 2, 3
    q = rng.normal(size=(B, T, H, D))
    k, v = rng.normal(size=(B, T, Hkv, D)), rng.normal(size=(B, T, Hkv, D))
    out, _ = attention_fwd(q, k, v)
    for bi in range(B):
        for h in range(H):
            kv = h // (H // Hkv)
            for t in range(T):
                scores = [float(q[bi, t, h] @ k[bi, j, kv]) / math.sqrt(D)
                          for j in range(t + 1)]
                z = sum(math.exp(s_) for s_ in scores)
                expected = sum(math.exp(s_) / z * v[bi, j, kv]
                               for j, s_ in enumerate(scores))
                worst = max(worst, float(np.max(np.abs(out[bi, t, h]
                                                        - expected))))
    logits, labels = rng.normal(size=(4, 5)), np.array([0, 4, 2, 2])
    loss, _ = cross_entropy_fwd(logits, labels)
    expected = sum(math.log(sum(math.exp(l) for l in logits[r]))
                   - logits[r, labels[r]] for r in range(4)) / 4
    worst = max(worst, abs(loss - expected))
    if worst > 1e-12:
        raise AssertionError(f"an op differs from its definition by {worst}")
    return worst


def check_rope():
    """The rotate-half pairing and angle, element by element."""
    rng = np.random.default_rng(0)
    B, T, H, D = 1, 5, 2, 8
    x = rng.normal(size=(B, T, H, D))
    cos, sin = rope_tables(T, D)
    y = rope_fwd(x, cos, sin)
    worst = 0.0
    for t in range(T):
        for h in range(H):
            for i in range(D // 2):
                angle = t * ROPE_THETA ** (-2.0 * i / D)
                a, b = x[0, t, h, i], x[0, t, h, i + D // 2]
                ea = a * math.cos(angle) - b * math.sin(angle)
                eb = a * math.sin(angle) + b * math.cos(angle)
                worst = max(worst, abs(y[0, t, h, i] - ea),
                            abs(y[0, t, h, i + D // 2] - eb))
    back = rope_bwd(y, cos, sin)  # the inverse rotation
    worst = max(worst, float(np.max(np.abs(back - x))))
    if worst > 1e-12:
        raise AssertionError(f"RoPE differs from its definition by {worst}")
    return worst


def check_adamw():
    """Two steps against the scalar recurrences of torch.optim.AdamW, with
    clipping active, decay on matrices only."""
    opt = AdamW(lr=0.01, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1,
                max_grad_norm=0.5)
    params = {"w": np.array([[0.3, -0.2], [0.1, 0.4]]), "b": np.array([0.5])}
    grads = {"w": np.array([[0.6, -0.8], [0.0, 0.2]]), "b": np.array([-0.4])}
    state, ps = None, params
    for _ in range(2):
        ps, state, coef = adamw_step(opt, ps, grads, state)
    norm = math.sqrt(0.36 + 0.64 + 0.04 + 0.16)
    c = min(1.0, 0.5 / (norm + 1e-6))
    worst = abs(coef - c)
    for name in params:
        for idx in np.ndindex(params[name].shape):
            p, m, v = params[name][idx], 0.0, 0.0
            wd = 0.1 if name == "w" else 0.0
            for t in (1, 2):
                g = c * grads[name][idx]
                p = p - 0.01 * wd * p
                m = 0.9 * m + 0.1 * g
                v = 0.95 * v + 0.05 * g * g
                p = p - 0.01 * (m / (1 - 0.9 ** t)) / (
                    math.sqrt(v / (1 - 0.95 ** t)) + 1e-8)
            worst = max(worst, abs(ps[name][idx] - p))
    if worst > 1e-15:
        raise AssertionError(f"AdamW differs from its recurrence by {worst}")
    return worst


def check_files(tmpdir):
    rng = np.random.default_rng(1)
    tensors = {"a.weight": rng.normal(size=(3, 5)), "s": np.array(2.5)}
    path = os.path.join(tmpdir, "roundtrip.safetensors")
    write_safetensors(path, tensors, {"step": 1})
    back, meta = read_safetensors(path)
    for name, value in tensors.items():
        expected = value.astype(np.float32).astype(np.float64)
        if back[name].shape != value.shape or np.any(back[name] != expected):
            raise AssertionError(f"safetensors round trip changed {name}")
    if meta != {"step": "1"}:
        raise AssertionError(f"safetensors metadata came back as {meta}")
    os.remove(path)


def cmd_selfcheck(args):
    import tempfile
    rng = np.random.default_rng(args.seed)
    overall = 0.0
    for cfg in SELFCHECK_CONFIGS:
        cfg.validate()
        results = finite_difference_check(cfg, rng, args.samples, args.step)
        worst_name, worst, _ = max(((n, e, k) for n, k, e in results),
                                   key=lambda r: r[1])
        checked = sum(k for _, k, _ in results)
        print(f"{cfg.family}: {len(results)} param tensors, {checked} "
              f"elements: worst |fd - backward| / scale = {worst:.3g} "
              f"({worst_name})")
        if args.verbose:
            for name, k, err in results:
                print(f"  {name:40s} {k:3d} elements  {err:.3g}")
        before, after = check_causality(cfg, rng)
        print(f"{cfg.family}: causality: changing token {cfg.seq // 2} moves "
              f"earlier logits by {before:.3g}, each later position's by "
              f">= {after:.3g}")
        overall = max(overall, worst)
        if worst > args.tol:
            sys.exit(f"{cfg.family}: the backward of {worst_name} differs "
                     f"from finite differences by {worst:.3g} > {args.tol}")
    print(f"ops (norms, gelu, attention with GQA, cross-entropy): worst "
          f"difference from the definitions {check_ops():.3g}")
    print(f"rope: worst difference from the definition {check_rope():.3g}")
    print(f"adamw: worst difference from the recurrence {check_adamw():.3g}")
    with tempfile.TemporaryDirectory() as tmp:
        check_files(tmp)
    print(f"selfcheck passed: worst finite-difference error {overall:.3g} "
          f"(tolerance {args.tol:g})")


# ---------------------------------------------------------------------------
# compare
# ---------------------------------------------------------------------------

# The step line's fields after grad_norm (throughput, MFU, memory) are not
# compared here.
STEP_LINE = re.compile(
    r"^step (\d+) loss (\S+) ms (\S+)(?: grad_norm (\S+))?(?: .*)?$")


def parse_manifest(text):
    """{"args": {name: fields}, "results": [...]}; fields: role, dtype,
    shape (tuple), attrs (dict)."""
    args, results = {}, []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0] in ("arg", "result"):
            shape = () if parts[5] == "scalar" else tuple(
                int(d) for d in parts[5].split("x"))
            entry = {"index": int(parts[1]), "role": parts[2],
                     "name": parts[3], "dtype": parts[4],
                     "shape": shape,
                     "attrs": dict(kv.split("=", 1) for kv in parts[6:]
                                   if "=" in kv)}
            if parts[0] == "arg":
                args[parts[3]] = entry
            else:
                results.append(entry)
    if not args:
        raise ValueError("no 'arg' records in the binary's manifest:\n" + text)
    return {"args": args, "results": results}


def run_command(cmd, what):
    print(f"$ {' '.join(shlex.quote(c) for c in cmd)}", flush=True)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              timeout=900)
    except FileNotFoundError as e:
        sys.exit(f"cannot run {what}: {e}")
    except subprocess.TimeoutExpired:
        sys.exit(f"{what} did not finish within 900 s")
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        sys.exit(f"{what} exited with status {proc.returncode}")
    return proc.stdout


def check_manifest(manifest, cfg, params):
    """The binary must be the model the reference computes: same params,
    batch and exposed gradients. Returns {grad result name: param name}."""
    problems = []
    args = manifest["args"]
    binary_params = {n: a["shape"] for n, a in args.items()
                     if a["role"] == "param"}
    for name, value in params.items():
        if name not in binary_params:
            problems.append(f"the binary has no param '{name}'")
        elif binary_params[name] != value.shape:
            problems.append(f"param '{name}' is {list(binary_params[name])} "
                            f"in the binary, {list(value.shape)} here")
    for name in sorted(set(binary_params) - set(params)):
        problems.append(f"the binary has a param '{name}' the reference "
                        "does not know")
    for field in ("input_ids", "labels"):
        a = args.get(field)
        if a is None:
            problems.append(f"the binary has no batch argument '{field}'")
            continue
        if a["dtype"] != "i32" or a["shape"][1:] != (cfg.seq,):
            problems.append(f"'{field}' is {a['dtype']} "
                            f"{list(a['shape'])}, expected i32 [rows, "
                            f"{cfg.seq}]")
        if a["attrs"].get("global") != str(cfg.batch):
            problems.append(f"'{field}' has a global batch of "
                            f"{a['attrs'].get('global')} rows, the reference "
                            f"{cfg.batch} (--batch)")
        if a["attrs"].get("classes", str(cfg.vocab)) != str(cfg.vocab):
            problems.append(f"'{field}' has classes={a['attrs']['classes']}, "
                            f"the reference vocab {cfg.vocab}")
    grads = {r["name"]: args_name(r, args) for r in manifest["results"]
             if r["role"] == "grad"}
    if not grads:
        problems.append("the binary exposes no gradients: compile it with "
                        "shard-compile --expose-gradients")
    elif set(grads.values()) != set(params):
        missing = sorted(set(params) - set(grads.values()))
        problems.append(f"no gradient result for {missing}")
    if "lr" not in args or args["lr"]["role"] != "hyper":
        problems.append("the binary has no hyper 'lr' (an AdamW step has "
                        "one)")
    if problems:
        sys.exit("the binary does not match the reference model:\n  " +
                 "\n  ".join(problems))
    return grads


def args_name(result, args):
    """The param a grad result belongs to (of=I is an argument index)."""
    index = int(result["attrs"].get("of", -1))
    for name, a in args.items():
        if a["index"] == index:
            return name
    return None


def cmd_compare(args):
    cfg = Config(args.family, args.layers, args.hidden, args.heads,
                 args.kv_heads or args.heads,
                 args.ffn or (4 * args.hidden if args.family == "gpt2"
                              else 0),
                 args.vocab, args.max_positions, args.seq, args.batch)
    try:
        cfg.validate()
    except ValueError as e:
        sys.exit(str(e))
    opt = AdamW(args.lr, args.beta1, args.beta2, args.eps, args.weight_decay,
                args.max_grad_norm)
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"--binary {args.binary}: not an executable file")
    os.makedirs(args.workdir, exist_ok=True)
    launcher = shlex.split(args.mpirun) if args.mpirun else []

    rng = np.random.default_rng(args.seed)
    params = init_params(cfg, rng, args.std)
    ids, labels = random_batch(cfg, rng)

    manifest_text = run_command(launcher + [args.binary, "--print-manifest"],
                                "the binary (--print-manifest)")
    grad_of = check_manifest(parse_manifest(manifest_text), cfg, params)

    files = {k: os.path.join(args.workdir, v) for k, v in (
        ("params", "params.safetensors"), ("data", "batch.asdata"),
        ("grads", "grads.safetensors"), ("after", "after.safetensors"))}
    write_safetensors(files["params"], params)
    write_asdata(files["data"], [("input_ids", ids), ("labels", labels)])
    for stale in ("grads", "after"):
        if os.path.exists(files[stale]):
            os.remove(files[stale])

    start = time.monotonic()
    ref_loss, ref_grads = loss_and_grads(cfg, params, ids, labels)
    ref_seconds = time.monotonic() - start

    # --lr sets the step's 'lr' hyper; betas, eps, weight decay and the
    # clipping norm are compiled in and must match the shard-gen flags.
    log = run_command(launcher + [
        args.binary, "--steps", "1", "--lr", repr(args.lr),
        "--load-params", files["params"], "--data", files["data"],
        "--data-format", "asdata", "--save-grads", files["grads"],
        "--save-params", files["after"]], "the binary")
    steps = [STEP_LINE.match(l.strip()) for l in log.splitlines()]
    steps = [m for m in steps if m and m.group(1) == "1"]
    if not steps:
        sys.exit("the binary printed no 'step 1 loss L ms X' line:\n" + log)
    loss = float(steps[0].group(2))
    norm = float(steps[0].group(4)) if steps[0].group(4) else None

    grads_raw, grads_meta = read_safetensors(files["grads"])
    after, _ = read_safetensors(files["after"])
    grads = {}
    for name, value in grads_raw.items():
        param = grads_meta.get(name + ".of") or grad_of.get(name)
        if param not in params:
            sys.exit(f"{files['grads']}: gradient '{name}' belongs to no "
                     f"param of the reference (of={param})")
        grads[param] = value
    for what, got in (("gradients", grads), ("params", after)):
        missing = sorted(set(params) - set(got))
        if missing:
            sys.exit(f"the binary saved no {what} for {missing}")
        for name in params:
            if got[name].shape != params[name].shape:
                sys.exit(f"saved {what} of {name} have shape "
                         f"{list(got[name].shape)}, expected "
                         f"{list(params[name].shape)}")

    # AdamW's first step is about lr * sign(g): float32 rounding of a
    # gradient element near zero (some vanish exactly, such as GPT-2's
    # k_proj.bias) flips it between +lr and -lr. So the reference optimizer
    # runs on the binary's gradients, which the gradient check has just
    # compared with the reference's own; clipping is recomputed from them.
    ref_after, _, coef = adamw_step(opt, params, grads)
    ref_coef, ref_norm = clip_coefficient(ref_grads, opt.max_grad_norm)

    failures = []
    loss_err = abs(loss - ref_loss) / max(abs(ref_loss), 1e-30)
    print(f"\n{cfg.family}: {cfg.layers} layers, hidden {cfg.hidden}, heads "
          f"{cfg.heads}/{cfg.kv_heads} kv, ffn {cfg.ffn}, vocab {cfg.vocab}, "
          f"batch {cfg.batch} x seq {cfg.seq}; reference in "
          f"{ref_seconds:.2f} s")
    print(f"loss: binary {loss:.8g} reference {ref_loss:.10g} relative "
          f"error {loss_err:.3g}")
    if not (math.isfinite(loss) and loss_err <= args.rtol_loss):
        failures.append(f"loss differs by {loss_err:.3g} > {args.rtol_loss}")
    print(f"gradient norm: reference {ref_norm:.6g}; clip coefficient: "
          f"reference {ref_coef:.6g}, from the binary's gradients "
          f"{coef:.6g}")
    # A clipping step logs the norm it clipped by (grad_norm on its line).
    if opt.max_grad_norm > 0:
        if norm is None:
            failures.append("the binary logged no grad_norm for a step that "
                            "clips its gradients")
        else:
            norm_err = abs(norm - ref_norm) / max(ref_norm, 1e-30)
            print(f"logged gradient norm: binary {norm:.6g}, relative error "
                  f"{norm_err:.3g}")
            if not norm_err <= args.rtol_grad:
                failures.append(f"logged gradient norm differs by "
                                f"{norm_err:.3g} > {args.rtol_grad}")
    elif norm is not None:
        failures.append("the binary logged a grad_norm for a step that does "
                        "not clip")
    if args.require_clipping and not ref_coef < 1.0:
        failures.append(f"--require-clipping: the gradient norm "
                        f"{ref_norm:.4g} is within --max-grad-norm "
                        f"{opt.max_grad_norm}, so clipping is not exercised")

    scales = gradient_scales(ref_grads, args.grad_floor)
    print(f"\n{'tensor':44s} {'shape':>10s} {'grad':>9s} {'param':>9s} "
          f"{'update':>9s}")
    worst = {"grad": (0.0, ""), "param": (0.0, ""), "update": (0.0, "")}
    for name, p in params.items():
        if not (np.all(np.isfinite(grads[name]))
                and np.all(np.isfinite(after[name]))):
            failures.append(f"{name}: non-finite values from the binary")
            continue
        g_err = relative_error(grads[name], ref_grads[name], scales[name])
        p_err = relative_error(after[name], ref_after[name],
                               max(float(np.max(np.abs(p))), 1e-30))
        ref_update = ref_after[name] - p
        # An update below float32's resolution of p cannot be seen in the
        # saved params: measure against at least 8 ulps of max |p|.
        u_err = relative_error(after[name] - p, ref_update,
                               max(float(np.max(np.abs(ref_update))),
                                   2.0 ** -20 * float(np.max(np.abs(p))),
                                   1e-30))
        marks = []
        for kind, err, tol in (("grad", g_err, args.rtol_grad),
                               ("param", p_err, args.rtol_param),
                               ("update", u_err, args.rtol_update)):
            if err > worst[kind][0]:
                worst[kind] = (err, name)
            if err > tol:
                marks.append(kind)
                failures.append(f"{name}: {kind} differs by {err:.3g} > "
                                f"{tol}")
        shape = "x".join(map(str, p.shape))
        print(f"{name:44s} {shape:>10s} {g_err:9.2e} {p_err:9.2e} "
              f"{u_err:9.2e}{'  FAIL ' + ','.join(marks) if marks else ''}")
    print("\nworst: " + ", ".join(f"{k} {e:.3g} ({n})"
                                  for k, (e, n) in worst.items()))
    print(f"tolerances: loss {args.rtol_loss:g}, grad {args.rtol_grad:g} "
          f"(of max |g|, at least {args.grad_floor:g} of the largest), param "
          f"{args.rtol_param:g} (of max |p|), update {args.rtol_update:g} "
          f"(of max |p' - p|, at least 2^-20 max |p|)")
    if failures:
        sys.exit("FAILED:\n  " + "\n  ".join(failures))
    print(f"PASS: {len(params)} params, loss, gradients and AdamW update "
          "match the reference")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("selfcheck", help="finite differences vs backward")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--samples", type=int, default=6,
                   help="random elements per tensor (plus its largest)")
    p.add_argument("--step", type=float, default=3e-4,
                   help="finite-difference step (five-point stencil)")
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--verbose", action="store_true")

    p = sub.add_parser("compare", help="check a compiled binary's step")
    p.add_argument("--family", choices=("gpt2", "llama"), required=True)
    for name in ("layers", "hidden", "heads", "vocab", "seq", "batch"):
        p.add_argument("--" + name, type=int, required=True)
    p.add_argument("--kv-heads", type=int, default=0,
                   help="default: --heads")
    p.add_argument("--ffn", type=int, default=0,
                   help="default 4 x hidden for gpt2; required for llama")
    p.add_argument("--max-positions", type=int, default=0)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.95)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--max-grad-norm", type=float, default=0.0,
                   help="<= 0: no clipping")
    p.add_argument("--require-clipping", action="store_true",
                   help="fail unless the gradient norm exceeds "
                        "--max-grad-norm")
    p.add_argument("--std", type=float, default=0.1,
                   help="std of the random params")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", required=True)
    p.add_argument("--binary", required=True)
    p.add_argument("--mpirun", default="",
                   help="launcher prefix, e.g. 'mpiexec -np 2'")
    p.add_argument("--rtol-loss", type=float, default=1e-4)
    p.add_argument("--rtol-grad", type=float, default=1e-4)
    p.add_argument("--rtol-param", type=float, default=1e-4)
    p.add_argument("--rtol-update", type=float, default=1e-3)
    p.add_argument("--grad-floor", type=float, default=1e-2,
                   help="gradient errors are relative to at least this "
                        "fraction of the largest |g| of any tensor (for "
                        "gradients that vanish in exact arithmetic)")
    args = parser.parse_args()
    if args.cmd == "compare" and args.family == "llama" and not args.ffn:
        parser.error("--ffn is required for llama")
    {"selfcheck": cmd_selfcheck, "compare": cmd_compare}[args.cmd](args)


if __name__ == "__main__":
    main()
