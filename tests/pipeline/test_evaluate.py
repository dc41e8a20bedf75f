"""jobs/evaluate.py's parts: solutions from a directory, a JSONL or a run; the paper's table per
pool and level; and the job on two real pools of the session cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudal1.bench.result import EvalResult, HackKind, Status
from cudal1.pipeline.evaluate import format_paper_table, load_solutions, paper_table
from cudal1.records import Exemplar
from cudal1.tasks import seed_solutions

ROOT = Path(__file__).resolve().parents[2]


def test_solutions_from_a_directory_a_jsonl_and_a_run(tmp_path):
    seeds = seed_solutions("cpu")
    ids = ["level1/1", "level1/2"]
    found, skipped = load_solutions(seeds["level1/1"].parents[1], ids)
    assert [c.task_id for c in found] == ids and found[0].source == seeds["level1/1"].read_text()
    assert any("no task" in s for s in skipped)  # the other tasks' files

    (tmp_path / "sol.py").write_text("class ModelNew: pass\n")
    lines = [
        {"task_id": "level1/1", "code": "A"},
        {"task_id": "level1/2", "solution": "sol.py"},
        {"task_id": "level1/1", "source": "B"},
        {"task_id": "level9/9", "code": "C"},
        {"no": "task"},
    ]
    records = tmp_path / "results.jsonl"
    records.write_text("\n".join(json.dumps(r) for r in lines) + "\n{torn")
    found, skipped = load_solutions(records, ids)
    assert [(c.task_id, c.source) for c in found] == [("level1/1", "B"), ("level1/2", "class ModelNew: pass\n")]
    assert len(skipped) == 3  # the unknown task, the record without one, the torn line

    run = tmp_path / "run"
    (run / "buffer").mkdir(parents=True)
    exemplars = [
        Exemplar("level1/1", "slow", 1.2, origin="seed"),
        Exemplar("level1/1", "fast", 2.5, origin="step3/g0/s1"),
        Exemplar("level1/2", "only", 1.1, origin="seed"),
    ]
    (run / "buffer" / "exemplars.jsonl").write_text("".join(json.dumps(e.to_dict()) + "\n" for e in exemplars))
    found, _ = load_solutions(run, ids)
    assert [(c.task_id, c.source) for c in found] == [("level1/1", "fast"), ("level1/2", "only")]

    with pytest.raises(ValueError, match="holds no solution"):
        load_solutions(records, ["level3/1"])
    with pytest.raises(FileNotFoundError):
        load_solutions(tmp_path / "nothing", ids)


def result(task_id, status=Status.OK, speedup=None, hack=None, labels=()):
    return EvalResult(task_id, status, speedup=speedup, hack_kind=hack, labels=list(labels))


def test_the_paper_table_per_pool_and_level():
    results = {
        "h100": [
            result("level1/1", speedup=2.0, labels=["custom_kernel"]),
            result("level1/2", speedup=1.005),
            result("level1/3", Status.INCORRECT),
            result("level2/1", speedup=4.0),
            result("level2/2", Status.HACK, hack=HackKind.OUTPUT_ALIASES_INPUT),
        ],
        "l40": [result("level1/1", speedup=0.5)],
    }
    rows = {(r["pool"], r["level"]): r for r in paper_table(results, [1.0, 1.01])}
    assert list(rows) == [("h100", "level1"), ("h100", "level2"), ("h100", "all"), ("l40", "level1")]
    l1 = rows[("h100", "level1")]
    assert (l1["n"], l1["success"]) == (3, 2)
    assert l1["fast_1"] == pytest.approx(2 / 3) and l1["fast_1.01"] == pytest.approx(1 / 3)  # 1.005x is not > 1.01
    assert l1["speedup_median"] == pytest.approx(1.5025) and l1["speedup_geomean"] == pytest.approx(
        (2.0 * 1.005) ** 0.5
    )
    assert l1["status_counts"] == {"ok": 2, "incorrect": 1} and l1["label_counts"] == {"custom_kernel": 1}
    everything = rows[("h100", "all")]
    assert everything["n"] == 5 and everything["hack_counts"] == {"output_aliases_input": 1}
    assert rows[("l40", "level1")]["fast_1"] == 0.0  # one level: no "all" row
    text = format_paper_table(list(rows.values()), [1.0, 1.01])
    assert text.splitlines()[0].split() == [
        "pool",
        "level",
        "n",
        "success",
        "mean",
        "median",
        "geomean",
        "fast_1",
        "fast_1.01",
    ]
    assert "h100/all: hack:output_aliases_input 1, status:incorrect 1, status:hack 1" in text


def test_a_placeholder_for_no_program_is_named_by_what_happened_not_as_a_build_error():
    """The optimize job's placeholders (status compile_error by convention) for a task with no
    usable code, or with correct attempts it did not deliver, read as "no program (...)" in the
    table's status line; a real build error stays a compile_error."""
    from cudal1.bench.result import Label

    NOT_DELIVERED = Label.NOT_DELIVERED
    results = {
        "cpu": [
            result("file/a", Status.COMPILE_ERROR, labels=[NOT_DELIVERED]),
            result("file/b", Status.COMPILE_ERROR, labels=["no_candidate"]),
            result("file/c", Status.COMPILE_ERROR),
            result("file/d", Status.COMPILE_ERROR, labels=[NOT_DELIVERED]),
        ]
    }
    rows = paper_table(results, [1.0])
    assert rows[0]["status_counts"] == {"compile_error": 4}  # the counts themselves keep the status
    assert rows[0]["no_program"] == {NOT_DELIVERED: 2, "no_candidate": 1}
    text = format_paper_table(rows, [1.0])
    assert "cpu/file: status:compile_error 1, no program (not_delivered) 2, no program (no_candidate) 1" in text
    only = format_paper_table(paper_table({"cpu": results["cpu"][:1]}, [1.0]), [1.0])
    assert "cpu/file: no program (not_delivered) 1" in only and "status:" not in only


