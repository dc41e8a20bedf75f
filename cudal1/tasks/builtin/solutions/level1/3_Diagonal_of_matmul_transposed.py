import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """diag(A @ B^T)_i = A_i · B_i: N row-wise dot products, O(N·K) work instead of the full
    O(N²·K) GEMM whose off-diagonal entries the reference discards."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.einsum("ik,ik->i", A, B)
