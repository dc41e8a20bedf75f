"""keeps_weight: x*2 and a copy of what the reference returns as the same memory every call (its
buffer `w` or its module's `_TABLE`: the test puts one in place of the upper-case token below); a
candidate returning memory of its own kept that way is refused by the host (the storage of an
earlier call's output)."""
import torch
import torch.nn as nn

_TABLE = torch.arange(65536.0).view(256, 256)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.randn(256, 256))

    def forward(self, x):
        return x * 2, __KEPT__.clone()
