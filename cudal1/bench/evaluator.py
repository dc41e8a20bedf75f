"""The evaluator's public API: `evaluate`, `prebuild`, `device_info`.

Plain Python, no Ray: the benchmark actors wrap these calls. Each evaluation runs as three fresh
sandboxed children (`cudal1.bench.worker.run_judged`): the judge (`cudal1.bench.judge`), which
holds the task, the secret inputs and the clock and decides the result; the candidate host
(`cudal1.bench.host`), the only process that runs candidate code, which can reach nothing but
the judge's socket and its own input slot; and the reference host, the same program running only
the task's reference, so that the reference is timed exactly as the candidate is. This process never imports candidate code; it turns
whatever happened (a result, a crash, a hang, a memory blow-up) into one labelled `EvalResult`
and adds what it saw from outside (`cudal1.bench.labels`).

Degenerate tasks: the judge runs the degenerate-task check (`cudal1.bench.degenerate`) the first
time it sees a task at a size profile; the answer is cached here and under
`<cache>/tasks/`, and every result on a degenerate task carries the label "degenerate_task". A
check that failed is not cached, and the result carries "degenerate_check_failed" (paid like a
result on a degenerate task: the check fails closed).

Device lock: evaluations sharing a GPU (two per GPU in `cudal1 eval-suite --per-device 2`, two
pool actors with `num_gpus: 0.5`) take turns from the degenerate-task check to the last reference
call (`cudal1.bench.devicelock`); the wait does not count against an evaluation's time limit.

Build cache: inline extensions build into `<cache>/ext/torch-<version>-cu<cuda>/<arch>/<sha>`, one
directory per candidate source hash, so equal sources reuse one build, different candidates never
contend for a build lock, and builds for other torch versions or architectures never mix.
`prebuild` fills it before timing (import, ModelNew() and one forward without a device), remembers
failed builds there (`cudal1.bench.buildcache`), and leaves the seconds its builds took for the
next `evaluate` of the source to report as `build_seconds`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import platform
import signal
import stat
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from ..tasks.suite import SOLUTION_DIRS, builtin_root
from ..tasks.task import Task
from . import buildcache, cores
from .builder import BuildService
from .devicelock import DeviceLock
from .labels import built_objects, kernel_labels, source_labels
from .result import EvalResult, HackKind, Label, Status, truncate_log
from .settings import EvalSettings
from .worker import JudgedOutcome, WorkerLimits, WorkerOutcome, read_untrusted, run_isolated, run_judged


def source_hash(source: str) -> str:
    """First 16 hex digits of the SHA-256 of a candidate's source."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]


PARSE_LIMIT_CHARS = 1_000_000
"""Sources longer than this are not parsed in the caller's process (the worker reports them)."""


def syntax_error(source: str) -> str | None:
    """ "SyntaxError: <msg> (<candidate>, line N)" when `source` is not valid Python, else None.

    Parsing only (`ast.parse`): nothing of the source runs. Sources over `PARSE_LIMIT_CHARS`, and
    any parser failure other than a syntax error (nesting too deep, memory), give None: the
    sandboxed worker then meets the same error and labels it.
    """
    import ast

    if len(source) > PARSE_LIMIT_CHARS:
        return None
    try:
        ast.parse(source, filename="<candidate>")
    except SyntaxError as e:  # includes IndentationError
        return f"{type(e).__name__}: {e.msg} (<candidate>, line {e.lineno})"
    except (ValueError, RecursionError, MemoryError):  # e.g. null bytes, pathological nesting
        return None
    return None


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
        return {
            "name": platform.processor() or platform.machine(),
            "arch": f"cpu-{platform.machine()}",
            "torch": torch.__version__,
            "cuda": None,
        }
    out = run_isolated(
        "cudal1.bench.targets:device_info", {"device": device}, WorkerLimits(wall_timeout_s=120, sandbox=False)
    )
    if out.kind != "returned":
        raise RuntimeError(f"device {device} is not usable: {out.error or out.kind}\n{out.log}")
    return out.value


