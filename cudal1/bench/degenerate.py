"""The degenerate-task check: is a task's output trivial over the inputs it will be checked on?

A candidate is judged by comparing its output with the reference's on the task's own inputs
(several seeds) and on shifted inputs (floating inputs mapped to x*4-2, where the reference stays
finite). If over all of these the reference output is constant, all zero, empty, the same for
every seed, or equal to one of the inputs, then a wrong candidate (return zeros, return the
input, return a cached tensor) passes: the task is degenerate. So is a task whose inputs do not
change with the seed (fresh inputs are what the evaluator's cache guards rely on), and one whose
reference returns NaN or inf on its own inputs (values there cannot be compared).

A property that holds on the task's own inputs but not on the shifted ones (ReLU of `torch.rand`
inputs is the identity) is not degenerate, because the shifted correctness trials catch the
wrong candidate; it is returned as a note, since it relies on those trials.

`degeneracy` is the pure check (run it on trusted code only: it calls the model); `probe_task` is
the worker entry point the probe (`cudal1.bench.probe.probe_suite`) runs through `cudal1.bench.worker.run_isolated`.
"Equal" means what the evaluator accepts (`cudal1.bench.correctness.compare_values`, same
tolerances): the question is whether a wrong candidate's output would pass, and an output that is
zero within the checker's tolerance lets a zeros candidate pass just as exact zeros do.

Device and dtype: the check runs where the task runs (CPU or GPU). Every constant it compares
with (a zeros or a typical-value candidate, a sample index) is made on the output's device in the
output's dtype, never on torch's default device; a Python number a model returns becomes a CPU
tensor and is moved to the device of whatever it is compared with.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from cudal1.bench.correctness import compare_values, tolerance

from .probe import STAGE_PREFIX

SHIFT_SCALE = 4.0
SHIFT_OFFSET = -2.0
"""Shifted distribution for floating inputs: x * SHIFT_SCALE + SHIFT_OFFSET ([0,1) -> [-2,2)).
The evaluator's first shifted trial (`cudal1.bench.judge.SHIFTS[0]`) uses the same map."""
SAMPLE = 4096
"""Elements compared in the quick rejection test before a full comparison."""


@dataclasses.dataclass
class DegeneracyReport:
    """Result of `check_degeneracy`.

    `reason`: why the task is degenerate, None when it is not. `notes`: properties that hold on the
    task's own inputs only (caught by shifted trials), and facts such as inputs mutated in place.
    `shifted`: "used", or why shifted inputs were not part of the check ("no floating inputs",
    "non-finite output", "raised ...", "not checked").
    """

    reason: str | None
    notes: list[str] = dataclasses.field(default_factory=list)
    shifted: str = "used"
    outputs: list[str] = dataclasses.field(default_factory=list)
    """Shape and dtype of each output tensor (seed 0), e.g. "float32[16, 64]"."""
    forward_ms: list[float] = dataclasses.field(default_factory=list)
    """Wall time of each forward call (ms), own seeds then shifted."""


@dataclasses.dataclass
class _Run:
    """Facts about one forward call (its outputs are not kept, except the first run's)."""

    inputs: list[Any]  # fingerprints of the inputs before the call
    finite: bool
    empty: bool
    constant: str | None  # "zero", "equal", or None
    equals_input: int | None  # index of an input every output tensor equals (same shape), or None
    mutated: list[int]  # inputs the call changed in place
    same_as_first: bool | None = None  # a cached first output would pass here (None: first run)


def degeneracy(
    model_factory: Callable[[], torch.nn.Module],
    get_inputs: Callable[[], Sequence[Any]],
    seeds: Sequence[int] = (0, 1, 2),
) -> str | None:
    """Why the task (`model_factory()` run on `get_inputs()`) is degenerate, or None.

    `model_factory` is called once after `torch.manual_seed(seeds[0])`; `get_inputs` once per seed
    after `torch.manual_seed(seed)`, and once more for the shifted distribution. Needs at least two
    seeds (ValueError). Raises whatever the model or `get_inputs` raise on the task's own inputs,
    and TypeError for outputs that are not tensors, numbers, or lists/tuples/dicts of them.
    """
    return check_degeneracy(model_factory, get_inputs, seeds).reason


