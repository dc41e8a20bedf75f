"""Control for cat_x_2x: written out."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.cat([x, x * 2], dim=0)
