"""Addressing tasks: level/id, level/id_Name, names, file paths; load_tasks."""

from pathlib import Path

import pytest

from cudal1.tasks import Task, find_task, load_tasks

SOURCE = "import torch\nclass Model(torch.nn.Module):\n    pass\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n"


def make(level: int, problem_id: int, name: str, path: str = "") -> Task:
    return Task(level=level, problem_id=problem_id, name=name, source=SOURCE, path=path)


TASKS = [
    make(1, 12, "Matmul_with_diagonal_matrices_"),
    make(1, 23, "Softmax"),
    make(1, 24, "LogSoftmax"),
    make(1, 26, "GELU_"),
    make(2, 5, "Softmax"),
    make(3, 1, "MLP"),
]


def test_by_level_and_id():
    assert find_task(TASKS, "level1/12").name == "Matmul_with_diagonal_matrices_"
    assert find_task(TASKS, "level1/12_Matmul_with_diagonal_matrices_").task_id == "level1/12"
    assert find_task(TASKS, "level1/12_matmul_with_diagonal_matrices").task_id == "level1/12"
    assert find_task(TASKS, "level3/1_MLP.py").task_id == "level3/1"  # a path that does not exist here
    with pytest.raises(LookupError, match="is 'Matmul_with_diagonal_matrices_', not 'Softmax'"):
        find_task(TASKS, "level1/12_Softmax")
    with pytest.raises(LookupError, match="no task level1/99"):
        find_task(TASKS, "level1/99")


def test_by_name():
    assert find_task(TASKS, "logsoftmax").task_id == "level1/24"
    assert find_task(TASKS, "gelu").task_id == "level1/26"  # trailing underscore ignored
    assert find_task(TASKS, "MLP").task_id == "level3/1"
    with pytest.raises(LookupError, match=r"ambiguous: level1/23 \(Softmax\), level2/5 \(Softmax\)"):
        find_task(TASKS, "Softmax")
    with pytest.raises(LookupError, match=r"no task named 'Sofmax'; close matches: .*level1/23 \(Softmax\)"):
        find_task(TASKS, "Sofmax")
    with pytest.raises(LookupError, match="close matches: none"):
        find_task(TASKS, "Conv3d")


def test_by_file_path(tmp_path: Path):
    file = tmp_path / "level1" / "23_Softmax.py"
    file.parent.mkdir()
    file.write_text(SOURCE)
    tasks = [*TASKS[:1], make(1, 23, "Softmax", path=str(file.resolve()))]
    assert find_task(tasks, str(file)) is tasks[1]
    assert find_task(tasks, file) is tasks[1]
    other = tmp_path / "level1" / "12_Matmul_with_diagonal_matrices_.py"
    other.write_text(SOURCE)  # exists, but is not the file any loaded task came from
    with pytest.raises(LookupError, match="is not one of the 2 loaded tasks' files"):
        find_task(tasks, other)


def test_load_tasks_from_a_path(tmp_path: Path):
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "3_Good.py").write_text(SOURCE)
    (tmp_path / "level1" / "4_Bad.py").write_text("def (:\n")
    tasks = load_tasks(tmp_path)
    assert [t.task_id for t in tasks] == ["level1/3"]
    assert find_task(tasks, "good").path == str((tmp_path / "level1" / "3_Good.py").resolve())
