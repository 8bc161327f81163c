"""Steps of F.nll_loss over log_softmax in layouts beyond [N, C], for
nll-loss.test: writes DIR/<name>.mlir for each."""

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import autoshard.torch as at


class Tokens(nn.Module):
    """Per-token classes with the classes in dimension 1 ([N, C, T]), as
    nn.NLLLoss takes a sequence: log_softmax(dim=1) and the loss's own
    class dimension both move the classes, and the moves cancel."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 5)

    def forward(self, x, y):
        scores = self.proj(x).transpose(1, 2)
        return F.nll_loss(F.log_softmax(scores, dim=1), y)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    cases = {
        "tokens": (Tokens(), (torch.randn(2, 3, 4),
                              torch.randint(0, 5, (2, 3)))),
    }
    for name, (module, inputs) in cases.items():
        step = at.export_training_step(module, inputs)
        step.save(os.path.join(out, f"{name}.mlir"),
                  os.path.join(out, f"{name}.safetensors"))


if __name__ == "__main__":
    main()
