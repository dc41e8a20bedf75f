"""Honest clamp to [0, 1] (a new tensor)."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp(0.0, 1.0)
