"""Builds the tiny C++ library of `tiny_build_in_init` lazily, in its first forward."""
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

_SRC = 'extern "C" int cudal1_tiny() { return 42; }\n'


def build(name):
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
        self.lib = None

    def forward(self, a, b):
        if self.lib is None:
            self.lib = build("cudal1_tiny_forward")
        return torch.relu(a @ b)
