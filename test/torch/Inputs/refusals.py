"""Every construct the importer refuses, one small module each: prints
"NAME: <the error>" (ExportError, ValueError or TypeError), or
"NAME: accepted" when it was not refused."""

import torch
import torch.nn as nn
import torch.nn.functional as F

import autoshard.torch as at


class Block(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.fn = fn

    def forward(self, x):
        return self.fn(self.proj(x))


class Net(nn.Module):
    """A block under a ModuleList, so that errors name a nested path."""

    def __init__(self, fn):
        super().__init__()
        self.layers = nn.ModuleList([Block(lambda h: h), Block(fn)])

    def forward(self, x, y):
        for layer in self.layers:
            x = layer(x)
        return F.cross_entropy(x, y)


def cumsum(h):
    return torch.cumsum(h, 1)


def strided(h):
    return h[:, ::2].repeat(1, 2)


def argmax(h):
    return h * h.argmax(-1, keepdim=True).float()


def data_dependent(h):
    if h.sum() > 0:
        return h
    return -h


X = torch.randn(4, 8)
Y = torch.randint(0, 8, (4,))


def export(module, inputs=(X, Y), **kw):
    return at.export_training_step(module, inputs, **kw)


class WithBatchNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(8)

    def forward(self, x, y):
        return F.cross_entropy(self.bn(x), y)


class PaddingIdx(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(8, 8, padding_idx=0)

    def forward(self, ids, y):
        return F.cross_entropy(self.emb(ids), y)


class Frozen(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.a.bias.requires_grad_(False)

    def forward(self, x, y):
        return F.cross_entropy(self.a(x), y)


class Unused(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.spare = nn.Linear(8, 8)

    def forward(self, x, y):
        return F.cross_entropy(self.a(x), y)


class Logits(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)

    def forward(self, x, y):
        return (self.a(x),)


class IntMath(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(9, 8)

    def forward(self, ids, y):
        return F.cross_entropy(self.emb(ids + 1), y)


class Smoothing(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)

    def forward(self, x, y):
        return F.cross_entropy(self.a(x), y, label_smoothing=0.1)


class Nll(nn.Module):
    """F.nll_loss with the keyword arguments `kw`."""

    def __init__(self, **kw):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.kw = kw

    def forward(self, x, y):
        return F.nll_loss(F.log_softmax(self.a(x), -1), y, **self.kw)


class BufferUpdate(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x, y):
        self.calls.add_(1)
        return F.cross_entropy(self.a(x), y)


class InPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x, y):
        return F.cross_entropy(self.act(self.a(x)), y)


class FloatToInt(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.emb = nn.Embedding(8, 8)

    def forward(self, x, y):
        ids = self.a(x).abs().long().clamp(0, 7)
        return F.cross_entropy(self.emb(ids).sum(1), y)


IDS = torch.randint(0, 8, (4,))
CASES = {
    "cumsum": lambda: export(Net(cumsum)),
    "strided-slice": lambda: export(Net(strided)),
    "argmax": lambda: export(Net(argmax)),
    "data-dependent": lambda: export(Net(data_dependent)),
    "batchnorm": lambda: export(WithBatchNorm()),
    "padding-idx": lambda: export(PaddingIdx(), (IDS, Y)),
    "frozen": lambda: export(Frozen()),
    "unused": lambda: export(Unused()),
    "no-loss": lambda: export(Logits()),
    "int-math": lambda: export(IntMath(), (IDS, Y)),
    "label-smoothing": lambda: export(Smoothing()),
    "nll-weight": lambda: export(Nll(weight=torch.rand(8))),
    "nll-sum": lambda: export(Nll(reduction="sum")),
    "buffer-update": lambda: export(BufferUpdate()),
    "in-place": lambda: export(InPlace()),
    "float-to-int": lambda: export(FloatToInt()),
    "bf16-params": lambda: export(Unused().to(torch.bfloat16),
                                  (X.to(torch.bfloat16), Y)),
    "batch-mismatch": lambda: export(Unused(), (X, Y[:2])),
    "precision": lambda: export(Unused(), precision="fp8"),
    "optimizer": lambda: export(Unused(), optimizer=torch.optim.AdamW),
}

for name, case in CASES.items():
    try:
        case()
        print(f"{name}: accepted")
    except (at.ExportError, ValueError, TypeError) as e:
        print(f"{name}: " + " | ".join(l.strip() for l in str(e).splitlines()))
