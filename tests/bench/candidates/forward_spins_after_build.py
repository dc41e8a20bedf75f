"""Builds the tiny C++ library of `tiny_build_in_init` in __init__, then spins forever in forward
when its inputs are not on a GPU (a forward that never finishes without a device)."""
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

_SRC = 'extern "C" int cudal1_tiny() { return 42; }\n'


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        folder = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "src")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "spin.cpp")
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(_SRC)
        self.lib = load(name="cudal1_tiny_spin", sources=[path], is_python_module=False)

    def forward(self, a, b):
        while not a.is_cuda:
            pass
        return torch.relu(a @ b)
