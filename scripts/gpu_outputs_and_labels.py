"""On a GPU: nested outputs are read through CUDA IPC and compared leaf by leaf, and
`custom_kernel` is granted for kernels this evaluation built (a Triton kernel, torch.compile's
generated kernels, an inline CUDA extension) through the build records, with Triton's cache
manager set to the recording one. Prints one line per case and a last line "CHECK_OUTPUTS PASS"
or "CHECK_OUTPUTS FAIL (...)". BACKEND=cpu runs the cases that need no GPU (a dry run).

    python3 scripts/gpu_outputs_and_labels.py
"""

import os
import tempfile

from cudal1.bench.evaluator import evaluate
from cudal1.bench.settings import EvalSettings
from cudal1.tasks.task import Task

backend = os.environ.get("BACKEND", "cuda")
settings = EvalSettings.for_backend(backend, rounds=3, cache_dir=tempfile.mkdtemp(prefix="cudal1-outputs-"))
HEADER = "import collections\nimport torch\nimport torch.nn as nn\n"

NESTED = Task(
    level=1,
    problem_id=811,
    name="nested_outputs_gpu",
    source=HEADER
    + """
Parts = collections.namedtuple("Parts", ["lo", "hi"])
class Model(nn.Module):
    def forward(self, a, b):
        y = (a @ b).relu()
        return {"y": y, "parts": Parts(torch.minimum(a, b), torch.maximum(a, b)), "stats": (64, "relu", None)}
def get_inputs():
    return [torch.randn(1024, 1024), torch.randn(1024, 1024)]
def get_init_inputs():
    return []
""",
)
NESTED_HONEST = (
    HEADER
    + """
Parts = collections.namedtuple("Parts", ["lo", "hi"])
class ModelNew(nn.Module):
    def forward(self, a, b):
        return {"parts": Parts(torch.min(a, b), torch.max(a, b)), "y": torch.relu(a @ b), "stats": (64, "relu", None)}
"""
)
# Right only in the rows and columns that printing the tensor shows, every plain value right.
NESTED_CORNERS = (
    HEADER
    + """
Parts = collections.namedtuple("Parts", ["lo", "hi"])
EDGE = [0, 1, 2, 1021, 1022, 1023]
class ModelNew(nn.Module):
    def forward(self, a, b):
        edge = torch.tensor(EDGE, device=a.device)
        y = torch.zeros(1024, 1024, device=a.device)
        y[edge.unsqueeze(1), edge] = (a[edge] @ b[:, edge]).relu()
        return {"y": y, "parts": Parts(torch.minimum(a, b), torch.maximum(a, b)), "stats": (64, "relu", None)}
"""
)

RELU = Task(
    level=1,
    problem_id=812,
    name="relu_gpu",
    source=HEADER
    + """
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(4096, 4096)]
def get_init_inputs():
    return []
""",
)
TRITON = (
    HEADER
    + """
import triton
import triton.language as tl
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
"""
)
COMPILED = (
    HEADER
    + """
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = torch.compile(lambda x: torch.relu(x) * 1.0)
    def forward(self, x):
        return self.f(x)
"""
)
INLINE_CUDA = (
    HEADER
    + '''
from torch.utils.cpp_extension import load_inline
_src = r"""
__global__ void relu_k(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu(torch::Tensor x) {
  auto y = torch::empty_like(x);
  long n = x.numel();
  relu_k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""
_ext = load_inline("cudal1_check_relu", cpp_sources="torch::Tensor relu(torch::Tensor x);", cuda_sources=_src,
                   functions=["relu"], verbose=False)
class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.relu(x.contiguous())
'''
)
PLAIN = (
    HEADER
    + """
class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_min(0.0)
"""
)

cases = [  # (what, task, source, expected status, label that must be there, label that must not)
    ("nested honest", NESTED, NESTED_HONEST, "ok", None, "custom_kernel"),
    ("nested right only where printed", NESTED, NESTED_CORNERS, "incorrect", None, None),
    ("plain pytorch", RELU, PLAIN, "ok", None, "custom_kernel"),
]
if backend == "cuda":
    cases += [
        ("triton kernel", RELU, TRITON, "ok", "custom_kernel", None),
        ("torch.compile", RELU, COMPILED, "ok", "custom_kernel", None),
        ("inline CUDA extension", RELU, INLINE_CUDA, "ok", "custom_kernel", None),
    ]
bad = []
for what, task, source, status, must, must_not in cases:
    r = evaluate(task, source, backend, settings=settings)
    ok = (
        r.status.value == status
        and (must is None or must in r.labels)
        and (must_not is None or must_not not in r.labels)
        and "harness_error" not in r.labels
    )
    speed = f"{r.speedup:.3f}x" if r.speedup is not None else "-"
    print(
        f"{'ok ' if ok else 'BAD'} {what}: {r.status.value} {speed} K={r.calls_per_round} labels={r.labels} "
        f"build_s={r.build_seconds} | {r.message[:160]}",
        flush=True,
    )
    if not ok:
        bad.append(what)
        print(r.log[-1500:])
print("CHECK_OUTPUTS PASS" if not bad else f"CHECK_OUTPUTS FAIL ({', '.join(bad)})")