def check_degeneracy(
    model_factory: Callable[[], torch.nn.Module],
    get_inputs: Callable[[], Sequence[Any]],
    seeds: Sequence[int] = (0, 1, 2),
    shift: bool = True,
    on_stage: Callable[[str], None] | None = None,
) -> DegeneracyReport:
    """`degeneracy` with the details: see `DegeneracyReport`. `shift=False` checks the task's own
    inputs only. `on_stage` is called with "model", "inputs seed=S", "forward seed=S", "inputs
    shifted", "forward shifted" before each step (to tell where a killed probe hung). Holds at
    most the first output, one output and one input set in memory."""
    stage = on_stage or (lambda name: None)
    if len(seeds) < 2:
        raise ValueError("need at least two seeds to tell whether the output depends on the input")
    stage("model")
    torch.manual_seed(seeds[0])
    model = model_factory()
    report = DegeneracyReport(reason=None)
    runs: list[_Run] = []
    first: list[torch.Tensor] = []
    shifted: _Run | None = None
    with torch.no_grad():
        for seed in seeds:
            stage(f"inputs seed={seed}")
            torch.manual_seed(seed)
            inputs = list(get_inputs())
            stage(f"forward seed={seed}")
            outs, run = _run(model, inputs, report, first if runs else None)
            if not runs:
                first = outs
                report.outputs = [f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}" for t in outs]
            runs.append(run)
            del outs, inputs
        if not shift:
            report.shifted = "not checked"
        else:
            stage("inputs shifted")
            torch.manual_seed(seeds[0])
            inputs = list(get_inputs())
            if not any(_is_float(x) for x in inputs):
                report.shifted = "no floating inputs"
            else:
                _shift(inputs)
                stage("forward shifted")
                try:
                    _, run = _run(model, inputs, report, first)
                except Exception as e:  # noqa: BLE001 - a reference may reject out-of-range inputs
                    report.shifted = f"raised {error_line(e)}"
                else:
                    if run.finite:
                        shifted = run
                    else:
                        report.shifted = "non-finite output"
            del inputs
    report.reason = _judge(runs, shifted, seeds, report)
    for i in sorted({i for r in runs for i in r.mutated}):
        report.notes.append(f"the reference changes input {i} in place")
    return report


def _judge(runs: list[_Run], shifted: _Run | None, seeds: Sequence[int], report: DegeneracyReport) -> str | None:
    """Combine per-run facts: a property makes the task degenerate when it holds on every own seed
    and on the shifted run where that run is usable; own-seeds-only properties become notes."""
    where = f"on seeds {list(seeds)}" + (" and shifted inputs" if shifted else f" (shifted inputs: {report.shifted})")
    bad = [s for s, r in zip(seeds, runs) if not r.finite]
    if bad:
        return f"non-finite output (nan or inf) on seed(s) {bad}"
    if all(r.empty for r in runs):
        return "empty output (no elements)"
    own_zero = all(r.constant == "zero" for r in runs)
    own_constant = all(r.constant is not None for r in runs)
    if own_zero and (shifted is None or shifted.constant == "zero"):
        return f"output all zero {where}"
    if own_constant and (shifted is None or shifted.constant is not None):
        return f"output constant (all elements equal) {where}"
    if own_constant:
        report.notes.append(
            f"output {'all zero' if own_zero else 'constant'} on the task's own inputs, not on shifted inputs"
        )
    indices = {r.equals_input for r in runs}
    if len(indices) == 1 and None not in indices:
        (i,) = indices
        if shifted is None or shifted.equals_input == i:
            return f"output equals input {i} {where}"
        report.notes.append(f"output equals input {i} on the task's own inputs, not on shifted inputs")
    if all(r.inputs == runs[0].inputs for r in runs[1:]):
        # Fresh inputs per trial and per timed call are what the cache and correctness guards rely on.
        return f"inputs identical for seeds {list(seeds)}: get_inputs ignores the torch seed"
    if all(r.same_as_first for r in runs[1:]):
        if shifted is None or shifted.same_as_first:
            return f"output identical across seeds {list(seeds)}" + (" and on shifted inputs" if shifted else "")
        report.notes.append("output identical across seeds, differs on shifted inputs")
    return None


