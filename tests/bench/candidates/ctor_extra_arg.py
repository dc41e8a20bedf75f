"""ModelNew wants a constructor argument the task does not give (its own hyperparameter)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, block_size):
        super().__init__()
        self.block_size = block_size

    def forward(self, a, b):
        return torch.relu(a @ b)
