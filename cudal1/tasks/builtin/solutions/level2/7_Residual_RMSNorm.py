import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """One buffer for the residual sum, normalized and scaled in place; the sum of squares comes
    from a vector-norm reduction instead of a full-size h² temporary."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        h = x + residual
        norm = torch.linalg.vector_norm(h, dim=-1, keepdim=True)
        inv_rms = norm.square_().div_(h.shape[-1]).add_(self.eps).rsqrt_()
        return h.mul_(inv_rms).mul_(self.weight)
