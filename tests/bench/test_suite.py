"""Solution matching and the append-only results file of `cudal1 eval-suite` (no evaluator needed)."""

import json

import pytest

from cudal1.bench.result import EvalResult, Status
from cudal1.bench.suite import ResultWriter, match_solutions, read_results


def _touch(path, text="class ModelNew: pass\n"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_match_solutions_by_layout(tmp_path):
    a = _touch(tmp_path / "level1" / "1_Diag.py")
    b = _touch(tmp_path / "nested" / "level2" / "07_Fused.py")  # leading zero: still id 7
    dup = _touch(tmp_path / "level1" / "1_Other.py")
    unknown = _touch(tmp_path / "level1" / "99_Nope.py")
    loose = _touch(tmp_path / "kernel.py")
    _touch(tmp_path / "level1" / "__pycache__" / "1_Diag.cpython-311.py")
    m = match_solutions(tmp_path, ["level1/1", "level2/7", "level3/1"])
    assert m.matched == {"level1/1": a, "level2/7": b}
    reasons = {p: r for p, r in m.unmatched}
    assert set(reasons) == {dup, unknown, loose}
    assert "1_Diag.py" in reasons[dup]  # "1_Diag.py" sorts before "1_Other.py" and wins
    assert "level1/99" in reasons[unknown]
    assert "level<L>" in reasons[loose]


def test_match_solutions_missing_dir(tmp_path):
    with pytest.raises(NotADirectoryError):
        match_solutions(tmp_path / "nope", [])


def test_writer_and_reader_survive_a_torn_line(tmp_path):
    path = tmp_path / "r" / "results.jsonl"
    w = ResultWriter(path)
    w.write(EvalResult(task_id="level1/1", status=Status.OK, speedup=2.0), solution="a.py")
    with open(path, "a") as f:
        f.write('{"task_id": "level1/2", "sta')  # killed mid-write
    w = ResultWriter(path)  # reopening starts a fresh line
    w.write(EvalResult(task_id="level1/3", status=Status.INCORRECT))
    w.write(EvalResult(task_id="level1/1", status=Status.OK, speedup=3.0))  # later line wins
    records, bad = read_results(path)
    assert bad == 1
    assert set(records) == {"level1/1", "level1/3"}
    assert records["level1/1"]["speedup"] == 3.0
    assert "solution" not in records["level1/1"]
    assert EvalResult.from_dict(records["level1/3"]).status is Status.INCORRECT
    assert json.loads(path.read_text().splitlines()[0])["solution"] == "a.py"
    assert read_results(tmp_path / "absent.jsonl") == ({}, 0)
