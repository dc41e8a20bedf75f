"""Sets a global flag in ModelNew.__init__ (not at import, not in forward)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark

    def forward(self, a, b):
        return torch.mm(a, b).clamp_min_(0.0)
