"""matmul then relu, right in the correctness trials, then in the first timed call a TypeError
that reads like a wrong signature with a 16 MB message (more than the wire's largest frame), or
(__KIND__ = "runtime") a RuntimeError as large: what it raises travels in the host's answer."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, a, b):
        self.calls += 1
        if self.calls > 7:
            filler = "x" * (16 << 20)
            if "__KIND__" == "runtime":
                raise RuntimeError("bad " + filler)
            raise TypeError("forward() takes 2 positional arguments but 3 were given " + filler)
        return torch.matmul(a, b).relu()