def extensions_dir(settings: EvalSettings, arch: str, source: str) -> Path:
    """Build directory for `source` on `arch` under the settings' cache root."""
    tag = f"torch-{torch.__version__}-cu{torch.version.cuda or 'none'}"
    return Path(settings.cache_dir) / "ext" / tag / arch / source_hash(source)


BUILD_GID_BASE = 20000
BUILD_GID_SPAN = 40000
"""A sandboxed child that runs a candidate runs as group BUILD_GID_BASE + (its source hash modulo
BUILD_GID_SPAN), one group per source (`build_group`): inside 0..65535, as the sandbox's uids, so
it exists in user namespaces that map only the first 65536 ids (where a group is refused, the
drop fails and the child stays root). Two sources share a group with probability 1/BUILD_GID_SPAN;
Landlock's read rules, where in force, keep them apart anyway."""


def build_group(source: str) -> int:
    """The group whose members (the candidate processes of `source`) alone may enter its build
    directory and scratch by mode."""
    return BUILD_GID_BASE + int(source_hash(source), 16) % BUILD_GID_SPAN


def own_build_dir(ext: Path, gid: int | None) -> None:
    """Create the build directory `ext` for the children that build into it. With a group (the
    evaluator runs as root and drops its children to an unprivileged uid of that group): root:gid,
    mode 0o2770, so only processes of that source's group enter it (the candidate's other files
    are group-writable by its umask, for the next evaluation of the same source, and inherit the
    group); what an earlier layout left inside is handed to the group once. Without one: mode
    0o777 (the children keep the evaluator's user, or the sandbox is off). The directories above
    it are root's, mode 0o711: the cache cannot be listed by mode."""
    ext.mkdir(parents=True, exist_ok=True)
    if gid is None:
        os.chmod(ext, 0o777)
        return
    for d in list(ext.parents)[:3]:  # <arch>, <torch tag>, ext
        os.chmod(d, 0o711)
    info = ext.stat()
    if info.st_gid != gid or stat.S_IMODE(info.st_mode) != 0o2770:
        for top, dirs, files in os.walk(ext):
            for name in dirs + files:
                path = os.path.join(top, name)
                try:
                    os.lchown(path, -1, gid)
                    if name in dirs and not os.path.islink(path):
                        os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) | 0o2070)
                except FileNotFoundError:
                    pass  # removed by a build of the same source meanwhile
        os.chown(ext, 0, gid)
        os.chmod(ext, 0o2770)


def stray_precompiled_header() -> Path | None:
    """torch's precompiled `extension.h.gch`, if one exists (left by a `load_inline(use_pch=True)`
    run with write access to torch's install). Every later `load_inline` tries to delete it, which
    a sandboxed build cannot: each candidate would fail to build for a reason not its own."""
    path = Path(torch.__file__).parent / "include" / "torch" / "extension.h.gch"
    return path if path.exists() else None


