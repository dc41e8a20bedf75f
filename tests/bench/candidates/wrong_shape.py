"""Drops the last output column."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)[:, :-1].contiguous()
