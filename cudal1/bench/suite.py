"""Evaluate many candidates: match solution files to tasks, build in parallel, time one at a time.

Builds (compilers: CPU-bound, parallel-safe) run in a thread pool, each in the evaluator's
isolated build worker (`evaluator.prebuild`). Timed evaluations run strictly one at a time per
device, because two timings sharing cores or a GPU measure each other. On the CPU backend the
builds also finish before the first timing starts (`overlap=False`): a compiler on the same two
cores would make the timing noise; on CUDA the overlap is what makes throughput.

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


def default_build_jobs() -> int:
    """Builds at a time: half the cores, since each build runs two compilers (MAX_JOBS=2). All
    cores' worth of builds started together also finish together, and late: on a 16-core H200
    host that took the builtin CUDA seeds from 505 to 376 candidates/hour from a cold cache
    (docs/benchmarks.md)."""
    return max(1, (os.cpu_count() or 2) // 2)


def run_suite(
    jobs: list[SuiteJob],
    backend: str,
    settings: EvalSettings,
    on_result: Callable[[SuiteJob, EvalResult], None],
    devices: list[str | None] | None = None,
    build_jobs: int | None = None,
    overlap: bool | None = None,
    per_device: int = 1,
) -> None:
    """Build all jobs in parallel, then time each, calling `on_result` once per job as it is known.

    `devices`: timing threads per device (default [None]: the backend's default device).
    `per_device`: evaluations at a time on each device (cuda: their setup overlaps, their timed
    phases take turns under `cudal1.bench.devicelock`; keep 1 on the CPU, where they would share
    the timed cores). `build_jobs`: parallel builds (default `default_build_jobs()`). `overlap`:
    start timing while builds still run (default: True on cuda, False on cpu). A build that fails yields its
    compile_error/timeout result without a timing. `on_result` is called from worker threads,
    one call at a time. Exceptions raised by the evaluator propagate after running jobs stop.
    """
    # Imported here so that `cudal1 --help` and the summary tools work without the evaluator's deps.
    from cudal1.bench.evaluator import evaluate, prebuild

    devices = devices or [None]
    build_jobs = build_jobs or default_build_jobs()
    if per_device < 1:
        raise ValueError(f"per_device must be at least 1, got {per_device}")
    if overlap is None:
        overlap = backend == "cuda"
    report_lock = threading.Lock()
    ready: queue.Queue[SuiteJob | None] = queue.Queue()
    errors: list[BaseException] = []

    def report(job: SuiteJob, result: EvalResult) -> None:
        with report_lock:
            on_result(job, result)

    def time_on(device: str | None) -> None:
        while (job := ready.get()) is not None:
            if errors:
                continue  # drain: a harness error stops the run
            try:
                report(job, evaluate(job.task, job.source, backend=backend, device=device, settings=settings))
            except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
                errors.append(exc)

    timers = [threading.Thread(target=time_on, args=(d,), daemon=True, name=f"time-{d}-{i}")
              for d in devices for i in range(per_device)]
    if overlap:
        for t in timers:
            t.start()
    built: list[int] = []  # without overlap, timing follows the jobs' order, not build completion
    with ThreadPoolExecutor(max_workers=build_jobs, thread_name_prefix="build") as pool:
        futures = {pool.submit(prebuild, job.task, job.source, backend, settings, devices[0]): i for i, job in enumerate(jobs)}
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