def _limits(settings: EvalSettings, arch: str, source: str, wall_s: float) -> WorkerLimits:
    if settings.sandbox and (pch := stray_precompiled_header()) is not None:
        raise RuntimeError(
            f"{pch} exists, and sandboxed builds cannot remove it (every candidate would fail to "
            f"build): delete it and its .sign file as the user who installed torch"
        )
    ext = extensions_dir(settings, arch, source)
    gid = build_group(source) if settings.sandbox and os.geteuid() == 0 else None
    own_build_dir(ext, gid)
    # One extension is a couple of translation units; suites run many builds side by side.
    env = {"TORCH_EXTENSIONS_DIR": str(ext), "MAX_JOBS": "2"}
    # Triton's and inductor's caches (Triton kernels, torch.compile's generated code) go into the
    # build directory too: the one persistent directory the candidate may write (their defaults
    # are under the home directory the fork server started with, which a sandboxed candidate
    # cannot write: every Triton or torch.compile candidate failed on a GPU), kept per source so a
    # second evaluation reuses the kernels. Inductor compiles in the candidate's own process, so
    # no pool of compile workers outlives a call or spends the sandbox's process limit.
    env.update(
        TRITON_CACHE_DIR=str(ext / "triton"),
        TORCHINDUCTOR_CACHE_DIR=str(ext / "torchinductor"),
        TORCHINDUCTOR_COMPILE_THREADS="1",
    )
    if arch.startswith("sm_"):
        digits = arch[3:]
        env["TORCH_CUDA_ARCH_LIST"] = f"{digits[:-1]}.{digits[-1]}"
    return WorkerLimits(
        wall_timeout_s=wall_s,
        cpu_time_s=settings.cpu_time_limit_s or 4 * wall_s,
        memory_mib=settings.memory_limit_mib,
        max_processes=settings.max_processes,
        sandbox=settings.sandbox,
        gid=gid,
        writable_dirs=[str(ext)],
        # The child reads only the toolchain (interpreter, site-packages, the cudal1 package,
        # compilers, CUDA, /usr, /proc, /sys, /dev) and its own dirs (`sandbox.toolchain_reads`):
        # not the run directory, other rollouts, the exemplar buffer, the user's home or the rest
        # of the checkout. Of the cache it reads only its own build directory, and of the
        # temporary directory only its own scratch, even where a toolchain path holds them: another
        # candidate's build (an extension, Triton's cache in its scratch), logs or the parent's
        # records are not in its reach by path (`sandbox.apply_sandbox`'s hidden). Nor are the
        # builtin seed solutions inside the cudal1 package: a candidate that ran its task's seed
        # read from there was paid the seed's speedup with code no copy check compares.
        private_dirs=[
            str(Path(settings.cache_dir)),
            tempfile.gettempdir(),
            *(str(builtin_root() / d) for d in SOLUTION_DIRS.values()),
        ],
        confine_reads=True,
        env=env,
    )


def _from_outcome(task: Task, backend: str, out: WorkerOutcome, limit_mib: int) -> EvalResult:
    """Turn a child's fate into an EvalResult (for everything but a normal return; `limit_mib`:
    its memory limit, for the message when it was hit)."""
    result = EvalResult(task_id=task.task_id, status=Status.RUNTIME_ERROR, backend=backend)
    if out.kind == "timeout":
        result.status, result.message = Status.TIMEOUT, f"worker killed: {out.error}"
    elif out.kind == "memory":
        why = f"memory > limit {limit_mib} MiB (the OOM killer of its control group)" if out.oom_killed else out.error
        result.status, result.message = Status.RESOURCE_EXCEEDED, f"worker killed: {why}"
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
    else:  # "raised": the target itself failed, which a candidate may have caused
        last = out.error.strip().splitlines()[-1] if out.error.strip() else "unknown error"
        result.message = f"evaluator failed inside the worker: {last}"
        result.labels.append("harness_error")
        out.log = truncate_log(out.log + "\n" + out.error)
    return result


def valid_text(text: str) -> str:
    """`text` with whatever UTF-8 cannot encode (lone surrogates) written as backslash escapes
    (`"\\ud800"`); any other text unchanged."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _valid_texts(fn: Any) -> Any:
    """`fn` (returning an `EvalResult`) with its result's message and log made valid UTF-8
    (`valid_text`)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> EvalResult:
        result = fn(*args, **kwargs)
        result.message, result.log = valid_text(result.message), valid_text(result.log)
        return result

    return wrapper


