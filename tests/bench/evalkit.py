"""Tiny tasks and a one-call evaluation helper for the guard and containment tests.

The tasks are written here (not taken from the builtin suite) so that each evaluation takes about
a second on a 2-core machine and so that each guard has a task it can bite on. Candidates live
as files in `candidates/`; a token such as `__MARKER__` in a candidate is replaced by the test
(paths and ports only known at run time).
"""

from __future__ import annotations

import importlib.util
import statistics
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from cudal1.bench.evaluator import evaluate
from cudal1.bench.result import EvalResult
from cudal1.bench.settings import EvalSettings
from cudal1.tasks.task import Task

CANDIDATES = Path(__file__).resolve().parent / "candidates"

_HEADER = "import torch\nimport torch.nn as nn\n\n"

TASKS: dict[str, str] = {
    # The workhorse: an operator chain that is cheap here and has no shortcut.
    "matmul_relu": _HEADER
    + """
class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b).relu()

N = 64

def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]

def get_init_inputs():
    return []
""",
    # Constructor arguments a candidate could drop or hard-code.
    "scale_bias": _HEADER
    + """
class Model(nn.Module):
    def __init__(self, scale, bias):
        super().__init__()
        self.scale, self.bias = scale, bias

    def forward(self, x):
        return x * self.scale + self.bias

def get_inputs():
    return [torch.randn(64, 64)]

def get_init_inputs():
    return [3.0, 0.5]
""",
    # The identity on its nominal inputs [0, 1): only the shifted trials tell clamp from copy.
    "clamp01": _HEADER
    + """
class Model(nn.Module):
    def forward(self, x):
        return torch.clamp(x, 0.0, 1.0)

def get_inputs():
    return [torch.rand(64, 64)]

def get_init_inputs():
    return []
""",
    # Small integers in float32: exact in bfloat16, so a bf16 rewrite is correct (and labelled).
    "int_relu": _HEADER
    + """
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randint(-8, 8, (64, 64)).float()]

def get_init_inputs():
    return []
""",
    # A relu on normal inputs: float16 rounding (2^-11 relative) is within float32's tolerance, and
    # changes the bits.
    "relu": _HEADER
    + """
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(64, 64)]

def get_init_inputs():
    return []
""",
    # A reference that refuses to run under global flags (or input dtypes) other than those of its
    # first call. The reference runs in the judge, which no candidate code reaches; were a flag the
    # candidate set to reach it, this reference would raise (invalid_task).
    "flags_probe": _HEADER
    + """
_first = None

def _state(a, b):
    return (torch.get_num_threads(), torch.get_default_dtype(), torch.get_float32_matmul_precision(),
            torch.are_deterministic_algorithms_enabled(), torch.is_grad_enabled(), a.dtype, b.dtype)

class Model(nn.Module):
    def forward(self, a, b):
        global _first
        now = _state(a, b)
        _first = _first or now
        if now != _first:
            raise RuntimeError(f"reference ran under {now}, its first call under {_first}")
        return torch.matmul(a, b).relu()

def get_inputs():
    return [torch.randn(64, 64), torch.randn(64, 64)]

def get_init_inputs():
    return []
""",
    # A nested output: a dict holding a tensor, a namedtuple of tensors and a tuple of plain values.
    # Printed, the 64x64 tensor shows only its 36 corner elements.
    "nested_outputs": _HEADER
    + """import collections

Parts = collections.namedtuple("Parts", ["lo", "hi"])

class Model(nn.Module):
    def forward(self, a, b):
        y = torch.matmul(a, b).relu()
        return {"y": y, "parts": Parts(torch.minimum(a, b), torch.maximum(a, b)),
                "stats": (y.mean().item(), 64, "relu", None, True)}

def get_inputs():
    return [torch.randn(64, 64), torch.randn(64, 64)]

def get_init_inputs():
    return []
""",
    # An output holding an object the checker has no rule for: the task cannot be judged.
    "opaque_output": _HEADER
    + """
class Box:
    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return "Box(...)"

class Model(nn.Module):
    def forward(self, x):
        return {"y": x * 2.0, "box": Box(x.sum())}

def get_inputs():
    return [torch.randn(64, 64)]

def get_init_inputs():
    return []
""",
}


def task(name: str) -> Task:
    """The tiny task `name` (a key of TASKS) as a Task record with no size profiles."""
    return Task(level=1, problem_id=1, name=name, source=TASKS[name])


def inline_task(problem_id: int, name: str, body: str) -> Task:
    """A level-1 Task whose source is the torch imports and `body` (a `Model`, `get_inputs`,
    `get_init_inputs`), for the red-team tests' own tasks."""
    return Task(level=1, problem_id=problem_id, name=name, source=_HEADER + body)


