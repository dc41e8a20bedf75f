"""Control for cat_x_colmean."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.cat([x, x.mean(dim=0, keepdim=True)], dim=0)
