"""Loads a shared object from its own build directory only in its first forward (as a candidate
that builds its extension lazily would): a copy of a small module from Python's standard library,
placed where the evaluator builds this candidate's extensions. No build made it: no
custom_kernel."""
import _bisect
import ctypes
import os
import shutil

import torch
import torch.nn as nn

_lib = None


class ModelNew(nn.Module):
    def forward(self, a, b):
        global _lib
        if _lib is None:
            src = _bisect.__file__
            dst = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "lazy_ext.so")
            if not os.path.exists(dst):
                shutil.copy(src, dst)
            _lib = ctypes.CDLL(dst)
        return torch.relu(a @ b)
