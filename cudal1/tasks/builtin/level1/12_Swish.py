import torch
import torch.nn as nn


class Model(nn.Module):
    """Swish (SiLU): x * sigmoid(x)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


BATCH = 8192
DIM = 32768

# cuda: 268M floats; sigmoid then multiply move ~5.4 GB at ~3 TB/s -> ~1.8 ms.
SIZE_PROFILES = {
    "cpu": {"BATCH": 1024, "DIM": 4096},
    "cuda": {"BATCH": 8192, "DIM": 32768},
}


def get_inputs():
    x = torch.randn(BATCH, DIM)
    return [x]


def get_init_inputs():
    return []
