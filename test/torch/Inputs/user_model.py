"""A user's model file for `python3 -m autoshard.torch user_model.py:make`:
a small residual MLP with repeated blocks (a ModuleList, so the step gets
one unit per block) and a classification loss."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.down(F.silu(self.up(self.norm(x))))


class ResidualMLP(nn.Module):
    def __init__(self, features=12, width=16, classes=5, depth=3):
        super().__init__()
        self.embed = nn.Linear(features, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def make(batch, seq=None):
    torch.manual_seed(0)
    model = ResidualMLP()
    x = torch.randn(batch, 12)
    y = torch.randint(0, 5, (batch,))
    return model, (x, y), lambda logits, x, y: F.cross_entropy(logits, y)


def not_a_pair(batch):
    return ResidualMLP()
