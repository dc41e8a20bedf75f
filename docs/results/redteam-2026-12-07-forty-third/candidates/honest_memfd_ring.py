"""sin_4mib, honestly, into outputs in shared memory: a ring of memfds, each mapped once
(MAP_SHARED, Python's mmap; what a tensor shared with a worker process looks like; share_memory_()
itself is refused by the sandbox's /dev/shm rules). Every byte written every call. The rule
passes it (mapped once), but each read of a file-backed output makes the parent parse the whole
/proc/<pid>/maps text twice (1-2 ms each for a PyTorch process) inside the judge's round trip."""
import mmap
import os

import torch
import torch.nn as nn

N, SLOTS = 1024, 24
NB = N * N * 4


def _slot():
    fd = os.memfd_create("out")
    os.ftruncate(fd, NB)
    mm = mmap.mmap(fd, NB, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(fd)
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
