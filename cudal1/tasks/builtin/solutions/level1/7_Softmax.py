import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """One fused softmax kernel instead of five passes (max, subtract, exp, sum, divide) that
    each allocate a full-size intermediate."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)
