"""Control of honest_memfd_ring.py: the same ring through Python mmap, but private anonymous
memory (mmap.mmap(-1, ..., MAP_PRIVATE)): the rule settles it by PROCMAP_QUERY alone."""
import mmap
import os

import torch
import torch.nn as nn

N, SLOTS = 1024, 24
NB = N * N * 4


def _slot():
    mm = mmap.mmap(-1, NB, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE)
    return torch.frombuffer(mm, dtype=torch.float32).view(N, N)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.slots = [_slot() for _ in range(SLOTS)]
        for s in self.slots:
            s.zero_()
        self.k = 0

    def forward(self, x):
        if tuple(x.shape) != (N, N):
            return torch.sin(x)
        out = self.slots[self.k]
        self.k = (self.k + 1) % SLOTS
        torch.sin(x, out=out)
        return out
