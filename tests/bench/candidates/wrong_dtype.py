"""Returns float64 where the reference returns float32."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.relu(a.double() @ b.double())
