import torch
import torch.nn as nn


def _max_pool_2x2(x: torch.Tensor) -> torch.Tensor:
    """2×2, stride-2 max pooling (floor mode) as two elementwise maxima of strided slices (row
    pairs, then column pairs): simple vectorized passes instead of the generic pooling kernel."""
    x = x[..., : x.shape[-2] // 2 * 2, : x.shape[-1] // 2 * 2]
    rows = torch.maximum(x[..., 0::2, :], x[..., 1::2, :])
    return torch.maximum(rows[..., 0::2], rows[..., 1::2])


class ModelNew(nn.Module):
    """tanh and multiplication by a positive constant are increasing functions, so they commute
    with max pooling: pool the convolution output first, then apply tanh and the scale in place
    on the 4× smaller pooled tensor. The two full-size elementwise passes and their buffers
    disappear. (A non-positive scale would not commute; that case keeps the reference order.)"""

    def __init__(self, in_channels: int, out_channels: int, scale: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.scale = scale
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.scale <= 0:
            return self.pool(torch.tanh(self.conv(x)) * self.scale)
        return _max_pool_2x2(self.conv(x)).tanh_().mul_(self.scale)
