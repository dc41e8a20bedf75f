"""An independent timing of trusted programs in one plain process: `measure`, `measure_isolated`.

This is the yardstick `benchmarks/agreement.py` holds the judge to. It shares nothing with the
judge's measurement (no hosts, no round trips, no sandbox, no guards, no calibration): the task's
reference and each candidate are built in this process and timed the textbook way, as
KernelBench's `time_execution_with_cuda_event` (src/kernelbench/timing.py) does:

- fresh inputs for every call, from the task's own `get_inputs()` under a seed (`seed + round`:
  the programs of one round get equal values in separately made tensors), made on the device
  (`cudal1.bench.inputs.make_inputs`); the time to make them is not measured;
- on CUDA, before each timed call, a buffer of twice the device's L2 size is overwritten and the
  device synchronized (a cold cache, as KernelBench's `clear_l2_cache`); then a CUDA event is
  recorded, the program called, a second event recorded and the device synchronized; the call's
  time is the events' elapsed time. On the CPU, `time.perf_counter_ns` around the call;
- warm-up calls first (torch.compile compiles during them), then `calls` rounds, each calling every
  program once in an order drawn at random per round, all under `torch.no_grad()` as the judge
  runs them;
- each program's time is the median of its calls, and a candidate's ratio is the reference's
  median over the candidate's (a speedup, as `EvalResult.speedup` defines it).

No isolation at all: the code runs with this process's rights and can change its state (global
flags, patched functions, work left on side streams that the end event does not wait for).
Use it for trusted baseline code only (the reference, `cudal1.bench.baselines`), never for a
policy's candidates. `measure_isolated` runs `measure` in a fresh child interpreter (still plain,
not sandboxed, with the evaluator's OpenMP and malloc environment) so that one task's compile caches,
memory or a CUDA fault do not reach the next.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REFERENCE = "Model"
"""The name the task's own reference Model goes by among the measured programs (in `spreads`);
candidates take any other name."""


@dataclasses.dataclass
class InProcessTiming:
    """What `measure` found for one task (times in ms per forward call, medians over `calls`)."""

    task_id: str
    device: str
    calls: int
    """Timed calls per program."""
    reference_ms: float
    candidates_ms: dict[str, float]
    """Median per candidate that built and ran (failed candidates are in `errors` only)."""
    ratios: dict[str, float]
    """reference_ms / candidate ms per candidate (×)."""
    spreads: dict[str, float]
    """Per program (the reference too): (p90 - p10) / median of its calls."""
    max_abs_error: dict[str, float | None]
    """Largest |candidate - reference| over the output tensors of one warm-up input, per candidate
    (None when the outputs are not tensors of matching shapes): a sanity check, not a verdict."""
    errors: dict[str, str] = dataclasses.field(default_factory=dict)
    """Candidates that failed to import, build, compile or run: one line each."""
    compile_cache: dict[str, int] = dataclasses.field(default_factory=dict)
    """Inductor's FX graph cache hits and misses in this measurement ("fxgraph_cache_hit",
    "fxgraph_cache_miss"; empty when nothing was compiled): hits mean the compiled kernels came
    from the build directory `measure_isolated` was given."""
    seconds: float = 0.0
    """Wall time of the whole measurement (building and compiling included)."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "InProcessTiming":
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


# -- pure statistics ----------------------------------------------------------------------------


def round_orders(names: Sequence[str], rounds: int, seed: int) -> list[list[str]]:
    """For each of `rounds` rounds, the order to call the programs `names` in: a random
    permutation per round (`random.Random(seed)`), so no program is always first after the flush
    or always right after another one. Raises ValueError for duplicate names."""
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate program names in {list(names)}")
    rng = random.Random(seed)
    orders = []
    for _ in range(rounds):
        order = list(names)
        rng.shuffle(order)
        orders.append(order)
    return orders


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) of `values`, interpolating linearly between order statistics
    (Hyndman and Fan's definition 7, numpy's default). Raises ValueError when `values` is empty
    or q lies outside [0, 1]."""
    if not values:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must lie in [0, 1], got {q}")
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def spread(times_ms: Sequence[float]) -> float:
    """(p90 - p10) / median of per-call times: how much one call's time varies (0.05 = 5%).
    Raises ValueError when empty; 0.0 when the median is 0."""
    mid = statistics.median(times_ms)
    return (quantile(times_ms, 0.9) - quantile(times_ms, 0.1)) / mid if mid > 0 else 0.0


def median_ratio(reference_ms: Sequence[float], candidate_ms: Sequence[float]) -> float:
    """median(reference) / median(candidate) (×): the candidate's speedup over the reference.
    Raises ValueError when either is empty or the candidate's median is not positive."""
    if not reference_ms or not candidate_ms:
        raise ValueError("a ratio needs times of both programs")
    cand = statistics.median(candidate_ms)
    if cand <= 0:
        raise ValueError(f"candidate median {cand} ms is not positive")
    return statistics.median(reference_ms) / cand