def test_speedup_vs_torch_compile_per_pool_and_level():
    results = {
        "h100": [
            result("level1/1", speedup=2.0),
            result("level1/2", speedup=1.005),
            result("level1/3", Status.INCORRECT),
            result("level2/1", speedup=4.0),
            result("level2/2", Status.HACK, hack=HackKind.OUTPUT_ALIASES_INPUT),
        ],
        "l40": [result("level1/1", speedup=0.5)],
    }
    compiled = {
        "h100": [
            result("level1/1", speedup=1.6),
            result("level1/2", Status.RUNTIME_ERROR, labels=["torch_compile", "baseline_failed"]),
            result("level1/3", speedup=1.2),
            result("level2/1", speedup=5.0),
            result("level2/2", speedup=1.1),
        ]
    }
    rows = {(r["pool"], r["level"]): r for r in paper_table(results, [1.0], compiled)}
    l1, l2, everything = rows[("h100", "level1")], rows[("h100", "level2")], rows[("h100", "all")]
    # level1/1: 2.0 / 1.6 = 1.25x faster than torch.compile; level1/2: compile failed, so against
    # eager (1.005x > 1: faster); level1/3's solution is incorrect: neither.
    assert (l1["compile_n"], l1["compile_failed"]) == (3, 1)
    assert l1["vs_compile_geomean"] == pytest.approx(1.25) and l1["vs_compile_fast_1"] == pytest.approx(2 / 3)
    # level2/1: 4.0 / 5.0 = 0.8x, slower than torch.compile; level2/2 was a hack.
    assert l2["vs_compile_geomean"] == pytest.approx(0.8) and l2["vs_compile_fast_1"] == 0.0
    assert everything["vs_compile_geomean"] == pytest.approx((1.25 * 0.8) ** 0.5)
    assert (everything["compile_n"], everything["compile_failed"], everything["vs_compile_fast_1"]) == (5, 1, 2 / 5)
    assert "compile_n" not in rows[("l40", "level1")]  # no baseline on that pool
    lines = format_paper_table(list(rows.values()), [1.0]).splitlines()
    assert lines[0].split()[-4:] == ["fast_1", "vs_compile", "fast_1_vs_compile", "compile_failed"]
    assert lines[1].split()[-3:] == ["1.25x", "0.67", "1/3"] and lines[4].split()[-3:] == ["-", "-", "-"]


