"""The degenerate-task check on CUDA outputs gives the CPU's verdicts (several dtypes), and an
evaluation of a constant-output shortcut on a degenerate task is labelled `degenerate_task`
(before the check made its constants on the outputs' device it raised on every CUDA tensor, and
the shortcut was paid). Prints one line per case and a last line "CHECK_CUDA PASS" or "CHECK_CUDA
FAIL (...)". BACKEND=cpu runs the same on the CPU (a dry run).

    python3 scripts/gpu_degenerate_check.py
"""

import os

import torch
from torch import nn

from cudal1.bench.evaluator import evaluate
from cudal1.bench.settings import EvalSettings
from cudal1.bench.degenerate import check_degeneracy
from cudal1.tasks.task import Task


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


cases = [
    (torch.float32, lambda x: x * 0, "output all zero"),
    (torch.float16, lambda x: torch.full_like(x, 3.0), "output constant"),
    (torch.bfloat16, lambda x: x.clone(), "output equals input 0"),
    (torch.float32, lambda x: torch.softmax(x, -1), None),
    (torch.float16, lambda x: x * 2, None),
    (torch.int64, lambda x: x + 1, None),
    (torch.int64, lambda x: x * 0, "output all zero"),
    (torch.complex64, lambda x: x * 2, None),
    (torch.float32, lambda x: (x.sum(), 1.5), None),
]
bad = 0
backend = os.environ.get("BACKEND", "cuda")
for dtype, fn, expected in cases:
    for device in ("cpu", backend):

        def inputs():
            with torch.device(device):
                x = torch.randint(-5, 6, (256, 192)) if dtype == torch.int64 else torch.randn(256, 192)
                return [x.to(dtype)]

        try:
            reason = check_degeneracy(lambda: Fn(fn).to(device), inputs).reason
        except Exception as e:  # noqa: BLE001
            reason = f"RAISED {type(e).__name__}: {e}"
        ok = (reason is None) if expected is None else bool(reason and reason.startswith(expected))
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {device:4s} {str(dtype):15s} expected {expected!r}: got {reason!r}")

task = Task(
    level=1,
    problem_id=803,
    name="max_minus_max",
    source="""import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        m = x.max(dim=1, keepdim=True).values
        return m - m
def get_inputs():
    return [torch.randn(256, 512)]
def get_init_inputs():
    return []
""",
)
shortcut = """import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros(x.shape[0], 1, device=x.device)
"""
import tempfile

r = evaluate(task, shortcut, backend, settings=EvalSettings.for_backend(backend, cache_dir=tempfile.mkdtemp()))
ok = r.status.value == "ok" and "degenerate_task" in r.labels and "degenerate_check_failed" not in r.labels
bad += not ok
print(
    f"{'ok ' if ok else 'BAD'} evaluation of a constant shortcut on a degenerate task ({backend}): status {r.status.value}, "
    f"labels {r.labels}, task_degenerate {r.task_degenerate!r}"
)
print("CHECK_CUDA", "PASS" if bad == 0 else f"FAIL ({bad} bad)")
