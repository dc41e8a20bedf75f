import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """torch.max(x, dim) also computes the argmax indices, which the task drops; amax reduces
    values only."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.amax(x, dim=self.dim)
