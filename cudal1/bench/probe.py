"""Probing a suite: run every task's reference in its own sandboxed worker (`probe_suite`).

A probe imports the task, builds its model and inputs on the probe's device and runs the
degenerate-task check (`cudal1.bench.degenerate.probe_task`). The parent process never imports task
code and never makes a CUDA context: what it needs to know about a GPU (its free memory) it asks a
child (`cudal1.bench.degenerate.device_memory`).

How many probes run at once:

- CPU: `jobs` (default half the cores; each probe's torch uses every core anyway).
- GPU: at most `jobs`, and only as many as the device's free memory allows: a first-come,
  first-served gate (`MemoryGate`) over the free memory (less `RESERVE_MIB`) starts a probe when
  its budget fits beside those running, or when nothing else runs (with less free memory than
  two budgets, probes run one at a time). A probe starts with a budget of `device_mib` (default
  `DEFAULT_DEVICE_MIB`) plus `CONTEXT_MIB` for its CUDA context. After importing the task, and
  before touching the device, the worker estimates what the task needs on the meta device
  (`cudal1.bench.degenerate.estimate_device_mib`: parameters, inputs and outputs); a task that
  needs more than its budget stops there and is queued again with what it needs (alone when that
  is more than the device has free).

An estimate leaves out the forward's intermediate tensors, so a probe may still run out of memory
beside others (or run slower than its time limit while sharing the device or the cores). So a
probe that failed while another one shared the device is run again alone, and only that answer
counts. Answers are cached per task
source, size profile and backend, except those that say nothing about the task: a worker that
timed out, crashed or hit its host memory limit, a failure seen beside other probes, and any
out-of-memory failure (it depends on what else held the device).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable

from cudal1.tasks.kernelbench import LoadFailure, SuiteReport, file_order, short_path
from cudal1.tasks.task import Task

STAGE_PREFIX = "cudal1-probe-stage: "
"""Prefix of the progress lines a probe worker prints (`cudal1.bench.degenerate.probe_task`).
Defined here, beside its reader, so that the parent process does not import torch."""
DEFAULT_DEVICE_MIB = 16384
"""Device memory budgeted for one probe before it runs (MiB). Over KernelBench levels 1-3 most
references peak far below this; the few that do not are run again alone if they fail."""
CONTEXT_MIB = 1024
"""Device memory of one process's CUDA context and library handles, which torch's allocator does
not count (MiB; about 500-900 on an H100/H200)."""
RESERVE_MIB = 2048
"""Device memory left free for everything else (MiB)."""


@dataclasses.dataclass
class ProbeAnswer:
    """How one task's probe ended (the second argument of `probe_suite`'s `on_probed`).

    `status`: "ok", "degenerate" or "FAILED". `reason`: why it failed or is degenerate (None when
    ok). `seconds`: wall seconds of its worker(s), 0.0 for a cached answer. `peak_mib`: on a GPU
    the most device memory torch's allocator held (MiB), on the CPU the worker's peak resident
    memory (MiB); None when unknown (cached, or the worker did not say). `estimate_mib`: the
    worker's estimate of the device memory it needs (GPU only). `resized`: its estimate exceeded
    the default budget, so it ran holding that much instead. `alone`: the probe first failed
    beside other probes and this is the answer of its run alone. (Inside `probe_suite` a status
    "deferred" marks a worker that stopped to ask for more memory; callers never see it.)
    """

    status: str
    reason: str | None = None
    seconds: float = 0.0
    peak_mib: float | None = None
    cached: bool = False
    alone: bool = False
    estimate_mib: float | None = None
    resized: bool = False

    def line(self, task: Task) -> str:
        """One line for a person: task id, status, seconds, peak memory, name, reason, e.g.
        "level1/12   ok           2.3 s    812 MiB  Matmul_with_diagonal_matrices_"."""
        peak = f"{self.peak_mib:7.0f} MiB" if self.peak_mib is not None else " " * 11
        how = " (cached)" if self.cached else " (run again alone)" if self.alone else ""
        if self.resized:
            how += f" (held {self.estimate_mib:.0f} MiB by its estimate)"
        text = f"{task.task_id:<11} {self.status:<10} {self.seconds:6.1f} s {peak}  {task.name[:40]:<40}"
        return (text + (f"  {self.reason}" if self.reason else "") + how).rstrip()


class MemoryGate:
    """First-come, first-served admission over a budget of device memory (MiB).

    `hold(need)` waits until the earliest waiter's `need` fits beside the holders (or nothing is
    held: a need larger than the whole budget runs alone), and `hold(exclusive=True)` until
    nothing is held, then keeps everyone else out. A hold's `shared` becomes True when any other
    hold overlapped it in time. Thread-safe.
    """

    @dataclasses.dataclass(eq=False)
    class Hold:
        need: float
        exclusive: bool
        shared: bool = False

    def __init__(self, capacity_mib: float) -> None:
        self.capacity = capacity_mib
        self._used = 0.0
        self._holders: list[MemoryGate.Hold] = []
        self._waiting: collections.deque[MemoryGate.Hold] = collections.deque()
        self._cond = threading.Condition()

    def _fits(self, hold: Hold) -> bool:
        if not self._holders:
            return True
        if hold.exclusive or any(h.exclusive for h in self._holders):
            return False
        return self._used + hold.need <= self.capacity

    def acquire(self, need: float = 0.0, exclusive: bool = False) -> Hold:
        """Wait for room; returns the hold to `release`."""
        hold = MemoryGate.Hold(need, exclusive)
        with self._cond:
            self._waiting.append(hold)
            while self._waiting[0] is not hold or not self._fits(hold):
                self._cond.wait()
            self._waiting.popleft()
            if self._holders:
                hold.shared = True
                for h in self._holders:
                    h.shared = True
            self._holders.append(hold)
            self._used += need
            self._cond.notify_all()
        return hold

    def release(self, hold: Hold) -> None:
        with self._cond:
            self._holders.remove(hold)
            self._used -= hold.need
            self._cond.notify_all()


def probe_suite(
    report: SuiteReport,
    profile: str | None,
    *,
    timeout_s: float = 60.0,
    memory_mib: int = 8192,
    seeds: tuple[int, ...] = (0, 1, 2),
    device: str = "cpu",
    jobs: int | None = None,
    device_mib: int | None = None,
    cache_dir: str | Path | None = None,
    on_probed: Callable[[Task, ProbeAnswer], None] | None = None,
) -> None:
    """Probe every task of `report` (see the module docstring) and update it in place: tasks that
    fail move to `report.failures`, the others get `Task.degenerate`; `probe_notes`,
    `probe_times` (worker seconds per file), `probe_seconds` (wall seconds of the whole) are set.

    `timeout_s` and `memory_mib` limit each worker (wall seconds, resident host MiB); `jobs` caps
    the probes at once (default half the cores); on a GPU `device_mib` is the device memory (MiB)
    budgeted per probe (default `DEFAULT_DEVICE_MIB`). `on_probed(task, ProbeAnswer)` is called in
    the calling thread as each task is done. Raises RuntimeError when a GPU's free memory cannot be
    read (no such device, no driver).
    """
    from cudal1.bench.settings import default_cache_dir
    from cudal1.bench.worker import WorkerLimits, run_isolated

    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    backend = "cuda" if device.startswith("cuda") else "cpu"
    limits = WorkerLimits(wall_timeout_s=timeout_s, memory_mib=memory_mib, max_processes=64)
    start = time.monotonic()
    workers = max(1, jobs or (os.cpu_count() or 2) // 2)
    need = 0.0
    if backend == "cuda":
        free = device_memory(device)["free_mib"]
        need = float(device_mib or DEFAULT_DEVICE_MIB) + CONTEXT_MIB
        gate = MemoryGate(max(0.0, free - RESERVE_MIB))
    else:
        gate = MemoryGate(float("inf"))
    report_lock = threading.Lock()

    def run(task: Task, hold_mib: float, exclusive: bool) -> tuple[ProbeAnswer, dict[str, Any], bool]:
        """One worker; `hold_mib` of the gate (the task may use it less the context), or all of it."""
        exclusive = exclusive or hold_mib > gate.capacity
        budget = None if exclusive or backend != "cuda" else hold_mib - CONTEXT_MIB
        payload = {
            "task": task.to_dict(),
            "profile": profile,
            "seeds": list(seeds),
            "device": device,
            "budget_mib": budget,
        }
        hold = gate.acquire(hold_mib, exclusive=exclusive)
        try:
            outcome = run_isolated("cudal1.bench.degenerate:probe_task", payload, limits)
        finally:
            gate.release(hold)
        value = outcome.value if outcome.kind == "returned" and isinstance(outcome.value, dict) else {}
        if value.get("deferred"):  # larger than its budget, by its own estimate: it did not start
            return ProbeAnswer("deferred", value.get("error"), outcome.wall_s), value, hold.shared
        reason = probe_failure_reason(outcome, timeout_s, memory_mib)
        peak = value.get("device_peak_mib") if backend == "cuda" else outcome.peak_rss_mib
        if reason:
            answer = ProbeAnswer("FAILED", reason, outcome.wall_s, peak)
        else:
            degenerate = value.get("degenerate")
            answer = ProbeAnswer("degenerate" if degenerate else "ok", degenerate, outcome.wall_s, peak)
        answer.estimate_mib = value.get("estimate_mib")
        # Cached: the task's own answer. Not: a harness outcome (timeout, crash, limit), a failure
        # beside other probes (confirmed alone next), or running out of memory (depends on the rest).
        own = outcome.kind == "returned" and not (reason and (hold.shared or value.get("out_of_memory")))
        if own:
            write_probe_cache(
                cache, task, profile, backend, {**(value if not reason else {}), "failure": reason, "peak_mib": peak}
            )
        return answer, (value if not reason else {}), hold.shared

    def probe(task: Task) -> tuple[Task, ProbeAnswer, dict[str, Any]]:
        cached = read_probe_cache(cache, task, profile, backend)
        if cached is not None:
            reason = cached.get("failure")
            status = "FAILED" if reason else "degenerate" if cached.get("degenerate") else "ok"
            peak = cached.get("peak_mib") if isinstance(cached.get("peak_mib"), (int, float)) else None
            return task, ProbeAnswer(status, reason or cached.get("degenerate"), peak_mib=peak, cached=True), cached
        answer, value, shared = run(task, need, exclusive=False)
        seconds = answer.seconds
        if answer.status == "deferred":  # again, holding what it said it needs
            answer, value, shared = run(task, float(value["need_mib"]) + CONTEXT_MIB + 1, exclusive=False)
            seconds += answer.seconds
            answer.resized = True
            if answer.status == "deferred":  # its estimate grew between two runs: alone, without a budget
                answer, value, shared = run(task, need, exclusive=True)
                seconds += answer.seconds
        if answer.status == "FAILED" and shared:
            answer, value, _ = run(task, need, exclusive=True)
            seconds += answer.seconds
            answer.alone = True
        answer.seconds = round(seconds, 3)
        with report_lock:
            key = short_path(task.path).removesuffix(".py")
            report.probe_times[key] = answer.seconds
            report.probe_memory[key] = {"peak_mib": answer.peak_mib, "estimate_mib": answer.estimate_mib}
        return task, answer, value

    kept: list[Task] = []
    with ThreadPoolExecutor(workers) as pool:
        for future in as_completed([pool.submit(probe, task) for task in report.tasks]):
            task, answer, value = future.result()
            if on_probed is not None:
                on_probed(task, answer)
            if answer.status == "FAILED":
                report.failures.append(LoadFailure(task.path, answer.reason or "probe failed"))
                continue
            if value.get("notes"):
                report.probe_notes[task.task_id] = list(value["notes"])
            kept.append(dataclasses.replace(task, degenerate=value.get("degenerate")))
    report.tasks = sorted(kept, key=lambda t: (t.level, t.problem_id))
    report.failures.sort(key=lambda f: (str(Path(f.path).parent), file_order(Path(f.path))))
    report.probed = True
    report.probe_seconds = round(time.monotonic() - start, 1)


def device_memory(device: str) -> dict[str, Any]:
    """{"free_mib", "total_mib", "name"} of a GPU, read in a child process (this one keeps no
    CUDA context). Raises RuntimeError, with the child's error, when it cannot be read."""
    from cudal1.bench.worker import WorkerLimits, run_isolated

    out = run_isolated(
        "cudal1.bench.degenerate:device_memory", {"device": device}, WorkerLimits(wall_timeout_s=120, sandbox=False)
    )
    if out.kind != "returned" or not isinstance(out.value, dict):
        raise RuntimeError(f"device {device}: cannot read its free memory: {last_error_line(out.error or out.kind)}")
    return out.value


