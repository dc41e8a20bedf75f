import torch
import torch.nn as nn


class Model(nn.Module):
    """A classifier head: linear layer, logits divided by a temperature, softmax over classes."""

    def __init__(self, in_features: int, num_classes: int, temperature: float):
        super().__init__()
        self.linear = nn.Linear(in_features, num_classes)
        self.temperature = temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.linear(x) / self.temperature
        return torch.softmax(logits, dim=1)


BATCH = 16384
IN_FEATURES = 256
NUM_CLASSES = 8192
TEMPERATURE = 0.7

# cuda: GEMM 2*16384*256*8192 = 69 GFLOP fp32 (~1.4 ms) plus divide and softmax over 134M
# logits (~3.2 GB at ~3 TB/s, ~1.1 ms) -> ~2.5 ms.
SIZE_PROFILES = {
    "cpu": {"BATCH": 1024, "IN_FEATURES": 64, "NUM_CLASSES": 8192},
    "cuda": {"BATCH": 16384, "IN_FEATURES": 256, "NUM_CLASSES": 8192},
}


def get_inputs():
    x = torch.randn(BATCH, IN_FEATURES)
    return [x]


def get_init_inputs():
    return [IN_FEATURES, NUM_CLASSES, TEMPERATURE]
