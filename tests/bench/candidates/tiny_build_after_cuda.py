"""Written for the GPU: a buffer made with device="cuda" in __init__, the inputs moved with
.cuda() in forward, and only then the tiny C++ library of `tiny_build_in_init` built. A prebuild
that sees no GPU still reaches that build."""
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

_SRC = 'extern "C" int cudal1_tiny() { return 42; }\n'


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.register_buffer("scale", torch.ones(1, device="cuda"))
        self.lib = None

    def forward(self, a, b):
        a, b = a.cuda(), b.to("cuda")
        if self.lib is None:
            folder = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "src")
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, "after_cuda.cpp")
            if not os.path.exists(path):
                with open(path, "w") as f:
                    f.write(_SRC)
            self.lib = load(name="cudal1_tiny_after_cuda", sources=[path], is_python_module=False)
        return torch.relu(a @ b) * self.scale
