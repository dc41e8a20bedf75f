"""The probe of a suite (`cudal1.bench.probe`): each reference run in its own sandboxed worker,
its failures, degenerate tasks, cache, and the device-memory gate."""

import json
import re
from pathlib import Path

import pytest

from cudal1.bench.probe import MemoryGate, probe_suite
from cudal1.tasks import load_suite
from tests.tasks.test_kernelbench_loader import HEADER, INPUTS, model, reasons, write_suite


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    """The loader tests' KernelBench-like checkout (`write_suite`)."""
    return write_suite(tmp_path)


def test_probe_reports_failures_and_degenerate_tasks(suite_dir: Path, tmp_path: Path):
    progress = []
    report = load_suite(suite_dir, levels=[1], ids=range(1, 10))
    probe_suite(
        report,
        None,
        timeout_s=3,  # the other probes take 0.1 s each here
        memory_mib=2048,
        jobs=2,
        cache_dir=tmp_path / "cache",
        on_probed=lambda task, answer: progress.append((task.task_id, answer)),
    )
    assert report.probed
    degenerate = {t.task_id: t.degenerate for t in report.tasks}
    assert degenerate["level1/1"] is None
    assert degenerate["level1/5"].startswith("output all zero")
    assert degenerate["level1/6"].startswith("output equals input 0")
    assert degenerate["level1/7"].startswith("output identical across seeds")
    # ReLU of inputs in [0, 1) is the identity there, but shifted trials catch an identity candidate.
    assert degenerate["level1/8"] is None
    assert report.probe_notes["level1/8"] == ["output equals input 0 on the task's own inputs, not on shifted inputs"]
    why = reasons(report)
    assert why["4_Raises_at_import.py"] == "import failed: RuntimeError: no model hub here"
    assert why["9_Hangs_at_import.py"] == "timed out after 3 s during import"
    assert "level1/4" not in degenerate and "level1/9" not in degenerate
    summary = report.summary()
    assert summary.startswith("level1: 5 loaded, 3 degenerate, 4 failed")
    assert "level1/5 Zeros: output all zero" in summary
    assert report.probe_times["level1/9_Hangs_at_import"] >= 3  # twice that if it hung beside another probe
    json.dumps(report.to_dict())
    # One line of progress per probed task, as it finishes.
    expected = {t: ("degenerate" if why else "ok", why) for t, why in degenerate.items()}
    expected["level1/4"] = ("FAILED", "import failed: RuntimeError: no model hub here")
    expected["level1/9"] = ("FAILED", "timed out after 3 s during import")
    assert {t: (a.status, a.reason) for t, a in progress} == expected and len(progress) == len(expected)
    assert all(a.seconds > 0 and not a.cached for _, a in progress)
    line = dict(progress)["level1/5"].line(next(t for t in report.tasks if t.task_id == "level1/5"))
    assert re.fullmatch(r"level1/5 +degenerate +\d+\.\d s +\d+ MiB  Zeros +output all zero on seeds .*", line), line
    # Answers are cached (a timed-out worker is not): probing again takes no worker for them (the
    # hanging task, probed again, is given 2 s).
    again = load_suite(suite_dir, levels=[1], ids=range(1, 10))
    probe_suite(again, None, timeout_s=2, memory_mib=2048, cache_dir=tmp_path / "cache")
    assert {t.task_id: t.degenerate for t in again.tasks} == degenerate
    assert set(again.probe_times) == {"level1/9_Hangs_at_import"}
    # ... and the evaluator finds the degenerate-task verdict of each task that ran beside it.
    verdicts = list((tmp_path / "cache" / "tasks").glob("[0-9a-f]*-cpu-cpu.json"))
    assert len(verdicts) == 5


SLOW = "import time\ntime.sleep(3)\n"
"""At import: keeps a probe running while the others start beside it."""
BESIDE_ANOTHER = (
    "import os\nimport psutil\n\ndef beside_another():\n"
    "    return len(psutil.Process(os.getppid()).children()) > 1  # probes are siblings of one fork server\n"
)


def test_a_failure_beside_other_probes_is_confirmed_alone_and_out_of_memory_is_never_cached(tmp_path: Path):
    oom = "torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 20.00 GiB')"
    files = {
        "level1/1_Slow.py": HEADER + SLOW + model("x + 1") + INPUTS,
        # Runs out of memory only while another probe runs (as on a GPU shared by several probes).
        "level1/2_Oom_beside_another.py": HEADER
        + BESIDE_ANOTHER
        + model("x + 1")
        + INPUTS.replace("    return [", f"    if beside_another():\n        raise {oom}\n    return [", 1),
        "level1/3_Oom_always.py": HEADER
        + model("x + 1")
        + INPUTS.replace("    return [", f"    raise {oom}\n    return [", 1),
        "level1/4_Raises_always.py": HEADER + model("x @ x") + INPUTS,
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    cache = tmp_path / "cache"
    answers = {}
    report = load_suite(tmp_path)
    probe_suite(
        report,
        None,
        timeout_s=30,
        memory_mib=2048,
        jobs=4,
        cache_dir=cache,
        on_probed=lambda task, answer: answers.setdefault(task.task_id, answer),
    )
    assert [t.task_id for t in report.tasks] == ["level1/1", "level1/2"]
    status = {t: (a.status, a.alone) for t, a in answers.items()}
    # All four started together; the three failures ran again alone, and only that answer counts.
    assert status == {
        "level1/1": ("ok", False),
        "level1/2": ("ok", True),
        "level1/3": ("FAILED", True),
        "level1/4": ("FAILED", True),
    }, answers
    assert answers["level1/3"].reason.startswith("inputs seed=0 failed: OutOfMemoryError: CUDA out of memory")
    assert answers["level1/4"].reason.startswith("forward seed=0 failed: RuntimeError")
    # Cached: both that ran and the task's own error; not the out-of-memory failure.
    again = {}
    probe_suite(
        load_suite(tmp_path),
        None,
        timeout_s=30,
        memory_mib=2048,
        jobs=4,
        cache_dir=cache,
        on_probed=lambda task, answer: again.setdefault(task.task_id, answer),
    )
    assert {t: a.cached for t, a in again.items()} == {
        "level1/1": True,
        "level1/2": True,
        "level1/3": False,
        "level1/4": True,
    }
    assert again["level1/4"].reason == answers["level1/4"].reason and not again["level1/3"].alone


def test_the_memory_gate_admits_by_budget_first_come_first_served():
    gate = MemoryGate(10.0)
    a = gate.acquire(6.0)
    assert not a.shared
    b = gate.acquire(4.0)  # fits beside a
    assert a.shared and b.shared
    order = []

    def take(name, need, exclusive=False):
        hold = gate.acquire(need, exclusive)
        order.append(name)
        return hold

    import threading

    waiters = [
        threading.Thread(target=lambda: order.append(gate.release(take("alone", 0, True)) or "left")),
        threading.Thread(target=lambda: gate.release(take("small", 1.0))),
    ]
    waiters[0].start()
    while not gate._waiting:  # "alone" waits first
        threading.Event().wait(0.01)
    waiters[1].start()
    threading.Event().wait(0.2)
    assert order == []  # "small" would fit beside a and b, but waits its turn behind "alone"
    gate.release(a)
    threading.Event().wait(0.1)
    assert order == []  # "alone" waits for b as well
    gate.release(b)
    for w in waiters:
        w.join(5)
    assert order == ["alone", "left", "small"]
    big = gate.acquire(50.0)  # larger than the whole budget: runs, alone
    assert not big.shared
    gate.release(big)
