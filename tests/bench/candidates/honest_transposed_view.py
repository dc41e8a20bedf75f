"""Honest: returns a transposed (non-contiguous) view of its own intermediate, (b^T a^T)^T."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.mm(b.t(), a.t()).clamp_min_(0.0).t()
