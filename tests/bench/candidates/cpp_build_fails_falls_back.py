"""Tries to build a C++ extension that does not compile, catches the error and falls back to
PyTorch (the pattern that cost 16-63 s of compiling in every evaluation on an H200 host)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

try:
    _ext = load_inline(name="broken_ext", cpp_sources="torch::Tensor f(torch::Tensor x) { return x +; }", functions=["f"],
                       verbose=False)
except RuntimeError as _e:
    print("BUILD FAILED, FALLING BACK", flush=True)
    _ext = None


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)
