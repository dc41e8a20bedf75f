"""sin_twice written out: sin, then a copy (the control of aliased_pages_two_outputs)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.sin(x)
        return y, y.clone()
