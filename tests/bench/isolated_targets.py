"""Small misbehaving programs for `cudal1.bench.worker.run_isolated` tests: reusable targets.

Each target takes one `payload` dict and returns a JSON-safe dict (so the worker adds the
sandbox report under "sandbox"); a refused action is reported as {"ok": False, "error":
"ExceptionType: message", "errno": name} instead of raising, so a test can tell "the sandbox said
no" from "the target crashed". Targets that must end the child (crash, busy_loop, hang) do so.

Naming: `tests/bench/conftest.py` puts this folder on sys.path before the worker's fork server
starts (the fork server copies sys.path once, at its start), so a target is addressed as
f"{isolated_targets.__name__}:write_file" after `import isolated_targets` in a test.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def _refused(e: BaseException) -> dict[str, Any]:
    code = getattr(e, "errno", None)
    return {"ok": False, "error": f"{type(e).__name__}: {e}", "errno": errno.errorcode.get(code, "") if code else ""}


def identity(payload: dict[str, Any]) -> dict[str, Any]:
    """Who and where the child is: uid/gid/groups, cwd, HOME/TMPDIR, network namespace
    (readlink of /proc/self/ns/net), effective capabilities (hex of CapEff), resource limits
    (soft, hard) for CPU (s), NPROC, FSIZE (bytes), AS (bytes), and its thread count."""
    caps = ""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            caps = line.split()[1]
    limits = {
        name: list(resource.getrlimit(getattr(resource, f"RLIMIT_{name}")))
        for name in ("CPU", "NPROC", "FSIZE", "AS", "CORE")
    }
    return {
        "ok": True,
        "uid": os.getuid(),
        "euid": os.geteuid(),
        "gid": os.getgid(),
        "groups": os.getgroups(),
        "cwd": os.getcwd(),
        "home": os.environ.get("HOME", ""),
        "tmpdir": os.environ.get("TMPDIR", ""),
        "netns": os.readlink("/proc/self/ns/net"),
        "cap_eff": caps,
        "rlimits": limits,
        "threads": len(os.listdir("/proc/self/task")),
        "echo": payload.get("echo"),
    }


def write_file(payload: dict[str, Any]) -> dict[str, Any]:
    """Write payload["text"] (default "x") to payload["path"] (relative: inside the scratch cwd)."""
    try:
        Path(payload["path"]).write_text(payload.get("text", "x"))
        return {"ok": True}
    except OSError as e:
        return _refused(e)


def read_file(payload: dict[str, Any]) -> dict[str, Any]:
    """Read payload["path"]; returns its length in bytes."""
    try:
        return {"ok": True, "bytes": len(Path(payload["path"]).read_bytes())}
    except OSError as e:
        return _refused(e)


def connect_tcp(payload: dict[str, Any]) -> dict[str, Any]:
    """TCP connect to (payload["host"] (default 127.0.0.1), payload["port"]) within
    payload["timeout_s"] (default 2 s)."""
    try:
        with socket.create_connection(
            (payload.get("host", "127.0.0.1"), payload["port"]), timeout=payload.get("timeout_s", 2.0)
        ):
            return {"ok": True}
    except OSError as e:
        return _refused(e)


def connect_unix(payload: dict[str, Any]) -> dict[str, Any]:
    """Connect to the unix socket file payload["path"] (e.g. the worker's fork server)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(payload.get("timeout_s", 2.0))
            s.connect(payload["path"])
            return {"ok": True}
    except OSError as e:
        return _refused(e)


def fork_children(payload: dict[str, Any]) -> dict[str, Any]:
    """Fork up to payload["n"] children that sleep payload["hold_s"] (default 60) s; stops at the
    first refusal. Returns {"forked": count, "ok": all forked, "error"/"errno" of the refusal}.
    The children are left running on purpose (the worker must kill them) unless payload["reap"]."""
    pids: list[int] = []
    out: dict[str, Any] = {"ok": True}
    for _ in range(payload["n"]):
        try:
            pid = os.fork()
        except OSError as e:
            out = _refused(e)
            break
        if pid == 0:
            time.sleep(payload.get("hold_s", 60))
            os._exit(0)
        pids.append(pid)
    if payload.get("reap"):
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    out["forked"] = len(pids)
    out["pids"] = pids
    return out


def run_command(payload: dict[str, Any]) -> dict[str, Any]:
    """Run payload["argv"] (exec must work: compilers run in the sandbox); returncode and output."""
    try:
        p = subprocess.run(payload["argv"], capture_output=True, text=True, timeout=payload.get("timeout_s", 30))
        return {"ok": p.returncode == 0, "returncode": p.returncode, "stdout": p.stdout, "stderr": p.stderr}
    except (OSError, subprocess.SubprocessError) as e:
        return _refused(e)


def send_signal(payload: dict[str, Any]) -> dict[str, Any]:
    """os.kill(payload["pid"], payload.get("sig", 0)): signal 0 only asks whether it is allowed."""
    try:
        os.kill(payload["pid"], payload.get("sig", 0))
        return {"ok": True}
    except OSError as e:
        return _refused(e)


def print_output(payload: dict[str, Any]) -> dict[str, Any]:
    """Write payload["text"] through print (stdout), sys.stderr, and fd 1 and 2 directly (as C
    code would): all four must reach the worker's log."""
    text = payload.get("text", "hello")
    print(f"print:{text}", flush=True)
    print(f"stderr:{text}", file=sys.stderr, flush=True)
    os.write(1, f"fd1:{text}\n".encode())
    os.write(2, f"fd2:{text}\n".encode())
    return {"ok": True}


def allocate(payload: dict[str, Any]) -> dict[str, Any]:
    """Allocate and touch payload["mib"] MiB, hold it payload["hold_s"] (default 0) s."""
    block = bytearray(payload["mib"] * 2**20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    time.sleep(payload.get("hold_s", 0))
    return {"ok": True, "mib": payload["mib"]}


def busy_loop(payload: dict[str, Any]) -> dict[str, Any]:
    """Spin on the CPU for payload["seconds"] s of wall time (None: forever)."""
    end = None if payload.get("seconds") is None else time.monotonic() + payload["seconds"]
    n = 0
    while end is None or time.monotonic() < end:
        n += 1
    return {"ok": True, "iterations": n}


def hang(payload: dict[str, Any]) -> dict[str, Any]:
    """Sleep forever (the worker's wall limit must end it)."""
    while True:
        time.sleep(3600)


def crash(payload: dict[str, Any]) -> dict[str, Any]:
    """End the child badly; payload["how"]: "segfault" (read address 0), "abort", "exit" (os._exit
    with payload["code"], default 3), "kill" (SIGKILL itself), "raise" (RuntimeError)."""
    how = payload.get("how", "segfault")
    if how == "segfault":
        ctypes.string_at(0)
    elif how == "abort":
        os.abort()
    elif how == "exit":
        os._exit(payload.get("code", 3))
    elif how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif how == "raise":
        raise RuntimeError("candidate raised on purpose")
    raise ValueError(f"unknown crash kind {how!r}")


def affinity(payload: dict[str, Any]) -> dict[str, Any]:
    """The cores this child may run on, as it and a program it starts see them (the kernel's
    Cpus_allowed_list of each), and torch's intra-op thread count."""
    import torch

    def allowed(status: str) -> str:
        return next(
            line.split(":", 1)[1].strip() for line in status.splitlines() if line.startswith("Cpus_allowed_list")
        )

    child = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True, timeout=30).stdout
    return {
        "ok": True,
        "self": allowed(Path("/proc/self/status").read_text()),
        "child": allowed(child),
        "threads": torch.get_num_threads(),
    }


def grab_device_lock(payload: dict[str, Any]) -> dict[str, Any]:
    """What a candidate can do to another evaluation's device lock: take `DeviceLock(key)` itself,
    and open and flock every file under `payload["lock_dir"]` (where lock files lived), then say so
    in `payload["ready"]` (a file) and hold all of it for `payload["hold_s"]` seconds."""
    import fcntl

    from cudal1.bench.devicelock import DeviceLock

    got: list[str] = []
    lock = DeviceLock(payload["key"])
    try:
        lock.hold()
        got.append("DeviceLock")
    except OSError as e:
        got.append(f"DeviceLock refused: {e}")
    held = []
    for path in Path(payload["lock_dir"]).glob("*"):
        try:
            fd = os.open(path, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(fd)
            got.append(f"flock {path.name}")
        except OSError as e:
            got.append(f"{path.name}: {type(e).__name__}")
    Path(payload["ready"]).write_text("\n".join(got))
    time.sleep(payload["hold_s"])
    return {"ok": True, "got": got}


def _sysv(name: str) -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, name)
    return fn, libc


def sysv_shm_leave(payload: dict[str, Any]) -> dict[str, Any]:
    """Create a SysV shared-memory segment with key `payload["key"]`, write into it and leave it
    (no IPC_RMID): state a later candidate could find."""
    shmget, libc = _sysv("shmget")
    libc.shmat.restype = ctypes.c_void_p
    ident = shmget(ctypes.c_int(payload["key"]), ctypes.c_size_t(1 << 20), ctypes.c_int(0o1000 | 0o666))  # IPC_CREAT
    if ident < 0:
        return {"ok": False, "errno": errno.errorcode.get(ctypes.get_errno(), "")}
    addr = libc.shmat(ctypes.c_int(ident), None, ctypes.c_int(0))
    ctypes.memmove(addr, b"left by the first candidate", 27)
    libc.shmdt(ctypes.c_void_p(addr))
    return {"ok": True, "shmid": ident, "visible": Path("/proc/sysvipc/shm").read_text().count("\n") - 1}


def sysv_shm_find(payload: dict[str, Any]) -> dict[str, Any]:
    """Look for the segment of key `payload["key"]` and for any segment at all."""
    shmget, _ = _sysv("shmget")
    ident = shmget(ctypes.c_int(payload["key"]), ctypes.c_size_t(0), ctypes.c_int(0))
    found = None if ident < 0 else ident
    return {
        "ok": True,
        "found": found,
        "errno": errno.errorcode.get(ctypes.get_errno(), "") if found is None else "",
        "segments": Path("/proc/sysvipc/shm").read_text().splitlines()[1:],
    }


def allocator(payload: dict[str, Any]) -> dict[str, Any]:
    """The allocator this child runs on, the LD_PRELOAD a program it starts would inherit, and the
    minor page faults of a loop of level1/17's forward on 2048 x 4096 inputs after its first call
    (`calls` calls), with a few hundred KiB kept alive between calls, as a host keeps messages."""
    import os
    import resource

    import torch

    from cudal1.bench import allocator as alloc

    p, t = torch.randn(2048, 4096), torch.randn(2048, 4096)
    torch.mean((p - t) ** 2)
    kept, faults = [], 0
    for i in range(payload["calls"]):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        torch.mean((p - t) ** 2)
        faults += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        kept.append(bytearray(100_000 * (i % 3 + 1)))
    return {"jemalloc": alloc.in_use(), "ld_preload": os.environ.get("LD_PRELOAD"), "faults": faults}


def namespaces_try(payload: dict[str, Any]) -> dict[str, Any]:
    """Try what a candidate would to get namespaces of its own (unshare of a user namespace, of
    a user and a network one, a raw clone with CLONE_NEWUSER, setns into its own network
    namespace) and what every program here needs (a thread, fork, a subprocess): the errno
    name of each, or "ok"."""
    import threading

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long

    def name(rc: int) -> str:
        return "ok" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))

    def in_child(fn: Any) -> str:  # only ctypes in the forked child, then _exit with its errno
        pid = os.fork()
        if pid == 0:
            os._exit(0 if fn() >= 0 else min(ctypes.get_errno(), 255) or 255)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        return "ok" if code == 0 else errno.errorcode.get(code, str(code))

    out: dict[str, Any] = {"ok": True}
    out["unshare_user"] = in_child(lambda: libc.unshare(ctypes.c_int(0x10000000)))
    out["unshare_user_net"] = in_child(lambda: libc.unshare(ctypes.c_int(0x10000000 | 0x40000000)))
    clone = {"x86_64": 56, "aarch64": 220}.get(os.uname().machine)
    if clone is not None:  # flags CLONE_NEWUSER | SIGCHLD, no stack: fork-like; the child exits at once
        rc = libc.syscall(ctypes.c_long(clone), ctypes.c_ulong(0x10000000 | 17), None, None, None, None)
        if rc == 0:
            os._exit(0)
        out["clone_user"] = name(rc)
        if rc > 0:
            os.waitpid(rc, 0)
    fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    out["setns_own_net"] = name(libc.setns(ctypes.c_int(fd), ctypes.c_int(0x40000000)))
    os.close(fd)
    ran: list[bool] = []
    t = threading.Thread(target=lambda: ran.append(True))
    t.start()
    t.join()
    out["thread"] = "ok" if ran else "not run"
    out["fork"] = in_child(lambda: 0)
    out["subprocess"] = "ok" if subprocess.run(["true"], check=False).returncode == 0 else "failed"
    return out
