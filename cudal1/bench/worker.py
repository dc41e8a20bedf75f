"""Run untrusted code in fresh, limited, disposable processes: `run_isolated` (one child that
returns a value) and `run_judged` (an evaluation: a judge, a candidate host and a reference host,
siblings joined by socket pairs, of which only the judge can send this process anything).

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
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import psutil

from . import allocator
from .cgroup import CandidateCgroup
from .result import Label, truncate_log
from .sandbox import NOBODY_GID, default_uid, remove_ipc_objects

# The server imports what every child needs, once; none of it runs candidate code or touches CUDA.
_PRELOAD = ["cudal1.bench.allocator", "torch", "cudal1.bench.judge", "cudal1.bench.host", "cudal1.bench.targets"]
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


SERVER_ENV = {
    "GOMP_SPINCOUNT": "10000",
    "KMP_BLOCKTIME": "0",
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "MALLOC_MMAP_MAX_": "0",
    "MALLOC_TRIM_THRESHOLD_": str(1 << 40),
    "MALLOC_TOP_PAD_": str(64 << 20),
}
"""Environment of the fork server (so of every child). OpenMP threads spin only briefly (tens of
microseconds) before they sleep, instead of up to 200 ms after each parallel region: the judge and
the candidate take turns on the same cores, and a spinning pool left by one would steal them from
the other's timed call. glibc keeps freed memory up to 32 MiB per block in the heap instead of
returning it to the system: otherwise a process that holds one call's output while it makes the
next (the candidate's does) faults in fresh pages on some calls and not others, which on the CPU
can double a call's time (seen here: 5 or 10 ms for the same 16 MB relu)."""


def _start_server() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    env = {**SERVER_ENV, **allocator.server_env()}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # read once, when the server starts (and its OpenMP and allocator load)
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
    """Directories the child may write besides its scratch dir (e.g. its build directory)."""
    private_dirs: list[str] = dataclasses.field(default_factory=list)
    """Directories nothing beneath which the child may read, but its scratch and `writable_dirs`
    (e.g. the build cache: a candidate reads only its own build directory)."""
    confine_reads: bool = False
    """The child reads only the toolchain and its own dirs (`SandboxPolicy.confine_reads`)."""
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    """Extra environment for the child (e.g. TORCH_EXTENSIONS_DIR, CUDA_VISIBLE_DEVICES)."""
    gid: int | None = None
    """The group the child runs as after the privilege drop (None: nogroup, shared by every
    child). Given, the child's scratch directory is made its group's alone (root:gid, mode
    0o2770) instead of world-writable: a process of another group cannot enter it by mode."""
    cpus: tuple[int, ...] | None = None
    """Cores the child and everything it starts may run on (`cudal1.bench.cores`), set before any
    untrusted code; torch's intra-op threads are cut to their number. None: the fork server's."""


@dataclasses.dataclass
class WorkerOutcome:
    """What happened to one child.

    kind: "returned" (value set), "raised" (error set: the target raised), "crashed" (the process
    died without a result: signal or exit), "timeout" (wall limit; killed), "memory" (resident
    memory limit; killed), "tampered" (something other than the evaluator wrote to the result pipe),
    "exited" (a child without a result pipe, `run_isolated(reply=False)`, exited with status 0).
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
        """ "SIGSEGV" etc. when the child was ended by a signal, else ""."""
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
    _pin(limits.cpus)
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
            confine_reads=limits.confine_reads,
            **({"gid": limits.gid} if limits.gid is not None else {}),
        ),
        scratch=Path(scratch),
        writable=[Path(p) for p in limits.writable_dirs],
        hidden=[Path(p) for p in limits.private_dirs],
    )
    _die_with_parent()
    return report


def _pin(cpus: tuple[int, ...] | None) -> None:
    """Pin this (still single-threaded) child to `cpus` and run no more torch threads than that;
    a no-op for None or where affinity is not available (`cudal1.bench.cores.pin`)."""
    from .cores import pin

    if pin(cpus):
        import torch

        if torch.get_num_threads() > len(cpus):
            torch.set_num_threads(len(cpus))


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


def _child_main(
    conn: Any,
    nonce: str,
    target: str,
    payload: Any,
    limits: WorkerLimits,
    scratch: str,
    channels: dict[str, Any] | None = None,
    link: Any = None,
) -> None:
    """Entry point of a child that returns a value to the parent. With `channels` (role -> a
    socket to a sibling) and `link` (a socket to the parent), the target is called as
    target(payload, {role: Channel}, readers.ParentLink(link)). Never returns normally: ends with
    os._exit."""
    code = 0
    try:
        keep = {conn.fileno()} | ({s.fileno() for s in channels.values()} | {link.fileno()} if channels else set())
        report = _enter_child(limits, scratch, keep)
        fn = _target(target)
        if channels:
            from .readers import ParentLink
            from .wire import Channel

            value = fn(payload, {role: Channel(s) for role, s in channels.items()}, ParentLink(link))
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


def _offer_builder(builder: Any) -> None:
    """Tell the code of this child where its builder socket is (`cudal1.bench.builder`)."""
    if builder is not None:
        from .builder import ENV_FD

        os.environ[ENV_FD] = str(builder.fileno())


def _blind_main(target: str, payload: Any, limits: WorkerLimits, scratch: str, builder: Any = None) -> None:
    """Entry point of a child with no way back to the parent but its exit status and the files it
    leaves (`run_isolated(..., reply=False)`): it holds no pipe, no nonce, and no socket but, when
    given, its `builder` (`cudal1.bench.builder`: it can only ask for builds), so code it imports
    can forge nothing. Calls target(payload); exits 0 when it returns, 3 when it raised."""
    code = 0
    try:
        _enter_child(limits, scratch, {builder.fileno()} if builder is not None else set())
        _offer_builder(builder)
        _target(target)(payload)
    except BaseException:  # noqa: BLE001 - the log says why; the parent sees the exit status
        traceback.print_exc()
        code = 3
    finally:
        _flush_std()
        os._exit(code)


def _host_main(
    channel: Any, target: str, payload: Any, limits: WorkerLimits, scratch: str, builder: Any = None
) -> None:
    """Entry point of a host (candidate or reference): no way back to the parent but its exit
    status; it talks to the judge over `channel` only, and, when given, asks for builds over
    `builder` (`cudal1.bench.builder`). Calls target(Channel(channel), payload) with the sandbox
    report in payload["sandbox"]. Never returns normally."""
    code = 0
    try:
        report = _enter_child(
            limits, scratch, {channel.fileno()} | ({builder.fileno()} if builder is not None else set())
        )
        _offer_builder(builder)
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
    every process of its sandbox uid (which catches double-forked, re-parented leftovers, and with
    `kill_every_process_of` one that keeps forking anew), then
    remove the SysV IPC objects that uid left in this IPC namespace. The
    child goes first: were its compilers killed first, it could see them fail and record a
    compile error that was only the kill."""
    try:
        doomed = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        doomed = []
    if sandbox_uid is not None and sandbox_uid not in (0, os.getuid()):
        doomed += [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == sandbox_uid]
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
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
    if sandbox_uid is not None and sandbox_uid not in (0, os.getuid()):
        kill_every_process_of(sandbox_uid)
        # Normally the child's own IPC namespace went with its processes; where the sandbox could
        # not make one, what its uid left in this one goes now (`sandbox.remove_ipc_objects`).
        try:
            psutil.wait_procs(doomed, timeout=0.5)  # killed ones create nothing more
        except psutil.Error:
            pass
        remove_ipc_objects(sandbox_uid)


def kill_every_process_of(uid: int) -> None:
    """SIGKILL every process of `uid` at once: `kill(-1, SIGKILL)` from a short-lived process
    running as that uid, which the kernel sends to every process the sender may signal, itself
    excepted, in one pass that no fork can slip out of. A listing of the uid's processes misses
    one that forks and lets its parent exit between the listing and the kill (a hopper, as a
    compiler -wrapper of the candidate's ran). Runs the `kill` program (procps or util-linux),
    else this interpreter (which the uid must be able to execute). Needs root (to take the uid);
    never raises."""
    if os.geteuid() != 0 or uid == 0:
        return
    command = shutil.which("kill")
    argv = [command, "-9", "-1"] if command else [sys.executable, "-c", "import os; os.kill(-1, 9)"]
    try:
        subprocess.run(
            argv,
            user=uid,
            group=NOBODY_GID,
            extra_groups=[],
            check=False,
            timeout=10,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        pass


def _read_result(recv: Any, nonce: str, proc: Any) -> WorkerOutcome:
    """Read the child's one result message. Anything else on the pipe (bytes that are not our
    JSON, a wrong nonce, a second message) means code in the child wrote to it: "tampered"."""
    try:
        message = json.loads(recv.recv_bytes(MAX_RESULT_BYTES))
        ok = (
            isinstance(message, dict)
            and message.get("nonce") == nonce
            and message.get("kind") in ("returned", "raised")
        )
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


ORPHAN_AGE_S = 3600.0
"""A scratch directory is swept (`sweep_orphaned_scratch`) only once it is this old (s) and the
process that made it is gone: the age guards a process of another PID namespace that shares the
temporary directory and happens to reuse the number."""
_SCRATCH_KINDS = ("judge", "eval", "ref")
_swept: set[str] = set()


def make_scratch(kind: str, root: str | None = None) -> str:
    """A fresh scratch directory `cudal1-<kind>-<pid>-XXXX` under `root` (default: the temporary
    directory), named after this process so that one left behind when this process is killed
    can be told from a live one. Sweeps orphans there first, once per process and directory."""
    where = root or tempfile.gettempdir()
    if where not in _swept:
        _swept.add(where)
        sweep_orphaned_scratch(where)
    return tempfile.mkdtemp(prefix=f"cudal1-{kind}-{os.getpid()}-", dir=where)


def sweep_orphaned_scratch(root: str, min_age_s: float = ORPHAN_AGE_S) -> list[str]:
    """Remove the scratch directories under `root` (`make_scratch`) whose process no longer
    exists and that are at least `min_age_s` old: an evaluation's process killed outright (an
    actor lost, SIGKILL) never reaches its own cleanup. Returns the paths removed; never raises."""
    removed: list[str] = []
    try:
        names = os.listdir(root)
    except OSError:
        return removed
    now = time.time()
    for name in names:
        parts = name.split("-")
        if len(parts) < 4 or parts[0] != "cudal1" or parts[1] not in _SCRATCH_KINDS or not parts[2].isdigit():
            continue
        path = os.path.join(root, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or now - info.st_mtime < min_age_s or _alive(int(parts[2])):
            continue
        remove_tree(path)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    """Whether a process `pid` exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def open_to_child(path: str, limits: WorkerLimits | None) -> None:
    """Make `path` (a directory the parent created) usable by the child that `limits` describe,
    which may drop to an unprivileged user: its group's alone (root:gid, mode 0o2770, new files
    inherit the group) when the limits name a group and this process may give it, else
    world-writable (mode 0o777)."""
    gid = limits.gid if limits is not None and limits.sandbox else None
    if gid is not None and os.geteuid() == 0:
        os.chown(path, 0, gid)
        os.chmod(path, 0o2770)
    else:
        os.chmod(path, 0o777)


def run_isolated(
    target: str,
    payload: Any,
    limits: WorkerLimits | None = None,
    scratch_root: str | None = None,
    keep_scratch: bool = False,
    reply: bool = True,
    builder: socket.socket | None = None,
    cancel: threading.Event | None = None,
) -> WorkerOutcome:
    """Run `target(payload)` ("package.module:function") in a fresh sandboxed child.

    `payload` must be picklable; the target's return value must be JSON-serializable (it travels
    back as JSON, so that nothing the child sends can run code here). With `reply=False` the child
    gets no result pipe and no nonce at all (`_blind_main`: for a target that imports candidate
    code, which could otherwise find both in its own process and forge the result); the outcome
    is then "exited" (exit status 0) or "crashed", and what the child has to say it leaves in
    files the caller reads as untrusted. `builder`: the child's end of a build service's socket
    (`cudal1.bench.builder.BuildService`), handed to a child without a result pipe (closed here once
    the child holds it). `cancel`: once set, the child is killed and the outcome is "timeout".
    Never raises for anything the child does; raises OSError only if no child can be started at all.
    """
    limits = limits or WorkerLimits()
    ctx = _context()
    scratch = make_scratch("eval", scratch_root)
    open_to_child(scratch, limits)
    recv = send = None
    nonce = ""
    if reply:
        recv, send = ctx.Pipe(duplex=False)
        nonce = secrets.token_hex(16)
        proc = ctx.Process(target=_child_main, args=(send, nonce, target, payload, limits, scratch), daemon=True)
    else:
        proc = ctx.Process(target=_blind_main, args=(target, payload, limits, scratch, builder), daemon=True)
    start = time.monotonic()
    try:
        _start_without_main(proc)
    finally:
        for end in (send, builder):
            if end is not None:
                end.close()
    ps = psutil.Process(proc.pid)
    peak = 0.0
    outcome: WorkerOutcome | None = None
    deadline = start + limits.wall_timeout_s
    try:
        while outcome is None:
            if recv is not None and recv.poll(0.05):
                outcome = _read_result(recv, nonce, proc)
                break
            if recv is None:
                proc.join(0.05)
            peak = max(peak, _tree_memory_mib(ps))
            if peak > limits.memory_mib:
                outcome = WorkerOutcome(
                    "memory", error=f"resident memory {peak:.0f} MiB > limit {limits.memory_mib} MiB"
                )
            elif time.monotonic() > deadline:
                outcome = WorkerOutcome("timeout", error=f"no result within {limits.wall_timeout_s:.0f} s")
            elif cancel is not None and cancel.is_set():
                outcome = WorkerOutcome("timeout", error="cancelled: the process it served was ended")
            elif not proc.is_alive() and (recv is None or not recv.poll(0)):
                proc.join(0.5)
                kind = "exited" if recv is None and proc.exitcode == 0 else "crashed"
                outcome = WorkerOutcome(kind, exitcode=proc.exitcode)
    finally:
        _kill_tree(proc.pid, default_uid(proc.pid) if limits.sandbox and os.geteuid() == 0 else None)
        proc.join(5.0)
        if recv is not None:
            recv.close()
    if outcome.exitcode is None and outcome.kind == "crashed":
        outcome.exitcode = proc.exitcode
    outcome.peak_rss_mib = round(peak, 1)
    outcome.wall_s = round(time.monotonic() - start, 3)
    outcome.log = _read_log(scratch)
    if not keep_scratch:
        remove_tree(scratch)
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
    host_objects: list[dict[str, str]] = dataclasses.field(default_factory=list)
    """Files under `watch_dirs` (and the host's Triton cache) seen mapped into the host's process
    that are ELF shared objects, still the file that was mapped when the evaluation ended:
    {"path", "sha256"} (`_mapped_fingerprints`). Whether one is a build's product is for the
    caller to decide (`cudal1.bench.labels.built_objects`)."""
    oom_killed: bool = False
    """The kernel's OOM killer ended a process of the host's control group (its memory limit)."""
    containment: str = ""
    """How the host's process tree was held: its control group, or why there was none."""

    @property
    def host_signal(self) -> str:
        """ "SIGSEGV" etc. when the host was ended by a signal, else ""."""
        return WorkerOutcome("crashed", exitcode=self.host_exitcode).signal_name


def _mapped_objects(pid: int, dirs: list[str]) -> set[tuple[str, int, int]]:
    """(path, device, inode) of each file under `dirs` mapped into process `pid`, read from
    outside (/proc/<pid>/maps), whatever its name; a file deleted since it was mapped is left
    out."""
    prefixes = tuple(d.rstrip("/") + "/" for d in dirs)
    found: set[tuple[str, int, int]] = set()
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                fields = line.split(maxsplit=5)
                if len(fields) < 6 or not fields[5].startswith(prefixes):
                    continue
                path = fields[5].rstrip("\n")
                if path.endswith(" (deleted)"):
                    continue
                major, _, minor = fields[3].partition(":")
                found.add((path, os.makedev(int(major, 16), int(minor, 16)), int(fields[4])))
    except (OSError, ValueError):
        return found
    return found


ELF_SHARED = (b"\x7fELF", 3)
"""An ELF file's magic, and e_type ET_DYN (a shared object)."""


def _mapped_fingerprints(
    mapped: set[tuple[str, int, int]], limit: int = 64, budget_bytes: int = 1 << 30
) -> list[dict[str, str]]:
    """{"path", "sha256"} of each mapped file (`_mapped_objects`) that is still, at its path, the
    file that was mapped (same device and inode, a regular file, not reached through a link) and
    is an ELF shared object; at most `limit` of them, and files of `budget_bytes` in all (the
    candidate chooses what it maps: it cannot keep the parent hashing for long). Opened as
    untrusted files are (`read_untrusted`): a FIFO or a link planted there is not waited on or
    followed. Never raises."""
    import hashlib

    out: list[dict[str, str]] = []
    for path, dev, ino in sorted(mapped)[: 4 * limit]:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            info = os.fstat(fd)
            if (
                not stat.S_ISREG(info.st_mode)
                or (info.st_dev, info.st_ino) != (dev, ino)
                or info.st_size > budget_bytes
            ):
                continue  # another file now lies at the path (not what the process mapped), or too much to read
            head = os.pread(fd, 64, 0)
            if len(head) < 18 or head[:4] != ELF_SHARED[0]:
                continue
            if int.from_bytes(head[16:18], "little" if head[5] == 1 else "big") != ELF_SHARED[1]:
                continue
            budget_bytes -= info.st_size
            digest = hashlib.sha256()
            offset = 0
            while chunk := os.pread(fd, 1 << 20, offset):
                digest.update(chunk)
                offset += len(chunk)
        except OSError:
            continue
        finally:
            os.close(fd)
        entry = {"path": path, "sha256": digest.hexdigest()}
        if entry not in out:
            out.append(entry)
        if len(out) >= limit:
            break
    return out


def run_judged(
    judge_target: str,
    judge_payload: dict[str, Any],
    judge_limits: WorkerLimits,
    host_target: str,
    host_payload: dict[str, Any],
    host_limits: WorkerLimits,
    watch_dirs: list[str] | None = None,
    reference_limits: WorkerLimits | None = None,
    device_lock: Any = None,
    builder: socket.socket | None = None,
    end_builds: Callable[[], Any] | None = None,
) -> JudgedOutcome:
    """Run an evaluation as sandboxed siblings: the judge, which returns the result to this process
    (JSON over a pipe only it holds, with a nonce); the candidate host, which has no channel to this
    process at all; and, with `reference_limits`, a reference host (the same `host_target`, which
    the judge tells to run only the task's reference). Each host is joined to the judge by a socket
    pair of its own; the hosts share nothing.

    The judge is called as judge_target(payload, {"candidate": Channel, "reference": Channel},
    link) and gets `payload["deadline"]` (the absolute monotonic time at which this process kills
    every child); through `link` (`cudal1.bench.readers.ParentLink`) it asks this process to read a
    host's memory (CPU) or to end the candidate host (and every process of its uid) before it goes
    on. A host is called as host_target(channel, payload). This process watches wall time and each
    tree's resident memory (`host_limits.memory_mib`, `judge_limits.memory_mib`,
    `reference_limits.memory_mib`), reads which shared objects under `watch_dirs` (and the
    candidate host's scratch directory) the candidate host maps, and kills every tree, and every
    process of their sandbox uids, at the end. `device_lock` (`cudal1.bench.devicelock.DeviceLock`)
    is held while the judge asks for it (the wall-time limit grows by the time spent waiting for
    it) and released at the latest when the evaluation ends. `builder`: the candidate host's end
    of a build service's socket (`cudal1.bench.builder.BuildService`), closed here once the host
    holds it; `end_builds` (the service's `close`) is called when the judge asks, before it times
    anything of the candidate's, and when the candidate host is ended: a build child (which runs
    compilers the candidate's flags can choose) then no longer runs beside a timed call. Never
    raises for anything a child does; raises OSError only if no child can be started.
    """
    ctx = _context()
    j_scratch = make_scratch("judge")
    h_scratch = make_scratch("eval")
    r_scratch = make_scratch("ref") if reference_limits is not None else None
    for d, lim in ((j_scratch, judge_limits), (h_scratch, host_limits), (r_scratch, reference_limits)):
        if d is not None:
            open_to_child(d, lim)
    judge_end, host_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    link_judge, link_parent = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    channels = {"candidate": judge_end}
    closing = [judge_end, host_end, link_judge]
    ref_host = None
    if reference_limits is not None:
        ref_judge_end, ref_host_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        channels["reference"] = ref_judge_end
        closing += [ref_judge_end, ref_host_end]
        ref_host = ctx.Process(
            target=_host_main, args=(ref_host_end, host_target, host_payload, reference_limits, r_scratch), daemon=True
        )
    recv, send = ctx.Pipe(duplex=False)
    closing.append(send)
    nonce = secrets.token_hex(16)
    start = time.monotonic()
    deadline = start + judge_limits.wall_timeout_s
    judge_payload = {**judge_payload, "deadline": deadline}
    host = ctx.Process(
        target=_host_main, args=(host_end, host_target, host_payload, host_limits, h_scratch, builder), daemon=True
    )
    if builder is not None:
        closing.append(builder)
    judge = ctx.Process(
        target=_child_main,
        args=(send, nonce, judge_target, judge_payload, judge_limits, j_scratch, channels, link_judge),
        daemon=True,
    )
    group = CandidateCgroup.create(host_limits.memory_mib, host_limits.max_processes) if host_limits.sandbox else None
    _start_without_main(host)
    if group is not None:
        try:
            group.add(host.pid)  # before any candidate code: that waits for the judge's setup
        except OSError:
            group.remove()
            group = None
    if ref_host is not None:
        _start_without_main(ref_host)
    _start_without_main(judge)
    for end in closing:
        end.close()
    watched = [
        os.path.realpath(d) for d in [*(watch_dirs or []), os.path.join(h_scratch, ".triton")]
    ]  # maps name real paths
    keeper = _HostKeeper(
        host,
        host_limits,
        watched,
        link_parent,
        group,
        reference=ref_host,
        device_lock=device_lock,
        end_builds=end_builds,
    )
    judge_ps = psutil.Process(judge.pid)
    ref_ps = psutil.Process(ref_host.pid) if ref_host is not None else None
    outcome: JudgedOutcome | None = None
    # Looking costs CPU time the children are being timed on (a tree walk reads every /proc
    # entry; a maps read takes the candidate's mm lock): process memory every 0.25 s, the whole
    # tree and the mapped objects every second.
    next_look, next_tree = 0.0, 0.0
    try:
        while outcome is None:
            if recv.poll(0.1):
                got = _read_result(recv, nonce, judge)
                outcome = JudgedOutcome(got.kind, value=got.value, error=got.error)
                break
            now = time.monotonic()
            if now < next_look:
                continue
            next_look = now + 0.25
            tree = now >= next_tree
            if tree:
                next_tree = now + 1.0
            keeper.look(tree)
            judge_mib = _tree_memory_mib(judge_ps) if tree else _memory_mib(judge_ps)
            ref_mib = (_tree_memory_mib(ref_ps) if tree else _memory_mib(ref_ps)) if ref_ps is not None else 0.0
            if keeper.peak > host_limits.memory_mib or keeper.oom_killed():
                outcome = JudgedOutcome(
                    "memory", error=f"resident memory {keeper.peak:.0f} MiB > limit {host_limits.memory_mib} MiB"
                )
            elif judge_mib > judge_limits.memory_mib:
                outcome = JudgedOutcome("judge_memory", error=f"the judge went over {judge_limits.memory_mib} MiB")
            elif reference_limits is not None and ref_mib > reference_limits.memory_mib:
                outcome = JudgedOutcome(
                    "judge_memory", error=f"the reference host went over {reference_limits.memory_mib} MiB"
                )
            elif now > deadline + keeper.waited(now):
                outcome = JudgedOutcome("timeout", error=f"no result within {judge_limits.wall_timeout_s:.0f} s")
            elif not judge.is_alive() and not recv.poll(0):
                judge.join(0.5)
                outcome = JudgedOutcome("crashed", error=f"the judge died ({_exit_text(judge.exitcode)})")
    finally:
        keeper.end(gone=_host_gone(outcome))
        oom_killed = keeper.oom_killed()  # before the group is removed
        root = os.geteuid() == 0
        for child, limits in ((judge, judge_limits), (ref_host, reference_limits)):
            if child is not None and limits is not None:
                _kill_tree(child.pid, default_uid(child.pid) if limits.sandbox and root else None)
                child.join(5.0)
        keeper.close()
        recv.close()
    outcome.host_exitcode = keeper.exit_before_end
    outcome.oom_killed = oom_killed
    outcome.containment = (
        group.describe()
        if group is not None
        else f"no control group ({CandidateCgroup.unavailable_reason or 'the sandbox is off'}): the parent watches resident memory and kills by uid"
    )
    outcome.peak_rss_mib = round(keeper.peak, 1)
    outcome.wall_s = round(time.monotonic() - start, 3)
    outcome.host_objects = _mapped_fingerprints(keeper.objects)  # before the scratch (Triton's cache) goes
    outcome.log = _read_log(h_scratch)
    outcome.judge_log = _read_log(j_scratch)
    if r_scratch is not None:
        ref_log = _read_log(r_scratch)
        if ref_log.strip():
            outcome.judge_log += "\n[reference host]\n" + ref_log
        remove_tree(r_scratch)
    remove_tree(h_scratch)
    remove_tree(j_scratch)
    return outcome


HOST_EXIT_GRACE_S = 1.0
"""How long the parent waits for a candidate host the judge saw go to finish exiting by itself
before it kills it (`_HostKeeper.end`)."""


def _host_gone(outcome: JudgedOutcome | None) -> bool:
    """Whether the judge's result says the candidate host died (`Label.HOST_DIED`)."""
    value = outcome.value if outcome is not None and outcome.kind == "returned" else None
    labels = value.get("labels") if isinstance(value, dict) else None
    return isinstance(labels, list) and Label.HOST_DIED in labels


class _HostKeeper:
    """The parent's side of the candidate host during `run_judged`: watches its memory and mapped
    objects, and, from a thread, serves the judge's requests over their link (read a host's
    memory, the candidate's or the reference's, into the judge's buffer for it; end the candidate
    host)."""

    def __init__(
        self,
        host: Any,
        limits: WorkerLimits,
        watch: list[str],
        link: socket.socket,
        group: CandidateCgroup | None = None,
        reference: Any = None,
        device_lock: Any = None,
        end_builds: Callable[[], Any] | None = None,
    ) -> None:
        from .readers import HostMemory
        from .wire import Channel

        self.host, self.limits, self.watch, self.group = host, limits, watch, group
        self.ps = psutil.Process(host.pid)
        self.memory = {"candidate": HostMemory(host.pid)}
        if reference is not None:
            self.memory["reference"] = HostMemory(reference.pid)
        self.objects: set[tuple[str, int, int]] = set()
        self.peak = 0.0
        self.exit_before_end: int | None = None
        self.ended = False
        self._cpu_start: dict[int, int] = {}  # pid (0: the control group) -> CPU ns at `cpu_interval(start=True)`
        self._thread_start: dict[int, int] = {}  # tid of the host's process -> its CPU ns at that start
        self.device_lock = device_lock
        self.end_builds = end_builds
        self.waited_s = 0.0  # for the device lock: the parent's deadline moves by as much
        self._waiting_since: float | None = None
        self._lock = threading.Lock()  # a memory read and the end of the host never overlap
        self._objects_lock = threading.Lock()
        self._chan = Channel(link)
        self._thread = threading.Thread(target=self._serve, name="cudal1-judge-link", daemon=True)
        self._thread.start()

    def look(self, tree: bool) -> None:
        """Sample the host's resident memory (its whole tree when `tree`) and mapped objects. Takes
        no lock: a read the judge asked for, timed, must not wait behind a scan of the maps."""
        if self.ended or not self.host.is_alive():
            return
        if self.group is not None:  # the kernel's count: shared memory and daemons included
            self.peak = max(self.peak, self.group.peak_mib())
        self.peak = max(self.peak, _tree_memory_mib(self.ps) if tree else _memory_mib(self.ps))
        if tree:
            found = _mapped_objects(self.host.pid, self.watch)
            with self._objects_lock:
                self.objects |= found

    def end(self, gone: bool = False) -> None:
        """Read the host's mapped objects once more, then kill its tree and every process of its
        sandbox uid (once). `gone`: the judge saw the host's socket close, so the host is dying
        by itself; it gets up to `HOST_EXIT_GRACE_S` to be reaped first, so that its own exit
        status (a signal it raised, an exit code) is what the result reports, not the parent's
        SIGKILL."""
        with self._lock:
            if self.ended:
                return
            self.stop_builds()
            if gone:
                # Closing its descriptors comes early in a process's exit; being reapable comes last.
                self.host.join(HOST_EXIT_GRACE_S)
            alive = self.host.is_alive()
            if alive:
                found = _mapped_objects(self.host.pid, self.watch)
                with self._objects_lock:
                    self.objects |= found
            else:
                self.exit_before_end = self.host.exitcode
            if self.group is not None:
                self.group.kill()
            _kill_tree(self.host.pid, default_uid(self.host.pid) if self.limits.sandbox and os.geteuid() == 0 else None)
            self.host.join(5.0)
            if alive and self.host.exitcode not in (None, -signal.SIGKILL):
                # It ended by itself before the kill landed: a process that exits closes its socket
                # (the judge's cue) before it can be reaped, a window that a loaded machine widens.
                self.exit_before_end = self.host.exitcode
            self.ended = True

    def stop_builds(self) -> None:
        """End the candidate's build service (its build under way killed, later requests
        refused); once only matters, later calls do nothing new."""
        if self.end_builds is not None:
            self.end_builds()

    def pause(self, stop: bool) -> tuple[bool, int]:
        """Stop (SIGSTOP) or continue (SIGCONT) every process of the candidate
        (`_candidate_pids`). The judge stops them while it times the reference, so that no
        candidate code runs beside it on the evaluation's cores (a host spinning on its socket between its own
        round trips slowed the reference 1.5-2x on two cores, and was paid up to the clean
        baseline's high quantile). A stop waits, at most `PAUSE_WAIT_S`, until every thread of
        each process is stopped (`wait_until_stopped`). Returns (whether it signalled the
        candidate (alive and not ended), how many of its processes still had a thread running
        when the wait ended)."""
        with self._lock:
            if self.ended or not self.host.is_alive():
                return False, 0
            pids = self._candidate_pids()
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGSTOP if stop else signal.SIGCONT)
                except (ProcessLookupError, PermissionError):
                    pass
            running = wait_until_stopped(pids, PAUSE_WAIT_S) if stop else []
            return True, len(running)

    def cpu_interval(self, start: bool) -> tuple[int, int | None]:
        """With `start`, begin an interval of the candidate's CPU time (answers (0, 0)); otherwise
        (the CPU time (ns) every process of the candidate spent since it began, the most any one of
        its threads spent in it). The first: with a control group, the group's count (ended
        processes included); else, per process of `_candidate_pids`, its CPU clock (all its
        threads, ended ones included) and its reaped children's time (at the kernel's tick), summed
        over the processes alive at the end, each less its own count at the start (so a process
        that ends takes only its own time with it, never another's). The second: per thread of the
        host's own process alive at the end, its scheduler run time less its own at the start
        (`_thread_cpu_ns`); None where the kernel does not give it. Only the host's: a thread of a
        helper process that calls execve takes over its leader's tid with its own past run time,
        and so looked busier than the interval (a red team's helpers that spun 150 ms each, then
        exec'd one a round trip, made every round trip's busiest thread 138-141 ms against
        intervals of 16-50 ms, and the count charged only the time beyond the interval again:
        1.12x against an honest 0.99x); an exec in the host's own process replaces the host
        itself, its mappings of the judge's slots with it. So work in a helper process is charged
        in full, also while the host only waits for it. (0, 0) once the candidate is ended."""
        with self._lock:
            if self.ended:
                return 0, 0
            usage = self.group.cpu_ns() if self.group is not None else None
            now = {0: usage} if usage is not None else {pid: _process_cpu_ns(pid) for pid in self._candidate_pids()}
            threads = _thread_cpu_ns(self.host.pid)
            if start:
                self._cpu_start, self._thread_start = now, threads
                return 0, 0
            total = sum(max(ns - self._cpu_start.get(pid, 0), 0) for pid, ns in now.items())
            if not threads:
                return total, None
            return total, max(max(ns - self._thread_start.get(tid, 0), 0) for tid, ns in threads.items())

    def _candidate_pids(self) -> list[int]:
        """Every process of the candidate: its group's; without one, its host's tree and (as root,
        sandboxed) every process of its sandbox uid, which catches double-forked daemons."""
        if self.group is not None:
            return self.group.pids(live=True)
        pids = {self.host.pid}
        try:
            pids |= {c.pid for c in self.ps.children(recursive=True)}
        except psutil.Error:
            pass
        if self.limits.sandbox and os.geteuid() == 0:
            uid = default_uid(self.host.pid)
            if uid not in (0, os.getuid()):
                pids |= {p.pid for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid}
        return sorted(pids)

    def waited(self, now: float) -> float:
        """Seconds the judge has spent waiting for the device so far (the wait under way included)."""
        since = self._waiting_since
        return self.waited_s + (now - since if since is not None else 0.0)

    def oom_killed(self) -> bool:
        return self.group is not None and self.group.oom_kills() > 0

    def _serve(self) -> None:
        from .wire import PeerGone, ProtocolError

        try:
            while True:
                msg = self._chan.recv(max_fds=1)
                op = msg.get("op")
                memory = self.memory.get(msg.get("host", "candidate"))
                if op == "buffer" and self._chan.received_fds and memory is not None:
                    memory.share(self._chan.received_fds.pop())
                    self._chan.send("buffer")
                elif op == "read" and memory is not None:
                    with self._lock:
                        error, why, aliased = (
                            ("the candidate's process has ended", "gone", [])
                            if self.ended and memory is self.memory["candidate"]
                            else memory.read(msg.get("ranges") or [])
                        )
                    self._chan.send("read", error=error, why=why, aliased=aliased)
                elif op == "overwrite" and memory is not None:
                    with self._lock:
                        error, why = (
                            ("the candidate's process has ended", "gone")
                            if self.ended and memory is self.memory["candidate"]
                            else memory.overwrite(msg.get("ranges") or [], msg.get("byte"))
                        )
                    self._chan.send("overwrite", error=error, why=why)
                elif op == "end_host":
                    self.end()
                    self._chan.send("end_host", ended=True)
                elif op == "end_builds":
                    self.stop_builds()
                    self._chan.send("end_builds")
                elif op == "cpu_interval":
                    # The reading's span on the judge's clock (`time.perf_counter_ns`, the machine's
                    # monotonic clock): every CPU time counted lies between the start reading's
                    # beginning and the end reading's end (a stamp taken after the start reading,
                    # with the parent kept off the CPU by a busy machine, charged a spinning honest
                    # host 2-4 ms).
                    began_ns = time.perf_counter_ns()
                    ns, busiest = self.cpu_interval(msg.get("start") is True)
                    self._chan.send(
                        "cpu_interval", ns=ns, busiest_ns=busiest, began_ns=began_ns, ended_ns=time.perf_counter_ns()
                    )
                elif op == "pause_host":
                    paused, running = self.pause(msg.get("stop") is True)
                    self._chan.send("pause_host", paused=paused, running=running)
                elif op == "hold_device":
                    self._waiting_since = time.monotonic()
                    waited = self.device_lock.hold() if self.device_lock is not None else 0.0
                    self.waited_s, self._waiting_since = self.waited_s + waited, None
                    self._chan.send("hold_device", waited_s=waited)
                elif op == "release_device":
                    if self.device_lock is not None:
                        self.device_lock.release()
                    self._chan.send("release_device")
                else:
                    return
        except (PeerGone, ProtocolError, OSError):
            return

    def close(self) -> None:
        self._chan.close()
        if self.device_lock is not None:
            self.device_lock.release()
        self._thread.join(2.0)
        if self.group is not None:
            self.group.remove()


_TICK_NS = 10**9 // (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def _process_cpu_ns(pid: int) -> int:
    """CPU time (ns) of process `pid`: its CPU clock (every thread, ended threads included;
    clock_getcpuclockid's clock) plus its reaped children's user and system time
    (/proc/<pid>/stat, in ticks). 0 for a process that is gone."""
    try:
        own = time.clock_gettime_ns(((~pid) << 3) | 2)  # glibc's MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
        fields = _stat_fields(pid)
        return own + (int(fields[13]) + int(fields[14])) * _TICK_NS
    except (OSError, IndexError, ValueError):
        return 0


def _thread_cpu_ns(pid: int) -> dict[int, int]:
    """Per thread of process `pid`, keyed by tid: its run time on a CPU in ns (the first field of
    /proc/<pid>/task/<tid>/schedstat, the scheduler's own sum, not a tick count). Threads that end
    while they are read are left out; {} for a process that is gone or a kernel without schedstat
    files (no CONFIG_SCHED_INFO)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    out: dict[int, int] = {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                out[int(tid)] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return out


def _stat_fields(pid: int, tid: int | None = None) -> list[bytes]:
    """The fields of /proc/<pid>/stat (of its thread `tid`: /proc/<pid>/task/<tid>/stat) after the
    command name (the state letter first); [] when the process or thread is gone or the file
    cannot be parsed."""
    try:
        with open(f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []


PAUSE_WAIT_S = 1.0
"""How long a pause of the candidate waits for its last thread to stop (s): honest threads stop
within milliseconds; the judge fails a candidate that keeps one running longer
(`Judge._pause_candidate`)."""
_STOPPED = ("T", "t", "Z", "X", "")


def wait_until_stopped(pids: list[int], timeout_s: float) -> list[int]:
    """Wait, at most `timeout_s`, until every thread of each process of `pids` (signalled
    SIGSTOP) is stopped; returns the processes with a thread still running. A thread stops only
    on its way back to user space: one inside a long system call (a gigabyte's pwritev into a
    memfd, which the kernel interrupts for a fatal signal only) runs on, in the kernel, for
    hundreds of milliseconds after its process's main thread shows stopped (a red team's
    candidate slowed the reference that way, 1.3-1.4x paid for the reference's own work)."""
    deadline = time.monotonic() + timeout_s
    pending = list(pids)
    while pending:
        pending = [pid for pid in pending if not _all_threads_stopped(pid)]
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(0.0002)
    return pending


def _all_threads_stopped(pid: int) -> bool:
    """Whether every thread of process `pid` is stopped (or the process is gone)."""
    if _state(pid) not in _STOPPED:
        return False
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for tid in tids:
        fields = _stat_fields(pid, int(tid))  # [] for a thread that ended
        if fields and fields[0].decode() not in _STOPPED:
            return False
    return True


def _state(pid: int) -> str:
    """The scheduler state letter of process `pid` (/proc/<pid>/stat), "" when it is gone."""
    fields = _stat_fields(pid)
    return fields[0].decode() if fields else ""


def _exit_text(exitcode: int | None) -> str:
    return WorkerOutcome("crashed", exitcode=exitcode).signal_name or f"exit code {exitcode}"


def _read_log(scratch: str, limit: int = 64 * 1024) -> str:
    """The tail of a child's worker.log, at most `limit` bytes, read as `read_untrusted` reads."""
    path = os.path.join(scratch, "worker.log")
    data = read_untrusted(path, limit, tail=True)
    if data is None:
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            return ""
        return (
            "" if stat.S_ISLNK(mode) or stat.S_ISREG(mode) else "[the log was replaced by something that is not a file]"
        )
    return truncate_log(data.decode(errors="replace"))


def read_untrusted(path: str | os.PathLike, limit: int, tail: bool = False) -> bytes | None:
    """Read a file a sandboxed child could write, without trusting it: the child may have put a
    FIFO, a symbolic link (to /dev/zero, say) or a huge sparse file there. Only a regular file is
    read, not followed, without blocking. Returns its bytes, or its last `limit` bytes with
    `tail` (without: None when it is longer than `limit`), or None when it is missing, not a
    regular file or unreadable. Never raises."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (info.st_size > limit and not tail):
            return None
        return os.pread(fd, limit, max(0, info.st_size - limit))
    except OSError:
        return None
    finally:
        os.close(fd)


def remove_tree(path: str) -> None:
    """Delete a directory a child could write, never following links and never raising: `rm -rf`
    walks iteratively (a tree 5,000 levels deep overflows shutil.rmtree's recursion)."""
    try:
        subprocess.run(
            ["rm", "-rf", "--one-file-system", "--", path],
            check=False,
            timeout=120,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        pass
    if os.path.lexists(path):
        try:
            shutil.rmtree(path, ignore_errors=True)
        except RecursionError:
            pass
