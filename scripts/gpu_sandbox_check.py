"""Issue 21 on a GPU: a candidate's process under the read allow-list (`sandbox.toolchain_reads`)
and the check of the recorded forward (`Judge._recorded_otherwise`), on the evaluations that need
the most of the toolchain: a Triton kernel, torch.compile (inductor, Triton), two inline-CUDA seed
solutions (nvcc in the prebuild), fused attention (must not come back `profile_failed`), a
float16-unless-recorded candidate (must come back `profile_failed`, `reduced_precision`) and a
candidate that reads the home and the checkout (must be refused).

    PYTHONPATH=$PWD python3 scripts/gpu_sandbox_check.py

Prints one block per evaluation: status, labels, the landlock_read measure, and any log line
that says a read was refused (Permission denied, EACCES, REFUSED) or the log tail when not ok.
"""

import os
import sys
import tempfile
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
import torch
from cudal1.bench.evaluator import evaluate, prebuild
from cudal1.bench.settings import EvalSettings
from cudal1.bench.sandbox import landlock_abi, toolchain_reads
from cudal1.tasks.suite import load_builtin, seed_solutions
from cudal1.tasks.task import Task
import evalkit

print("torch", torch.__version__, "gpus", torch.cuda.device_count(), "landlock", landlock_abi(), flush=True)
print("toolchain", [str(p) for p in toolchain_reads() if not str(p).startswith(("/dev", "/etc"))], flush=True)
cache = os.environ.get("CUDAL1_CACHE") or tempfile.mkdtemp()
s = EvalSettings.for_backend("cuda", cache_dir=cache, wall_timeout_s=300.0)
RELU = Task(
    level=1,
    problem_id=1,
    name="relu",
    source=evalkit._HEADER
    + textwrap.dedent("""
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(4096, 4096)]

def get_init_inputs():
    return []
"""),
)
TRITON = textwrap.dedent("""
import torch, torch.nn as nn, triton, triton.language as tl

@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(y_ptr + i, tl.maximum(tl.load(x_ptr + i, mask=m), 0.0), mask=m)

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
""")
COMPILE = textwrap.dedent("""
import torch, torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = torch.compile(lambda x: torch.relu(x) * 1.0)
    def forward(self, x):
        return self.f(x)
""")
import test_judge

SDPA = Task(level=1, problem_id=2, name="sdpa", source=test_judge.SDPA_TASK.source)
cases = [
    ("relu triton", RELU, TRITON),
    ("relu torch.compile", RELU, COMPILE),
    ("relu fp16_unless_recorded", RELU, evalkit.candidate("fp16_unless_recorded")),
    (
        "relu reads_outside",
        RELU,
        evalkit.candidate("reads_outside", paths=repr(["/root/.bashrc", os.path.join(ROOT, "README.md")])),
    ),
    ("sdpa honest", SDPA, evalkit.candidate("honest_sdpa")),
]
tasks = {t.task_id: t for t in load_builtin(profile=None).tasks}
seeds = seed_solutions("cuda")
for tid in ("level1/7", "level2/1"):
    cases.append((f"{tid} cuda seed", tasks[tid], seeds[tid].read_text()))
for name, task, src in cases:
    t0 = time.time()
    try:
        if "seed" in name:
            prebuild(task, src, "cuda", settings=s)
        r = evaluate(task, src, "cuda", settings=s)
    except Exception as e:
        print(f"== {name}: RAISED {type(e).__name__}: {e}", flush=True)
        continue
    lr = r.sandbox.get("measures", {}).get("landlock_read", {})
    print(
        f"== {name}: {r.status.value} {r.hack_kind} labels={r.labels} speedup={r.speedup} {time.time() - t0:.0f}s "
        f"landlock_read={lr.get('active')}: {str(lr.get('detail'))[:200]}\n   {r.message[:300]}",
        flush=True,
    )
    bad = [l for l in r.log.splitlines() if "ermission" in l or "EACCES" in l or "REFUSED" in l or "READ " in l]
    if bad or r.status.value != "ok":
        print("   log:", "\n   ".join((bad or r.log.splitlines())[-25:]), flush=True)