@_valid_texts
def evaluate(
    task: Task,
    candidate_source: str,
    backend: str = "cpu",
    device: str | None = None,
    settings: EvalSettings | None = None,
    cpus: Sequence[int] | None = None,
) -> EvalResult:
    """Check and time `candidate_source` (a file defining `ModelNew`) against `task`'s reference.

    backend: "cpu" or "cuda"; device: "cpu" or "cuda:<i>" (default: the backend's first device).
    cpus: the cores the evaluation's three processes may run on (`cudal1.bench.cores`: a slot kept
    free of builds; on CUDA both hosts share one of them, `cores.judge_and_hosts`); None: on CUDA
    the device's slot of this node (`cores.device_slot`), on the CPU any. Works on its own; after a `prebuild` of the same source its
    extensions are already built, and the result's `build_seconds` and `phases_s["prebuild"]`
    say what that prebuild took (`build_seconds` adds the seconds this evaluation spent in build
    calls itself: near zero when the prebuild built everything).
    The result's message and log are valid UTF-8 (`valid_text`): they carry text from the
    candidate's process, which may hold lone surrogates that no UTF-8 file, terminal or tokenizer
    takes (a feedback prompt quoting them could not be tokenized).
    Never raises for anything the candidate does: crashes, hangs, memory blow-ups, CUDA faults and
    cheats come back as statuses. Raises ValueError for an unknown backend and RuntimeError when
    torch's install holds a stray precompiled header (`stray_precompiled_header`) or
    the device cannot be used at all.
    """
    settings = settings or EvalSettings.for_backend(backend)
    device = device or default_device(backend)
    info = device_info(device)
    syntax = syntax_error(candidate_source)
    if syntax is not None:  # no process needed to say so
        return EvalResult(
            task.task_id,
            Status.COMPILE_ERROR,
            backend=backend,
            device=info["name"],
            arch=info["arch"],
            message=f"candidate failed to import/build: {syntax}",
        )
    profile = settings.size_profile or backend
    payload = {
        "task": task.to_dict(),
        "source": candidate_source,
        "backend": backend,
        "device": device,
        "settings": settings.to_dict(),
        "degenerate": _degenerate_cached(settings, task, profile, backend),
    }
    host_limits = _limits(settings, info["arch"], candidate_source, settings.wall_timeout_s)
    if cpus is None and backend == "cuda":
        cpus = cores.device_slot(device)
    judge_cpus, host_limits.cpus = cores.judge_and_hosts(cpus, backend)
    prebuilt = buildcache.take_record(host_limits.env["TORCH_EXTENSIONS_DIR"])
    # Triton's launcher builds go to the builder too (`cudal1.bench.tritoncache`).
    host_limits.env.setdefault("TRITON_CACHE_MANAGER", "cudal1.bench.tritoncache:BuilderCacheManager")
    judge_limits = WorkerLimits(
        wall_timeout_s=settings.wall_timeout_s,
        cpu_time_s=settings.cpu_time_limit_s or 4 * settings.wall_timeout_s,
        memory_mib=2 * settings.memory_limit_mib,
        max_processes=settings.max_processes,
        sandbox=settings.sandbox,
        cpus=judge_cpus,
    )
    # One evaluation times on a GPU at a time, however many share it (`cudal1.bench.devicelock`).
    lock = DeviceLock(info.get("uuid") or f"{platform.node()}-{device}") if backend == "cuda" else None
    # The candidate host's builds are made here (`cudal1.bench.builder`), which records them.
    ext = host_limits.env["TORCH_EXTENSIONS_DIR"]
    kept = buildcache.remembered_built(ext)
    service = BuildService(host_limits, ext, known=kept)
    try:
        # The reference host runs only the task's reference, under the judge's limits.
        out = run_judged(
            "cudal1.bench.judge:main",
            payload,
            judge_limits,
            "cudal1.bench.host:main",
            {},
            host_limits,
            watch_dirs=[ext],
            reference_limits=dataclasses.replace(judge_limits, cpus=host_limits.cpus),
            device_lock=lock,
            builder=service.child_end,
            end_builds=service.close,
        )
    finally:
        built = service.close()
        buildcache.remember_built(ext, built)  # for the next evaluation of this source, as the prebuild's
    result = _from_judged(task, backend, out, settings.memory_limit_mib)
    # custom_kernel: a mapped shared object counts only with the content of a build this process
    # made for this source (the prebuild's, kept beside the build directory; this evaluation's).
    judged = (out.value.get("judge") or {}) if isinstance(out.value, dict) else {}
    kernels = built_objects(out.host_objects, kept + built)
    if not result.device:
        result.device, result.arch = info["name"], info["arch"]
    if isinstance(out.value, dict):
        report = judged.get("degenerate")
        if report is not None and payload["degenerate"] is None and not report.get("failed"):
            _degenerate_store(settings, task, profile, backend, report)
        if judged.get("host_sandbox"):
            result.sandbox = judged["host_sandbox"]
        if isinstance(judged.get("phases_s"), dict):
            result.phases_s = dict(judged["phases_s"])
            if result.eval_seconds is not None:
                result.phases_s["processes"] = round(max(0.0, out.wall_s - result.eval_seconds), 3)
    if isinstance(result.sandbox, dict):
        result.sandbox.setdefault("measures", {})["cgroup"] = {
            "requested": settings.sandbox,
            "active": out.containment.startswith("cgroup"),
            "detail": out.containment,
        }
        failed = "profile_failed" in result.labels
        for label in kernel_labels(kernels, judged.get("ops"), failed) if result.status is Status.OK else []:
            _add(result, label)
    for label in source_labels(candidate_source):
        _add(result, label)
    if kernels and "custom_kernel" not in result.labels and result.status is not Status.OK:
        _add(result, "custom_kernel")
    result.candidate_hash = source_hash(candidate_source)
    if result.eval_seconds is None:
        result.eval_seconds = out.wall_s
    if prebuilt is not None:
        result.build_seconds = round(prebuilt["build_seconds"] + (result.build_seconds or 0.0), 3)
        result.phases_s["prebuild"] = round(prebuilt["prebuild_s"], 3)
    return result


