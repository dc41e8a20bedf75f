"""The device lock (evaluations that share a GPU take turns for their timed phases), and a broken build environment named at once."""

from __future__ import annotations

import threading
import time

import pytest

from cudal1.bench.devicelock import DeviceLock


def test_a_second_holder_waits_until_the_first_releases(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDAL1_LOCK_DIR", str(tmp_path))
    first, second = DeviceLock("GPU-1234"), DeviceLock("GPU-1234")
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


def test_different_devices_do_not_wait_for_each_other(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDAL1_LOCK_DIR", str(tmp_path))
    a, b = DeviceLock("GPU-a"), DeviceLock("GPU-b/../weird name")
    a.hold()
    assert b.hold() < 0.5
    assert b.path.parent == tmp_path  # the key cannot point the lock file elsewhere
    a.release(), b.release()


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
