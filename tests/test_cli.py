"""The real `cudal1` CLI on builtin tasks with seed solutions, on the CPU backend.

`test_eval_seed_solution_json` runs it as a user does, a subprocess (`python -m cudal1.cli`, its
exit code and its stdout); the other tests call the same `main(argv)` in this process (`run`), with
the same arguments, working directory and build cache, and read its exit code, stdout and stderr:
a subprocess per call would add an interpreter, a torch import and a fork server's start (about 5 s
each on 2 cores) to what they check.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROUNDS = "1"  # enough for the output fields; timing quality is tested elsewhere

pytestmark = pytest.mark.timeout(900)


# The cheapest level-1 tasks to evaluate on the CPU first (small inputs: 3-5 s an evaluation on 2
# idle cores, against 7-13 s for the elementwise tasks on their 2048x4096 inputs).
PREFERRED = ("Kronecker_matvec", "Matmul_with_diagonal_matrix", "Diagonal_of_matmul_transposed", "Swish")


def _seeds() -> dict[str, Path]:
    """Two level-1 builtin tasks with CPU seed solutions: {task id: seed file}."""
    from cudal1.tasks import load_builtin, seed_solutions

    seeds = seed_solutions(kind="cpu")
    names = {t.task_id: t.name for t in load_builtin().tasks}
    level1 = [tid for tid in seeds if tid.startswith("level1/") and tid in names]
    rank = {name: i for i, name in enumerate(PREFERRED)}
    level1.sort(key=lambda tid: (rank.get(names[tid], len(rank)), int(tid.split("/")[1])))
    assert len(level1) >= 2, "need two level-1 builtin tasks with CPU seed solutions"
    return {tid: Path(seeds[tid]) for tid in level1[:2]}


@pytest.fixture(scope="module")
def seeds() -> dict[str, Path]:
    return _seeds()


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), e.get("PYTHONPATH")]))
    e["CUDAL1_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    return e


def cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cudal1.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=800
    )


@pytest.fixture
def run(env, monkeypatch, capsys):
    """`cudal1 ARGS` in this process: `cudal1.cli.main(ARGS)` in `cwd`, with the module's
    CUDAL1_CACHE; returns what the subprocess would (returncode, stdout, stderr)."""
    from cudal1.cli import main

    monkeypatch.setenv("CUDAL1_CACHE", env["CUDAL1_CACHE"])

    def call(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
        monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = main(args)
        out = capsys.readouterr()
        return subprocess.CompletedProcess(["cudal1", *args], code, out.out, out.err)

    return call


def wrong_solution(seed: Path) -> str:
    """The seed solution with every output shifted by 1: runs fine, must be judged incorrect."""
    return seed.read_text() + (
        "\n\n_Seed = ModelNew\n\n\nclass ModelNew(_Seed):\n"
        "    def forward(self, *args):\n"
        "        return super().forward(*args) + 1.0\n"
    )


def test_eval_seed_solution_json(seeds, env, tmp_path):
    task_id, seed = next(iter(seeds.items()))
    proc = cli(
        ["eval", "--task", task_id, "--solution", str(seed), "--backend", "cpu", "--json", "--rounds", ROUNDS],
        env,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads(proc.stdout)
    assert record["task_id"] == task_id
    assert record["status"] == "ok"
    assert record["hack_kind"] is None
    assert record["backend"] == "cpu"
    assert record["solution"] == str(seed)
    assert isinstance(record["labels"], list)
    assert record["reference"]["median_ms"] > 0 and record["candidate"]["median_ms"] > 0
    # The reference time counts up to its clean baseline; both times from the resolution up.
    ref = max(min(record["reference"]["median_ms"], record["baseline_ms"]), record["resolution_ms"])
    cand = max(record["candidate"]["median_ms"], record["resolution_ms"])
    assert record["speedup"] == pytest.approx(ref / cand, rel=0.02)
    assert record["correctness_trials"] >= 5


def test_eval_wrong_solution_text(seeds, run, tmp_path):
    task_id, seed = next(iter(seeds.items()))
    wrong = tmp_path / "wrong.py"
    wrong.write_text(wrong_solution(seed))
    proc = run(["eval", "--task", task_id, "--solution", str(wrong), "--rounds", ROUNDS], tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = {ln.split()[0]: ln for ln in proc.stdout.splitlines() if ln.strip()}
    assert lines["status"].split()[1] == "incorrect"
    assert task_id in lines["task"]


def test_eval_timeout_ends_a_hanging_candidate_as_a_timeout(run, tmp_path):
    hang = tmp_path / "hang.py"
    hang.write_text(
        "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, *args):\n        while True:\n"
        "            pass\n"
    )
    proc = run(["eval", "--task", "level1/3", "--solution", str(hang), "--timeout-s", "5"], tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = {ln.split()[0]: ln for ln in proc.stdout.splitlines() if ln.strip()}
    assert lines["status"].split()[1] == "timeout"
    assert "no result within 5 s" in lines["message"]


def test_heartbeat_says_what_runs_how_long_and_when_it_is_past_its_limit(capsys):
    import time

    from cudal1.cli import _heartbeat

    with _heartbeat("evaluating level1/3", limit_s=0.12, every_s=0.05):
        time.sleep(0.3)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) >= 3
    assert all(ln.startswith("  evaluating level1/3: ") for ln in lines)
    assert "(limit 0 s)" in lines[0]
    assert lines[-1].endswith("(past its 0 s limit: ending it)")


def test_eval_timeout_must_be_positive(seeds, tmp_path, capsys):
    from cudal1.cli import main

    task_id, seed = next(iter(seeds.items()))
    assert main(["eval", "--task", task_id, "--solution", str(seed), "--timeout-s", "0"]) == 2
    assert "--timeout-s must be a positive number of seconds, got 0.0" in capsys.readouterr().err


def test_eval_usage_errors(seeds, tmp_path, capsys):
    from cudal1.cli import main

    task_id, seed = next(iter(seeds.items()))
    assert main(["eval", "--task", "level9/999", "--solution", str(seed)]) == 2
    err = capsys.readouterr().err
    assert "no task level9/999" in err and "Traceback" not in err
    assert main(["eval", "--task", "NoSuchOperatorAnywhere", "--solution", str(seed)]) == 2
    assert "no task named 'NoSuchOperatorAnywhere'" in capsys.readouterr().err
    assert main(["eval", "--task", task_id, "--solution", str(tmp_path / "missing.py")]) == 2
    assert "missing.py" in capsys.readouterr().err
    assert main(["eval-suite", "--solutions", str(tmp_path / "nodir")]) == 2
    assert "nodir" in capsys.readouterr().err
    assert main(["eval", "--task", task_id, "--solution", str(seed), "--tasks", str(tmp_path)]) == 2
    assert "cannot load tasks" in capsys.readouterr().err
    import torch

    if not torch.cuda.is_available():  # a backend without a device is a usage error, not a traceback
        assert main(["eval", "--task", task_id, "--solution", str(seed), "--backend", "cuda"]) == 2
        assert "backend cuda" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # argparse: --solution is required
        main(["eval", "--task", task_id])
    assert exc.value.code == 2


STANDALONE_TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.randn(64, 64), torch.randn(64, 64)]


def get_init_inputs():
    return []
"""


