"""The plain in-process yardstick (`cudal1.bench.inprocess`): its statistics, and real CPU runs
that tell a program from itself and from one doing twice the work."""

from __future__ import annotations

import collections
import statistics

import pytest

from cudal1.bench.baselines import reference_candidate
from cudal1.bench.inprocess import (
    REFERENCE,
    InProcessTiming,
    measure,
    measure_isolated,
    median_ratio,
    quantile,
    round_orders,
    spread,
)
from cudal1.tasks import find_task, load_tasks
from cudal1.tasks.task import Task


def test_every_round_calls_each_program_once_in_a_random_order():
    names = ["reference", "self", "compiled"]
    orders = round_orders(names, 300, seed=7)
    assert len(orders) == 300 and all(sorted(o) == sorted(names) for o in orders)
    assert orders == round_orders(names, 300, seed=7) and orders != round_orders(names, 300, seed=8)
    first = collections.Counter(o[0] for o in orders)
    # Each program leads about a third of the rounds (binomial sd ~8 of 100).
    assert all(60 < first[n] < 140 for n in names), first
    with pytest.raises(ValueError, match="duplicate"):
        round_orders(["a", "a"], 1, 0)


def test_quantile_spread_and_ratio():
    # Definition 7 of Hyndman and Fan: position q*(n-1), linear between neighbours.
    assert quantile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.1) == pytest.approx(1.3)
    assert quantile([5.0], 0.9) == 5.0
    with pytest.raises(ValueError):
        quantile([], 0.5)
    with pytest.raises(ValueError):
        quantile([1.0], 1.5)
    times = [float(t) for t in range(1, 12)]  # 1..11: median 6, p10 2, p90 10
    assert spread(times) == pytest.approx((10 - 2) / 6)
    assert spread([0.0, 0.0]) == 0.0
    # Medians, not means: one slow outlier call does not move the ratio.
    assert median_ratio([2.0, 2.0, 2.0, 90.0], [1.0, 1.0, 1.0, 1.0]) == 2.0
    with pytest.raises(ValueError):
        median_ratio([], [1.0])
    with pytest.raises(ValueError):
        median_ratio([1.0], [0.0])


def twice_the_work(source: str) -> str:
    """A trusted candidate that runs the reference's forward twice (returns the second result)."""
    return (
        source.rstrip()
        + """


class ModelNew(Model):
    def forward(self, *args):
        super().forward(*args)
        return super().forward(*args)
"""
    )


def test_a_real_cpu_measurement_tells_a_program_from_twice_its_work():
    task = find_task(load_tasks("builtin"), "level1/12")  # Swish at its CPU size (4M floats)
    sources = {
        "self": reference_candidate(task.source),
        "twice": twice_the_work(task.source),
        "broken": "raise ImportError('no such kernel')\n",
    }
    # In a child with the evaluator's OpenMP and malloc settings, as the agreement benchmark runs it:
    # in pytest's own process each 16 MB output is a fresh mmap whose page faults cost as much as
    # the arithmetic, and two CI runs measured "twice" at 0.98x and 0.84x that way.
    # Shared 2-core machine: loose bounds, far apart, on the median of up to three measurements (in
    # one CI run the other pytest worker's load put a single one's "self" at 1.60x).
    runs = []
    while True:
        timing = measure_isolated(task, sources, "cpu", timeout_s=300, calls=60, warmup=2, seed=3 + len(runs))
        assert timing.calls == 60 and timing.reference_ms > 0
        assert set(timing.candidates_ms) == {"self", "twice"} and set(timing.errors) == {"broken"}
        assert timing.errors["broken"] == "build: ImportError: no such kernel"
        assert timing.max_abs_error == {"self": 0.0, "twice": 0.0}
        assert timing.ratios["self"] == pytest.approx(timing.reference_ms / timing.candidates_ms["self"])
        assert set(timing.spreads) == {REFERENCE, "self", "twice"}
        runs.append(timing)
        self_x = statistics.median(t.ratios["self"] for t in runs)
        twice_x = statistics.median(t.ratios["twice"] for t in runs)
        if (0.7 < self_x < 1.4 and twice_x < 0.75) or len(runs) == 3:
            break
    assert 0.7 < self_x < 1.4, runs
    assert twice_x < 0.75, runs
    with pytest.raises(ValueError):
        measure(task, {REFERENCE: sources["self"]}, "cpu")


