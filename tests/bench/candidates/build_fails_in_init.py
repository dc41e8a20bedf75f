"""Builds a C++ extension in __init__ under a different, random name each run, with a compiler
flag that does not exist (the compiler fails at once), and does not catch the failure."""
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        print("COMPILING", flush=True)
        self.ext = load_inline(name=f"broken_{os.getpid()}_{os.urandom(3).hex()}", cpp_sources="int f() { return 1; }",
                               extra_cflags=["-fno-such-flag-cudal1"], verbose=False)

    def forward(self, a, b):
        return torch.relu(a @ b)
