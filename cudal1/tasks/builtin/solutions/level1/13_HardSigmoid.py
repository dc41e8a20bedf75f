import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Fused hard sigmoid, relu6(x + 3) / 6 = clamp(x / 6 + 1/2, 0, 1): one pass instead of three."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardsigmoid(x)
