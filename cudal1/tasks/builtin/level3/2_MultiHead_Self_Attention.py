import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """Multi-head self-attention written out: separate Q, K, V projections, per-head scaled
    dot-product attention with an explicit softmax, then the output projection. (B, S, E) -> (B, S, E)."""

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        b, s, _ = t.shape
        return t.view(b, s, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, e = x.shape
        q = self._split(self.q_proj(x))
        k = self._split(self.k_proj(x))
        v = self._split(self.v_proj(x))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        weights = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(weights, v).transpose(1, 2).reshape(b, s, e)
        return self.out_proj(ctx)


BATCH = 16
SEQ = 2048
EMBED_DIM = 512
NUM_HEADS = 8

# cuda: projections 4 * 2*16*2048*512*512 = 69 GFLOP, attention 2 * 2*16*8*2048^2*64 = 69 GFLOP,
# fp32 at ~50 TFLOP/s (~2.8 ms), plus scale and softmax over 537M scores (~6 GB, ~2 ms) -> ~5 ms.
SIZE_PROFILES = {
    "cpu": {"BATCH": 2, "SEQ": 1024, "EMBED_DIM": 256, "NUM_HEADS": 4},
    "cuda": {"BATCH": 16, "SEQ": 2048, "EMBED_DIM": 512, "NUM_HEADS": 8},
}


def get_inputs():
    x = torch.randn(BATCH, SEQ, EMBED_DIM)
    return [x]


def get_init_inputs():
    return [EMBED_DIM, NUM_HEADS]
