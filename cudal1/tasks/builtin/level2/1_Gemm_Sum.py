import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer whose outputs are summed per row: (B, in) -> (B, 1)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).sum(dim=1, keepdim=True)


BATCH = 8192
IN_FEATURES = 4096
OUT_FEATURES = 4096

# cuda: GEMM 2*8192*4096*4096 = 275 GFLOP fp32 at ~50 TFLOP/s -> ~5.5 ms.
SIZE_PROFILES = {
    "cpu": {"BATCH": 512, "IN_FEATURES": 1024, "OUT_FEATURES": 1024},
    "cuda": {"BATCH": 8192, "IN_FEATURES": 4096, "OUT_FEATURES": 4096},
}


def get_inputs():
    x = torch.randn(BATCH, IN_FEATURES)
    return [x]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
