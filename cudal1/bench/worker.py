"""Run untrusted code in a fresh, limited, disposable process: `run_isolated`.

Every call forks one child from a `multiprocessing` fork server that has imported torch but never
runs candidate code and never initialises CUDA, so each candidate starts from a clean interpreter
in about the time of a fork. The child

- starts its own session (so the parent can kill it and whatever it forked as one group),
- sends its stdout/stderr (C level included) to a log file in its own scratch directory,
- applies `cudal1.bench.sandbox` (resource limits, no network, writes confined to scratch and
  the build cache) before it imports any untrusted code,
- runs `target(payload)` and sends back a JSON-safe value.

The parent watches the child's wall time and the resident memory of its whole process tree,
kills the tree on any limit, and always kills it after the result arrives (no forked leftovers).
A crash, hang, `os._exit`, signal, or CUDA fault in the child only ends that child: the next call
gets a new one. What this does not protect against is written in `cudal1.bench.sandbox`.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import multiprocessing
import multiprocessing.spawn
import os
import secrets
import shutil
import signal
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import psutil

from .result import truncate_log
from .sandbox import default_uid

# The server imports what every child needs, once; none of it runs candidate code or touches CUDA.
_PRELOAD = ["torch", "cudal1.bench.runner"]
MAX_RESULT_BYTES = 16 * 2**20
_ctx_lock = threading.Lock()  # guards the swap of multiprocessing's preparation data
_init_lock = threading.Lock()  # guards the one-time creation of the fork server
_ctx: Any = None


def _preparation_data_without_main(name: str) -> dict[str, Any]:
    data = _stdlib_preparation_data(name)
    data.pop("init_main_from_path", None)
    data.pop("init_main_from_name", None)
    return data


_stdlib_preparation_data = multiprocessing.spawn.get_preparation_data


def _start_without_main(proc: Any) -> None:
    """Start `proc` without making the child re-import the parent's __main__.

    multiprocessing's fork server re-imports the parent's main script in every child, which would
    rerun a driver script's top level (or a test runner's) before each evaluation. The child's
    target lives in this module, so the main script is never needed: its entry is dropped from the
    preparation data for this one start.
    """
    with _ctx_lock:
        multiprocessing.spawn.get_preparation_data = _preparation_data_without_main
        try:
            proc.start()
        finally:
            multiprocessing.spawn.get_preparation_data = _stdlib_preparation_data


def _ready() -> None:
    """Target of the warm-up child: returning at once shows the fork server is serving."""


def _context() -> Any:
    """The fork-server context, created once per process.

    The server imports torch and the evaluator before it forks its first child (tens of seconds
    on a busy machine); one warm-up child is started and joined here, untimed, so that this
    start-up is never charged to the first candidate's time limit.
    """
    global _ctx
    with _init_lock:
        if _ctx is None:
            _ctx = _start_server()
    return _ctx


def _start_server() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    warm = ctx.Process(target=_ready, daemon=True)
    _start_without_main(warm)
    warm.join()
    return ctx


@dataclasses.dataclass
class WorkerLimits:
    """Limits and isolation for one child. Seconds, MiB."""

    wall_timeout_s: float = 300.0
    cpu_time_s: float | None = None
    memory_mib: int = 8192
    max_processes: int = 64
    sandbox: bool = True
    writable_dirs: list[str] = dataclasses.field(default_factory=list)
    """Directories the child may write besides its scratch dir (e.g. the build cache)."""
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    """Extra environment for the child (e.g. TORCH_EXTENSIONS_DIR, CUDA_VISIBLE_DEVICES)."""


@dataclasses.dataclass
class WorkerOutcome:
    """What happened to one child.

    kind: "returned" (value set), "raised" (error set: the target raised), "crashed" (the process
    died without a result: signal or exit), "timeout" (wall limit; killed), "memory" (resident
    memory limit; killed), "tampered" (something other than the evaluator wrote to the result pipe).
    """

    kind: str
    value: Any = None
    error: str = ""
    log: str = ""
    exitcode: int | None = None
    peak_rss_mib: float = 0.0
    wall_s: float = 0.0

    @property
    def signal_name(self) -> str:
        """"SIGSEGV" etc. when the child was ended by a signal, else ""."""
        if self.exitcode is not None and self.exitcode < 0:
            try:
                return signal.Signals(-self.exitcode).name
            except ValueError:
                return f"signal {-self.exitcode}"
        return ""


def _die_with_parent() -> None:
    """Ask the kernel to SIGKILL this child when the fork server exits (which it does when the
    evaluating process dies), so a killed driver leaves no candidate running. Set after the
    privilege drop, which clears it."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the server is already gone
        os._exit(4)


