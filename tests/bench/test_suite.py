"""Solution matching and the append-only results file of `cudal1 eval-suite` (no evaluator
needed), and where its builds and timings run (real prebuilds and evaluations on the CPU backend)."""

import json
from pathlib import Path

import pytest

from cudal1.bench.result import EvalResult, Status
from cudal1.bench.settings import EvalSettings
from cudal1.bench.suite import ResultWriter, SuiteJob, match_solutions, read_results, run_suite


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


# -- builds keep off the timing cores (real prebuilds and evaluations, on the CPU backend) ---------


def _cores_said(cache, source):
    """What `candidates/reports_cores.py` wrote at each import: {"prebuild", "self", "child", "at"}."""
    import os

    from cudal1.bench.evaluator import extensions_dir

    settings_ = EvalSettings.for_backend("cpu", cache_dir=str(cache))
    folder = extensions_dir(settings_, "cpu-" + os.uname().machine, source)
    return [{**json.loads(p.read_text()), "at": p.stat().st_mtime} for p in folder.glob("cores-*.json")]


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity"), reason="needs CPU affinity")
def test_overlapping_builds_run_off_the_timing_slot(tmp_path):
    """With overlap, each build (and the programs it starts) runs on the build cores and each
    evaluation on its slot; with reserve_cores=False both may use every core."""
    import evalkit

    from cudal1.bench import cores

    usable = cores.usable_cores()
    if len(usable) < 2:
        pytest.skip("needs 2 usable cores")
    split = cores.CoreSplit.reserve(1)
    sources = [evalkit.candidate("reports_cores") + f"\n# variant {i}\n" for i in range(2)]
    jobs = [SuiteJob(evalkit.task("matmul_relu"), s, Path(f"v{i}.py")) for i, s in enumerate(sources)]
    results = []
    run_suite(jobs, "cpu", evalkit.settings(tmp_path / "pinned"), lambda job, r: results.append(r), overlap=True)
    assert [r.status for r in results] == [Status.OK, Status.OK], [r.message for r in results]
    for source in sources:
        said = {s["prebuild"]: s for s in _cores_said(tmp_path / "pinned", source)}
        assert said[True]["self"] == list(split.builds) and said[True]["child"] == _listed(split.builds), said
        assert said[False]["self"] == list(split.slot(0)) and said[False]["child"] == _listed(split.slot(0)), said

    run_suite(
        jobs[:1],
        "cpu",
        evalkit.settings(tmp_path / "free"),
        lambda job, r: results.append(r),
        overlap=True,
        reserve_cores=False,
    )
    assert results[-1].status is Status.OK, results[-1].message
    assert {tuple(s["self"]) for s in _cores_said(tmp_path / "free", sources[0])} == {usable}


def _listed(cpus):
    """Cpus_allowed_list's spelling of a set of cores ("1" or "0-3" or "0,2")."""
    cpus = sorted(cpus)
    if len(cpus) > 1 and cpus == list(range(cpus[0], cpus[-1] + 1)):
        return f"{cpus[0]}-{cpus[-1]}"
    return ",".join(map(str, cpus))


def test_timing_waits_for_the_builds_where_the_cores_cannot_be_split(tmp_path, monkeypatch):
    """On a host with one usable core there is no split: overlap is turned off, nothing is pinned,
    and the first evaluation starts only once every build is done."""
    import evalkit

    from cudal1.bench import cores

    monkeypatch.setattr(cores, "usable_cores", lambda: (0,))
    sources = [evalkit.candidate("reports_cores") + f"\n# variant {i}\n" for i in range(2)]
    jobs = [SuiteJob(evalkit.task("matmul_relu"), s, Path(f"v{i}.py")) for i, s in enumerate(sources)]
    results = []
    run_suite(jobs, "cpu", evalkit.settings(tmp_path), lambda job, r: results.append(r), overlap=True)
    assert [r.status for r in results] == [Status.OK, Status.OK], [r.message for r in results]
    said = [s for source in sources for s in _cores_said(tmp_path, source)]
    builds, timings = [s for s in said if s["prebuild"]], [s for s in said if not s["prebuild"]]
    assert len(builds) == len(timings) == 2
    assert max(s["at"] for s in builds) <= min(s["at"] for s in timings)
    assert all(s["self"] == sorted(__import__("os").sched_getaffinity(0)) for s in said)  # nothing pinned
