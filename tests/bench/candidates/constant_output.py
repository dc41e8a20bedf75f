"""Constant-output shortcut: zeros of the right shape (matmul_relu is not degenerate: must be incorrect)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.zeros(a.shape[0], b.shape[1])
