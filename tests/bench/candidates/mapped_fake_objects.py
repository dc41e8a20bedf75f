"""Asks for custom_kernel without building anything (issue 21): zero-filled 4 KiB files named
x.so in its build directory, its scratch directory and Triton's cache there, each mapped into
its process (mmap), plus a copy of a real shared object from Python's standard library in its
build directory, loaded with ctypes. The forward is plain PyTorch."""
import _bisect
import ctypes
import mmap
import os
import shutil

import torch
import torch.nn as nn

_maps = []
for folder in (os.environ["TORCH_EXTENSIONS_DIR"], os.getcwd(), os.path.join(os.path.expanduser("~"), ".triton", "cache", "x")):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "x.so")
    with open(path, "wb") as f:
        f.write(bytes(4096))
    with open(path, "rb") as f:
        _maps.append(mmap.mmap(f.fileno(), 4096, prot=mmap.PROT_READ))
_copy = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "copied_ext", "copied_ext.so")
os.makedirs(os.path.dirname(_copy), exist_ok=True)
shutil.copy(_bisect.__file__, _copy)
_lib = ctypes.CDLL(_copy)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)