def _add(result: EvalResult, label: str) -> None:
    if label not in result.labels:
        result.labels.append(label)


def _from_judged(task: Task, backend: str, out: JudgedOutcome, limit_mib: int) -> EvalResult:
    """The EvalResult of a two-process evaluation, whatever happened to either process
    (`limit_mib`: the candidate's memory limit, for the message when it was hit)."""
    log = out.log
    if out.kind == "returned" and isinstance(out.value, dict):
        value = {k: v for k, v in out.value.items() if k != "judge"}
        try:
            result = EvalResult.from_dict(value)
        except (KeyError, TypeError, ValueError) as exc:
            result = EvalResult(
                task_id=task.task_id,
                status=Status.RUNTIME_ERROR,
                backend=backend,
                message=f"the judge returned a malformed result: {exc}",
                labels=["harness_error"],
            )
        if Label.HOST_DIED in result.labels:
            result.labels.remove(Label.HOST_DIED)
            _host_death(result, out)
        if out.oom_killed and result.status is not Status.OK:
            result.status, result.hack_kind = Status.RESOURCE_EXCEEDED, None
            result.labels = [label for label in result.labels if label != "worker_crashed"]
            result.message = f"worker killed: memory > limit {limit_mib} MiB (the OOM killer of its control group)"
        if result.status is Status.INVALID_TASK or "harness_error" in result.labels:
            log = log + "\n[judge]\n" + out.judge_log
        result.log = truncate_log(log)
        return result
    result = EvalResult(task_id=task.task_id, status=Status.RUNTIME_ERROR, backend=backend)
    if out.kind == "timeout":
        result.status, result.message = Status.TIMEOUT, f"worker killed: {out.error}"
    elif out.kind == "memory":
        why = f"memory > limit {limit_mib} MiB (the OOM killer of its control group)" if out.oom_killed else out.error
        result.status, result.message = Status.RESOURCE_EXCEEDED, f"worker killed: {why}"
    elif out.kind == "tampered":
        result.status, result.hack_kind = Status.HACK, HackKind.HARNESS_TAMPERING
        result.message = f"the evaluator's result channel was tampered with: {out.error}"
    else:  # the judge crashed, raised, or outgrew its memory: the harness failed, not the candidate
        last = out.error.strip().splitlines()[-1] if out.error.strip() else out.kind
        result.message = f"evaluator failed inside the judge: {last}"
        result.labels.append("harness_error")
        log = log + "\n[judge]\n" + out.judge_log + ("\n" + out.error if out.kind == "raised" else "")
    result.log = truncate_log(log)
    return result


def _host_death(result: EvalResult, out: JudgedOutcome) -> None:
    """The judge saw the candidate's process go: say how it went, as the parent saw it."""
    if out.host_exitcode == -signal.SIGXCPU:
        result.status, result.message = Status.TIMEOUT, "worker killed: CPU-time limit (SIGXCPU)"
        result.labels = [label for label in result.labels if label != "worker_crashed"]
        return
    if out.host_signal:
        how = out.host_signal
    elif out.host_exitcode is not None:
        how = f"exit code {out.host_exitcode}"
    else:  # still exiting when the parent's grace ran out: the parent's kill ended it
        how = "it closed its connection; its own exit status was not seen"
    result.message = f"worker died without a result ({how})"


