import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """Scaled dot-product attention written out: softmax(Q K^T / sqrt(d)) V over (B, H, S, d)."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        weights = torch.softmax(scores, dim=-1)
        return torch.matmul(weights, v)


BATCH = 32
HEADS = 16
SEQ = 1024
HEAD_DIM = 64

# cuda: two batched GEMMs of 2*32*16*1024*1024*64 = 69 GFLOP each, fp32 (~2.8 ms), plus
# scale and softmax over 537M scores (~6 GB, ~2 ms) -> ~5 ms.
SIZE_PROFILES = {
    "cpu": {"BATCH": 2, "HEADS": 8, "SEQ": 512, "HEAD_DIM": 64},
    "cuda": {"BATCH": 32, "HEADS": 16, "SEQ": 1024, "HEAD_DIM": 64},
}


def get_inputs():
    q = torch.randn(BATCH, HEADS, SEQ, HEAD_DIM)
    k = torch.randn(BATCH, HEADS, SEQ, HEAD_DIM)
    v = torch.randn(BATCH, HEADS, SEQ, HEAD_DIM)
    return [q, k, v]


def get_init_inputs():
    return []
