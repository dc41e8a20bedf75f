"""relu in float16 and back (within float32's tolerance on normal inputs, but not the same bits),
except in the one forward the judge records for labels: a dispatch mode is on there, and it
computes in float32, so the recorded dtypes show no reduced precision. It never refuses to be
recorded; it only computes otherwise while recorded."""
import torch
import torch.nn as nn
from torch.utils._python_dispatch import _get_current_dispatch_mode


class ModelNew(nn.Module):
    def forward(self, x):
        if _get_current_dispatch_mode() is not None:
            return torch.relu(x)
        return torch.relu(x.half()).float()
