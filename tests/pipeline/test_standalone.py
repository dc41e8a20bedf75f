"""Standalone programs in the optimize job, without Ray: their task ids are their own names
("file/<name>"), two files of one name get a numeric suffix (logged), and a start directory's
solutions are matched to them by file name."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from cudal1.pipeline.evaluate import load_solutions, paper_table
from cudal1.pipeline.optimize_job import distinct_ids, solution_path
from cudal1.tasks import load_task_file

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = (
    "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n"
    "def get_inputs():\n    return [torch.randn(8, 8)]\n\ndef get_init_inputs():\n    return []\n"
)


def write(root: Path, rel: str, text: str = PROGRAM) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_two_files_of_one_name_get_a_numeric_suffix_that_takes_no_existing_name(tmp_path, caplog):
    files = ["a/relu.py", "b/relu.py", "c/relu_2.py", "d/my-relu.py", "kb/level1/3_Relu.py", "kb2/level1/3_Relu.py"]
    tasks = [load_task_file(write(tmp_path, f)) for f in files]
    with caplog.at_level(logging.INFO, logger="cudal1.pipeline.optimize_job"):
        named = distinct_ids(tasks)
    # b/relu.py would be relu_2, but c/relu_2.py has that name: it gets relu_3
    assert [t.task_id for t in named] == [
        "file/relu",
        "file/relu_3",
        "file/relu_2",
        "file/my_relu",
        "level1/3",
        "level1/4",
    ]
    assert [t.path for t in named] == [t.path for t in tasks]
    logged = [r.getMessage() for r in caplog.records]
    assert logged == [
        f"file/relu ({tmp_path / 'b/relu.py'}) named file/relu_3: the name is taken",
        f"level1/3 ({tmp_path / 'kb2/level1/3_Relu.py'}) renumbered level1/4: the id is taken",
    ]
    assert solution_path(tmp_path / "s", named[1]) == tmp_path / "s" / "file" / "relu_3.py"
    assert solution_path(tmp_path / "s", named[4]) == tmp_path / "s" / "level1" / "3_Relu.py"


def test_start_solutions_are_matched_to_standalone_programs_by_name(tmp_path):
    own = write(tmp_path, "starts/relu.py")  # the task's own file, in the start directory
    ids = ["file/relu", "file/my_relu", "file/gelu", "file/tanh", "level1/3"]
    write(tmp_path, "starts/sub/relu.py", "# relu's start\n")
    write(tmp_path, "starts/my-relu.py", "# my_relu's start\n")  # made safe as the task's name was
    write(tmp_path, "starts/z/my_relu.py", "# a second one for my_relu\n")
    write(tmp_path, "starts/level0/0_gelu.py", "# gelu's, in the old level0/0_<name> layout\n")
    write(tmp_path, "starts/level1/3_Relu.py", "# the suite task's\n")
    write(tmp_path, "starts/softmax.py", "# no such task\n")
    found, skipped = load_solutions(tmp_path / "starts", ids, exclude=[str(own), ""])
    assert {c.task_id: c.source for c in found} == {
        "file/relu": "# relu's start\n",
        "file/my_relu": "# my_relu's start\n",
        "file/gelu": "# gelu's, in the old level0/0_<name> layout\n",
        "level1/3": "# the suite task's\n",
    }
    assert [c.task_id for c in found] == ["file/relu", "file/my_relu", "file/gelu", "level1/3"]  # the tasks' order
    starts = tmp_path / "starts"
    assert sorted(skipped) == sorted(
        [
            f"{own}: the task file of file/relu itself",
            f"{starts / 'softmax.py'}: not laid out as level<L>/<id>_<Name>.py; no task file/softmax",
            f"{starts / 'z/my_relu.py'}: another solution for file/my_relu comes first: {starts / 'my-relu.py'}",
        ]
    )
    # without standalone tasks the directory is read as before: the suite layout only
    found, skipped = load_solutions(starts, ["level1/3"])
    assert [c.task_id for c in found] == ["level1/3"] and len(skipped) == 6
    with pytest.raises(ValueError, match="holds no solution for the 1 selected tasks"):
        load_solutions(starts, ["file/sigmoid"])


def test_a_runs_solutions_directory_is_the_next_runs_start(tmp_path):
    """What the job writes for a standalone program (solutions/file/<name>.py) is what `start=`
    matches back to the same program."""
    task = distinct_ids([load_task_file(write(tmp_path, "progs/my-relu.py"))])[0]
    path = solution_path(tmp_path / "out" / "solutions", task)
    write(path.parent, path.name, "# delivered\n")
    (c,), skipped = load_solutions(tmp_path / "out" / "solutions", [task.task_id], exclude=[task.path])
    assert (c.task_id, c.source, skipped) == ("file/my_relu", "# delivered\n", [])


def test_the_paper_table_groups_standalone_programs_in_one_file_row():
    from cudal1.bench.result import EvalResult, Status

    results = [
        EvalResult("file/relu", Status.OK, speedup=2.0),
        EvalResult("file/gelu", Status.INCORRECT),
        EvalResult("level1/3", Status.OK, speedup=1.5),
    ]
    rows = paper_table({"cpu": results}, (1.0,))
    assert [(r["level"], r["n"], r["success"]) for r in rows] == [("file", 2, 1), ("level1", 1, 1), ("all", 3, 2)]