def _send(conn: Any, nonce: str, kind: str, value: Any) -> None:
    """Send one result as JSON (never pickle: the parent must not run code the child chose)."""
    conn.send_bytes(json.dumps({"nonce": nonce, "kind": kind, "value": value}).encode())


def _close_inherited_fds(keep: set[int]) -> None:
    """Close every descriptor above stderr but `keep`: the fork server's own pipes must not be
    reachable from candidate code (a write to its liveness pipe would kill it)."""
    for fd in sorted(int(name) for name in os.listdir("/proc/self/fd") if int(name) > 2 and int(name) not in keep):
        try:
            os.close(fd)
        except OSError:
            pass


def _child_main(conn: Any, nonce: str, target: str, payload: Any, limits: WorkerLimits, scratch: str) -> None:
    """Entry point of the child. Never returns normally: ends with os._exit."""
    code = 0
    try:
        os.setsid()
        log_fd = os.open(os.path.join(scratch, "worker.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        _close_inherited_fds({conn.fileno()})
        os.chdir(scratch)
        os.environ.update(limits.env)
        os.environ["TMPDIR"] = scratch
        os.environ["HOME"] = scratch
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        tempfile.tempdir = scratch
        from .sandbox import SandboxPolicy, apply_sandbox

        report = apply_sandbox(
            SandboxPolicy(
                enabled=limits.sandbox,
                cpu_time_s=limits.cpu_time_s,
                memory_mib=limits.memory_mib,
                max_processes=limits.max_processes,
            ),
            scratch=Path(scratch),
            writable=[Path(p) for p in limits.writable_dirs],
        )
        _die_with_parent()
        module_name, fn_name = target.split(":")
        fn = getattr(importlib.import_module(module_name), fn_name)
        value = fn(payload)
        if isinstance(value, dict) and not value.get("sandbox"):
            value["sandbox"] = report.to_dict()
        _send(conn, nonce, "returned", value)
    except BaseException:  # noqa: BLE001 - everything must reach the parent as a labelled result
        try:
            _send(conn, nonce, "raised", traceback.format_exc())
        except Exception:
            code = 3
    finally:
        try:
            import sys

            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        os._exit(code)


def _tree_memory_mib(proc: psutil.Process) -> float:
    """Resident memory of the child plus the private (USS) memory of everything it forked.

    Forked children share their parent's pages copy-on-write; counting their RSS would charge
    those pages once per child and kill a candidate that merely forks.
    """
    try:
        total = proc.memory_info().rss
        children = proc.children(recursive=True)
    except psutil.Error:
        return 0.0
    for p in children:
        try:
            total += p.memory_full_info().uss
        except psutil.Error:
            pass
    return total / 2**20


def _kill_tree(pid: int, sandbox_uid: int | None) -> None:
    """SIGKILL the child, everything it forked (found while still linked), its session group, and
    every process of its sandbox uid (which catches double-forked, re-parented leftovers)."""
    try:
        doomed = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        doomed = []
    if sandbox_uid is not None and sandbox_uid not in (0, os.getuid()):
        doomed += [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == sandbox_uid]
    for proc in doomed:
        try:
            proc.kill()
        except psutil.Error:
            pass
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except (ProcessLookupError, PermissionError):
            pass


def _read_result(recv: Any, nonce: str, proc: Any) -> WorkerOutcome:
    """Read the child's one result message. Anything else on the pipe (bytes that are not our
    JSON, a wrong nonce, a second message) means code in the child wrote to it: "tampered"."""
    try:
        message = json.loads(recv.recv_bytes(MAX_RESULT_BYTES))
        ok = isinstance(message, dict) and message.get("nonce") == nonce and message.get("kind") in ("returned", "raised")
    except (EOFError,):
        proc.join(1.0)
        return WorkerOutcome("crashed", exitcode=proc.exitcode)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return WorkerOutcome("tampered", error=f"unreadable data on the result pipe ({type(exc).__name__})")
    if not ok:
        return WorkerOutcome("tampered", error="a message on the result pipe was not the evaluator's")
    proc.join(2.0)  # the child exits right after sending; anything more it wrote is a forgery attempt
    try:
        if recv.poll(0):  # true at end-of-file too: only data that can be read is a second message
            recv.recv_bytes(MAX_RESULT_BYTES)
            return WorkerOutcome("tampered", error="more than one message on the result pipe")
    except (EOFError, OSError):
        pass
    if message["kind"] == "returned":
        return WorkerOutcome("returned", value=message["value"])
    return WorkerOutcome("raised", error=str(message["value"]))


def run_isolated(
    target: str,
    payload: Any,
    limits: WorkerLimits | None = None,
    scratch_root: str | None = None,
    keep_scratch: bool = False,
) -> WorkerOutcome:
    """Run `target(payload)` ("package.module:function") in a fresh sandboxed child.

    `payload` must be picklable; the target's return value must be JSON-serializable (it travels
    back as JSON, so that nothing the child sends can run code here). Never raises for anything the child does; raises OSError only if no child can be
    started at all.
    """
    limits = limits or WorkerLimits()
    ctx = _context()
    scratch = tempfile.mkdtemp(prefix="cudal1-eval-", dir=scratch_root)
    os.chmod(scratch, 0o777)  # the child may drop to an unprivileged user
    recv, send = ctx.Pipe(duplex=False)
    nonce = secrets.token_hex(16)
    proc = ctx.Process(target=_child_main, args=(send, nonce, target, payload, limits, scratch), daemon=True)
    start = time.monotonic()
    _start_without_main(proc)
    send.close()
    ps = psutil.Process(proc.pid)
    peak = 0.0
    outcome: WorkerOutcome | None = None
    deadline = start + limits.wall_timeout_s
    try:
        while outcome is None:
            if recv.poll(0.05):
                outcome = _read_result(recv, nonce, proc)
                break
            peak = max(peak, _tree_memory_mib(ps))
            if peak > limits.memory_mib:
                outcome = WorkerOutcome("memory", error=f"resident memory {peak:.0f} MiB > limit {limits.memory_mib} MiB")
            elif time.monotonic() > deadline:
                outcome = WorkerOutcome("timeout", error=f"no result within {limits.wall_timeout_s:.0f} s")
            elif not proc.is_alive() and not recv.poll(0):
                proc.join(0.5)
                outcome = WorkerOutcome("crashed", exitcode=proc.exitcode)
    finally:
        _kill_tree(proc.pid, default_uid(proc.pid) if limits.sandbox and os.geteuid() == 0 else None)
        proc.join(5.0)
        recv.close()
    if outcome.exitcode is None and outcome.kind == "crashed":
        outcome.exitcode = proc.exitcode
    outcome.peak_rss_mib = round(peak, 1)
    outcome.wall_s = round(time.monotonic() - start, 3)
    try:
        outcome.log = truncate_log(Path(scratch, "worker.log").read_text(errors="replace"))
    except OSError:
        outcome.log = ""
    if not keep_scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    return outcome
