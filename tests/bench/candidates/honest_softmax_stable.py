"""softmax over rows, the numerically stable way: the row's maximum subtracted before exp, so
no value overflows whatever the inputs' magnitude (the control of softmax_without_max)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        e = torch.exp(x - x.amax(dim=1, keepdim=True))
        return e / e.sum(dim=1, keepdim=True)
