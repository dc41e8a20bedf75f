"""Builds keep off the cores that time (`cudal1.bench.cores`): the split itself, and the affinity
of the real children (the worker's, an evaluation's three processes, a prebuild's and the
programs they start) as the kernel reports it in /proc."""

from __future__ import annotations

import os

import pytest

from cudal1.bench import cores
from cudal1.bench.cores import CoreSplit

needs_two = pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(cores.usable_cores()) < 2,
                               reason="needs CPU affinity and at least 2 usable cores")


def test_reserve_gives_each_slot_its_own_cores_and_builds_the_rest() -> None:
    split = CoreSplit.reserve(2, 2, cores=range(16))
    assert split.slots == ((0, 1), (2, 3)) and split.builds == tuple(range(4, 16))
    assert split.slot(3) == (2, 3) and split.timing == (0, 1, 2, 3)
    # Too few cores for disjoint slots: all but one core are reserved and shared round robin.
    small = CoreSplit.reserve(2, 2, cores=[4, 5, 6])
    assert small.builds == (6,) and small.slots == ((4, 5), (4, 5))
    tiny = CoreSplit.reserve(1, 2, cores=[0, 1])
    assert tiny.slots == ((0,),) and tiny.builds == (1,)
    assert CoreSplit.reserve(1, 2, cores=[0]) is None  # nothing to split
    with pytest.raises(ValueError):
        CoreSplit.reserve(0)


def test_node_slots_follow_the_visible_gpu(monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,4")
    assert cores.visible_gpu_index() == 3
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1234")
    assert cores.visible_gpu_index() == 0
    gpus = "/proc/driver/nvidia/gpus"
    assert cores.gpu_count() == (len(os.listdir(gpus)) if os.path.isdir(gpus) else 0)


@needs_two
def test_a_worker_child_and_what_it_starts_run_on_the_given_cores() -> None:
    import isolated_targets

    from cudal1.bench.worker import WorkerLimits, run_isolated

    last = cores.usable_cores()[-1]
    out = run_isolated(f"{isolated_targets.__name__}:affinity", {}, WorkerLimits(wall_timeout_s=60, cpus=(last,)))
    assert out.kind == "returned", out.error + out.log
    assert out.value["self"] == out.value["child"] == str(last)
    assert out.value["threads"] == 1  # torch runs no more threads than it has cores
    free = run_isolated(f"{isolated_targets.__name__}:affinity", {}, WorkerLimits(wall_timeout_s=60))
    assert free.value["self"] != str(last) or len(cores.usable_cores()) == 1
