"""The degenerate-task check, in-process on small trusted models."""

import pytest
import torch
from torch import nn

from cudal1.bench.degenerate import check_degeneracy, degeneracy, estimate_device_mib, is_out_of_memory, probe_task
from cudal1.tasks.task import Task


class Fn(nn.Module):
    """forward(*xs) = fn(*xs); a fixed-seed parameter `w` (8, 16) is available to fn."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn
        self.w = nn.Parameter(torch.randn(8, 16))

    def forward(self, *xs):
        return self.fn(self, *xs)


def check(fn, get_inputs=lambda: [torch.randn(8, 16)], **kw):
    return check_degeneracy(lambda: Fn(fn), get_inputs, **kw)


def test_honest_tasks_are_not_degenerate():
    assert degeneracy(lambda: nn.Linear(16, 4), lambda: [torch.randn(8, 16)], (0, 1, 2)) is None
    assert check(lambda m, x: torch.softmax(x, -1)).reason is None
    assert check(lambda m, x: x.argmax(-1)).reason is None  # integer outputs compare exactly
    assert check(lambda m, x: (x.sum(), x.amax(-1))).reason is None  # tuples, 0-d tensors
    report = check(lambda m, a, b: a @ b.T, lambda: [torch.rand(8, 16), torch.rand(4, 16)])
    assert report.reason is None and report.outputs == ["float32[8, 4]"] and len(report.forward_ms) == 4


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (lambda m, x: x * 0, "output all zero on seeds [0, 1, 2] and shifted inputs"),
        (lambda m, x: x * 1e-7, "output all zero"),  # zero within the evaluator's tolerance passes too
        (lambda m, x: torch.full_like(x, 3.0), "output constant (all elements equal)"),
        (lambda m, x: x.clone(), "output equals input 0 on seeds [0, 1, 2] and shifted inputs"),
        (lambda m, x: m.w + 0 * x.sum(), "output identical across seeds [0, 1, 2] and on shifted inputs"),
        (lambda m, x: x / 0, "non-finite output"),
        (lambda m, x: x[:0], "empty output"),
    ],
)
def test_degenerate_outputs_are_flagged(fn, expected):
    reason = check(fn).reason
    assert reason is not None and reason.startswith(expected), reason


def test_second_input_returned():
    reason = check(lambda m, a, b: b + 0, lambda: [torch.randn(3), torch.randn(8, 16)]).reason
    assert reason.startswith("output equals input 1")


def test_fixed_inputs_are_flagged():
    reason = check(lambda m, x: x * 2, lambda: [torch.arange(16.0).reshape(2, 8)]).reason
    assert reason == "inputs identical for seeds [0, 1, 2]: get_inputs ignores the torch seed"


def test_properties_of_the_own_distribution_only_become_notes():
    # ReLU is the identity on [0, 1): shifted trials (x*4-2) catch an identity candidate.
    report = check(lambda m, x: torch.relu(x), lambda: [torch.rand(8, 16)])
    assert report.reason is None and report.shifted == "used"
    assert report.notes == ["output equals input 0 on the task's own inputs, not on shifted inputs"]
    # clamp(max=-3) of inputs in [0, 1) is constant; shifted inputs still reach -3.
    report = check(lambda m, x: torch.clamp(x, max=-1.0), lambda: [torch.rand(8, 16)])
    assert report.reason is None
    assert report.notes[0] == "output constant on the task's own inputs, not on shifted inputs"
    # Without shifted inputs the same task is degenerate.
    report = check(lambda m, x: torch.relu(x), lambda: [torch.rand(8, 16)], shift=False)
    assert report.reason == "output equals input 0 on seeds [0, 1, 2] (shifted inputs: not checked)"


def test_shifted_inputs_outside_the_domain_are_skipped():
    report = check(lambda m, x: torch.log(x), lambda: [torch.rand(8, 16) + 0.01])
    assert report.reason is None and report.shifted == "non-finite output"
    report = check(lambda m, x: x + 1, lambda: [torch.randint(0, 5, (8, 16))])
    assert report.reason is None and report.shifted == "no floating inputs"

    def picky(m, x):
        if bool((x < 0).any()):
            raise ValueError("negative input")
        return x.sqrt()

    report = check(picky, lambda: [torch.rand(8, 16)])
    assert report.reason is None and report.shifted == "raised ValueError: negative input"


def test_in_place_mutation_is_noted_and_not_mistaken_for_identity():
    report = check(lambda m, x: x.mul_(2), lambda: [torch.randn(8, 16)])
    assert report.reason is None
    assert report.notes == ["the reference changes input 0 in place"]


def test_errors_on_own_inputs_propagate():
    with pytest.raises(RuntimeError):
        check(lambda m, x: x @ x)  # (8, 16) @ (8, 16)
    with pytest.raises(ValueError):
        degeneracy(lambda: nn.Identity(), lambda: [torch.randn(2)], seeds=[0])


def test_probe_task_in_process(capsys):
    source = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 0\n"
    source += "N = 64\nSIZE_PROFILES = {'cpu': {'N': 4}}\n"
    source += "def get_inputs():\n    return [torch.randn(N, 3)]\ndef get_init_inputs():\n    return []\n"
    task = Task(level=1, problem_id=1, name="Zeros", source=source, size_profiles=("cpu",))
    result = probe_task({"task": task.to_dict(), "profile": "cpu", "seeds": [0, 1, 2]})
    assert result["ok"] and result["degenerate"].startswith("output all zero")
    assert result["outputs"] == ["float32[4, 3]"]
    assert "cudal1-probe-stage: forward shifted" in capsys.readouterr().out
    broken = Task(level=1, problem_id=2, name="Broken", source=source.replace("x * 0", "x @ x"))
    result = probe_task({"task": broken.to_dict(), "profile": None, "seeds": [0, 1]})
    assert not result["ok"] and result["stage"] == "forward seed=0" and result["error"].startswith("RuntimeError: ")


# -- device: every constant on the output's device, in its dtype ---------------------------------

DTYPE_CASES = [
    # (dtype of the inputs, forward, what the check must find)
    (torch.float16, lambda m, x: x * 0, "output all zero"),
    (torch.bfloat16, lambda m, x: torch.full_like(x, 3.0), "output constant"),
    (torch.float16, lambda m, x: x.clone(), "output equals input 0"),
    (torch.bfloat16, lambda m, x: x * 2, None),
    (torch.int64, lambda m, x: x * 0, "output all zero"),
    (torch.int64, lambda m, x: x + 1, None),
    (torch.bool, lambda m, x: ~x, None),
    (torch.complex64, lambda m, x: x * 2, None),
    (torch.float32, lambda m, x: (x * 2, 1.5), None),  # a number beside a tensor
    (torch.float32, lambda m, x: 1.5, "output identical across seeds"),  # a number alone
    (torch.float32, lambda m, x: x.t().contiguous().t() * 2, None),  # strided output (no flat view)
    (torch.float32, lambda m, x: x.new_zeros(()).expand_as(x), "output all zero"),  # expanded
]


def _inputs_of(dtype: torch.dtype):
    """One input of 128 x 96 (more than 2 * SAMPLE elements: the sampled pre-check runs) on the CPU."""

    def get_inputs():
        if dtype in (torch.int64, torch.bool):
            return [torch.randint(-5, 6, (128, 96), device="cpu").to(dtype)]
        return [torch.randn(128, 96, device="cpu").to(dtype)]

    return get_inputs


@pytest.mark.parametrize(("dtype", "fn", "expected"), DTYPE_CASES)
def test_the_check_builds_its_constants_on_the_outputs_device(dtype, fn, expected):
    """On a GPU the outputs are CUDA tensors while torch's default device is the CPU: a constant
    the check made without naming a device (a zeros tensor, a sample index, a number's tensor)
    then sits on another device than the output, and comparing them raised "Expected all tensors
    to be on the same device" for every task. The same mismatch made here: outputs on the CPU, the
    default device `meta`. Before the fix every case raised; now each gives the same verdict as
    with the CPU as default, in the output's own dtype. (The real CUDA run is part of
    scripts/gpu_probe_check.sh.)"""

    def factory():
        with torch.device("cpu"):
            return Fn(fn)

    plain = check_degeneracy(factory, _inputs_of(dtype))
    torch.set_default_device("meta")
    try:
        elsewhere = check_degeneracy(factory, _inputs_of(dtype))
    finally:
        torch.set_default_device(None)
    assert elsewhere.reason == plain.reason and elsewhere.notes == plain.notes
    if expected is None:
        assert plain.reason is None, plain.reason
    else:
        assert plain.reason is not None and plain.reason.startswith(expected), plain.reason


def test_out_of_memory_is_told_apart_from_the_tasks_own_errors():
    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert is_out_of_memory("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")
    assert is_out_of_memory(MemoryError())
    assert not is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied (8x16 and 8x16)"))


def test_a_task_larger_than_its_budget_stops_before_it_runs():
    """probe_task with a device-memory budget sizes the task on the meta device first (the parent
    gives a budget on a GPU; here on the CPU the same code path)."""
    source = "import torch\nclass Model(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    source += "        self.w = torch.nn.Parameter(torch.randn(1024, 1024))\n"  # 4 MiB
    source += "    def forward(self, x):\n        return torch.cat([x, x], 1) @ self.w\n"
    source += "def get_inputs():\n    return [torch.randn(2048, 512)]\n"  # 4 MiB in, 8 MiB out
    source += "def get_init_inputs():\n    return []\n"
    task = Task(level=1, problem_id=3, name="Sized", source=source)
    import types

    module = types.ModuleType("sized")
    exec(source, module.__dict__)
    assert estimate_device_mib(module) == pytest.approx(4 + 2 * 4 + 5 * 8)
    small = probe_task({"task": task.to_dict(), "profile": None, "seeds": [0, 1], "budget_mib": 40})
    assert small["deferred"] and not small["ok"] and small["need_mib"] == pytest.approx(52)
    assert small["error"] == "needs about 52 MiB of device memory, 40 MiB granted"
    enough = probe_task({"task": task.to_dict(), "profile": None, "seeds": [0, 1], "budget_mib": 60})
    assert enough["ok"] and enough["estimate_mib"] == pytest.approx(52) and enough["degenerate"] is None
    # What the meta device cannot build has no estimate: the default budget applies.
    opaque = types.ModuleType("opaque")
    exec(source.replace("return [torch.randn(2048, 512)]", "return [torch.randn(2048, 512).numpy()]"), opaque.__dict__)
    assert estimate_device_mib(opaque) is None
