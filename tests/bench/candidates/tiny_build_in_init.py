"""Builds a tiny C++ library in __init__ with cpp_extension.load (plain C++, no torch headers: it
compiles in about a second) and computes relu(a @ b) with PyTorch. Only a prebuild that constructs
the model meets this build; the library's path is kept, so the evaluation's log shows whether it
was compiled there."""
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

_SRC = 'extern "C" int cudal1_tiny() { return 42; }\n'


def build(name):
    # A source file at a stable path in the build directory: ninja then finds the build up to date.
    folder = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "src")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name + ".cpp")
    if not os.path.exists(path) or open(path).read() != _SRC:
        with open(path, "w") as f:
            f.write(_SRC)
    return load(name=name, sources=[path], is_python_module=False, verbose=True)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.lib = build("cudal1_tiny_init")

    def forward(self, a, b):
        return torch.relu(a @ b)
