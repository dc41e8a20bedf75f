"""The evaluator's public API: `evaluate`, `prebuild`, `device_info`.

Plain Python, no Ray: the benchmark actors wrap these calls. Each call runs the candidate in a
fresh sandboxed child (`cudal1.bench.worker`); this process never imports candidate code. The
child's `cudal1.bench.runner` does the checking and timing; this module turns whatever happened to
the child (a result, a crash, a hang, a memory blow-up) into one labelled `EvalResult`.

Build cache: inline extensions build into `<cache>/ext/torch-<version>-cu<cuda>/<arch>/<sha>`, one
directory per candidate source hash, so equal sources reuse one build, different candidates never
contend for a build lock, and builds for other torch versions or architectures never mix.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import platform
import secrets
import signal
from pathlib import Path

import torch

from ..tasks.task import Task
from .result import EvalResult, HackKind, Status, truncate_log
from .settings import EvalSettings
from .worker import WorkerLimits, WorkerOutcome, run_isolated


def source_hash(source: str) -> str:
    """First 16 hex digits of the SHA-256 of a candidate's source."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def default_device(backend: str) -> str:
    if backend == "cpu":
        return "cpu"
    if backend == "cuda":
        return "cuda:0"
    raise ValueError(f"unknown backend {backend!r}: expected 'cpu' or 'cuda'")


@functools.lru_cache(maxsize=None)
def device_info(device: str) -> dict:
    """{"name", "arch", "torch", "cuda"} of `device`, probed once in a child process.

    The probe keeps this process free of a CUDA context. Raises RuntimeError if the device
    cannot be used (e.g. "cuda:0" on a machine without a GPU).
    """
    if device == "cpu":
        return {"name": platform.processor() or platform.machine(), "arch": f"cpu-{platform.machine()}",
                "torch": torch.__version__, "cuda": None}
    out = run_isolated("cudal1.bench.runner:device_info", {"device": device}, WorkerLimits(wall_timeout_s=120, sandbox=False))
    if out.kind != "returned":
        raise RuntimeError(f"device {device} is not usable: {out.error or out.kind}\n{out.log}")
    return out.value


def extensions_dir(settings: EvalSettings, arch: str, source: str) -> Path:
    """Build directory for `source` on `arch` under the settings' cache root."""
    tag = f"torch-{torch.__version__}-cu{torch.version.cuda or 'none'}"
    return Path(settings.cache_dir) / "ext" / tag / arch / source_hash(source)


def _limits(settings: EvalSettings, arch: str, source: str, wall_s: float) -> WorkerLimits:
    ext = extensions_dir(settings, arch, source)
    ext.mkdir(parents=True, exist_ok=True)
    os.chmod(ext, 0o777)  # the sandboxed child may run as an unprivileged user
    # One extension is a couple of translation units; suites run many builds side by side.
    env = {"TORCH_EXTENSIONS_DIR": str(ext), "MAX_JOBS": "2"}
    if arch.startswith("sm_"):
        digits = arch[3:]
        env["TORCH_CUDA_ARCH_LIST"] = f"{digits[:-1]}.{digits[-1]}"
    return WorkerLimits(
        wall_timeout_s=wall_s,
        cpu_time_s=settings.cpu_time_limit_s or 4 * wall_s,
        memory_mib=settings.memory_limit_mib,
        max_processes=settings.max_processes,
        sandbox=settings.sandbox,
        writable_dirs=[str(ext)],
        env=env,
    )


