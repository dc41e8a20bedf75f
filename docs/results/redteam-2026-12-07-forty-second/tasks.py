"""Tasks for the red-team scripts."""
import sys
sys.path.insert(0, "/work/main/tests/bench")
import evalkit

AFFINE_16M = evalkit.inline_task(
    951,
    "affine_16mib",
    """
class Model(nn.Module):
    def forward(self, x):
        return x * 2 + 1

def get_inputs():
    return [torch.randn(2048, 2048)]

def get_init_inputs():
    return []
""",
)
"""x*2+1 over 4 Mi floats (16 MiB in, 16 MiB out): the judge's read of each output and the
host's mapping of each input set cost about what the forward does."""

SIN_16M = evalkit.inline_task(
    952,
    "sin_16mib",
    """
class Model(nn.Module):
    def forward(self, x):
        return torch.sin(x)

def get_inputs():
    return [torch.randn(2048, 2048)]

def get_init_inputs():
    return []
""",
)
"""sin over 4 Mi floats (16 MiB in and out): compute-bound enough that two threads halve it, while
the judge's hand-over of each call (reading 16 MiB, sending the next slot) is longer than half of it."""

MATMUL_1024 = evalkit.inline_task(
    953,
    "matmul_1024",
    """
class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b).relu()

def get_inputs():
    return [torch.randn(1024, 1024), torch.randn(1024, 1024)]

def get_init_inputs():
    return []
""",
)

COL_MEAN_FILLED = evalkit.inline_task(
    961,
    "col_mean_filled",
    """
class Model(nn.Module):
    def forward(self, x):
        return torch.ones_like(x) * x.mean(dim=0, keepdim=True)

def get_inputs():
    return [torch.randn(256, 16384)]

def get_init_inputs():
    return []
""",
)
"""Every row of the output is the column means (64 KiB a row, 16 MiB out): rows identical and
page-aligned, so one row's pages mapped 256 times make a contiguous output that repeats memory
physically, not in its strides."""

REPEAT_4 = evalkit.inline_task(
    962,
    "repeat_4",
    """
class Model(nn.Module):
    def forward(self, x):
        return torch.sin(x).repeat(4, 1)

def get_inputs():
    return [torch.randn(1024, 1024)]

def get_init_inputs():
    return []
""",
)
"""sin(x) tiled 4 times (4 MiB in, 16 MiB out): the output's four quarters are identical and page-aligned."""

SIN_TWICE = evalkit.inline_task(
    963,
    "sin_twice",
    """
class Model(nn.Module):
    def forward(self, x):
        y = torch.sin(x)
        return y, y.clone()

def get_inputs():
    return [torch.randn(2048, 2048)]

def get_init_inputs():
    return []
""",
)
"""Two separate outputs with the same values (16 MiB each)."""
