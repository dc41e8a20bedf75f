"""Builds keep off the cores that time (`cudal1.bench.cores`): the split itself, and the affinity
of the real children (the worker's, an evaluation's three processes, a prebuild's and the
programs they start) as the kernel reports it in /proc."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import evalkit
import psutil
import pytest

from cudal1.bench import cores
from cudal1.bench.cores import CoreSplit
from cudal1.bench.evaluator import evaluate, extensions_dir, prebuild
from cudal1.bench.result import Status

needs_two = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(cores.usable_cores()) < 2,
    reason="needs CPU affinity and at least 2 usable cores",
)


def test_reserve_gives_each_slot_its_own_cores_and_builds_the_rest() -> None:
    alone = lambda core: (core,)  # noqa: E731 - a host without SMT
    split = CoreSplit.reserve(2, 2, cores=range(16), siblings=alone)
    assert split.slots == ((14, 15), (12, 13)) and split.builds == tuple(range(12))
    assert split.slot(3) == (12, 13) and split.timing == (12, 13, 14, 15)
    # Too few cores for disjoint slots: all but one core are reserved and shared round robin.
    small = CoreSplit.reserve(2, 2, cores=[4, 5, 6], siblings=alone)
    assert small.builds == (4,) and small.slots == ((5, 6), (5, 6))
    tiny = CoreSplit.reserve(1, 2, cores=[0, 1], siblings=alone)
    assert tiny.slots == ((1,),) and tiny.builds == (0,)
    assert CoreSplit.reserve(1, 2, cores=[0]) is None  # nothing to split
    with pytest.raises(ValueError):
        CoreSplit.reserve(0)


def test_reserve_takes_whole_physical_cores_under_smt() -> None:
    """16 hardware threads on 8 physical cores (thread c and c + 8 share one): a slot is both
    threads of one core, so no compiler runs beside a timed thread on the same core."""
    smt = lambda core: (core % 8, core % 8 + 8)  # noqa: E731
    split = CoreSplit.reserve(2, 2, cores=range(16), siblings=smt)
    assert split.slots == ((7, 15), (6, 14))
    assert split.builds == tuple(c for c in range(16) if c not in (6, 7, 14, 15))
    # One physical core with two threads: whole cores do not fit, single threads are split.
    assert CoreSplit.reserve(1, 2, cores=[0, 1], siblings=lambda core: (0, 1)).builds == (0,)
    assert cores.thread_siblings(0)[0] == 0  # this host's topology (or (0,) where unknown)


def test_node_slots_follow_the_visible_gpu(monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,4")
    assert cores.host_index("cuda") == 3
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1234")
    assert cores.host_index("cuda") == 0
    gpus = "/proc/driver/nvidia/gpus"
    assert cores.gpu_count() == (len(os.listdir(gpus)) if os.path.isdir(gpus) else 0)


def test_on_cuda_both_hosts_share_the_slots_last_core_and_the_judge_takes_the_rest() -> None:
    assert cores.judge_and_hosts((5, 3, 4), "cuda") == ((3, 4), (5,))
    assert cores.judge_and_hosts((7,), "cuda") == ((7,), (7,))  # one core: nothing to split
    assert cores.judge_and_hosts((4, 5), "cpu") == ((4, 5), (4, 5))  # CPU hosts compute on their cores
    assert cores.judge_and_hosts(None, "cuda") == (None, None)
    assert cores.judge_and_hosts((), "cpu") == (None, None)


def test_a_cuda_device_name_maps_to_its_host_index(monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert cores.host_index("cuda:1") == 1 and cores.host_index("cuda") == 3 and cores.host_index("cuda:0") == 3
    assert cores.host_index("cuda:2") == 2  # past the list: taken as it is
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-5e7c,GPU-11ab")  # UUIDs: no index to read
    assert cores.host_index("cuda:1") == 1
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert cores.host_index("cuda:2") == 2


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


@needs_two
def test_an_evaluation_runs_its_three_processes_on_its_slot(tmp_path) -> None:
    """Every process of the evaluation (judge, candidate host, reference host), watched from
    outside while it runs, is allowed only the slot's core; the candidate says the same."""
    slot = (cores.usable_cores()[0],)
    seen: dict[int, tuple[str, list[int]]] = {}
    stop = threading.Event()
    me = psutil.Process()

    def watch() -> None:
        while not stop.is_set():
            for p in me.children(recursive=True):
                try:  # this process's own children are the fork server and its helpers: not the evaluation's
                    # (nor are other descendants, such as a Ray cluster another test of this run started)
                    forked = "multiprocessing.forkserver" in " ".join(p.cmdline())
                    if p.ppid() != me.pid and forked:  # the last look counts: a child pins itself just after the fork
                        seen[p.pid] = (p.name(), p.cpu_affinity())
                except psutil.Error:
                    pass
            stop.wait(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        r = evaluate(
            evalkit.task("matmul_relu"),
            evalkit.candidate("reports_cores"),
            "cpu",
            settings=evalkit.settings(tmp_path),
            cpus=slot,
        )
    finally:
        stop.set()
        watcher.join()
    assert r.status is Status.OK, evalkit.describe(r)
    assert len(seen) >= 3, seen  # the judge and the two hosts at least
    assert all(aff == list(slot) for _, aff in seen.values()), seen
    said = [
        json.loads(p.read_text())
        for p in extensions_dir(evalkit.settings(tmp_path), r.arch, evalkit.candidate("reports_cores")).glob(
            "cores-*.json"
        )
    ]
    assert said and all(s["self"] == list(slot) and s["child"] == str(slot[0]) for s in said), said


@needs_two
def test_a_prebuild_and_its_programs_run_on_the_build_cores(tmp_path) -> None:
    build = (cores.usable_cores()[-1],)
    source = evalkit.candidate("reports_cores")
    assert prebuild(evalkit.task("matmul_relu"), source, "cpu", evalkit.settings(tmp_path), cpus=build) is None
    said = [
        json.loads(p.read_text())
        for p in Path(extensions_dir(evalkit.settings(tmp_path), "cpu-" + os.uname().machine, source)).glob(
            "cores-*.json"
        )
    ]
    assert len(said) == 1 and said[0]["prebuild"], said
    assert said[0]["self"] == list(build) and said[0]["child"] == str(build[0]), said


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_evaluation_given_no_cores_runs_both_hosts_on_one_core_of_its_devices_slot(tmp_path) -> None:
    """On CUDA a host's one-call round trips are mostly its CPU launching kernels: given no cores,
    the evaluation takes its device's slot (`cores.device_slot`), and both hosts share the slot's
    last core (`cores.judge_and_hosts`); the candidate, running in the candidate host, says so."""
    from cudal1.bench.settings import EvalSettings

    slot = cores.device_slot("cuda:0")
    if slot is None or len(slot) < 2:
        pytest.skip(f"no two-core slot for the device on this host ({slot})")
    settings = EvalSettings.for_backend("cuda", rounds=2, calls_per_round=2, cache_dir=str(tmp_path))
    source = evalkit.candidate("reports_cores")
    r = evaluate(evalkit.task("matmul_relu"), source, "cuda", settings=settings)
    assert r.status is Status.OK, evalkit.describe(r)
    said = [json.loads(p.read_text()) for p in extensions_dir(settings, r.arch, source).glob("cores-*.json")]
    assert said and all(s["self"] == [max(slot)] for s in said if not s["prebuild"]), (slot, said)