def _run(
    model: torch.nn.Module, inputs: list[Any], report: DegeneracyReport, first: list[torch.Tensor] | None
) -> tuple[list[torch.Tensor], _Run]:
    """One forward on `inputs`; facts about its output (compared with `first`, the first run's)."""
    before = [_fingerprint(x) for x in inputs]
    start = time.perf_counter()
    out = model(*inputs)
    outs = _flatten(out)
    _synchronize(outs)
    report.forward_ms.append(round((time.perf_counter() - start) * 1e3, 3))
    mutated = [i for i, x in enumerate(inputs) if _fingerprint(x) != before[i]]
    finite = all(_finite(t) for t in outs)
    run = _Run(before, finite, all(t.numel() == 0 for t in outs), None, None, mutated)
    if not finite or not outs or run.empty:
        return outs, run
    scales = [_scale(t) for t in outs]
    if all(t.numel() > 1 for t in outs):
        if all(_passes(_filled(t, 0), t, sc) for t, sc in zip(outs, scales)):
            run.constant = "zero"
        elif all(_passes(_filled(t, _typical(t)), t, sc) for t, sc in zip(outs, scales)):
            run.constant = "equal"
    for i, x in enumerate(inputs):
        if i not in mutated and isinstance(x, torch.Tensor) and all(_passes(x, t, sc) for t, sc in zip(outs, scales)):
            run.equals_input = i
            break
    if first is not None:
        run.same_as_first = len(first) == len(outs) and all(_passes(a, t, sc) for a, t, sc in zip(first, outs, scales))
    return outs, run


def error_line(e: BaseException, limit: int = 300) -> str:
    """ "<Type>: <first line of the message>", at most `limit` characters."""
    message = str(e).strip()
    line = f"{type(e).__name__}: {message.splitlines()[0]}" if message else type(e).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _synchronize(outs: list[torch.Tensor]) -> None:
    """Wait for the work that made `outs` on each GPU they are on (so forward_ms is the forward's)."""
    for device in {t.device for t in outs if t.device.type == "cuda"}:
        torch.cuda.synchronize(device)


def _flatten(out: Any) -> list[torch.Tensor]:
    """Output tensors in order (numbers become 0-d CPU tensors; None and strings, which say
    nothing about the work, are skipped)."""
    if isinstance(out, torch.Tensor):
        return [out.detach()]
    if isinstance(out, bool | int | float | complex):
        return [torch.tensor(out, device="cpu")]
    if out is None or isinstance(out, str):
        return []
    if isinstance(out, dict):
        return [t for v in out.values() for t in _flatten(v)]
    if isinstance(out, list | tuple):
        return [t for v in out for t in _flatten(v)]
    raise TypeError(f"unsupported output type {type(out).__name__}")


