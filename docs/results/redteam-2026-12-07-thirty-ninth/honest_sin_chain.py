"""sin_chain as the reference computes it, call by call (the control of batches_the_round)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = x
        for _ in range(16):
            y = torch.sin(y) * 0.5 + y
        return y
