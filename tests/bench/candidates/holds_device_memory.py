"""Computes x * 2 + 1, but first takes all but __RESERVE_MIB__ MiB of the device's free memory
and holds it (in 256 MiB blocks, then smaller ones), so that another process's next allocation on
the device fails: a reference host that fails then must not look like the harness's failure."""
import torch
import torch.nn as nn

_HELD = []


def _take_all_but(reserve: int) -> None:
    block = 256 << 20
    while block >= 1 << 20:
        free, _ = torch.cuda.mem_get_info()
        if free - block < reserve:
            block //= 2
            continue
        try:
            _HELD.append(torch.empty(block, dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError:
            block //= 2
    print(f"HOLDING {sum(t.numel() for t in _HELD) >> 20} MiB, free {torch.cuda.mem_get_info()[0] >> 20} MiB")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        _take_all_but(__RESERVE_MIB__ << 20)

    def forward(self, x):
        return x * 2.0 + 1.0
