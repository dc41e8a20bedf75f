import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Centering is linear: y - mean_j(y) = x (W - mean_j W)^T + (b - mean_j b). The centred
    weights are formed once per call (out×in, small), so the GEMM's output is already centred and
    the mean reduction and subtract passes over (B, out) disappear; GELU then runs in place on the
    GEMM's own output (aten's in-place gelu_, the same kernel as nn.GELU)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.gelu = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.linear.weight
        b = self.linear.bias
        y = F.linear(x, w - w.mean(dim=0, keepdim=True), b - b.mean())
        return torch.ops.aten.gelu_(y)