# -- the measurement ----------------------------------------------------------------------------


class _Clock:
    """Times one call on `device` in ms, with an L2 flush before it on CUDA (see the module doc)."""

    def __init__(self, device: str, flush_l2: bool) -> None:
        import torch

        self.torch = torch
        self.cuda = device.startswith("cuda")
        self.flush_buf = None
        if self.cuda:
            dev = torch.device(device)
            # "cuda" alone names the current device; set_device needs an index.
            self.dev = dev if dev.index is not None else torch.device("cuda", torch.cuda.current_device())
            torch.cuda.set_device(self.dev)  # the events record on this device's current stream
            if flush_l2:
                l2 = getattr(torch.cuda.get_device_properties(self.dev), "L2_cache_size", 0) or 64 * 2**20
                self.flush_buf = torch.empty(2 * l2 // 4, dtype=torch.float32, device=self.dev)
            self.start = torch.cuda.Event(enable_timing=True)
            self.end = torch.cuda.Event(enable_timing=True)

    def time(self, fn: Any, args: list[Any]) -> tuple[float, Any]:
        """(ms, output) of one fn(*args)."""
        if not self.cuda:
            t0 = time.perf_counter_ns()
            out = fn(*args)
            return (time.perf_counter_ns() - t0) / 1e6, out
        if self.flush_buf is not None:
            self.flush_buf.fill_(1.0)
        self.torch.cuda.synchronize(self.dev)
        self.start.record()
        out = fn(*args)
        self.end.record()
        self.torch.cuda.synchronize(self.dev)
        return self.start.elapsed_time(self.end), out


def _tensors(x: Any) -> list[Any]:
    import torch

    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors(v)]
    return []


def _max_abs_error(out: Any, ref: Any) -> float | None:
    a, b = _tensors(out), _tensors(ref)
    if not a or len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return None
    return max((x.double() - y.double()).abs().max().item() if x.numel() else 0.0 for x, y in zip(a, b))


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


def measure(
    task: Any,
    sources: Mapping[str, str],
    device: str = "cpu",
    calls: int = 100,
    warmup: int = 3,
    seed: int = 0,
    flush_l2: bool = True,
    profile: str | None = None,
) -> InProcessTiming:
    """Time the task's reference and each candidate source (`{name: source defining ModelNew}`)
    in this process, interleaved, as the module docstring describes; returns their medians (ms)
    and each candidate's ratio reference / candidate (×).

    `task`: a `cudal1.tasks.task.Task`; `device`: "cpu" or "cuda[:i]"; `calls` >= 1 timed calls
    per program (the agreement benchmark uses >= 100); `warmup` untimed calls per program first;
    `seed`: the base seed of the inputs, the call order, and the weights (the generator is seeded
    with it before each constructor, so every program gets the reference's weights when it builds
    the same parameters in the same order); `profile`: the task's size profile (default: "cuda" on
    a CUDA device, else "cpu", as the judge's default). A candidate that fails to import, build
    or run is left out of the timing and reported in `errors`. Runs trusted code without any
    isolation (see the module docstring). Raises ValueError for calls < 1 or a candidate named
    "Model" (`REFERENCE`), and whatever the task's own code raises when its reference cannot be built or
    run.
    """
    import torch

    from cudal1.bench.inputs import make_init_inputs, make_inputs
    from cudal1.tasks.task import load_source_module

    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    if REFERENCE in sources:
        raise ValueError(f"{REFERENCE!r} names the task's own reference; give candidates other names")
    started = time.monotonic()
    profile = profile or ("cuda" if device.startswith("cuda") else "cpu")
    clock = _Clock(device, flush_l2)
    module = task.load_module(profile)
    init = make_init_inputs(module)
    torch.manual_seed(seed)
    models: dict[str, Any] = {REFERENCE: module.Model(*init).to(device)}
    errors: dict[str, str] = {}
    for n, (name, source) in enumerate(sources.items()):
        try:
            cand_module = load_source_module(source, f"cudal1_inprocess_{n}_{task.level}_{task.problem_id}")
            torch.manual_seed(seed)
            models[name] = cand_module.ModelNew(*init).to(device)
        except Exception as exc:  # noqa: BLE001 - a candidate's failure is a result
            errors[name] = f"build: {_one_line(exc)}"
    max_err: dict[str, float | None] = {}
    with torch.no_grad():
        for w in range(max(warmup, 1)):
            args = make_inputs(module, seed + 10**6 + w, device)
            expected = models[REFERENCE](*args)
            for name in [k for k in models if k != REFERENCE]:
                try:
                    out = models[name](*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
                    if w == 0:
                        max_err[name] = _max_abs_error(out, expected)
                except Exception as exc:  # noqa: BLE001 - torch.compile failing is a result
                    errors[name] = f"warm-up: {_one_line(exc)}"
                    del models[name]
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)
        times: dict[str, list[float]] = {name: [] for name in models}
        for i, order in enumerate(round_orders(list(models), calls, seed)):
            for name in order:
                args = make_inputs(module, seed + i, device)
                ms, out = clock.time(models[name], args)
                times[name].append(ms)
                del out, args
    ref = times.pop(REFERENCE)
    counters = sys.modules["torch._dynamo.utils"].counters["inductor"] if "torch._dynamo.utils" in sys.modules else {}
    cache = {k: int(counters[k]) for k in ("fxgraph_cache_hit", "fxgraph_cache_miss") if counters.get(k)}
    return InProcessTiming(
        task_id=task.task_id,
        device=device,
        calls=calls,
        reference_ms=statistics.median(ref),
        candidates_ms={k: statistics.median(v) for k, v in times.items()},
        ratios={k: median_ratio(ref, v) for k, v in times.items()},
        spreads={REFERENCE: spread(ref), **{k: spread(v) for k, v in times.items()}},
        max_abs_error={k: v for k, v in max_err.items() if k in times},
        errors=errors,
        compile_cache=cache,
        seconds=time.monotonic() - started,
    )


