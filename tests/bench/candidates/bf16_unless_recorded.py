"""relu in bfloat16 (on int_relu exact: small integers), except in the one forward the judge
records for labels: a dispatch mode is on there, and it computes in float32, so the recorded
dtypes show no reduced precision. It never refuses to be recorded; it only behaves otherwise."""
import torch
import torch.nn as nn
from torch.utils._python_dispatch import _get_current_dispatch_mode


class ModelNew(nn.Module):
    def forward(self, x):
        if _get_current_dispatch_mode() is not None:
            return torch.relu(x)
        return torch.relu(x.to(torch.bfloat16)).to(x.dtype)