def _from_outcome(task: Task, backend: str, out: WorkerOutcome) -> EvalResult:
    """Turn a child's fate into an EvalResult (for everything but a normal return)."""
    result = EvalResult(task_id=task.task_id, status=Status.RUNTIME_ERROR, backend=backend)
    if out.kind == "timeout":
        result.status, result.message = Status.TIMEOUT, f"worker killed: {out.error}"
    elif out.kind == "memory":
        result.status, result.message = Status.RESOURCE_EXCEEDED, f"worker killed: {out.error}"
    elif out.kind == "tampered":
        result.status, result.hack_kind = Status.HACK, HackKind.HARNESS_TAMPERING
        result.message = f"the evaluator's result channel was tampered with: {out.error}"
    elif out.kind == "crashed":
        if out.exitcode == -signal.SIGXCPU:
            result.status, result.message = Status.TIMEOUT, "worker killed: CPU-time limit (SIGXCPU)"
        else:
            how = out.signal_name or f"exit code {out.exitcode}"
            result.message = f"worker died without a result ({how})"
            result.labels.append("worker_crashed")
    else:  # "raised": the runner itself failed, which a candidate may have caused
        last = out.error.strip().splitlines()[-1] if out.error.strip() else "unknown error"
        result.message = f"evaluator failed inside the worker: {last}"
        result.labels.append("harness_error")
        out.log = truncate_log(out.log + "\n" + out.error)
    return result


def evaluate(
    task: Task,
    candidate_source: str,
    backend: str = "cpu",
    device: str | None = None,
    settings: EvalSettings | None = None,
) -> EvalResult:
    """Check and time `candidate_source` (a file defining `ModelNew`) against `task`'s reference.

    backend: "cpu" or "cuda"; device: "cpu" or "cuda:<i>" (default: the backend's first device).
    Never raises for anything the candidate does: crashes, hangs, memory blow-ups, CUDA faults and
    cheats come back as statuses. Raises ValueError for an unknown backend and RuntimeError when
    the device cannot be used at all.
    """
    settings = settings or EvalSettings.for_backend(backend)
    if settings.seed is None:
        # Unpredictable seeds: a candidate cannot precompute the answers to the trials.
        settings = dataclasses.replace(settings, seed=secrets.randbelow(2**31 - 100_000))
    device = device or default_device(backend)
    info = device_info(device)
    payload = {
        "task": task.to_dict(),
        "source": candidate_source,
        "backend": backend,
        "device": device,
        "settings": settings.to_dict(),
    }
    limits = _limits(settings, info["arch"], candidate_source, settings.wall_timeout_s)
    out = run_isolated("cudal1.bench.runner:evaluate_payload", payload, limits)
    if out.kind == "returned":
        result = EvalResult.from_dict(out.value)
    else:
        result = _from_outcome(task, backend, out)
        result.device, result.arch = info["name"], info["arch"]
    result.candidate_hash = source_hash(candidate_source)
    result.seed = settings.seed
    if isinstance(out.value, dict) and "sandbox" in out.value:
        result.sandbox = out.value["sandbox"]
    result.log = truncate_log(out.log)
    if result.eval_seconds is None:
        result.eval_seconds = out.wall_s
    return result


def prebuild(
    task: Task,
    candidate_source: str,
    backend: str = "cpu",
    settings: EvalSettings | None = None,
    device: str | None = None,
) -> EvalResult | None:
    """Build the candidate's inline extensions into the cache, without touching the device.

    Run many of these in parallel (they only compile); the later `evaluate` then finds the build.
    Returns None when the build succeeded (or the import failed for a reason only the full
    evaluation can judge), or a compile_error / timeout / resource result.
    """
    settings = settings or EvalSettings.for_backend(backend)
    info = device_info(device or default_device(backend))
    limits = _limits(settings, info["arch"], candidate_source, settings.build_timeout_s)
    limits.env["CUDA_VISIBLE_DEVICES"] = ""  # compile only: no context, no GPU memory
    out = run_isolated("cudal1.bench.runner:build_payload", {"source": candidate_source}, limits)
    if out.kind == "returned":
        if out.value["ok"] or not out.value["build_error"]:
            return None
        result = EvalResult(task_id=task.task_id, status=Status.COMPILE_ERROR, backend=backend,
                            message=out.value["message"], build_seconds=out.value["build_seconds"])
    else:
        result = _from_outcome(task, backend, out)
    result.device, result.arch = info["name"], info["arch"]
    result.candidate_hash = source_hash(candidate_source)
    result.log = truncate_log(out.log)
    return result
