"""Leaves a chain of 5,000 nested directories in its scratch directory (a recursive delete in the
parent would overflow Python's recursion limit)."""
import os

import torch
import torch.nn as nn

_cwd = os.getcwd()
for _ in range(5000):
    os.mkdir("d")
    os.chdir("d")
os.chdir(_cwd)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b).clamp_min_(0.0)
