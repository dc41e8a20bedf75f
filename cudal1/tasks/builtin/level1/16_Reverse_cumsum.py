import torch
import torch.nn as nn


class Model(nn.Module):
    """Reverse (suffix) cumulative sum along one dimension: out[i] = sum of x[j] for j >= i."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)


BATCH = 8192
LENGTH = 32768
DIM = 1

# cuda: 268M floats; flip, scan and flip move ~6.4 GB at ~3 TB/s -> ~2 ms (the scan is slower).
SIZE_PROFILES = {
    "cpu": {"BATCH": 2048, "LENGTH": 4096},
    "cuda": {"BATCH": 8192, "LENGTH": 32768},
}


def get_inputs():
    x = torch.randn(BATCH, LENGTH)
    return [x]


def get_init_inputs():
    return [DIM]
