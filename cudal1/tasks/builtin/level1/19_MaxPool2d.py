import torch
import torch.nn as nn


class Model(nn.Module):
    """Non-overlapping k×k max pooling (stride k) of an (N, C, H, W) tensor."""

    def __init__(self, kernel_size: int):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


BATCH = 64
CHANNELS = 64
HEIGHT = 512
WIDTH = 512
KERNEL_SIZE = 2

# cuda: reads 1.07G floats (4.3 GB) and writes a quarter of that: ~5.4 GB at ~3 TB/s -> ~1.8 ms.
SIZE_PROFILES = {
    "cpu": {"BATCH": 16, "CHANNELS": 32, "HEIGHT": 128, "WIDTH": 128},
    "cuda": {"BATCH": 64, "CHANNELS": 64, "HEIGHT": 512, "WIDTH": 512},
}


def get_inputs():
    x = torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)
    return [x]


def get_init_inputs():
    return [KERNEL_SIZE]
