"""The Task record: ids, serialization, module loading and size profiles."""

import pytest

from cudal1.bench.result import EvalResult, HackKind, Status, Timing, truncate_log
from cudal1.tasks.task import Task, load_source_module

SOURCE = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x + 1
N = 8
SIZE_PROFILES = {"cpu": {"N": 2}, "cuda": {"N": 8}}
def get_inputs():
    return [torch.randn(N)]
def get_init_inputs():
    return []
"""


def test_task_id_and_roundtrip():
    task = Task(level=2, problem_id=7, name="X", source=SOURCE, size_profiles=("cpu", "cuda"))
    assert task.task_id == "level2/7"
    assert Task.from_dict(task.to_dict()) == task


def test_a_standalone_file_is_named_by_its_stem_and_a_suite_file_keeps_its_id(tmp_path):
    from cudal1.tasks import load_task_file

    for sub in ("progs", "level2", "level0", "level1"):
        (tmp_path / sub).mkdir()
    files = {
        "progs/my-softmax v2.py": ("file/my_softmax_v2", "my_softmax_v2", 0, 0),
        "progs/3_Relu.py": ("file/3_Relu", "3_Relu", 0, 0),  # not in a level<L>/ directory
        "level2/7_Gemm_Add.py": ("level2/7", "Gemm_Add", 2, 7),  # named like a suite's: unchanged
        "level0/0_relu.py": ("file/0_relu", "0_relu", 0, 0),  # level 0 and id 0 are no suite's
        "level1/0_relu.py": ("file/0_relu", "0_relu", 0, 0),
    }
    for rel, (task_id, name, level, problem_id) in files.items():
        (tmp_path / rel).write_text(SOURCE)
        task = load_task_file(tmp_path / rel)
        assert (task.task_id, task.name, task.level, task.problem_id, task.suite) == (
            task_id,
            name,
            level,
            problem_id,
            "file",
        ), rel
        assert Task.from_dict(task.to_dict()) == task and task.to_dict()["task_id"] == task_id
    # a suite's record keeps exactly its fields: nothing was added for standalone programs
    suite_task = Task(level=2, problem_id=7, name="X", source=SOURCE)
    assert list(suite_task.to_dict()) == [
        "level",
        "problem_id",
        "name",
        "source",
        "suite",
        "path",
        "size_profiles",
        "degenerate",
        "task_id",
    ]
    # only suite "file" at level 0 is standalone: a builtin task at level 0 keeps the suite form
    assert Task(level=0, problem_id=0, name="build", source="").task_id == "level0/0"


def test_standalone_names_are_safe_in_paths_and_metric_keys():
    from cudal1.tasks import standalone_name

    assert standalone_name("my-softmax v2") == "my_softmax_v2"
    assert standalone_name("../../etc/passwd") == "etc_passwd"
    assert standalone_name("Relu_") == "Relu"
    assert standalone_name("héllo") == "h_llo"
    assert standalone_name("!!!") == standalone_name("") == "program"
    assert standalone_name("x" * 300) == "x" * 100


def test_size_profiles_are_applied_and_typos_raise():
    task = Task(level=1, problem_id=1, name="X", source=SOURCE)
    assert task.load_module("cpu").get_inputs()[0].shape == (2,)
    assert task.load_module(None).get_inputs()[0].shape == (8,)
    with pytest.raises(KeyError, match="not defined"):
        task.load_module("tpu")
    bad = Task(level=1, problem_id=1, name="X", source=SOURCE.replace('{"N": 2}', '{"M": 2}'))
    with pytest.raises(KeyError, match="does not define"):
        bad.load_module("cpu")


def test_eval_result_json_roundtrip():
    r = EvalResult(
        task_id="level1/1",
        status=Status.HACK,
        hack_kind=HackKind.RESULT_CACHE,
        reference=Timing(1.0, 1.0, 1.0, 1.0, [1.0], 0.0, 1),
        labels=["pytorch_only"],
    )
    back = EvalResult.from_dict(r.to_dict())
    assert back == r
    assert '"hack_kind": "result_cache"' in r.to_json()


def test_truncate_log_keeps_the_tail():
    text = "a" * 10 + "END"
    assert truncate_log(text, 5).endswith("aaEND")
    assert truncate_log("short", 100) == "short"


def test_a_loaded_sources_functions_have_their_source():
    """Triton's @triton.jit reads its function's source with inspect; a candidate is loaded from a
    string, so its source must be where inspect looks (before, every Triton candidate failed to
    import: "@jit functions should be defined in a Python file")."""
    import inspect

    source = "def double(x):\n    return 2 * x\n"
    module = load_source_module(source, "cudal1_test_inspectable", "<candidate>")
    assert inspect.getsource(module.double) == source
    triton = pytest.importorskip("triton")
    jitted = load_source_module("import triton\n\n@triton.jit\ndef k(x_ptr):\n    pass\n", "cudal1_test_jit", "<jit>")
    assert isinstance(jitted.k, triton.runtime.jit.JITFunction) and "def k(x_ptr)" in jitted.k.src
