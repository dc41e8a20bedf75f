"""The builtin CPU seed solutions pass the evaluator (correctness; speed is measured by the main job).

The PyTorch-level seeds run here; the seeds that build a C++ extension take one to three minutes
each on two cores, so they run only with CUDAL1_SLOW_TESTS=1 (the main job, `cudal1 eval-suite`,
evaluates all of them, speed included: docs/benchmarks.md).
"""

from __future__ import annotations

import os

import pytest

from cudal1.bench.evaluator import evaluate
from cudal1.bench.result import Status
from cudal1.bench.settings import EvalSettings
from cudal1.tasks import find_task, load_builtin, seed_solutions

SEEDS = seed_solutions("cpu")
TASKS = load_builtin().tasks
SLOW = os.environ.get("CUDAL1_SLOW_TESTS") == "1"


def _params():
    for task_id, path in sorted(SEEDS.items()):
        builds = "load_inline" in path.read_text()
        marks = (
            [] if (SLOW or not builds) else [pytest.mark.skip(reason="builds a C++ extension: set CUDAL1_SLOW_TESTS=1")]
        )
        yield pytest.param(task_id, path, id=task_id, marks=marks)


def test_every_builtin_task_has_a_cpu_seed():
    assert {t.task_id for t in TASKS} == set(SEEDS)


@pytest.mark.parametrize("task_id,path", list(_params()))
def test_seed_solution_is_correct(task_id, path, tmp_path_factory):
    # Correctness is what this test asserts: one timed call a round, the shortest calibration, and
    # every kind of correctness trial (fresh, shifted, wide inputs) but fewer of each than a reward's.
    settings = EvalSettings.for_backend(
        "cpu",
        correctness_trials=2,
        shifted_trials=1,
        wide_trials=1,
        rounds=1,
        calls_per_round=1,
        max_calls_per_round=1,
        warmup_calls=1,
        calibration_calls=3,
        calibration_rounds=1,
        cache_dir=str(tmp_path_factory.getbasetemp() / "cache"),
    )
    r = evaluate(find_task(TASKS, task_id), path.read_text(), "cpu", settings=settings)
    assert r.status is Status.OK, f"{task_id}: {r.status.value} {r.message}\n{r.log[-1500:]}"
    # The two nominal trials always count; a spread trial outside the reference's domain is skipped.
    assert r.hack_kind is None and 2 <= r.correctness_trials <= 4
