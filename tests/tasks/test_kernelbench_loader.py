"""Loading KernelBench-format directories: parsing and the failures found without running anything
(running each reference is the probe: tests/bench/test_probe.py)."""

import json
import os
import textwrap
from pathlib import Path

import pytest

from cudal1.tasks import load_suite
from cudal1.tasks.kernelbench import find_levels_dir

KERNELBENCH = Path(os.environ.get("CUDAL1_KERNELBENCH", "/work/kb/KernelBench"))

HEADER = "import torch\nimport torch.nn as nn\n"
INPUTS = "def get_inputs():\n    return [torch.randn(4, 8)]\n\ndef get_init_inputs():\n    return []\n"


def model(forward: str, init: str = "") -> str:
    """A Model class with the given forward body (and optional __init__ body)."""
    init_block = (
        f"    def __init__(self):\n        super().__init__()\n{textwrap.indent(init, ' ' * 8)}\n" if init else ""
    )
    return f"class Model(nn.Module):\n{init_block}    def forward(self, x):\n        return {forward}\n"


FILES = {
    "level1/1_Add_one.py": HEADER + model("x + 1") + INPUTS,
    "level1/2_Syntax_error.py": HEADER + "class Model(nn.Module:\n    pass\n" + INPUTS,
    "level1/3_No_get_inputs.py": HEADER + model("x + 1") + "def get_init_inputs():\n    return []\n",
    "level1/4_Raises_at_import.py": HEADER + "raise RuntimeError('no model hub here')\n" + model("x") + INPUTS,
    "level1/5_Zeros.py": HEADER + model("x * 0") + INPUTS,
    "level1/6_Identity.py": HEADER + model("x.clone()") + INPUTS,
    "level1/7_Same_every_seed.py": HEADER
    + model("self.w + 0 * x.sum()", init="self.w = nn.Parameter(torch.randn(4, 8))")
    + INPUTS,
    "level1/8_Relu_of_rand.py": HEADER + model("torch.relu(x)") + INPUTS.replace("randn", "rand"),
    "level1/9_Hangs_at_import.py": HEADER + "import time\nwhile True:\n    time.sleep(0.1)\n" + model("x") + INPUTS,
    "level1/10_Hub_model.py": HEADER
    + "from transformers import AutoModel\n"
    + model("self.m(x)", init="self.m = AutoModel.from_pretrained('gpt2')")
    + INPUTS,
    "level1/11_Torch_hub.py": HEADER
    + model("self.m(x)", init="self.m = torch.hub.load('pytorch/vision', 'resnet18')")
    + INPUTS,
    "level1/12_Needs_a_module.py": HEADER + "import cudal1_no_such_module as nsm\n" + model("x + 1") + INPUTS,
    "level1/13_Optional_module.py": HEADER
    + "try:\n    import cudal1_no_such_module\nexcept ImportError:\n    pass\n"
    + model("x + 1")
    + INPUTS,
    "level1/no_id_here.py": HEADER + model("x") + INPUTS,
    "level1/0_Id_zero.py": HEADER + model("x") + INPUTS,
    "level1/notes.txt": "not a task",
    "level2/1_Profiled.py": HEADER
    + model("x * 2")
    + "N = 8\nSIZE_PROFILES = {'cpu': {'N': 4}, 'cuda': {'N': 64}}\n"
    + INPUTS.replace("(4, 8)", "(N,)"),
    "level2/2_Profile_sets_unknown.py": HEADER + model("x") + "SIZE_PROFILES = {'cpu': {'M': 4}}\n" + INPUTS,
}


def write_suite(root: Path) -> Path:
    """`FILES` under `root` laid out like the KernelBench repo: <root>/KernelBench/level1/...; returns `root`."""
    for rel, text in FILES.items():
        path = root / "KernelBench" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    """A checkout laid out like the KernelBench repo (`write_suite`)."""
    return write_suite(tmp_path)


def reasons(report) -> dict[str, str]:
    return {Path(f.path).name: f.reason for f in report.failures}


