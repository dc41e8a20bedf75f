import torch
import torch.nn as nn


def _max_pool_2x2(x: torch.Tensor) -> torch.Tensor:
    """2×2, stride-2 max pooling (floor mode) as two elementwise maxima of strided slices (row
    pairs, then column pairs): simple vectorized passes instead of the generic pooling kernel."""
    x = x[..., : x.shape[-2] // 2 * 2, : x.shape[-1] // 2 * 2]
    rows = torch.maximum(x[..., 0::2, :], x[..., 1::2, :])
    return torch.maximum(rows[..., 0::2], rows[..., 1::2])


class ModelNew(nn.Module):
    """ReLU is monotone, so it commutes with max pooling: pool first, then apply ReLU in place on
    the 4× smaller pooled tensor, skipping a full pass (and buffer) over the convolution output.
    The pooling itself uses strided elementwise maxima, several times faster on CPU than the
    generic pooling kernel."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _max_pool_2x2(self.conv(x)).relu_()
