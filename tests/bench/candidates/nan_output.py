"""Right everywhere except one NaN (the reference is finite everywhere)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.relu(a @ b)
        out[0, 0] = float("nan")
        return out
