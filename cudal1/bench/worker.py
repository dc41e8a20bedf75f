"""Run untrusted code in fresh, limited, disposable processes: `run_isolated` (one child that
returns a value) and `run_judged` (an evaluation: a judge and a candidate host, siblings joined
by a socket pair, of which only the judge can send this process anything).

Every child is forked from a `multiprocessing` fork server that has imported torch but never runs
candidate code and never initialises CUDA, so each starts from a clean interpreter in about the
time of a fork. A child

- starts its own session (so the parent can kill it and whatever it forked as one group),
- sends its stdout/stderr (C level included) to a log file in its own scratch directory,
- applies `cudal1.bench.sandbox` (resource limits, no network, writes confined to scratch and
  the build cache) before it imports any untrusted code,
- runs its target and, unless it is a candidate host, sends back a JSON-safe value through a
  pipe that only it holds (JSON, never pickle, with a per-run nonce).

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
import socket
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
_PRELOAD = ["torch", "cudal1.bench.judge", "cudal1.bench.host", "cudal1.bench.targets"]
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


SERVER_ENV = {"GOMP_SPINCOUNT": "10000", "KMP_BLOCKTIME": "0"}
"""Environment of the fork server (so of every child): OpenMP threads spin only briefly (tens of
microseconds) before they sleep, instead of up to 200 ms after each parallel region. The judge and
the candidate take turns on the same cores; a spinning pool left by one would steal them from the
other's timed call."""


def _start_server() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    saved = {k: os.environ.get(k) for k in SERVER_ENV}
    os.environ.update(SERVER_ENV)  # read once, when the server starts (and its OpenMP loads)
    try:
        warm = ctx.Process(target=_ready, daemon=True)
        _start_without_main(warm)
        warm.join()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
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


