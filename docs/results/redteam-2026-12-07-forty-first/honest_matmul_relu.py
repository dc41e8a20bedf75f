"""Honest PyTorch rewrite of matmul_relu: different operators (mm + in-place clamp on its own result)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b).clamp_min_(0.0)
