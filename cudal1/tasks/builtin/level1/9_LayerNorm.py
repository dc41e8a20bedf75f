import torch
import torch.nn as nn


class Model(nn.Module):
    """Layer normalization over the last dimension of a (B, S, D) tensor, with a learned
    per-feature scale and shift, written out from its definition (biased variance)."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


BATCH = 64
SEQ = 2048
DIM = 2048

# cuda: 268M floats; ~8 elementwise/reduction passes move ~17 GB at ~3 TB/s -> ~6 ms.
SIZE_PROFILES = {
    "cpu": {"BATCH": 8, "SEQ": 512, "DIM": 1024},
    "cuda": {"BATCH": 64, "SEQ": 2048, "DIM": 2048},
}


def get_inputs():
    x = torch.randn(BATCH, SEQ, DIM)
    return [x]


def get_init_inputs():
    return [DIM]
