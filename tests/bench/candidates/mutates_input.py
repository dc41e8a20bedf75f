"""Uses an input as scratch space: the right answer, but the caller's tensor is overwritten."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.mm(a, b).clamp_min_(0.0)
        a.zero_()
        return out
