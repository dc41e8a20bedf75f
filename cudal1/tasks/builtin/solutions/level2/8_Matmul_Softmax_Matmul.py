import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """torch's fused (flash-style) attention: scores are produced, normalized and consumed block
    by block, never materializing the (B, H, S, S) score and weight tensors."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)
