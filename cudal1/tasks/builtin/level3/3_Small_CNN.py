import torch
import torch.nn as nn


class Model(nn.Module):
    """A small image classifier: two (3×3 conv, ReLU, 2×2 max pool) stages, then a two-layer
    classifier head. (N, C, H, W) -> (N, num_classes)."""

    def __init__(self, in_channels: int, height: int, width: int, num_classes: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(64 * (height // 4) * (width // 4), 256),
            nn.ReLU(),
            nn.Linear(256, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


BATCH = 256
IN_CHANNELS = 3
HEIGHT = 128
WIDTH = 128
NUM_CLASSES = 10

# cuda: conv1 2*256*32*128^2*27 = 7 GFLOP, conv2 2*256*64*64^2*288 = 39 GFLOP, head
# 2*256*65536*256 = 8.6 GFLOP: ~55 GFLOP fp32 (~1.5 ms at convolution efficiency) plus ~1.6 GB
# of conv-1 activations through ReLU and pooling (~1 ms) -> ~2.5 ms.
SIZE_PROFILES = {
    "cpu": {"BATCH": 16, "HEIGHT": 64, "WIDTH": 64},
    "cuda": {"BATCH": 256, "HEIGHT": 128, "WIDTH": 128},
}


def get_inputs():
    x = torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)
    return [x]


def get_init_inputs():
    return [IN_CHANNELS, HEIGHT, WIDTH, NUM_CLASSES]
