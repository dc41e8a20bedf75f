"""Evaluate many candidates: match solution files to tasks, build in parallel, time one at a time.

Builds (compilers: CPU-bound, parallel-safe) run in a thread pool, each in the evaluator's
isolated build worker (`evaluator.prebuild`, which constructs the model and runs one forward
without a device, so builds made in __init__ or the first forward are done too). Timed
evaluations run strictly one at a time per device, because two timings sharing cores or a GPU
measure each other. On CUDA builds overlap timing (that is what makes throughput), and the host's
cores are split (`cudal1.bench.cores.CoreSplit`): each evaluation at a time gets a slot of cores
that no compiler runs on, and builds get the rest. On the CPU backend, or on a host too small to
split, the builds finish before the first timing starts (`overlap=False`): there the timed code
runs on the cores a compiler would take.

Results go to an append-only JSONL file, one line per result, flushed as soon as it is known,
so a crash or Ctrl-C loses nothing and `--resume` continues where it stopped.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import re
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from cudal1.bench.result import EvalResult
from cudal1.bench.settings import EvalSettings

_LEVEL_DIR = re.compile(r"^level(\d+)$")
_SOLUTION_FILE = re.compile(r"^(\d+)_.*\.py$")


@dataclasses.dataclass
class SolutionMatch:
    """Solution files matched to task ids, and the files that matched none (with why)."""

    matched: dict[str, Path]
    """task id ("level1/12") -> solution file."""
    unmatched: list[tuple[Path, str]]
    """(file, reason) for every .py file that was not used."""


def match_solutions(directory: Path, task_ids: Iterable[str]) -> SolutionMatch:
    """Match `directory/**/level<L>/<id>_*.py` files to the suite's task ids.

    A file outside that layout, one whose id is not in the suite, and every file after the first
    (in sorted path order) for the same task are reported in `unmatched`. Raises
    NotADirectoryError if `directory` is not a directory.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise NotADirectoryError(f"solutions directory {str(directory)!r} does not exist or is not a directory")
    known = set(task_ids)
    matched: dict[str, Path] = {}
    unmatched: list[tuple[Path, str]] = []
    for path in sorted(directory.rglob("*.py")):
        if "__pycache__" in path.parts or path.name == "__init__.py":
            continue
        level = _LEVEL_DIR.match(path.parent.name)
        problem = _SOLUTION_FILE.match(path.name)
        if not (level and problem):
            unmatched.append((path, "not laid out as level<L>/<id>_<Name>.py"))
            continue
        task_id = f"level{int(level.group(1))}/{int(problem.group(1))}"
        if task_id not in known:
            unmatched.append((path, f"no task {task_id} in the suite"))
        elif task_id in matched:
            unmatched.append((path, f"another solution for {task_id} comes first: {matched[task_id].name}"))
        else:
            matched[task_id] = path
    return SolutionMatch(matched, unmatched)


def read_results(path: Path) -> tuple[dict[str, dict[str, Any]], int]:
    """Records of a results JSONL by task id (a later line replaces an earlier one), and the
    number of lines that did not parse (e.g. the last line of a run killed mid-write).
    A missing file reads as empty."""
    records: dict[str, dict[str, Any]] = {}
    bad = 0
    if not Path(path).exists():
        return records, 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                records[record["task_id"]] = record
            except (json.JSONDecodeError, KeyError, TypeError):
                bad += 1
    return records, bad


