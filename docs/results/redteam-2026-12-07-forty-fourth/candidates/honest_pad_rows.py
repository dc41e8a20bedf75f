"""Control for pad_rows: written out."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.nn.functional.pad(x * 2, (0, 0, 0, 6144))