def sin_chain(problem_id: int, name: str, shape: str) -> Task:
    """48 small elementwise operators (16 rounds of sin, scale, add) on one randn input of `shape`
    (e.g. "16, 256"): a call is mostly per-operator overhead."""
    return inline_task(
        problem_id,
        name,
        f"""
class Model(nn.Module):
    def forward(self, x):
        y = x
        for _ in range(16):
            y = torch.sin(y) * 0.5 + y
        return y

def get_inputs():
    return [torch.randn({shape})]

def get_init_inputs():
    return []
""",
    )


def matmul_relu(problem_id: int, name: str, n: int) -> Task:
    """relu(A @ B) on two randn n x n inputs."""
    return inline_task(
        problem_id,
        name,
        f"""
class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b).relu()

def get_inputs():
    return [torch.randn({n}, {n}), torch.randn({n}, {n})]

def get_init_inputs():
    return []
""",
    )


MATMUL_512 = matmul_relu(905, "matmul_512", 512)
"""matmul then relu on 512x512 (a few ms a call on the CPU): long enough that what a round trip
costs besides the forwards is small against the work."""

SIN_CHAIN = sin_chain(904, "sin_chain", "16, 256")
"""The red-team tests' task 904: computing several calls' inputs stacked costs about what one
call does."""

SIN_CHAIN_WIDE = sin_chain(909, "sin_chain_wide", "16, 1024")
"""SIN_CHAIN on 16x1024: each operator still runs on one core (below PyTorch's grain size), and is
long enough that two threads running two calls at once gain (1.7x for 8 calls on this machine)."""

SOFTMAX = inline_task(
    901,
    "softmax_rows",
    """
class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)

def get_inputs():
    return [torch.randn(16, 4096)]

def get_init_inputs():
    return []
""",
)
"""A row softmax over 4096 columns (the red-team tests' task 901)."""

TANH = inline_task(
    902,
    "tanh",
    """
class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x)

def get_inputs():
    return [torch.randn(64, 1024)]

def get_init_inputs():
    return []
""",
)
"""An elementwise tanh (the red-team tests' task 902)."""


def candidate(name: str, **tokens: object) -> str:
    """Source of `candidates/<name>.py` with each `__KEY__` token replaced by str(value)."""
    text = (CANDIDATES / f"{name}.py").read_text()
    for key, value in tokens.items():
        text = text.replace(f"__{key.upper()}__", str(value))
    return text


def benchmark(name: str) -> ModuleType:
    """The script `benchmarks/<name>.py` loaded as a module (the folder is not a package), so that
    a test runs its functions on the records it makes."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TIMING_ONLY = dict(correctness_trials=1, shifted_trials=0, wide_trials=0)
"""Settings for tests that compare timings only: one correctness trial an evaluation (the trials
are other tests'; they took 0.36-0.41 s of an honest matmul evaluation's 2.7-3.1 s)."""


def settings(cache_dir: Path, **overrides: object) -> EvalSettings:
    """CPU settings small enough for tests: default correctness trials (5 + 2 shifted), 2 rounds
    of 2 timed calls, a 60 s wall limit. The build cache goes to `cache_dir`."""
    base: dict[str, object] = dict(rounds=2, calls_per_round=2, wall_timeout_s=60.0, cache_dir=str(cache_dir))
    base.update(overrides)
    return EvalSettings.for_backend("cpu", **base)


def run(task_name: str, source: str, cache_dir: Path, **overrides: object) -> EvalResult:
    """evaluate() one candidate source against a tiny task on the CPU backend."""
    return evaluate(task(task_name), source, "cpu", settings=settings(cache_dir, **overrides))


def describe(r: EvalResult) -> str:
    """One-paragraph summary for assertion messages: status, kind, labels, message, log tail."""
    kind = r.hack_kind.value if r.hack_kind else None
    return (
        f"status={r.status.value} hack_kind={kind} labels={r.labels}\nmessage: {r.message}\nlog tail:\n{r.log[-1500:]}"
    )


def held_to_honest(
    evaluate_series: Callable[[], list[EvalResult]],
    bound: Callable[[float, float], bool],
    first: int = 3,
    most: int = 6,
) -> tuple[bool, list[list[EvalResult]]]:
    """Whether shortcut candidates gain no more than `bound` allows over an honest one, deciding
    sequentially on a noisy machine.

    `evaluate_series()` runs one series, honest first: [honest, shortcut 1, shortcut 2, ...]. At
    least `first` series run; while some shortcut's median speedup (×) fails `bound(shortcut_x,
    honest_x)` against the honest median, one more series runs, up to `most`. Honest evaluations
    of one code on a loaded 2-core CI machine spread over 0.40-1.39x (one CI run: 0.99, 0.68,
    0.62), so three series decide only where the medians are far apart; a shortcut that gains for
    real fails at six as it did at three. Returns (held, the series run)."""
    series: list[list[EvalResult]] = []
    while True:
        series.append(evaluate_series())
        if len(series) < first:
            continue
        honest_x = statistics.median(s[0].speedup or 0.0 for s in series)
        held = all(
            bound(statistics.median(s[i].speedup or 0.0 for s in series), honest_x) for i in range(1, len(series[0]))
        )
        if held or len(series) >= most:
            return held, series