def _is_float(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()


def _passes(candidate: torch.Tensor, reference: torch.Tensor, scale: float) -> bool:
    """Would the evaluator accept `candidate` as `reference` (values only; shapes must match)?

    `scale` is `_scale(reference)`. A strided sample is checked first with the evaluator's rule,
    which rejects most pairs without the full comparison's float64 copies. A candidate on another
    device (a number's CPU tensor beside a GPU output) is compared on the reference's device.
    """
    if candidate.shape != reference.shape:
        return False
    if candidate.device != reference.device:
        candidate = candidate.to(reference.device)
    if not (reference.is_floating_point() or reference.is_complex()):  # integers, bool: exact
        exact = not (candidate.is_floating_point() or candidate.is_complex())
        return exact and bool(torch.equal(candidate.to(reference.dtype), reference))
    if reference.numel() > 2 * SAMPLE and not reference.is_complex() and not candidate.is_complex():
        rtol, atol = tolerance(reference.dtype, None, None)
        r, c = _sample(reference).double(), _sample(candidate).double()
        if bool(((c - r).abs() > atol * scale + rtol * r.abs()).any()):
            return False
    return compare_values(candidate, reference)[0]


def _shift(inputs: list[Any]) -> None:
    """Map each floating input x to x * SHIFT_SCALE + SHIFT_OFFSET in the list, one at a time
    (so at most one input exists twice; the originals are not changed: a task may reuse them)."""
    for i in range(len(inputs)):
        if _is_float(inputs[i]):
            inputs[i] = inputs[i].mul(SHIFT_SCALE).add_(SHIFT_OFFSET)


def _scale(reference: torch.Tensor) -> float:
    """max(1, mean |reference|): the evaluator's atol multiplier (finite references only).
    float32/float64: a fused 1-norm, no |reference| copy (a large output's copy is GiBs on a GPU)."""
    if not reference.is_floating_point() or reference.numel() == 0:
        return 1.0
    if reference.dtype in (torch.float32, torch.float64):
        return max(1.0, float(torch.linalg.vector_norm(reference, 1)) / reference.numel())
    return max(1.0, float(reference.abs().mean(dtype=torch.float32)))


def _finite(t: torch.Tensor) -> bool:
    """No NaN or inf in `t` (min and max propagate NaN, so one reduction pass suffices)."""
    if t.is_complex():
        t = torch.view_as_real(t)
    if not t.is_floating_point() or t.numel() == 0:
        return True
    lo, hi = torch.aminmax(t)
    return bool(torch.isfinite(lo) & torch.isfinite(hi))


def _sample(t: torch.Tensor, n: int = SAMPLE) -> torch.Tensor:
    """About `n` elements of `t` at evenly spaced flat positions (no copy of `t`, any strides)."""
    if t.dim() == 0:
        return t.reshape(1)
    flat = _sample_index(t.numel(), n, str(t.device))
    if t.is_contiguous():
        return t.view(-1)[flat]
    if all(stride == 0 for stride in t.stride()):  # an expanded scalar (see `_filled`)
        return t[(0,) * t.dim()].expand(len(flat))
    return t[torch.unravel_index(flat, t.shape)]


@functools.lru_cache(maxsize=64)
def _sample_index(numel: int, n: int, device: str) -> torch.Tensor:
    """int64 flat positions 0, step, 2*step, ... (at most `n`, step numel // n) on `device`."""
    return torch.arange(0, numel, max(1, numel // n), device=device)[:n]


def _filled(like: torch.Tensor, value: complex) -> torch.Tensor:
    """A constant tensor shaped like `like`, on its device and in its dtype, without allocating
    it (an expanded scalar)."""
    return torch.full((), value, dtype=like.dtype, device=like.device).expand(like.shape)


def _typical(t: torch.Tensor) -> float | int | bool:
    """The value a constant-output candidate would return: the median of a sample (the first
    element for integers)."""
    if t.is_floating_point():
        return float(_sample(t).double().median())
    if t.is_complex():
        return complex(t.reshape(-1)[0])
    return t.reshape(-1)[0].item()


def _fingerprint(x: Any) -> Any:
    """A cheap summary that changes when a tensor's values change (its sum and a strided sample);
    non-tensors are their own summary."""
    if not isinstance(x, torch.Tensor):
        return repr(x)
    t = x.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    return (
        tuple(t.shape),
        str(t.dtype),
        repr(float(t.sum())) if t.numel() else "",
        repr(_sample(t, 64).tolist()) if t.numel() else "",
    )


OUT_OF_MEMORY_MARKS = (
    "out of memory",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_ALLOC_FAILED",
    "CUFFT_ALLOC_FAILED",
    "cudaErrorMemoryAllocation",
)
"""Error texts that mean the device ran out of memory (torch.OutOfMemoryError's message and the
libraries' own codes): a failure that depends on what else held the device, not on the task."""


def is_out_of_memory(error: BaseException | str) -> bool:
    """True when `error` (an exception or its text) says the device or the host ran out of memory."""
    if isinstance(error, MemoryError | torch.OutOfMemoryError):
        return True
    text = str(error)
    return any(mark.lower() in text.lower() for mark in OUT_OF_MEMORY_MARKS)


def estimate_device_mib(module: Any) -> float | None:
    """Device memory (MiB) the check of a task (an imported task module) needs, estimated on the
    meta device (nothing allocated, no CUDA): parameters and buffers, twice the inputs (shifted
    inputs are made beside them), five times the outputs (the first run's output, the current
    one, and a full comparison's three temporaries of its size). Intermediate tensors of the
    forward are not counted; an output the meta device cannot compute counts as large as the
    inputs, and so does that of a model with recurrent layers (their meta forward runs step by
    step in Python: half a minute for KernelBench's 6-layer LSTM). None when the model or the
    inputs cannot be built on the meta device.
    """
    try:
        with torch.device("meta"), torch.no_grad():
            inputs = list(module.get_inputs())
            model = module.Model(*module.get_init_inputs())
            in_bytes = sum(x.nbytes for x in inputs if isinstance(x, torch.Tensor))
            out_bytes = in_bytes
            if not any(isinstance(m, torch.nn.RNNBase) for m in model.modules()):
                try:
                    out_bytes = sum(t.nbytes for t in _flatten(model(*inputs)))
                except Exception:  # noqa: BLE001 - an operator without a meta kernel, data-dependent code
                    pass
            held = sum(t.nbytes for t in [*model.parameters(), *model.buffers()])
    except Exception:  # noqa: BLE001 - no estimate: the caller's default budget applies
        return None
    return (held + 2 * in_bytes + 5 * out_bytes) / 2**20


def probe_task(payload: dict[str, Any]) -> dict[str, Any]:
    """Worker entry point (`run_isolated("cudal1.bench.degenerate:probe_task", payload)`).

    payload: {"task": Task.to_dict(), "profile": str | None, "seeds": [int, ...], "device": str
    (default "cpu"), "budget_mib": float | None}. Imports the task at the profile, builds the
    model and the inputs on the device (inputs made there directly, as the evaluator makes them),
    and runs `check_degeneracy`. With a `budget_mib` (the parent gives one on a GPU), a task whose
    `estimate_device_mib` is larger stops before touching the device and returns {"ok": False,
    "deferred": True, "need_mib": estimate, "stage": "sizing", "error": ...}, for the caller to
    run it again with room for it. Returns
    {"ok": True, "degenerate": reason | None, "notes": [...], "shifted": str, "outputs": [...],
    "forward_ms": [...], "seconds": {"import": s, "check": s}} or {"ok": False, "stage": where
    it failed ("import", "model", "forward seed=0", ...), "error": "<Type>: <first line of the
    message>", "out_of_memory": bool (`is_out_of_memory`)}. On a GPU both also carry
    "device_peak_mib": the most device memory torch's allocator held at once (MiB; the CUDA
    context's own few hundred MiB are not in it) and "estimate_mib" (`estimate_device_mib`). Prints "cudal1-probe-stage: <stage>" lines to
    stdout so that a parent that kills a hung worker can tell where it hung.
    """
    from cudal1.tasks.task import Task

    task = Task.from_dict(payload["task"])
    seeds = list(payload.get("seeds") or (0, 1, 2))
    device = payload.get("device") or "cpu"
    cuda = device.startswith("cuda")
    seconds: dict[str, float] = {}
    stage = ["import"]

    def mark(name: str) -> None:
        stage[0] = name
        print(f"{STAGE_PREFIX}{name}", flush=True)

    def peak() -> dict[str, float]:
        if not (cuda and torch.cuda.is_initialized()):
            return {}
        return {"device_peak_mib": round(torch.cuda.max_memory_reserved(device) / 2**20, 1)}

    sizing: dict[str, float] = {}
    try:
        mark("import")
        start = time.perf_counter()
        module = task.load_module(payload.get("profile"))
        seconds["import"] = round(time.perf_counter() - start, 3)
        budget = payload.get("budget_mib")
        if cuda or budget is not None:
            mark("sizing")
            need = estimate_device_mib(module)
            if need is not None:
                sizing["estimate_mib"] = round(need, 1)
                if budget is not None and need > budget:
                    return {
                        "ok": False,
                        "deferred": True,
                        "need_mib": round(need, 1),
                        "stage": "sizing",
                        "error": f"needs about {need:.0f} MiB of device memory, {budget:.0f} MiB granted",
                    }
        if cuda:
            torch.cuda.set_device(device)  # cuBLAS handles and bare torch.randn(device="cuda") go there
        start = time.perf_counter()

        def factory() -> torch.nn.Module:
            return module.Model(*module.get_init_inputs()).to(device)

        def inputs() -> list[Any]:
            with torch.device(device):
                return [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]

        report = check_degeneracy(factory, inputs, seeds, on_stage=mark)
        seconds["check"] = round(time.perf_counter() - start, 3)
    except Exception as e:  # noqa: BLE001 - every failure is reported as data
        return {
            "ok": False,
            "stage": stage[0],
            "error": error_line(e),
            "out_of_memory": is_out_of_memory(e),
            **peak(),
            **sizing,
        }
    mark("done")
    return {
        "ok": True,
        "degenerate": report.reason,
        "notes": report.notes,
        "shifted": report.shifted,
        "outputs": report.outputs,
        "forward_ms": report.forward_ms,
        "seconds": seconds,
        **peak(),
        **sizing,
    }


def device_memory(payload: dict[str, Any]) -> dict[str, Any]:
    """Worker entry point (`run_isolated("cudal1.bench.degenerate:device_memory", {"device":
    "cuda:0"})`), so that the asking process never makes a CUDA context of its own.

    Returns {"free_mib": float, "total_mib": float} of the device as the driver reports them now
    (`torch.cuda.mem_get_info`: free counts every process's use), and "name". Raises what torch
    raises for a device that cannot be used (no GPU, bad index).
    """
    device = torch.device(payload["device"])
    free, total = torch.cuda.mem_get_info(device)
    return {
        "free_mib": round(free / 2**20, 1),
        "total_mib": round(total / 2**20, 1),
        "name": torch.cuda.get_device_name(device),
    }
