import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """The fused layer-norm kernel (one read for the statistics, one pass for the output) in place
    of seven elementwise and reduction passes. Parameters are created as in the reference."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)