CACHE_VERSION = 2
"""Part of a cached probe answer's name. 2: answers of the probe before its check compared on the
outputs' device (on a GPU it failed nearly every task with "Expected all tensors to be on the same
device") and before out-of-memory failures were left out are not read."""


def probe_cache_path(cache_dir: Path, task: Task, profile: str | None, backend: str) -> Path:
    """Where a task's probe answer is cached. The evaluator's degenerate-task verdict for the same
    key sits beside it (`cudal1.bench.evaluator`)."""
    name = f"probe{CACHE_VERSION}-{task.source_hash}-{profile or backend}-{backend}.json"
    return Path(cache_dir) / "tasks" / name


def read_probe_cache(cache_dir: Path, task: Task, profile: str | None, backend: str) -> dict[str, Any] | None:
    """The cached probe answer ({"ok", "failure", "degenerate", "notes", ...}), or None."""
    try:
        value = json.loads(probe_cache_path(cache_dir, task, profile, backend).read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def write_probe_cache(cache_dir: Path, task: Task, profile: str | None, backend: str, value: dict[str, Any]) -> None:
    """Write the probe's answer, and for a task that ran, the evaluator's degenerate verdict."""
    path = probe_cache_path(cache_dir, task, profile, backend)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        entries = [(path, value)]
        if value.get("ok") and not value.get("failure"):
            verdict = {"reason": value.get("degenerate"), "notes": list(value.get("notes") or [])}
            entries.append((path.parent / f"{task.source_hash}-{profile or backend}-{backend}.json", verdict))
        for target, content in entries:
            tmp = target.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}")
            tmp.write_text(json.dumps(content))
            tmp.replace(target)
    except OSError:
        pass  # a cache: the next probe runs again


