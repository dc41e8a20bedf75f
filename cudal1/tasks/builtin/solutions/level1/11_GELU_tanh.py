import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """torch's fused tanh-approximate GELU: one pass instead of about eight."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")
