"""torch.set_num_threads(2) inside forward: more threads than the hosts run."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        torch.set_num_threads(2)
        return torch.mm(a, b).clamp_min_(0.0)
