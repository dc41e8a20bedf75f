import torch
import torch.nn as nn


class Model(nn.Module):
    """Two linear branches applied to the same input and added: fc1(x) + fc2(x)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc1 = nn.Linear(in_features, out_features)
        self.fc2 = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc1(x) + self.fc2(x)


BATCH = 8192
IN_FEATURES = 2048
OUT_FEATURES = 2048

# cuda: two GEMMs of 2*8192*2048*2048 = 69 GFLOP each, fp32 at ~50 TFLOP/s -> ~2.8 ms.
SIZE_PROFILES = {
    "cpu": {"BATCH": 512, "IN_FEATURES": 1024, "OUT_FEATURES": 1024},
    "cuda": {"BATCH": 8192, "IN_FEATURES": 2048, "OUT_FEATURES": 2048},
}


def get_inputs():
    x = torch.randn(BATCH, IN_FEATURES)
    return [x]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