def test_parse_without_running(suite_dir: Path):
    report = load_suite(suite_dir)  # the repo root form
    ids = [t.task_id for t in report.tasks]
    # Files that raise or hang at import parse fine: only probing runs code.
    assert ids == [
        "level1/1",
        "level1/4",
        "level1/5",
        "level1/6",
        "level1/7",
        "level1/8",
        "level1/9",
        "level1/13",
        "level2/1",
    ]
    add = report.tasks[0]
    assert add.name == "Add_one" and add.level == 1 and add.problem_id == 1
    assert add.source == FILES["level1/1_Add_one.py"] and Path(add.path).is_file()
    assert add.suite == str(suite_dir.resolve() / "KernelBench") and add.degenerate is None
    assert report.tasks[-1].size_profiles == ("cpu", "cuda")
    why = reasons(report)
    assert set(why) == {
        "2_Syntax_error.py",
        "3_No_get_inputs.py",
        "no_id_here.py",
        "0_Id_zero.py",
        "2_Profile_sets_unknown.py",
        "10_Hub_model.py",
        "11_Torch_hub.py",
        "12_Needs_a_module.py",
    }
    assert why["10_Hub_model.py"].startswith("loads pretrained weights (from_pretrained): needs a model hub")
    # Tasks that need the network or a module not installed fail at once, before any worker.
    assert why["11_Torch_hub.py"] == "downloads (torch.hub.load(...): needs the network, and cudal1 runs offline"
    assert why["12_Needs_a_module.py"] == (
        "imports cudal1_no_such_module, not installed here (pip install cudal1_no_such_module to run it)"
    )
    assert why["2_Syntax_error.py"].startswith("syntax error") and "line 3" in why["2_Syntax_error.py"]
    assert why["3_No_get_inputs.py"] == "missing module-level get_inputs"
    assert why["no_id_here.py"].startswith("bad file name")
    assert why["0_Id_zero.py"].startswith("bad file name")
    assert "'M'" in why["2_Profile_sets_unknown.py"]
    summary = report.summary()
    assert summary.splitlines()[:2] == ["level1: 8 loaded, 7 failed", "level2: 1 loaded, 1 failed"]
    assert "level1/2_Syntax_error.py: syntax error" in summary
    json.dumps(report.to_dict())  # JSON-safe


def test_levels_ids_and_profiles(suite_dir: Path):
    levels_dir = suite_dir / "KernelBench"
    assert find_levels_dir(suite_dir) == find_levels_dir(levels_dir) == levels_dir.resolve()
    report = load_suite(levels_dir, levels=[1], ids=[1, 6, 2])
    assert [t.task_id for t in report.tasks] == ["level1/1", "level1/6"]
    assert set(reasons(report)) == {"2_Syntax_error.py"}  # badly named files have no id to select
    assert list(report.levels) == [1]
    # A profile the file's SIZE_PROFILES lacks is a load failure, not a silent fallback.
    cuda = load_suite(levels_dir, levels=[2], profile="cuda")
    assert [t.task_id for t in cuda.tasks] == ["level2/1"]
    rocm = load_suite(levels_dir, levels=[2], profile="rocm")
    assert rocm.tasks == [] and "no 'rocm' profile" in reasons(rocm)["1_Profiled.py"]
    with pytest.raises(FileNotFoundError):
        load_suite(levels_dir, levels=[3])
    with pytest.raises(FileNotFoundError):
        load_suite(suite_dir / "nowhere")


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason=f"no KernelBench checkout at {KERNELBENCH}")
def test_real_kernelbench_checkout_parses():
    report = load_suite(KERNELBENCH)
    counts = {lv: sum(t.level == lv for t in report.tasks) for lv in report.levels}
    assert counts[1] == 100 and counts[2] == 100 and counts[3] == 50
    # level4 loads pretrained weights from a hub: refused at once, with the reason, not imported.
    assert counts.get(4, 0) == 0
    assert all("needs a model hub" in f.reason and "/level4/" in f.path for f in report.failures), report.failures[:3]
    assert len(report.failures) == (20 if 4 in report.levels else 0)
    assert len({t.task_id for t in report.tasks}) == len(report.tasks)
    twelve = next(t for t in report.tasks if t.task_id == "level1/12")
    assert twelve.name.startswith("Matmul_with_diagonal")
    # The repo-root form (the directory above KernelBench/) gives the same tasks.
    if (KERNELBENCH.parent / "KernelBench").resolve() == KERNELBENCH.resolve():
        assert len(load_suite(KERNELBENCH.parent).tasks) == len(report.tasks)
