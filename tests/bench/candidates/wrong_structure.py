"""Returns a one-element tuple where the reference returns a tensor."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return (torch.relu(a @ b),)
