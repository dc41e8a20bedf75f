"""Honest: splits the rows over a persistent thread pool and waits for both halves before returning."""
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn as nn

_pool = ThreadPoolExecutor(max_workers=2)


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.empty(a.shape[0], b.shape[1])
        half = a.shape[0] // 2

        def rows(lo, hi):
            torch.mm(a[lo:hi], b, out=out[lo:hi])
            out[lo:hi].clamp_min_(0.0)

        for f in [_pool.submit(rows, 0, half), _pool.submit(rows, half, a.shape[0])]:
            f.result()
        return out
