"""Asks for 40 TB in one allocation."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.empty(10**13)
