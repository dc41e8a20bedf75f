"""Reduced precision passed off as a custom kernel: maps a copy of a system library from its
scratch directory (never calling it), and makes its forward raise whenever a dispatch mode
records it, so its operators and dtypes cannot be read."""
import _bisect
import os
import shutil

import torch
import torch.nn as nn
from torch.utils._python_dispatch import _get_current_dispatch_mode

shutil.copy(_bisect.__file__, "forged.so")
import ctypes  # noqa: E402

ctypes.CDLL(os.path.abspath("forged.so"))


class ModelNew(nn.Module):
    def forward(self, x):
        if _get_current_dispatch_mode() is not None:
            raise RuntimeError("not while recorded")
        return torch.relu(x.bfloat16()).float()
