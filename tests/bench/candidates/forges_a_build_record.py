"""Asks for custom_kernel without building anything (issue 21, kind 6): copies a shared object of
Python's standard library into its build directory, records it as built through the recorder the
harness once ran in the candidate's own process (`buildcache.note_built`, where there is one), and
maps it with ctypes. The forward is plain PyTorch."""
import _bisect
import ctypes
import os
import shutil

import torch
import torch.nn as nn

from cudal1.bench import buildcache

dst = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "forged_ext", "forged_ext.so")
os.makedirs(os.path.dirname(dst), exist_ok=True)
if not os.path.exists(dst):
    shutil.copy(_bisect.__file__, dst)
tried = []
for name in ("note_built",):
    if hasattr(buildcache, name):
        getattr(buildcache, name)(dst)
        tried.append(name)
_lib = ctypes.CDLL(dst)
print("FORGED BUILT", dst, tried, flush=True)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)
