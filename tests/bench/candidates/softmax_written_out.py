"""softmax over rows written out: the row's max subtracted, exp, the row's sum, divided: exact,
rounding otherwise than torch.softmax."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        e = torch.exp(x - x.max(dim=1, keepdim=True).values)
        return e / e.sum(dim=1, keepdim=True)