class ResultWriter:
    """Appends one JSON line per result and makes it durable before returning (thread-safe)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # A run killed mid-line leaves no trailing newline: start on a fresh line.
        if self.path.exists() and self.path.stat().st_size > 0:
            with open(self.path, "rb") as f:
                f.seek(-1, os.SEEK_END)
                needs_newline = f.read(1) != b"\n"
            if needs_newline:
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write("\n")
        self._lock = threading.Lock()

    def write(self, result: EvalResult, **extra: Any) -> None:
        """Append `result.to_dict()` plus `extra` keys (e.g. solution=path)."""
        line = json.dumps({**result.to_dict(), **extra}, sort_keys=True)
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


@dataclasses.dataclass
class SuiteJob:
    """One candidate to evaluate: the task, the candidate source, and where it came from."""

    task: Any  # cudal1.tasks.task.Task
    source: str
    solution: Path


def default_build_jobs(cores: int | None = None) -> int:
    """Builds at a time on `cores` cores (default: all of the host's): half of them, since each
    build runs two compilers (MAX_JOBS=2). All cores' worth of builds started together also
    finish together, and late: on a 16-core H200 host that took the builtin CUDA seeds from 505 to
    376 candidates/hour from a cold cache (docs/benchmarks.md)."""
    return max(1, (cores or os.cpu_count() or 2) // 2)


def run_suite(
    jobs: list[SuiteJob],
    backend: str,
    settings: EvalSettings,
    on_result: Callable[[SuiteJob, EvalResult], None],
    devices: list[str | None] | None = None,
    build_jobs: int | None = None,
    overlap: bool | None = None,
    per_device: int = 1,
    reserve_cores: bool = True,
    cores_per_evaluation: int | None = None,
) -> None:
    """Build all jobs in parallel, then time each, calling `on_result` once per job as it is known.

    `devices`: timing threads per device (default [None]: the backend's default device).
    `per_device`: evaluations at a time on each device (cuda: their setup overlaps, their timed
    phases take turns under `cudal1.bench.devicelock`; keep 1 on the CPU, where they would share
    the timed cores). `build_jobs`: parallel builds (default `default_build_jobs` of the build
    cores). `overlap`: start timing while builds still run (default: True on cuda, False on cpu).
    With overlap and `reserve_cores`, each timing thread's evaluations are pinned to a slot of
    `cores_per_evaluation` cores (default `cudal1.bench.cores.PER_EVALUATION`) and the builds to
    the other cores; where the host cannot be split, timing waits for the builds instead
    (overlap is turned off). `reserve_cores=False` keeps the old behaviour, builds and timing on
    any core (for comparison). A build that fails yields its compile_error/timeout result without
    a timing. `on_result` is called from worker threads, one call at a time. Exceptions raised by
    the evaluator propagate after running jobs stop. Raises ValueError for per_device or
    cores_per_evaluation below 1.
    """
    # Imported here so that `cudal1 --help` and the summary tools work without the evaluator's deps.
    from cudal1.bench.cores import PER_EVALUATION, CoreSplit
    from cudal1.bench.evaluator import evaluate, prebuild

    devices = devices or [None]
    if per_device < 1:
        raise ValueError(f"per_device must be at least 1, got {per_device}")
    if overlap is None:
        overlap = backend == "cuda"
    split = None
    if overlap and reserve_cores:
        split = CoreSplit.reserve(len(devices) * per_device, cores_per_evaluation or PER_EVALUATION)
        overlap = split is not None  # no cores to spare: timing waits for the builds
    build_jobs = build_jobs or default_build_jobs(len(split.builds) if split else None)
    build_cpus = split.builds if split else None
    report_lock = threading.Lock()
    ready: queue.Queue[SuiteJob | None] = queue.Queue()
    errors: list[BaseException] = []

    def report(job: SuiteJob, result: EvalResult) -> None:
        with report_lock:
            on_result(job, result)

    def time_on(device: str | None, cpus: tuple[int, ...] | None) -> None:
        while (job := ready.get()) is not None:
            if errors:
                continue  # drain: a harness error stops the run
            try:
                report(
                    job, evaluate(job.task, job.source, backend=backend, device=device, settings=settings, cpus=cpus)
                )
            except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
                errors.append(exc)

    places = [d for d in devices for _ in range(per_device)]  # one timing thread each, on slot k
    timers = [
        threading.Thread(target=time_on, args=(d, split.slot(k) if split else None), daemon=True, name=f"time-{d}-{k}")
        for k, d in enumerate(places)
    ]
    if overlap:
        for t in timers:
            t.start()
    built: list[int] = []  # without overlap, timing follows the jobs' order, not build completion
    with ThreadPoolExecutor(max_workers=build_jobs, thread_name_prefix="build") as pool:
        futures = {
            pool.submit(prebuild, job.task, job.source, backend, settings, devices[0], cpus=build_cpus): i
            for i, job in enumerate(jobs)
        }
        try:
            for future in as_completed(futures):
                i = futures[future]
                failed = future.result()
                if failed is not None:
                    report(jobs[i], failed)
                elif overlap:
                    ready.put(jobs[i])
                else:
                    built.append(i)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            for _ in timers:
                ready.put(None)
            raise
    for i in sorted(built):
        ready.put(jobs[i])
    for _ in timers:
        ready.put(None)
    if not overlap:
        for t in timers:
            t.start()
    for t in timers:
        t.join()
    if errors:
        raise errors[0]
