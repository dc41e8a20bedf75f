"""The reference's own operators (matmul, relu), plus a trivial C library built through the build
service and mapped, never called: `custom_kernel` is evidence of a build, so it must not hide
that the reference's operators do all the work (`calls_reference_ops`)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

load_inline(name="trivial", cpp_sources="int f() { return 0; }", no_implicit_headers=True, is_python_module=False)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b).relu()
