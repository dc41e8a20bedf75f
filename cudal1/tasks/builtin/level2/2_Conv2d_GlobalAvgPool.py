import torch
import torch.nn as nn


class Model(nn.Module):
    """A valid (unpadded) k×k convolution followed by global average pooling:
    (N, C_in, H, W) -> (N, C_out)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).mean(dim=(2, 3))


BATCH = 32
IN_CHANNELS = 64
OUT_CHANNELS = 128
HEIGHT = 128
WIDTH = 128
KERNEL_SIZE = 3

# cuda: 2 * 32*128*126*126 outputs * 64*9 MACs = 75 GFLOP fp32 at ~50 TFLOP/s (convolutions
# reach about half of it) -> ~3 ms.
SIZE_PROFILES = {
    "cpu": {"BATCH": 8, "IN_CHANNELS": 32, "OUT_CHANNELS": 64, "HEIGHT": 64, "WIDTH": 64},
    "cuda": {"BATCH": 32, "IN_CHANNELS": 64, "OUT_CHANNELS": 128, "HEIGHT": 128, "WIDTH": 128},
}


def get_inputs():
    x = torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)
    return [x]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE]
