import torch
import torch.nn as nn


class Model(nn.Module):
    """C = triu(A) @ triu(B): the product of the upper-triangular parts of two square matrices.

    The result is itself upper triangular.
    """

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.triu(A) @ torch.triu(B)


N = 4096

# cuda: 2*N^3 = 137 GFLOP fp32 at ~50 TFLOP/s -> ~2.8 ms.
SIZE_PROFILES = {
    "cpu": {"N": 1024},
    "cuda": {"N": 4096},
}


def get_inputs():
    A = torch.randn(N, N)
    B = torch.randn(N, N)
    return [A, B]


def get_init_inputs():
    return []