def measure_isolated(
    task: Any,
    sources: Mapping[str, str],
    device: str = "cpu",
    timeout_s: float = 600.0,
    build_dir: str | Path | None = None,
    keep_builds: bool = False,
    **kwargs: Any,
) -> InProcessTiming:
    """`measure` in a fresh child interpreter (plain: not sandboxed), so that compile caches,
    memory and CUDA state of one task do not reach the next and a crash ends only the child.

    The child gets the environment the evaluator's processes get (`cudal1.bench.worker.SERVER_ENV`:
    OpenMP threads that sleep soon after a parallel region, glibc malloc that keeps freed memory).
    Its `TORCH_EXTENSIONS_DIR` (where `cudal1.bench.baselines.compile_candidate` keeps
    inductor's and Triton's caches) is a fresh directory, or a copy of `build_dir` when given:
    pass the judge's build directory of the same compile baseline
    (`cudal1.bench.evaluator.extensions_dir`) and the child loads the kernels the judge compiled,
    with the same autotuning choices, instead of compiling (and autotuning) them again; so both
    measure the same code, and what differs is the measurement. The copy keeps the judge's
    directory out of this process's reach. With `keep_builds` the child builds in `build_dir`
    itself (made when missing) and leaves its builds there, so that repeated measurements of the
    same sources (fresh processes, new seeds) compile once; for trusted code only, as all of this
    module. Keyword arguments go to `measure`. Raises ValueError for `keep_builds` without a
    `build_dir`,
    TimeoutError when the child runs past `timeout_s` seconds (it is killed), and RuntimeError
    with the tail of its output when it exits without a result (the reference failed, the
    process crashed)."""
    import shutil

    from cudal1.bench.worker import SERVER_ENV
    from cudal1.tasks.task import Task

    if not isinstance(task, Task):
        raise TypeError("task must be a cudal1.tasks.task.Task")
    if keep_builds and build_dir is None:
        raise ValueError("keep_builds needs a build_dir to keep the builds in")
    with tempfile.TemporaryDirectory(prefix="cudal1-inprocess-") as tmp:
        request, answer = Path(tmp) / "request.json", Path(tmp) / "answer.json"
        request.write_text(json.dumps({"task": task.to_dict(), "sources": dict(sources), "device": device, **kwargs}))
        builds = Path(build_dir) if keep_builds else Path(tmp) / "build"
        if build_dir is not None and Path(build_dir).is_dir() and not keep_builds:
            shutil.copytree(build_dir, builds, symlinks=True, ignore=shutil.ignore_patterns("*.lock"))
        builds.mkdir(parents=True, exist_ok=True)
        # The evaluator's processes run with these OpenMP and glibc malloc settings; without them
        # a CPU call here could take ten times as long on a loaded machine (OpenMP threads spinning
        # for up to 200 ms after each parallel region), a difference that is not the judge's.
        env = dict(
            os.environ,
            **SERVER_ENV,
            PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
            TORCH_EXTENSIONS_DIR=str(builds),
        )
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "cudal1.bench.inprocess", str(request), str(answer)],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired as exc:
            raise TimeoutError(f"in-process measurement of {task.task_id} ran past {timeout_s:.0f} s") from exc
        if proc.returncode != 0 or not answer.exists():
            tail = (proc.stdout + proc.stderr).strip()[-2000:]
            raise RuntimeError(f"in-process measurement of {task.task_id} failed (exit {proc.returncode}):\n{tail}")
        return InProcessTiming.from_dict(json.loads(answer.read_text()))


def _main(argv: list[str]) -> int:
    """Child of `measure_isolated`: read the request JSON, write the InProcessTiming JSON."""
    from cudal1.tasks.task import Task

    request = json.loads(Path(argv[0]).read_text())
    task = Task.from_dict(request.pop("task"))
    result = measure(task, request.pop("sources"), **request)
    Path(argv[1]).write_text(json.dumps(result.to_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
