"""The device lock: evaluations that share a GPU take turns for their timed phases."""

from __future__ import annotations

import threading
import time

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
