"""Issue 21, kind 5: nothing a candidate creates in SysV IPC outlives its evaluation or reaches a
later one. Each child of the evaluator gets its own IPC namespace (`cudal1.bench.sandbox`), which
dies with its last process; where the machine refuses one, the parent removes what the child's
uid left (`sandbox.remove_ipc_objects`, called when the worker kills a child's processes)."""

from __future__ import annotations

import ctypes
import os
import random
import secrets
from pathlib import Path

import isolated_targets
import pytest

from cudal1.bench import sandbox
from cudal1.bench.worker import WorkerLimits, run_isolated

ROOT = os.geteuid() == 0


def _keys_here() -> set[int]:
    """The keys of the SysV shared-memory segments of this process's IPC namespace."""
    lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    return {int(line.split()[0]) for line in lines}


def test_a_segment_a_candidate_leaves_is_gone_after_it_and_unseen_by_the_next() -> None:
    """A sandboxed child creates a 1 MiB segment with a key of its choosing and leaves it; once
    its evaluation is over no segment of that key exists, and the next sandboxed child finds
    neither it nor any other segment. Before the children had IPC namespaces of their own the
    segment stayed in the host's namespace (kernel.shm_rmid_forced is 0 here) and the next child
    attached it."""
    key = random.SystemRandom().randrange(1 << 20, 1 << 30)
    target = isolated_targets.__name__
    first = run_isolated(f"{target}:sysv_shm_leave", {"key": key}, WorkerLimits(wall_timeout_s=60))
    assert first.kind == "returned" and first.value["ok"], (first.kind, first.error, first.value)
    assert key not in _keys_here()  # nothing of it outlives the evaluation
    measures = first.value["sandbox"]["measures"]
    assert measures["ipc_namespace"]["active"], measures
    # The report names the namespaces in force, as the kernel shows them.
    assert measures["namespaces"]["active"] and measures["namespaces"]["detail"].startswith("own: net, ipc, uts"), (
        measures
    )
    second = run_isolated(f"{target}:sysv_shm_find", {"key": key}, WorkerLimits(wall_timeout_s=60))
    assert second.kind == "returned", (second.kind, second.error)
    assert second.value["found"] is None and second.value["errno"] == "ENOENT", second.value
    assert second.value["segments"] == [], second.value  # and no other evaluation's either


@pytest.mark.skipif(not ROOT, reason="makes a segment as another uid")
def test_without_a_namespace_the_parent_removes_what_the_uid_left() -> None:
    """The fallback where the sandbox gets no IPC namespace: a process of uid U creates a segment
    and exits; `remove_ipc_objects(U)` (which the worker runs after it kills U's processes)
    removes it and nothing of another uid."""
    uid = 20000 + secrets.randbelow(40000)
    key = random.SystemRandom().randrange(1 << 20, 1 << 30)
    mine = key + 1
    libc = ctypes.CDLL(None, use_errno=True)
    own = libc.shmget(ctypes.c_int(mine), ctypes.c_size_t(4096), ctypes.c_int(0o1000 | 0o600))
    assert own >= 0
    try:
        pid = os.fork()
        if pid == 0:  # only ctypes calls, then _exit: safe in a forked child
            code = 1
            try:
                os.setresgid(65534, 65534, 65534)
                os.setresuid(uid, uid, uid)
                code = (
                    0 if libc.shmget(ctypes.c_int(key), ctypes.c_size_t(4096), ctypes.c_int(0o1000 | 0o600)) >= 0 else 2
                )
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert key in _keys_here()
        assert sandbox.remove_ipc_objects(uid) == 1
        assert key not in _keys_here() and mine in _keys_here()
        assert sandbox.remove_ipc_objects(uid) == 0
    finally:
        libc.shmctl(ctypes.c_int(own), ctypes.c_int(0), None)
