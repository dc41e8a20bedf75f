"""Tasks for the forty-third red team."""
import sys
sys.path.insert(0, "/tmp/rt44/tests/bench")
import evalkit

CAT_X_2X = evalkit.inline_task(
    971,
    "cat_x_2x",
    """
class Model(nn.Module):
    def forward(self, x):
        return torch.cat([x, x * 2], dim=0)

def get_inputs():
    return [torch.randn(2048, 2048)]

def get_init_inputs():
    return []
""",
)
"""The output's first half is the input (16 MiB), its second half x*2 (16 MiB)."""

PAD_ROWS = evalkit.inline_task(
    972,
    "pad_rows",
    """
class Model(nn.Module):
    def forward(self, x):
        return torch.nn.functional.pad(x * 2, (0, 0, 0, 6144))

def get_inputs():
    return [torch.randn(2048, 2048)]

def get_init_inputs():
    return []
""",
)
"""x*2 (16 MiB) followed by 48 MiB of zeros."""

SIN_4M = evalkit.inline_task(
    973,
    "sin_4mib",
    """
class Model(nn.Module):
    def forward(self, x):
        return torch.sin(x)

def get_inputs():
    return [torch.randn(1024, 1024)]

def get_init_inputs():
    return []
""",
)
"""sin over 1 Mi floats (4 MiB in and out)."""

CAT_X_MEAN = evalkit.inline_task(
    974,
    "cat_x_colmean",
    """
class Model(nn.Module):
    def forward(self, x):
        return torch.cat([x, x.mean(dim=0, keepdim=True)], dim=0)

def get_inputs():
    return [torch.randn(2048, 2048)]

def get_init_inputs():
    return []
""",
)
"""The input (16 MiB) with its column means appended as one more row (8 KiB)."""

Y_TWICE = evalkit.inline_task(
    975,
    "y_and_copy",
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
"""Two outputs with equal values, in memory of their own (16 MiB each)."""

PAD_BIG = evalkit.inline_task(
    976,
    "pad_rows_big",
    """
class Model(nn.Module):
    def forward(self, x):
        return torch.nn.functional.pad(x * 2, (0, 0, 0, 64512))

def get_inputs():
    return [torch.randn(1024, 1024)]

def get_init_inputs():
    return []
""",
)
"""x*2 (4 MiB) followed by 252 MiB of zero rows."""