def probe_failure_reason(outcome: Any, timeout_s: float, memory_mib: int) -> str | None:
    """One line saying why a probe worker did not give a usable result, or None when it did."""
    stage = _last_stage(outcome.log)
    if outcome.kind == "returned":
        value = outcome.value
        if isinstance(value, dict) and value.get("ok"):
            return None
        if isinstance(value, dict):
            return f"{value.get('stage', 'probe')} failed: {value.get('error', 'no error given')}"
        return f"probe returned {type(value).__name__}, not a dict"
    if outcome.kind == "timeout":
        return f"timed out after {timeout_s:.0f} s during {stage or 'start-up'}"
    if outcome.kind == "memory":
        return f"exceeded {memory_mib} MiB during {stage or 'start-up'}"
    if outcome.kind == "raised":
        return f"probe raised: {last_error_line(outcome.error)}"
    where = f" during {stage}" if stage else ""
    return f"worker crashed{where} ({outcome.signal_name or f'exit code {outcome.exitcode}'})"


def _last_stage(log: str) -> str:
    stages = re.findall("^" + re.escape(STAGE_PREFIX) + "(.+)$", log or "", flags=re.MULTILINE)
    return stages[-1] if stages else ""


def last_error_line(text: str, limit: int = 300) -> str:
    """The last non-empty line of a traceback (the exception), cut to `limit` characters."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    line = lines[-1] if lines else "(no message)"
    return line if len(line) <= limit else line[: limit - 3] + "..."
