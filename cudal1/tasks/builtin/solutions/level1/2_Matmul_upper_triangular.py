import torch
import torch.nn as nn

# Blocks at or below this size are multiplied as plain GEMMs.
_LEAF = 512


def _upper_product(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> None:
    """Write A @ B into C for upper-triangular square views A, B (C a view of the same size).

    With A = [[A11, A12], [0, A22]] and B likewise, the product is
    [[A11 B11, A11 B12 + A12 B22], [0, A22 B22]]: the zero block is never multiplied and the
    diagonal blocks recurse, so each level halves the work of the full 2n^3-FLOP product.
    """
    n = A.shape[0]
    if n <= _LEAF:
        torch.mm(A, B, out=C)
        return
    h = n // 2
    _upper_product(A[:h, :h], B[:h, :h], C[:h, :h])
    _upper_product(A[h:, h:], B[h:, h:], C[h:, h:])
    torch.mm(A[:h, :h], B[:h, h:], out=C[:h, h:])
    C[:h, h:].addmm_(A[:h, h:], B[h:, h:])
    C[h:, :h].zero_()


class ModelNew(nn.Module):
    """triu(A) @ triu(B) by recursive 2×2 blocking that skips the products with the zero block
    (half the FLOPs per recursion level; the triangular masks are taken once, as in the
    reference)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        C = torch.empty(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
        _upper_product(torch.triu(A), torch.triu(B), C)
        return C
