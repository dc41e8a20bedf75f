"""col_mean_filled written out: the column means, then one write of the whole output (the
control of aliased_pages_output)."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.mean(dim=0, keepdim=True).expand(x.shape[0], x.shape[1]).contiguous()
