"""Honest baseline candidates made from a task: the reference itself, and `torch.compile` of it.

Both are ordinary candidate sources (files defining `ModelNew`), evaluated by the judge like any
other candidate, so the report can say how a solution compares with what PyTorch gives for free,
and `benchmarks/agreement.py` can check the judge against an independent measurement on code
whose speed is known in advance (the reference as its own candidate is 1.00x by construction).

- `reference_candidate`: the task file with `ModelNew = Model` appended
  (`cudal1.tasks.task.reference_as_candidate`).
- `compile_candidate`: the task file plus a `ModelNew(Model)` whose forward is `Model.forward`
  under `torch.compile` (inductor). Subclassing keeps the constructor, the parameter names and,
  since the judge seeds the generator before each constructor, the weights identical to the
  reference's; only the forward is compiled, as KernelBench's torch.compile baseline compiles the
  reference module (its `scripts/generate_baseline_time.py`, inductor, mode "default").

Mode "default" (not "reduce-overhead" or "max-autotune"): it is the configuration KernelBench
reports as its compile baseline; it launches fresh kernels on the current stream every call,
while "reduce-overhead" (and max-autotune's CUDA graphs) replays CUDA graphs whose outputs live
in buffers the next replay overwrites, which an honest judge rejects ("output_changed_later")
and which would make the baseline a CUDA-graph baseline; and max-autotune's GEMM search takes
minutes per task, longer than an evaluation's time limit.

Where compilation writes: under the evaluator, inductor's cache (`TORCHINDUCTOR_CACHE_DIR`,
generated code, compiled C++ and Triton kernels, the FX graph cache) and Triton's cache
(`TRITON_CACHE_DIR`) go under the candidate's build directory, as for every candidate
(`cudal1.bench.evaluator`'s build environment), so a second evaluation of the same baseline on the same architecture reuses the kernels; without it
(a plain process), under the temporary directory. Inductor compiles in the candidate's own
process (`compile_threads = 1`): no pool of compile workers outlives the forward, and the sandbox's
process limit is not spent on them.

A compile failure (dynamo or inductor raising, a compile running past the evaluation's time
limit, outputs that do not match) comes back from the judge as an ordinary failed result; the
baseline's failure is then labelled with `label_baseline` so reports count it as such.
"""

from __future__ import annotations

from cudal1.bench.result import EvalResult
from cudal1.tasks.task import reference_as_candidate

REFERENCE = "reference"
TORCH_COMPILE = "torch_compile"
BASELINES = (REFERENCE, TORCH_COMPILE)
"""The honest baselines, by name."""
COMPILE_MODE = "default"
BASELINE_FAILED = "baseline_failed"
"""Label on a baseline's result that is not ok (with "baseline:<name>" on every baseline's result)."""

_COMPILE_TAIL = '''

# -- cudal1 baseline: torch.compile of the reference (cudal1.bench.baselines) -------------------
import torch as _cudal1_torch
import torch._inductor.config as _cudal1_inductor_config

_cudal1_inductor_config.compile_threads = 1  # compile in this process: no worker pool outlives a call


class ModelNew(Model):
    """The reference Model, its forward compiled by torch.compile (inductor, mode {mode!r})."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._cudal1_compiled = _cudal1_torch.compile(super().forward, mode={mode!r})

    def forward(self, *args, **kwargs):
        return self._cudal1_compiled(*args, **kwargs)
'''


def reference_candidate(task_source: str) -> str:
    """The reference itself as a candidate source (`ModelNew = Model`): 1.00x by construction."""
    return reference_as_candidate(task_source)


def compile_candidate(task_source: str, mode: str = COMPILE_MODE) -> str:
    """A candidate source whose `ModelNew` is the task's `Model` with its forward under
    `torch.compile(mode=mode)` (see the module docstring for why mode "default").

    The task file is kept whole (its helpers and constants stay defined) and the class is added
    after it; nothing compiles until the first forward. Raises ValueError for a mode that
    torch.compile does not know of ("default", "reduce-overhead", "max-autotune",
    "max-autotune-no-cudagraphs").
    """
    if mode not in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        raise ValueError(f"unknown torch.compile mode {mode!r}")
    return task_source.rstrip() + "\n" + _COMPILE_TAIL.replace("{mode!r}", repr(mode))


def baseline_source(name: str, task_source: str) -> str:
    """The candidate source of baseline `name` ("reference" or "torch_compile") for a task.
    Raises ValueError for another name."""
    if name == REFERENCE:
        return reference_candidate(task_source)
    if name == TORCH_COMPILE:
        return compile_candidate(task_source)
    raise ValueError(f"unknown baseline {name!r}: expected one of {BASELINES}")


def label_baseline(result: EvalResult, name: str) -> EvalResult:
    """Mark `result` (the judge's result of baseline `name`) as a baseline's, in place, and return it.

    Every baseline result gets "baseline:<name>"; one whose status is not ok also gets
    `BASELINE_FAILED` ("baseline_failed"), so a report counts, e.g., a torch.compile that raised,
    ran out of time or gave wrong outputs as a failure of the compile baseline and never as a
    speed. The status and message the judge gave are kept.
    """
    for label in (f"baseline:{name}", *([BASELINE_FAILED] if not result.correct else [])):
        if label not in result.labels:
            result.labels.append(label)
    return result
