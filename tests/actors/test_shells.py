"""The generic actor shell: a plain class built inside an actor, its methods forwarded by name."""

from __future__ import annotations

import os

import pytest
import ray

from cudal1.actors.shells import BufferActor, remote_class
from cudal1.records import Exemplar


class Counter:
    """A small stateful plain class, as the rollout generator, buffer and learner are."""

    def __init__(self, start: int, step: int = 1):
        self.value = start
        self.step = step

    def add(self, times: int = 1) -> int:
        self.value += self.step * times
        return self.value

    def pid(self) -> int:
        return os.getpid()

    def fail(self) -> None:
        raise ValueError("counter refused")


def test_shell_forwards_calls_and_keeps_state(ray_cluster):
    counter = remote_class(Counter).remote(10, step=5)
    assert counter.ready(timeout_s=120) == "Counter"
    refs = [counter.add.remote() for _ in range(3)]  # one at a time, in submission order
    assert ray.get(refs) == [15, 20, 25]
    assert counter.add(times=2) == 35  # blocking form
    assert counter.attribute("value") == 35
    assert counter.pid() != os.getpid()  # the object lives in the actor's process
    with pytest.raises(ValueError, match="counter refused"):  # the original type still catches it
        counter.fail()
    with pytest.raises(AttributeError, match="private"):
        counter.method("_secret")()
    counter.kill()


class Broken:
    """A plain class whose constructor fails, as one whose engine cannot start does."""

    def __init__(self) -> None:
        raise RuntimeError("no engine here")


def test_shell_constructor_error_reaches_the_driver(ray_cluster):
    broken = remote_class(Broken).remote()
    with pytest.raises(Exception, match="no engine here"):
        broken.ready(timeout_s=120)


def test_buffer_shell_persists_across_a_restart(ray_cluster, tmp_path):
    pytest.importorskip("cudal1.rl.buffer")
    buffer = BufferActor.remote(str(tmp_path / "buffer"), seed=1)
    assert buffer.ready(timeout_s=120) == "ExemplarBuffer"
    ex = [Exemplar("level1/5", f"code {i}", speedup=1.0 + i) for i in range(3)]
    assert buffer.add(ex) == 3
    assert buffer.stats()["total"] == 3
    buffer.kill(no_restart=False)  # BufferActor restarts; the constructor replays the JSONL log
    assert buffer.stats()["total"] == 3
    assert buffer.best("level1/5").speedup == 3.0
    buffer.kill()
