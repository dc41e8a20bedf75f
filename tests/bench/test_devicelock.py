"""The device lock (evaluations that share a GPU take turns for their timed phases), and a broken build environment named at once."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

import pytest

from cudal1.bench import devicelock
from cudal1.bench.devicelock import DeviceLock


def test_a_second_holder_waits_until_the_first_releases():
    first, second = DeviceLock(f"GPU-test-{os.getpid()}"), DeviceLock(f"GPU-test-{os.getpid()}")
    assert first.hold() < 0.5 and first.held
    waited: list[float] = []
    t = threading.Thread(target=lambda: waited.append(second.hold()))
    t.start()
    time.sleep(0.4)
    assert not waited, "the second holder got the device while the first held it"
    first.release()
    t.join(5.0)
    assert waited and waited[0] >= 0.35 and second.held
    second.release()
    assert not second.held
    second.release()  # idempotent


def test_different_devices_do_not_wait_for_each_other():
    a, b = DeviceLock(f"GPU-a-{os.getpid()}"), DeviceLock(f"GPU-b/../weird name\0{os.getpid()}")
    a.hold()
    assert b.hold() < 0.5
    assert (
        b.name.startswith(devicelock.PREFIX) and "/" not in b.name[len(devicelock.PREFIX) :] and "\0" not in b.name
    )  # no other name
    a.release(), b.release()


def test_a_sandboxed_process_can_neither_take_nor_stall_the_lock(tmp_path):
    """Issue 21, kind 7: a candidate's process (sandboxed as every child is) takes the lock of a
    device and flocks every file where lock files lived, and holds all of it; the evaluator's
    lock of that device is still free at once. Before the lock left the filesystem, the
    candidate's flock on the lock file (open for reading is enough, and the sandbox keeps
    CAP_DAC_READ_SEARCH) stalled every evaluation of that GPU until it let go."""
    import isolated_targets

    from cudal1.bench.worker import WorkerLimits, run_isolated

    key = f"GPU-kind7-{os.getpid()}"
    ready = tmp_path / "ready"
    folder = Path(os.environ.get("CUDAL1_LOCK_DIR") or Path(tempfile.gettempdir()) / "cudal1-device-locks")
    mine = DeviceLock(key)
    mine.hold()  # the device has been used before (a lock file kept its lock, before)
    mine.release()
    os.chmod(tmp_path, 0o777)
    payload = {"key": key, "lock_dir": str(folder), "ready": str(ready), "hold_s": 4.0}
    done: list = []
    child = threading.Thread(
        target=lambda: done.append(
            run_isolated(
                f"{isolated_targets.__name__}:grab_device_lock",
                payload,
                WorkerLimits(wall_timeout_s=60, writable_dirs=[str(tmp_path)]),
            )
        )
    )
    child.start()
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), "the sandboxed child never got going"
        waited = threading.Thread(target=mine.hold, daemon=True)
        waited.start()
        waited.join(2.0)
        assert mine.held, f"the evaluator waited for a lock the candidate's process took: {ready.read_text()}"
    finally:
        mine.release()
        child.join(60)
    assert done and done[0].kind == "returned", done
    assert done[0].value["sandbox"]["measures"]["network"]["active"], done[0].value["sandbox"]


def test_a_stray_precompiled_header_in_torch_stops_the_evaluator_with_its_path(tmp_path, monkeypatch):
    """Found on the H200: after one `load_inline(use_pch=True)` as root, every sandboxed build failed
    trying to delete torch's extension.h.gch, and each candidate came back compile_error."""
    import torch

    from cudal1.bench import evaluator
    from cudal1.bench.settings import EvalSettings
    from cudal1.tasks import load_tasks

    assert evaluator.stray_precompiled_header() is None  # this install is clean
    fake = tmp_path / "torch"
    (fake / "include" / "torch").mkdir(parents=True)
    (fake / "include" / "torch" / "extension.h.gch").write_bytes(b"")
    monkeypatch.setattr(torch, "__file__", str(fake / "__init__.py"))
    task = load_tasks("builtin")[0]
    with pytest.raises(RuntimeError, match="extension.h.gch exists"):
        evaluator.prebuild(task, "x = 1\n", "cpu", EvalSettings.for_backend("cpu", cache_dir=str(tmp_path / "c")))
