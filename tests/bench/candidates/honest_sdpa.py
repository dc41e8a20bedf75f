"""Honest: the reference's own attention call."""
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)
