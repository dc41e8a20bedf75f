import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """torch's fused GLU kernel: value * sigmoid(gate) in one pass over the GEMM output, with one
    output buffer, instead of a sigmoid pass and a multiply pass with a buffer each."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, 2 * out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.glu(self.linear(x), dim=-1)