def test_the_isolated_child_returns_the_same_record():
    task = find_task(load_tasks("builtin"), "level1/13")  # HardSigmoid
    timing = measure_isolated(
        task, {"self": reference_candidate(task.source)}, "cpu", timeout_s=300, calls=10, warmup=1
    )
    assert isinstance(timing, InProcessTiming) and timing.task_id == "level1/13" and timing.calls == 10
    assert timing.candidates_ms["self"] > 0 and timing.errors == {}
    bad = Task(level=1, problem_id=99, name="bad", source="raise RuntimeError('the reference is broken')\n")
    with pytest.raises(RuntimeError, match="the reference is broken"):
        measure_isolated(bad, {}, "cpu", timeout_s=300, calls=1)


def test_the_child_builds_in_a_copy_of_the_given_build_directory(tmp_path):
    # The agreement benchmark hands over the judge's build directory of the compile baseline: the
    # child must see what the judge left there (its compiled kernels) and write only to its copy.
    task = find_task(load_tasks("builtin"), "level1/13")
    judges = tmp_path / "judge_build"
    (judges / "torchinductor").mkdir(parents=True)
    (judges / "torchinductor" / "kernel.py").write_text("compiled by the judge")
    (judges / "x.lock").write_text("")
    reads_and_writes = (
        reference_candidate(task.source)
        + """
import os as _os
_builds = _os.environ["TORCH_EXTENSIONS_DIR"]
assert open(_os.path.join(_builds, "torchinductor", "kernel.py")).read() == "compiled by the judge"
assert not _os.path.exists(_os.path.join(_builds, "x.lock"))
open(_os.path.join(_builds, "written_by_the_child"), "w").close()
"""
    )
    timing = measure_isolated(
        task, {"self": reads_and_writes}, "cpu", timeout_s=300, build_dir=judges, calls=3, warmup=1
    )
    assert timing.errors == {} and timing.candidates_ms["self"] > 0
    assert sorted(p.name for p in judges.rglob("*")) == ["kernel.py", "torchinductor", "x.lock"]


def test_keep_builds_leaves_the_childs_builds_for_the_next_measurement(tmp_path):
    # A second fresh process finds what the first one wrote (a compile it need not repeat);
    # without a directory to keep them in, the request is refused before any child starts.
    task = find_task(load_tasks("builtin"), "level1/13")
    builds = tmp_path / "plain_builds"
    counts = (
        reference_candidate(task.source)
        + """
import os as _os
_mark = _os.path.join(_os.environ["TORCH_EXTENSIONS_DIR"], "built")
open(_mark, "a").write("x")
"""
    )
    for _ in range(2):
        timing = measure_isolated(
            task, {"self": counts}, "cpu", timeout_s=300, build_dir=builds, keep_builds=True, calls=2, warmup=1
        )
        assert timing.errors == {}
    assert (builds / "built").read_text() == "xx"
    with pytest.raises(ValueError, match="keep_builds"):
        measure_isolated(task, {"self": counts}, "cpu", keep_builds=True)


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA device")
def test_a_real_cuda_measurement_tells_a_program_from_twice_its_work():
    # Swish at its CUDA size (268M floats, ~1.8 ms on an H100-class GPU): CUDA events, L2 flushed.
    task = find_task(load_tasks("builtin"), "level1/12")
    timing = measure(
        task,
        {"self": reference_candidate(task.source), "twice": twice_the_work(task.source)},
        "cuda:0",
        calls=30,
        warmup=2,
    )
    assert 0.95 < timing.ratios["self"] < 1.05, timing
    assert 0.4 < timing.ratios["twice"] < 0.6, timing