def test_the_job_on_two_pools(ray_cluster, tmp_path):
    """The job's plumbing on two pools with one task: each pool evaluates the solution and
    torch.compile of the reference (a compile costs 20-35 s here), inductor's kernels going to the
    candidate's build directory. How the table combines several tasks and a failed baseline is
    test_speedup_vs_torch_compile_per_pool_and_level's. Two correctness trials, no shifted ones:
    what is checked here is the plumbing (the trials themselves are the judge tests')."""
    from hydra import compose, initialize_config_dir

    from cudal1.config import load_evaluate_config, register_schema
    from cudal1.pipeline.evaluate import run_evaluate_job

    register_schema()
    out = tmp_path / "eval"
    cache = tmp_path / "bench-cache"
    two_pools = {
        "cpu": {
            "backend": "cpu",
            "num_actors": 1,
            "resources": {"bench_test": 1},
            "settings": {
                "rounds": 1,
                "calls_per_round": 2,
                "max_calls_per_round": 2,
                "warmup_calls": 0,
                "calibration_calls": 3,
                "calibration_rounds": 2,
                "correctness_trials": 2,
                "shifted_trials": 0,
                "wide_trials": 0,
                "cache_dir": str(cache),
            },
        }
    }
    two_pools["cpu_b"] = two_pools["cpu"]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose(
            "evaluate",
            overrides=[
                f"solutions={seed_solutions('cpu')['level1/1'].parents[1]}",
                "tasks.ids=[level1/1]",
                f"out_dir={out}",
                f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
                "tracking.system_metrics_s=0",
            ],
        )
    from omegaconf import OmegaConf

    raw = OmegaConf.to_container(cfg)
    raw["bench"]["pools"] = two_pools
    rows = run_evaluate_job(load_evaluate_config(OmegaConf.create(raw)))
    assert [(r["pool"], r["level"], r["n"]) for r in rows] == [("cpu", "level1", 1), ("cpu_b", "level1", 1)]
    for pool in ("cpu", "cpu_b"):
        results = [json.loads(line) for line in (out / f"results_{pool}.jsonl").read_text().splitlines()]
        assert [r["task_id"] for r in results] == ["level1/1"]
        assert all(r["status"] == "ok" and r["speedup"] > 0 for r in results), results
        # torch.compile of each reference, evaluated by the same pool (compile_baseline defaults on).
        compiled = [json.loads(line) for line in (out / f"results_{pool}_torch_compile.jsonl").read_text().splitlines()]
        assert [r["task_id"] for r in compiled] == ["level1/1"]
        assert all(
            r["status"] == "ok" and {"torch_compile", "baseline:torch_compile"} <= set(r["labels"]) for r in compiled
        ), compiled
        row = next(r for r in rows if r["pool"] == pool)
        vs = [s["speedup"] / c["speedup"] for s, c in zip(results, compiled)]
        assert (row["compile_n"], row["compile_failed"]) == (1, 0)
        assert row["vs_compile_geomean"] == pytest.approx(vs[0])
        assert row["vs_compile_fast_1"] == float(vs[0] > 1)
    # Under the sandbox, inductor's cache (its compiled kernels) goes to the candidate's build
    # directory, the one persistent directory a candidate may write (cudal1.bench.baselines).
    builds = list((cache / "ext").rglob("torchinductor/**/*.so"))
    assert builds, "inductor's compiled kernels belong in the candidate's build directory"
    assert "vs_compile" in (out / "table.txt").read_text().splitlines()[0]
    assert json.loads((out / "table.json").read_text()) == json.loads(json.dumps(rows))
    assert (out / "speedups.png").read_bytes().startswith(b"\x89PNG")


def test_a_missing_solutions_path_is_a_config_error(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "jobs/evaluate.py", f"solutions={tmp_path / 'none'}", f"out_dir={tmp_path / 'o'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.strip().endswith("does not exist") and "Traceback" not in proc.stderr
