import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """sum_j (x W^T + b)_j = x · (sum_j W_j) + sum_j b_j: one matrix-vector product instead of a
    GEMM followed by a row sum."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.linear.weight.sum(dim=0)
        b = self.linear.bias.sum()
        return torch.mv(x, w).add_(b).unsqueeze(1)
