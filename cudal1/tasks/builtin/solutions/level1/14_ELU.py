import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Fused ELU (one pass) instead of compare, exp, subtract, scale and select."""

    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.elu(x, alpha=self.alpha)
