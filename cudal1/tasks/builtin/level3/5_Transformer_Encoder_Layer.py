import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """A pre-norm transformer encoder layer written out: x + MHA(LN(x)), then x + FFN(LN(x)) with
    a GELU feed-forward network. (B, S, E) -> (B, S, E)."""

    def __init__(self, embed_dim: int, num_heads: int, ffn_dim: int):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.norm1 = nn.LayerNorm(embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.norm2 = nn.LayerNorm(embed_dim)
        self.fc1 = nn.Linear(embed_dim, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, embed_dim)
        self.act = nn.GELU()

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        b, s, _ = t.shape
        return t.view(b, s, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, e = x.shape
        h = self.norm1(x)
        q, k, v = self._split(self.q_proj(h)), self._split(self.k_proj(h)), self._split(self.v_proj(h))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, s, e)
        x = x + self.out_proj(ctx)
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


BATCH = 8
SEQ = 2048
EMBED_DIM = 512
NUM_HEADS = 8
FFN_DIM = 2048

# cuda: projections 4 * 2*8*2048*512^2 = 34 GFLOP, attention 2 * 2*8*8*2048^2*64 = 34 GFLOP, FFN
# 2 * 2*8*2048*512*2048 = 69 GFLOP: 137 GFLOP fp32 (~2.8 ms at ~50 TFLOP/s) plus softmax over
# 268M scores and the norms/residuals (~4 GB, ~1.5 ms) -> ~4.5 ms.
SIZE_PROFILES = {
    "cpu": {"BATCH": 2, "SEQ": 1024, "EMBED_DIM": 256, "NUM_HEADS": 4, "FFN_DIM": 1024},
    "cuda": {"BATCH": 8, "SEQ": 2048, "EMBED_DIM": 512, "NUM_HEADS": 8, "FFN_DIM": 2048},
}


def get_inputs():
    x = torch.randn(BATCH, SEQ, EMBED_DIM)
    return [x]


def get_init_inputs():
    return [EMBED_DIM, NUM_HEADS, FFN_DIM]
