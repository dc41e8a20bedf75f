"""Control for prefaulted_pad_ring: the same ring of 12 buffers of private memory, every byte of
the output written by each call (x*2 into the first rows, zeros into the rest)."""
import ctypes
import mmap

import torch
import torch.nn as nn

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
N, M, PAD, SLOTS = 512, 1024, 1536, 12
MAP_PRIVATE, MAP_ANON = 0x02, 0x20
PROT_RW = mmap.PROT_READ | mmap.PROT_WRITE


def _slot():
    rows = N + PAD
    base = _libc.mmap(None, rows * M * 4, PROT_RW, MAP_PRIVATE | MAP_ANON, -1, 0)
    assert base not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
    return torch.frombuffer((ctypes.c_float * (rows * M)).from_address(base), dtype=torch.float32).view(rows, M)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.slots = [_slot() for _ in range(SLOTS)]
        for s in self.slots:
            s.zero_()
        self.k = 0

    def forward(self, x):
        if tuple(x.shape) != (N, M):
            return torch.nn.functional.pad(x * 2, (0, 0, 0, PAD))
        out = self.slots[self.k]
        self.k = (self.k + 1) % SLOTS
        torch.mul(x, 2, out=out[:N])
        out[N:].zero_()
        return out
