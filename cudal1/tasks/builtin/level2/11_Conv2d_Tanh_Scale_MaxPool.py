import torch
import torch.nn as nn


class Model(nn.Module):
    """A CNN stem: 3×3 convolution (padding 1) from few input channels, tanh, a constant positive
    scale, then 2×2 max pooling."""

    def __init__(self, in_channels: int, out_channels: int, scale: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.scale = scale
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(self.conv(x))
        y = y * self.scale
        return self.pool(y)


BATCH = 64
IN_CHANNELS = 3
OUT_CHANNELS = 32
HEIGHT = 512
WIDTH = 512
SCALE = 2.5

# cuda: the convolution writes 537M floats (2.1 GB; its 29 GFLOP are minor), tanh and the scale
# each read and write them, pooling reads them: ~13 GB at ~3 TB/s -> ~4.3 ms.
SIZE_PROFILES = {
    "cpu": {"BATCH": 4, "HEIGHT": 256, "WIDTH": 256},
    "cuda": {"BATCH": 64, "HEIGHT": 512, "WIDTH": 512},
}


def get_inputs():
    x = torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)
    return [x]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, SCALE]
