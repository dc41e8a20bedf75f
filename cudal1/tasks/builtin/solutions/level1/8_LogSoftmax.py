import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """One fused log-softmax kernel instead of max, subtract, exp, sum, log and subtract passes."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=1)
