"""Task selection around the probe of each task's reference (pure parts of the run context)."""

import logging

import pytest

from cudal1.pipeline.context import usable_tasks
from cudal1.tasks.task import Task


def _task(i: int) -> Task:
    return Task(level=1, problem_id=i, name=f"t{i}", source="")


def test_degenerate_and_failed_tasks_are_left_out_with_a_log_line(caplog):
    tasks = [_task(1), _task(2), _task(3), _task(4)]
    probes = {
        "level1/1": {"degenerate": None, "failure": None},
        "level1/2": {"degenerate": "output all zero on seeds [0, 1, 2]", "failure": None},
        "level1/3": {"degenerate": None, "failure": "import failed: ImportError: x"},
        # level1/4: not probed at all (an actor that did not answer for it): kept
    }
    with caplog.at_level(logging.WARNING, logger="cudal1.pipeline.context"):
        kept = usable_tasks(tasks, probes)
    assert [t.task_id for t in kept] == ["level1/1", "level1/4"]
    assert "level1/2 (t2) left out: degenerate: output all zero" in caplog.text
    assert "level1/3 (t3) left out: import failed" in caplog.text
    with pytest.raises(ValueError, match="none of the 2 selected tasks"):
        usable_tasks(tasks[1:3], probes)
