"""torch.set_num_threads(1) inside forward."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        torch.set_num_threads(1)
        return torch.mm(a, b).clamp_min_(0.0)
