import torch
import torch.nn as nn


class Model(nn.Module):
    """A CNN stem: 3×3 convolution (padding 1) from few input channels, ReLU, 2×2 max pooling."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.relu(self.conv(x)))


BATCH = 64
IN_CHANNELS = 3
OUT_CHANNELS = 32
HEIGHT = 512
WIDTH = 512

# cuda: the convolution writes 537M floats (2.1 GB; 29 GFLOP is minor), ReLU reads and writes
# them, pooling reads them: ~8.6 GB at ~3 TB/s -> ~3 ms.
SIZE_PROFILES = {
    "cpu": {"BATCH": 4, "HEIGHT": 256, "WIDTH": 256},
    "cuda": {"BATCH": 64, "HEIGHT": 512, "WIDTH": 512},
}


def get_inputs():
    x = torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)
    return [x]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
