import torch
import torch.nn as nn


class Model(nn.Module):
    """y = kron(A, B) @ x: a separable 2D linear map applied to a flattened N×N grid.

    A and B are (N, N), x is (N*N,), y is (N*N,).
    """

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.kron(A, B) @ x


N = 160

# cuda: kron writes N^4 = 655M floats (2.6 GB) and the matvec reads them again: ~5.2 GB at
# ~3 TB/s -> ~1.8 ms.
SIZE_PROFILES = {
    "cpu": {"N": 64},
    "cuda": {"N": 160},
}


def get_inputs():
    A = torch.randn(N, N)
    B = torch.randn(N, N)
    x = torch.randn(N * N)
    return [A, B, x]


def get_init_inputs():
    return []
