"""Allocates and touches 64 MiB at a time, up to 4 GiB, keeping everything."""
import torch
import torch.nn as nn

_hoard = []


class ModelNew(nn.Module):
    def forward(self, a, b):
        for _ in range(64):
            _hoard.append(torch.ones(16 * 2**20))
        return torch.relu(a @ b)
