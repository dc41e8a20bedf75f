"""The agreement report's statistics (`cudal1.bench.agreement`) on hand-made records, and the
benchmark script's task choice and batch-size profile (`benchmarks/agreement.py`)."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

from cudal1.bench import agreement as ag
from cudal1.bench.result import EvalResult, Status, Timing

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "agreement.py"


def judge(status="ok", speedup=1.0, ref_ms=1.0, cand_ms=1.0, message=""):
    return {
        "status": status,
        "speedup": speedup if status == "ok" else None,
        "reference_ms": ref_ms,
        "candidate_ms": cand_ms,
        "labels": [],
        "message": message,
        "seconds": 1.0,
    }


def record(
    task_id,
    group="kernelbench/level1",
    ref_judge=1.0,
    comp_judge=2.0,
    ref_plain=1.0,
    comp_plain=2.0,
    ref_status="ok",
    comp_status="ok",
    ref_ms=1.0,
    plain_errors=None,
):
    """A task whose judge saw the reference at `ref_judge`x and torch.compile at `comp_judge`x, and
    whose in-process timing saw `ref_plain`x and `comp_plain`x (None: not measured)."""
    ratios = {k: v for k, v in (("reference", ref_plain), ("torch_compile", comp_plain)) if v is not None}
    timing = {
        "reference_ms": ref_ms,
        "candidates_ms": {k: ref_ms / v for k, v in ratios.items()},
        "ratios": ratios,
        "errors": plain_errors or {},
    }
    return ag.task_record(
        task_id,
        group,
        {"reference": judge(ref_status, ref_judge), "torch_compile": judge(comp_status, comp_judge)},
        timing,
    )


def test_agreement_is_the_judges_speedup_over_the_plain_one():
    r = record("level1/1", comp_judge=2.1, comp_plain=2.0)
    assert ag.agreement(r, "torch_compile") == pytest.approx(1.05)
    assert ag.compared(r, "torch_compile") == "both"
    failed = record("level1/2", comp_status="runtime_error", comp_plain=None)
    assert ag.agreement(failed, "torch_compile") is None and ag.compared(failed, "torch_compile") == "neither"
    assert ag.compared(record("level1/3", comp_plain=None), "torch_compile") == "judge_only"
    assert ag.compared(record("level1/4", comp_status="timeout"), "torch_compile") == "inprocess_only"
    # The band edges belong to the band.
    assert ag.within(1.05, 0.05) and ag.within(0.95, 0.05) and not ag.within(1.0501, 0.05) and not ag.within(None, 0.1)
    assert ag.in_reference_band(0.98) and ag.in_reference_band(1.02) and not ag.in_reference_band(1.021)


def test_kind_summary_counts_one_sided_failures_against_agreement_and_leaves_double_failures_out():
    records = [
        record("level1/1", comp_judge=2.0, comp_plain=2.0),  # agrees
        record("level1/2", comp_judge=2.08, comp_plain=2.0),  # +4%
        record("level1/3", comp_judge=2.16, comp_plain=2.0),  # +8%
        record("level1/4", comp_judge=3.0, comp_plain=2.0),  # +50%
        record("level1/5", comp_status="runtime_error"),  # the judge failed, the plain run did not
        record("level1/6", comp_status="runtime_error", comp_plain=None),  # torch.compile failed both ways
    ]
    s = ag.kind_summary(records, "torch_compile")
    assert s["n"] == 6 and s["outcomes"] == {"both": 4, "judge_only": 0, "inprocess_only": 1, "neither": 1}
    assert s["within_5"] == pytest.approx(2 / 5) and s["within_10"] == pytest.approx(3 / 5)
    assert s["agreement"]["median"] == pytest.approx((1.04 + 1.08) / 2)
    # Linear interpolation over [1.0, 1.04, 1.08, 1.5]: p5 at position 0.15, p95 at 2.85.
    assert s["agreement"]["p5"] == pytest.approx(1.0 + 0.15 * 0.04)
    assert s["agreement"]["p95"] == pytest.approx(1.08 + 0.85 * 0.42)


def test_reference_band_share_counts_failed_evaluations_as_outside():
    records = [
        record("level1/1", ref_judge=1.0),
        record("level1/2", ref_judge=1.019),
        record("level1/3", ref_judge=0.97),
        record("level1/4", ref_status="timeout"),
        record("level1/5", ref_judge=1.0, ref_plain=1.03),
    ]
    s = ag.kind_summary(records, "reference")
    assert s["judge_in_band"] == pytest.approx(3 / 5)
    assert s["inprocess_in_band"] == pytest.approx(4 / 5)  # the timed-out one was still measured in-process


def test_targets_pass_and_fail_at_their_shares():
    good = [record(f"level1/{i}", ref_judge=1.0, comp_judge=2.0, comp_plain=2.0) for i in range(1, 20)]
    results = ag.target_results(good + [record("level1/20", ref_judge=1.01, comp_judge=2.15, comp_plain=2.0)])
    # 20 of 20 references in band; torch.compile: 19 of 20 within ±5% (95% >= 90%), 20 of 20 within ±10%.
    assert [(t["passed"], t["n"]) for t in results] == [(True, 20), (True, 20), (True, 20)]
    assert results[1]["share"] == pytest.approx(0.95)
    worse = good + [record("level1/20", ref_judge=1.05, comp_judge=2.5, comp_plain=2.0)]
    # 19 of 20 in band is 95%: enough for the reference (95%) and for ±5% (90%), not for ±10% (98%).
    assert [t["passed"] for t in ag.target_results(worse)] == [True, True, False]
    assert [t["passed"] for t in ag.target_results([])] == [False, False, False]


def test_outliers_and_the_report_show_times_on_both_sides():
    records = [
        record("level1/1"),
        record("level1/2", ref_judge=1.1),
        record("level2/3", group="kernelbench/level2", comp_judge=1.0, comp_plain=2.0, ref_ms=0.05),
        record("level2/4", group="kernelbench/level2", comp_status="runtime_error", comp_plain=1.5),
    ]
    records[3]["judge"]["torch_compile"]["message"] = "forward: InductorError: boom"
    found = ag.outliers(records)
    assert [(o["task_id"], o["kind"]) for o in found] == [
        ("level2/4", "torch_compile"),
        ("level2/3", "torch_compile"),
        ("level1/2", "reference"),
    ]
    assert found[1]["agreement"] == pytest.approx(0.5) and found[1]["inprocess_candidate_ms"] == pytest.approx(0.025)
    text = ag.format_report(
        records, ag.select(records, ["kernelbench/level1", "kernelbench/level2"]), "KernelBench levels 1-2"
    )
    assert "== kernelbench/level1: 2 tasks" in text and "== kernelbench/level2: 2 tasks" in text
    assert "(tasks under 0.1 ms: 1)" in text  # level2/3's reference runs in 0.05 ms
    assert "runtime_error forward: InductorError: boom" in text
    lines = [line for line in text.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert lines == [
        "FAIL reference as candidate: judge speedup within 0.98-1.02x: 75.0% of 4 (KernelBench levels 1-2; needs 95%)",
        "FAIL torch.compile: judge within ±5% of in-process ratio: 50.0% of 4 (KernelBench levels 1-2; needs 90%)",
        "FAIL torch.compile: judge within ±10% of in-process ratio: 50.0% of 4 (KernelBench levels 1-2; needs 98%)",
    ]


def test_judge_entry_reads_an_eval_result():
    t = Timing(median_ms=2.0, mean_ms=2.1, min_ms=1.9, max_ms=2.5, round_medians_ms=[2.0], spread=0.0, calls=5)
    r = EvalResult(
        "level1/1", Status.OK, speedup=1.01, reference=t, candidate=t, labels=["torch_compile"], message="ok"
    )
    assert ag.judge_entry(r, 3.14159) == {
        "status": "ok",
        "speedup": 1.01,
        "reference_ms": 2.0,
        "candidate_ms": 2.0,
        "labels": ["torch_compile"],
        "message": "ok",
        "seconds": 3.14,
    }


def script():
    spec = importlib.util.spec_from_file_location("agreement_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_interleaves_groups_and_sets_kernelbenchs_batch_size(tmp_path):
    bench = script()
    root = tmp_path / "KernelBench"
    for level in (1, 2):
        (root / f"level{level}").mkdir(parents=True)
        for i in (1, 2, 3):
            (root / f"level{level}" / f"{i}_Op.py").write_text(
                "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x.relu()\n\n"
                "batch_size = 4096\ndim = 8\n\ndef get_inputs():\n    return [torch.randn(batch_size, dim)]\n\n"
                "def get_init_inputs():\n    return []\n"
            )
    args = argparse.Namespace(
        kernelbench=str(root), levels=[1, 2], builtin=False, tasks=None, limit=2, batch_size=3, backend="cpu"
    )
    chosen = bench.choose_tasks(args)
    assert [(g, t.task_id) for g, t in chosen] == [
        ("kernelbench/level1", "level1/1"),
        ("kernelbench/level2", "level2/1"),
        ("kernelbench/level1", "level1/2"),
        ("kernelbench/level2", "level2/2"),
    ]
    module = chosen[0][1].load_module("cpu")
    assert module.batch_size == 3 and module.get_inputs()[0].shape == (3, 8)
    args.tasks, args.limit = ["kernelbench/level2/3"], None
    assert [t.task_id for _, t in bench.choose_tasks(args)] == ["level2/3"]
    args.tasks = ["kernelbench/level3/1"]
    with pytest.raises(SystemExit, match="no such task"):
        bench.choose_tasks(args)
