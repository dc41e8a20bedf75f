"""pad_rows (x*2 then zero rows): a ring of SLOTS buffers, each a private mapping of its own region
of a memfd whose bytes are zeros (written once, at init). The parent's pattern lands in private
copy-on-write pages; each call drops them (madvise MADV_DONTNEED on the zero rows), so the zero
rows read as the file's page-cache pages again -- bytes written at init, served again -- and the
call writes only x*2 (a quarter of the output). No file offset is mapped twice. (The forty-fourth
session's second red team; paid `ok` before the pagemap read refused unwritten file pages.)"""

import ctypes
import mmap
import os

import torch
import torch.nn as nn

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
N, M, PAD, SLOTS = 512, 1024, 1536, __SLOTS__
ROWS = N + PAD
SIZE = ROWS * M * 4
TOP = N * M * 4
MAP_PRIVATE, MAP_ANON = 0x02, 0x20
PROT_RW = mmap.PROT_READ | mmap.PROT_WRITE
MADV_DONTNEED = 4

_fd = os.memfd_create("zeros")
_zero = bytes(1 << 20)
for _ in range(SIZE * SLOTS // len(_zero)):
    os.write(_fd, _zero)


def _slot(i):
    base = _libc.mmap(None, SIZE, PROT_RW, MAP_PRIVATE, _fd, i * SIZE)
    assert base not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
    t = torch.frombuffer((ctypes.c_float * (ROWS * M)).from_address(base), dtype=torch.float32).view(ROWS, M)
    return base, t


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.slots = [_slot(i) for i in range(SLOTS)]
        self.k = 0

    def forward(self, x):
        if tuple(x.shape) != (N, M):
            return torch.nn.functional.pad(x * 2, (0, 0, 0, PAD))
        base, out = self.slots[self.k]
        self.k = (self.k + 1) % SLOTS
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls == SLOTS + 1:
            print("RING WRAPPED", flush=True)
        assert _libc.madvise(base + TOP, SIZE - TOP, MADV_DONTNEED) == 0
        torch.mul(x, 2, out=out[:N])
        return out