# -- the degenerate-task check, cached per task source and size profile ------------------------

_degenerate_lock = threading.Lock()
_degenerate_memory: dict[str, dict[str, Any]] = {}


def _degenerate_key(task: Task, profile: str, backend: str) -> str:
    return f"{task.source_hash}-{profile}-{backend}"


def _degenerate_cached(settings: EvalSettings, task: Task, profile: str, backend: str) -> dict[str, Any] | None:
    key = _degenerate_key(task, profile, backend)
    with _degenerate_lock:
        if key in _degenerate_memory:
            return _degenerate_memory[key]
    try:
        report = json.loads((Path(settings.cache_dir) / "tasks" / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(report, dict) or "reason" not in report:
        return None
    with _degenerate_lock:
        _degenerate_memory[key] = report
    return report


def _degenerate_store(settings: EvalSettings, task: Task, profile: str, backend: str, report: dict[str, Any]) -> None:
    key = _degenerate_key(task, profile, backend)
    with _degenerate_lock:
        _degenerate_memory[key] = report
    try:
        folder = Path(settings.cache_dir) / "tasks"
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"{key}.json.tmp{os.getpid()}"
        tmp.write_text(json.dumps(report))
        tmp.replace(folder / f"{key}.json")
    except OSError:
        pass  # the cache is an optimization: the next evaluation checks again


def prebuild(
    task: Task,
    candidate_source: str,
    backend: str = "cpu",
    settings: EvalSettings | None = None,
    device: str | None = None,
    arch: str | None = None,
    cpus: Sequence[int] | None = None,
) -> EvalResult | None:
    """Run the candidate as far as its builds go, untimed and without touching the device, so that
    its extensions are in the build cache before `evaluate` times it.

    In a fresh sandboxed child that sees no GPU (CUDA_VISIBLE_DEVICES=""; a CPU build node will
    do), `cudal1.bench.targets.build_payload` imports the candidate, constructs `ModelNew` with
    the task's constructor arguments and calls forward once on the task's inputs made on the meta
    device (or the CPU), so that every `load_inline` / `load` the candidate calls at import, in
    __init__ or in its first forward builds into the cache. Run many at once: they only compile.
    `arch` ("sm_90") builds for a device this machine need not have (nvcc is enough); by default
    the device's own. `cpus`: the cores the child and its compilers may use (`cudal1.bench.cores`:
    off the cores that time); None: any. A task without source (`Task.source == ""`) is imported
    only.

    Not covered (these still build inside the evaluation, before timing): a build behind a branch
    a device-less run does not take (`if x.is_cuda:`) or after code that needs the GPU itself
    (`torch.cuda.*`, streams, events; moving tensors with `.cuda()` / `.to("cuda")` is fine);
    torch.compile (switched off here) and Triton kernels, which compile on the device in the
    evaluation's first call (a correctness trial, untimed); a compiler the candidate runs itself.

    Bounds: the child has `settings.build_timeout_s` in all, and the candidate's own code outside
    build calls `settings.build_grace_s` in all, after which the child is ended (a forward that
    hangs or runs long without a device costs that much, builds already done).

    Returns None when the candidate is ready to be timed: its builds went well, or something other
    than a build failed (only the evaluation, with the device, judges that). The seconds its
    builds took are then left for the next `evaluate` of this source, which reports them as
    `build_seconds` (`cudal1.bench.buildcache.write_record`). Returns a compile_error result
    when a build failed and the failure reached the candidate's import, constructor or forward
    (a candidate that catches it and falls back is timed; its evaluation finds the failure
    recorded and does not compile again), and a timeout / resource_exceeded / runtime_error result
    when the child was ended inside a build; a hack (harness_tampering) when the record the
    child keeps of itself is not one (`wire.expect_record`: only candidate code writes that). The
    child that imports the candidate holds no result pipe and no nonce (`run_isolated(...,
    reply=False)`): its exit status and that record are all it can say. Raises ValueError for an
    unknown backend and RuntimeError as `evaluate` does (stray precompiled header, unusable device).
    """
    settings = settings or EvalSettings.for_backend(backend)
    info = {"name": "", "arch": arch} if arch else device_info(device or default_device(backend))
    limits = _limits(settings, info["arch"], candidate_source, settings.build_timeout_s)
    limits.env["CUDA_VISIBLE_DEVICES"] = ""  # compile only: no context, no GPU memory
    limits.env["TORCH_COMPILE_DISABLE"] = "1"
    limits.cpus = tuple(cpus) if cpus else None
    ext = limits.env["TORCH_EXTENSIONS_DIR"]
    record_path = os.path.join(ext, f".prebuild-{os.getpid()}-{threading.get_ident()}-{os.urandom(4).hex()}.json")
    payload = {
        "source": candidate_source,
        "task": task.to_dict() if task.source else None,
        "profile": settings.size_profile or backend,
        "grace_s": settings.build_grace_s,
        "record": record_path,
    }
    service = BuildService(limits, ext, known=buildcache.remembered_built(ext))
    try:
        # The child that imports the candidate has no result pipe and no nonce (`reply=False`):
        # what it says is its exit status and the record it keeps, checked here as untrusted data.
        # Its builds are made by `service`, which records their products.
        out = run_isolated(
            "cudal1.bench.targets:build_payload", payload, limits, reply=False, builder=service.child_end
        )
        record = _child_record(record_path)
    finally:
        buildcache.remember_built(ext, service.close())
        for leftover in (record_path, record_path + ".tmp"):
            try:
                os.unlink(leftover)
            except OSError:
                pass
    if record == "malformed":
        return EvalResult(
            task_id=task.task_id,
            status=Status.HACK,
            backend=backend,
            hack_kind=HackKind.HARNESS_TAMPERING,
            device=info["name"],
            arch=info["arch"],
            candidate_hash=source_hash(candidate_source),
            message="the prebuild's record of itself was not the harness's",
            log=truncate_log(out.log),
        )
    building = record is None or bool(record.get("building"))
    if out.kind == "exited" or (not building and out.kind != "tampered"):
        # Done, or ended outside any build (the grace timer, a forward too large or crashing
        # without a device): the builds it reached are in the cache.
        seconds = _seconds(record.get("build_seconds")) if isinstance(record, dict) else 0.0
        if not (isinstance(record, dict) and record.get("build_error")):
            buildcache.write_record(ext, {"build_seconds": seconds, "prebuild_s": out.wall_s})
            return None
        result = EvalResult(
            task_id=task.task_id,
            status=Status.COMPILE_ERROR,
            backend=backend,
            message=str(record.get("message", ""))[:1000],
            build_seconds=seconds,
        )
    else:
        result = _from_outcome(task, backend, out, settings.memory_limit_mib)
        if out.kind == "timeout":
            result.message = f"build did not finish within {settings.build_timeout_s:.0f} s ({out.error})"
    result.device, result.arch = info["name"], info["arch"]
    result.candidate_hash = source_hash(candidate_source)
    result.log = truncate_log(out.log)
    return result


def _child_record(path: str) -> dict[str, Any] | str | None:
    """The build child's last word (`cudal1.bench.targets._Progress`), read from the file it keeps
    (written by the process that imports the candidate: read as untrusted, `read_untrusted`, and
    checked whole, `wire.expect_record`). Returns the record; None when there is none (the child
    was ended before it wrote one); "malformed" when the file holds anything but a record (only
    candidate code writes that: the child replaces the file atomically)."""
    from .wire import ProtocolError, expect_record

    if not os.path.lexists(path):
        return None
    data = read_untrusted(path, 256 * 1024)
    try:
        return expect_record(json.loads(data)) if data is not None else "malformed"
    except (ValueError, RecursionError, ProtocolError):
        return "malformed"


def _seconds(value: Any) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return 0.0
    return round(seconds, 3) if 0.0 <= seconds < 1e6 else 0.0
