"""Honest: in-place ops, but only on its own intermediates."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        t = torch.mm(a, b)
        t.relu_()
        t.mul_(2.0).div_(2.0)
        return t