def _enter_child(limits: WorkerLimits, scratch: str, keep: set[int]) -> Any:
    """What every child does before it runs its target: own session, log to scratch, close
    inherited descriptors but `keep`, environment, sandbox, die with the fork server. Returns the
    sandbox report."""
    os.setsid()
    log_fd = os.open(os.path.join(scratch, "worker.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    _close_inherited_fds(keep)
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
    return report


def _flush_std() -> None:
    try:
        import sys

        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass


def _target(target: str) -> Any:
    module_name, fn_name = target.split(":")
    return getattr(importlib.import_module(module_name), fn_name)


class ParentLink:
    """What a judge may ask of the parent mid-run: `end_host()` kills the candidate host's
    process tree and every process of its uid, and returns once that is done (True), or False
    when no answer came within `timeout_s`."""

    def __init__(self, conn: Any, nonce: str, ack: Any) -> None:
        self._conn, self._nonce, self._ack = conn, nonce, ack

    def end_host(self, timeout_s: float = 30.0) -> bool:
        _send(self._conn, self._nonce, "end_host", None)
        if not self._ack.poll(timeout_s):
            return False
        try:
            return self._ack.recv_bytes(16) == b"ended"
        except (EOFError, OSError):
            return False


def _child_main(conn: Any, nonce: str, target: str, payload: Any, limits: WorkerLimits, scratch: str,
                channel: Any = None, ack: Any = None) -> None:
    """Entry point of a child that returns a value to the parent. With `channel` (a socket to a
    sibling) and `ack` (the parent's answers), the target is called as
    target(payload, Channel(channel), ParentLink(...)). Never returns normally: ends with os._exit."""
    code = 0
    try:
        keep = {conn.fileno()} | ({channel.fileno(), ack.fileno()} if channel is not None else set())
        report = _enter_child(limits, scratch, keep)
        fn = _target(target)
        if channel is not None:
            from .wire import Channel

            value = fn(payload, Channel(channel), ParentLink(conn, nonce, ack))
        else:
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
        _flush_std()
        os._exit(code)


def _host_main(channel: Any, target: str, payload: Any, limits: WorkerLimits, scratch: str) -> None:
    """Entry point of the candidate host: no way back to the parent but its exit status; it talks
    to the judge over `channel` only. Calls target(Channel(channel), payload) with the sandbox
    report in payload["sandbox"]. Never returns normally."""
    code = 0
    try:
        report = _enter_child(limits, scratch, {channel.fileno()})
        from .wire import Channel

        _target(target)(Channel(channel), {**payload, "sandbox": report.to_dict()})
    except BaseException:  # noqa: BLE001 - the judge sees the channel close; the log says why
        traceback.print_exc()
        code = 3
    finally:
        _flush_std()
        os._exit(code)


def _memory_mib(proc: psutil.Process) -> float:
    """Resident memory of one process (MiB; 0 when it is gone)."""
    try:
        return proc.memory_info().rss / 2**20
    except psutil.Error:
        return 0.0


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


def _read_result(recv: Any, nonce: str, proc: Any, requests: tuple[str, ...] = ()) -> WorkerOutcome:
    """Read the child's result message. Anything else on the pipe (bytes that are not our JSON, a
    wrong nonce, a second message) means code in the child wrote to it: "tampered". A message of
    a kind in `requests` comes back as WorkerOutcome(kind) for the caller to act on and read on."""
    try:
        message = json.loads(recv.recv_bytes(MAX_RESULT_BYTES))
        ok = isinstance(message, dict) and message.get("nonce") == nonce and message.get("kind") in ("returned", "raised", *requests)
        if ok and message["kind"] in requests:
            return WorkerOutcome(message["kind"])
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


@dataclasses.dataclass
class JudgedOutcome:
    """What happened in one two-process evaluation (`run_judged`).

    kind: "returned" (the judge's value is set), "raised" (the judge's code raised: error),
    "crashed" (the judge died without a result), "timeout" (wall limit: both killed), "memory"
    (the candidate host's process tree went over its resident-memory limit: both killed),
    "judge_memory" (the judge did), "tampered" (the judge's result pipe carried something else).
    """

    kind: str
    value: Any = None
    error: str = ""
    log: str = ""
    """The candidate host's log (its stdout and stderr: prints, compiler output, tracebacks)."""
    judge_log: str = ""
    host_exitcode: int | None = None
    """The host's exit status if it had exited before the end (negative: killed by that signal)."""
    peak_rss_mib: float = 0.0
    """Peak resident memory of the host's process tree (MiB)."""
    wall_s: float = 0.0
    host_objects: list[str] = dataclasses.field(default_factory=list)
    """Shared objects from `watch_dirs` seen mapped into the host's process (its own builds)."""

    @property
    def host_signal(self) -> str:
        """"SIGSEGV" etc. when the host was ended by a signal, else ""."""
        return WorkerOutcome("crashed", exitcode=self.host_exitcode).signal_name


def _mapped_objects(pid: int, dirs: list[str]) -> set[str]:
    """Paths of shared objects under `dirs` mapped into process `pid` (read from outside)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            paths = {line.split(maxsplit=5)[-1].strip() for line in f if ".so" in line}
    except OSError:
        return set()
    return {p for p in paths if any(p.startswith(d.rstrip("/") + "/") for d in dirs)}


def run_judged(
    judge_target: str,
    judge_payload: dict[str, Any],
    judge_limits: WorkerLimits,
    host_target: str,
    host_payload: dict[str, Any],
    host_limits: WorkerLimits,
    watch_dirs: list[str] | None = None,
) -> JudgedOutcome:
    """Run an evaluation as two sandboxed siblings joined by a socket pair: the judge, which
    returns the result to this process (JSON over a pipe only it holds, with a nonce), and the
    candidate host, which has no channel to this process at all.

    The judge is called as judge_target(payload, channel, link) and gets `payload["deadline"]` (the
    absolute monotonic time at which this process kills both); `link.end_host()` asks this process
    to end the host (and every process of its uid) before the judge goes on. The host is called as
    host_target(channel, payload). This process watches wall time and each tree's resident memory
    (`host_limits.memory_mib`, `judge_limits.memory_mib`), reads which shared objects under
    `watch_dirs` (and the host's scratch directory) the host maps, and kills both trees, and every
    process of their sandbox uids, at the end. Never raises for anything either child does;
    raises OSError only if no child can be started.
    """
    ctx = _context()
    j_scratch = tempfile.mkdtemp(prefix="cudal1-judge-")
    h_scratch = tempfile.mkdtemp(prefix="cudal1-eval-")
    for d in (j_scratch, h_scratch):
        os.chmod(d, 0o777)  # the children drop to unprivileged users
    judge_end, host_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    recv, send = ctx.Pipe(duplex=False)
    ack_recv, ack_send = ctx.Pipe(duplex=False)
    nonce = secrets.token_hex(16)
    start = time.monotonic()
    deadline = start + judge_limits.wall_timeout_s
    judge_payload = {**judge_payload, "deadline": deadline}
    host = ctx.Process(target=_host_main, args=(host_end, host_target, host_payload, host_limits, h_scratch), daemon=True)
    judge = ctx.Process(target=_child_main, args=(send, nonce, judge_target, judge_payload, judge_limits, j_scratch, judge_end,
                                                  ack_recv), daemon=True)
    _start_without_main(host)
    _start_without_main(judge)
    for end in (send, judge_end, host_end, ack_recv):
        end.close()
    watch = [*(watch_dirs or []), h_scratch]
    objects: set[str] = set()
    host_ps, judge_ps = psutil.Process(host.pid), psutil.Process(judge.pid)
    peak = 0.0
    outcome: JudgedOutcome | None = None
    # Looking costs CPU time the two children are being timed on (a tree walk reads every /proc
    # entry; a maps read takes the candidate's mm lock): process memory every 0.25 s, the whole
    # tree and the mapped objects every second.
    next_look, next_tree = 0.0, 0.0
    host_exit: int | None = None
    host_ended = False
    try:
        while outcome is None:
            if recv.poll(0.1):
                got = _read_result(recv, nonce, judge, requests=("end_host",))
                if got.kind == "end_host":  # the judge is done with the candidate: end it now
                    if host.is_alive():
                        objects |= _mapped_objects(host.pid, watch)
                    host_exit, host_ended = _end_host(host, host_limits), True
                    ack_send.send_bytes(b"ended")
                    continue
                outcome = JudgedOutcome(got.kind, value=got.value, error=got.error)
                break
            now = time.monotonic()
            if now < next_look:
                continue
            next_look = now + 0.25
            tree = now >= next_tree
            if tree:
                next_tree = now + 1.0
            if host.is_alive():
                peak = max(peak, _tree_memory_mib(host_ps) if tree else _memory_mib(host_ps))
                if tree:
                    objects |= _mapped_objects(host.pid, watch)
            judge_mib = _tree_memory_mib(judge_ps) if tree else _memory_mib(judge_ps)
            if peak > host_limits.memory_mib:
                outcome = JudgedOutcome("memory", error=f"resident memory {peak:.0f} MiB > limit {host_limits.memory_mib} MiB")
            elif judge_mib > judge_limits.memory_mib:
                outcome = JudgedOutcome("judge_memory", error=f"the judge went over {judge_limits.memory_mib} MiB")
            elif now > deadline:
                outcome = JudgedOutcome("timeout", error=f"no result within {judge_limits.wall_timeout_s:.0f} s")
            elif not judge.is_alive() and not recv.poll(0):
                judge.join(0.5)
                outcome = JudgedOutcome("crashed", error=f"the judge died ({_exit_text(judge.exitcode)})")
    finally:
        if host.is_alive():
            objects |= _mapped_objects(host.pid, watch)
        if not host_ended:
            host_exit = _end_host(host, host_limits)
        root = os.geteuid() == 0
        _kill_tree(judge.pid, default_uid(judge.pid) if judge_limits.sandbox and root else None)
        judge.join(5.0)
        recv.close()
        ack_send.close()
    outcome.host_exitcode = host_exit
    outcome.peak_rss_mib = round(peak, 1)
    outcome.wall_s = round(time.monotonic() - start, 3)
    outcome.host_objects = sorted(objects)
    outcome.log = _read_log(h_scratch)
    outcome.judge_log = _read_log(j_scratch)
    shutil.rmtree(h_scratch, ignore_errors=True)
    shutil.rmtree(j_scratch, ignore_errors=True)
    return outcome


def _end_host(host: Any, limits: WorkerLimits) -> int | None:
    """Kill the candidate host's tree and every process of its sandbox uid; return its exit
    status as it was before the kill (None if it was still running)."""
    before = None if host.is_alive() else host.exitcode
    _kill_tree(host.pid, default_uid(host.pid) if limits.sandbox and os.geteuid() == 0 else None)
    host.join(5.0)
    return before


def _exit_text(exitcode: int | None) -> str:
    return WorkerOutcome("crashed", exitcode=exitcode).signal_name or f"exit code {exitcode}"


def _read_log(scratch: str) -> str:
    try:
        return truncate_log(Path(scratch, "worker.log").read_text(errors="replace"))
    except OSError:
        return ""