def test_eval_a_standalone_task_file(run, tmp_path):
    """A KernelBench-format file outside any suite is a task; one without Model says so; a
    candidate with a syntax error is reported without a worker; a slower one is called slower."""
    (tmp_path / "task.py").write_text(STANDALONE_TASK)
    (tmp_path / "sol.py").write_text(STANDALONE_TASK.replace("class Model(", "class ModelNew("))
    proc = run(["eval", "--task", "task.py", "--solution", "sol.py", "--json", "--rounds", ROUNDS], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads(proc.stdout)
    assert record["task_id"] == "file/task" and record["status"] == "ok"
    words = record["message"].split("; ")[1]
    assert ("faster" in words) == (round(record["speedup"], 3) > 1.0), record["message"]

    (tmp_path / "nomodel.py").write_text(STANDALONE_TASK.replace("class Model(", "class Other("))
    proc = run(["eval", "--task", "nomodel.py", "--solution", "sol.py"], tmp_path)
    assert proc.returncode == 2 and "task file nomodel.py: missing module-level Model" in proc.stderr

    (tmp_path / "broken.py").write_text("class ModelNew(torch.nn.Module)\n    pass\n")
    proc = run(["eval", "--task", "task.py", "--solution", "broken.py", "--json"], tmp_path)
    record = json.loads(proc.stdout)
    assert record["status"] == "compile_error" and record["eval_seconds"] is None  # no worker ran
    assert "SyntaxError: expected ':' (<candidate>, line 1)" in record["message"]


def test_speedup_words_never_call_a_slower_candidate_faster():
    from cudal1.bench.result import speedup_phrase

    assert speedup_phrase(1.5) == "1.500× faster"
    assert speedup_phrase(0.5) == "2.000× slower (speedup 0.500×)"
    assert speedup_phrase(1.0004) == "as fast (speedup 1.000×)" == speedup_phrase(0.9996)


def test_version(capsys):
    import cudal1
    from cudal1.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"cudal1 {cudal1.__version__}"


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def test_eval_suite_results_resume_and_summary(seeds, run, tmp_path):
    (good_id, good_seed), (bad_id, bad_seed) = list(seeds.items())
    sol = tmp_path / "solutions"
    (sol / "level1").mkdir(parents=True)
    good_file = sol / "level1" / good_seed.name
    good_file.write_text(good_seed.read_text())
    (sol / "level1" / bad_seed.name).write_text(wrong_solution(bad_seed))
    (sol / "notes.py").write_text("# not a solution\n")
    out = tmp_path / "res" / "results.jsonl"
    args = [
        "eval-suite",
        "--solutions",
        str(sol),
        "--backend",
        "cpu",
        "--out",
        str(out),
        "--rounds",
        ROUNDS,
        "--build-jobs",
        "2",
    ]

    proc = run(args, tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # one candidate is wrong
    assert "notes.py" in proc.stderr  # unmatched file reported
    records = {r["task_id"]: r for r in _jsonl(out)}
    assert set(records) == {good_id, bad_id}
    assert records[good_id]["status"] == "ok" and records[good_id]["speedup"] > 0
    assert records[bad_id]["status"] == "incorrect"
    assert records[good_id]["solution"] == str(good_file)

    summary_file = out.with_suffix(".summary.json")
    s = json.loads(summary_file.read_text())
    assert s["summary"]["n"] == 2
    assert s["summary"]["n_correct"] == 1
    assert s["summary"]["status_counts"]["ok"] == 1 and s["summary"]["status_counts"]["incorrect"] == 1
    assert s["summary"]["pass_rate"] == pytest.approx(0.5)
    fast_1 = 0.5 if records[good_id]["speedup"] > 1.0 else 0.0
    assert s["summary"]["fast_p"]["fast_1"] == pytest.approx(fast_1)
    assert set(s["summary"]["fast_p"]) == {"fast_1", "fast_1.5", "fast_2"}
    assert [u["file"] for u in s["unmatched"]] == [str(sol / "notes.py")]
    assert "tasks evaluated" in proc.stdout and "fast_1.5" in proc.stdout

    # an existing results file is never silently overwritten
    assert run(args, tmp_path).returncode == 2

    # Resume after a run killed mid-write, with one solution edited since: the unchanged task is
    # skipped, the edited one is evaluated again, the torn line is ignored.
    bad_file = sol / "level1" / bad_seed.name
    bad_file.write_text(bad_file.read_text() + "\n# edited\n")
    with open(out, "a") as f:
        f.write('{"task_id": "' + good_id + '", "sta')
    proc = run([*args, "--resume"], tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 task(s) already in" in proc.stderr
    assert "1 task(s) in" in proc.stderr and "changed solution" in proc.stderr
    assert "1 unreadable line(s)" in proc.stderr
    records = _jsonl_lenient(out)
    assert sorted(r["task_id"] for r in records) == sorted([good_id, bad_id, bad_id])
    assert records[-1]["task_id"] == bad_id and records[-1]["status"] == "incorrect"
    first_bad = next(r for r in records[:-1] if r["task_id"] == bad_id)
    assert records[-1]["candidate_hash"] != first_bad["candidate_hash"]
    s = json.loads(summary_file.read_text())
    assert s["summary"]["n"] == 2 and s["summary"]["n_correct"] == 1


def _jsonl_lenient(path: Path) -> list[dict]:
    out = []
    for ln in path.read_text().splitlines():
        try:
            out.append(json.loads(ln))
        except json.JSONDecodeError:
            pass
    return out


@pytest.mark.parametrize(
    "ref, cand, baseline, floor",
    [
        (45.0, 7.6, 50.0, 0.5),  # plain ratio
        (45.0, 7.6, 40.0, 0.5),  # the reference capped by its clean baseline
        (0.098, 0.055, 0.2, 0.16),  # both below the resolution: equal
        (2.0, 0.01, 2.1, 0.1),  # the candidate below the resolution: a bound
    ],
)
def test_the_printed_result_shows_the_figures_that_make_the_speedup(ref, cand, baseline, floor):
    """The figures `cudal1 eval` prints give the speedup it prints (the CPU backend once printed
    45 ms and 7.6 ms beside 2.00×, from a resolution it did not show)."""
    import re

    from cudal1.bench.result import EvalResult, Status, Timing
    from cudal1.bench.timing import speedup_stats
    from cudal1.cli import format_result

    def timing(ms):
        return Timing(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, round_medians_ms=[ms], spread=0.0, calls=10)

    speedup, _ = speedup_stats([[ref]], [[cand]], ref_cap_ms=baseline, floor_ms=floor)
    result = EvalResult(
        "level1/1",
        Status.OK,
        reference=timing(ref),
        candidate=timing(cand),
        baseline_ms=baseline,
        resolution_ms=floor,
        calls_per_round=10,
        speedup=speedup,
        speedup_spread=0.0,
    )
    text = format_result(result)
    line = next(row for row in text.splitlines() if row.startswith("speedup"))
    shown, num, den = re.search(r"([\d.]+)×.*= ([\d.]+)(?: \(\w+\))? / ([\d.]+)(?: \(\w+\))? ms", line).groups()
    assert float(shown) == pytest.approx(speedup, abs=5e-4)
    assert float(num) / float(den) == pytest.approx(speedup, rel=1e-3), line
    assert "resolution" in text


def test_tasks_probe_prints_one_line_per_task(run, tmp_path):
    """`cudal1 tasks --probe`: one line per task as it finishes (id, status, seconds, name, reason),
    the listing, the summary and, with --json, the report; a hub model fails without a worker."""
    head = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return "
    tail = "\n\ndef get_inputs():\n    return [torch.randn(8, 4)]\n\ndef get_init_inputs():\n    return []\n"
    files = {
        "1_Add_one.py": head + "x + 1" + tail,
        "2_Zeros.py": head + "x * 0" + tail,
        "3_Bad_matmul.py": head + "x @ x" + tail,
        "4_Hub.py": head + "x" + tail + "W = torch.hub.load('pytorch/vision', 'resnet18')\n",
    }
    (tmp_path / "level1").mkdir()
    for name, text in files.items():
        (tmp_path / "level1" / name).write_text(text)
    report = tmp_path / "report.json"
    proc = run(
        ["tasks", "--tasks", str(tmp_path), "--levels", "1", "--probe", "--jobs", "1", "--json", str(report)],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("[")]
    assert [ln.split()[1:3] for ln in lines] == [
        ["level1/1", "ok"],
        ["level1/2", "degenerate"],
        ["level1/3", "FAILED"],
    ], proc.stderr
    assert re.match(r"\[3/3\] level1/3 +FAILED +\d+\.\d s +\d+ MiB  Bad_matmul ", lines[2]), lines[2]
    assert "Bad_matmul" in lines[2] and "forward seed=0 failed: RuntimeError" in lines[2]
    assert "output all zero" in lines[1]
    assert "level1: 2 loaded, 1 degenerate, 2 failed" in proc.stderr
    assert "DEGENERATE: output all zero" in proc.stdout and "4_Hub.py: downloads (torch.hub.load" in proc.stdout
    data = json.loads(report.read_text())
    assert [t["task_id"] for t in data["tasks"]] == ["level1/1", "level1/2"] and len(data["failures"]) == 2
    # Usage errors: one line, exit code 2.
    bad = run(["tasks", "--tasks", str(tmp_path), "--probe", "--jobs", "0"], tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip() == "cudal1: --jobs must be at least 1"
