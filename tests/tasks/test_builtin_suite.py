"""The builtin suite: every task parses, defines both size profiles, and is not degenerate on the
CPU; the seed solutions name existing tasks."""

import contextlib
import io

import pytest

from cudal1.tasks import builtin_root, find_task, load_builtin, load_tasks, seed_solutions
from cudal1.bench.degenerate import probe_task

REPORT = load_builtin()


def test_builtin_suite_parses():
    assert (builtin_root() / "level1").is_dir()
    assert REPORT.failures == [], REPORT.summary()
    assert REPORT.tasks, "no builtin tasks"
    for task in REPORT.tasks:
        assert task.suite == "builtin"
        assert {"cpu", "cuda"} <= set(task.size_profiles), f"{task.task_id} lacks a cpu or cuda size profile"
    assert [t.task_id for t in load_tasks("builtin")] == [t.task_id for t in REPORT.tasks]
    assert load_builtin(profile="cuda").failures == []


@pytest.mark.parametrize("kind", ["cpu", "cuda"])
def test_seed_solutions_name_builtin_tasks(kind):
    solutions = seed_solutions(kind)
    for task_id, path in solutions.items():
        task = find_task(REPORT.tasks, task_id)
        assert path.stem.partition("_")[2] == task.name, f"{path} does not match {task.task_id}_{task.name}"
    with pytest.raises(ValueError):
        seed_solutions("tpu")


@pytest.mark.parametrize("task", REPORT.tasks, ids=lambda t: f"{t.task_id}_{t.name}")
def test_builtin_task_is_not_degenerate_on_cpu(task):
    # Builtin tasks are our own code: probed in-process (KernelBench files go through workers).
    with contextlib.redirect_stdout(io.StringIO()):
        result = probe_task({"task": task.to_dict(), "profile": "cpu", "seeds": [0, 1, 2]})
    assert result["ok"], result
    assert result["degenerate"] is None, result


def test_seeds_belong_to_a_task_by_its_source_not_its_id():
    from cudal1.tasks.suite import seeds_for
    from cudal1.tasks.task import Task

    found = seeds_for(REPORT.tasks, "cpu")
    assert set(found) == set(seed_solutions("cpu")) and all("ModelNew" in src for src in found.values())
    # Another suite's level1/1 (KernelBench's is a square matmul) is another problem.
    builtin = find_task(REPORT.tasks, "level1/1")
    other = Task(
        level=1,
        problem_id=1,
        name="Square_matmul",
        source=builtin.source + "\n# another problem\n",
        suite="/kb/KernelBench",
    )
    assert seeds_for([other], "cpu") == {}
