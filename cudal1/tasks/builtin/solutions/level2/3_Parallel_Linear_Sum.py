import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """fc1(x) + fc2(x) = x (W1 + W2)^T + (b1 + b2): one GEMM instead of two plus an add."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc1 = nn.Linear(in_features, out_features)
        self.fc2 = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.fc1.weight + self.fc2.weight, self.fc1.bias + self.fc2.bias)
