"""Returns a constant: right only on a task whose output is constant (a degenerate task)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros(x.shape[0], 1)
