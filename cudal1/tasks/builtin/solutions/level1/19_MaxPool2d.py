import torch
import torch.nn as nn


def _max_pool_nonoverlapping(x: torch.Tensor, k: int) -> torch.Tensor:
    """k×k, stride-k max pooling (floor mode) as elementwise maxima of strided slices: first of
    the k rows of each window, then of the k columns. Each step is a simple vectorized binary
    op over contiguous row segments, where the generic pooling kernel walks every window.
    Exact: max is associative and commutative, NaN propagates as in max pooling."""
    h, w = x.shape[-2] // k * k, x.shape[-1] // k * k
    x = x[..., :h, :w]
    rows = x[..., 0::k, :]
    for i in range(1, k):
        rows = torch.maximum(rows, x[..., i::k, :])
    out = rows[..., 0::k]
    for j in range(1, k):
        out = torch.maximum(out, rows[..., j::k])
    return out if k > 1 else out.clone()


class ModelNew(nn.Module):
    """Max pooling from strided elementwise maxima (rows, then columns)."""

    def __init__(self, kernel_size: int):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _max_pool_nonoverlapping(x, self.pool.kernel_size)
