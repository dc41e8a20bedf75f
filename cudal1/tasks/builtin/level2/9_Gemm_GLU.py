import torch
import torch.nn as nn


class Model(nn.Module):
    """Gated linear unit: one linear layer to 2·out features, split into value and gate halves,
    value * sigmoid(gate)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, 2 * out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        value, gate = self.linear(x).chunk(2, dim=-1)
        return value * torch.sigmoid(gate)


BATCH = 32768
IN_FEATURES = 256
OUT_FEATURES = 4096

# cuda: GEMM 2*32768*256*8192 = 137 GFLOP fp32 (~2.8 ms at ~50 TFLOP/s) plus sigmoid and
# multiply over 134M gates (~2.7 GB, ~0.9 ms) -> ~3.7 ms.
SIZE_PROFILES = {
    "cpu": {"BATCH": 2048, "IN_FEATURES": 64, "OUT_FEATURES": 2048},
    "cuda": {"BATCH": 32768, "IN_FEATURES": 256, "OUT_FEATURES": 4096},
}


def get_inputs():
    x = torch.randn(BATCH, IN_FEATURES)
    return [x]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
