"""summarize / format_summary on hand-built results with hand-computed expectations."""

import pytest

from cudal1.bench.result import EvalResult, HackKind, Status
from cudal1.bench.summary import fast_p_key, format_summary, geometric_mean, summarize


def _ok(task_id, speedup, labels=()):
    return EvalResult(task_id=task_id, status=Status.OK, speedup=speedup, labels=list(labels))


@pytest.fixture
def results():
    return [
        _ok("level1/1", 2.0, ["custom_kernel"]),
        _ok("level1/2", 0.5, ["pytorch_only"]),
        _ok("level1/3", 4.0, ["custom_kernel"]),
        _ok("level1/4", 1.5),  # exactly p=1.5: not counted in fast_1.5 (strict >)
        EvalResult(task_id="level1/5", status=Status.INCORRECT),
        # A hack must never count as fast, even if a speedup was recorded before the guard fired.
        EvalResult(task_id="level1/6", status=Status.HACK, hack_kind=HackKind.RESULT_CACHE, speedup=10.0),
    ]


def test_counts_and_pass_rate(results):
    s = summarize(results)
    assert s["n"] == 6
    assert s["n_correct"] == 4
    assert s["pass_rate"] == pytest.approx(4 / 6)
    assert s["status_counts"]["ok"] == 4
    assert s["status_counts"]["incorrect"] == 1
    assert s["status_counts"]["hack"] == 1
    assert s["status_counts"]["timeout"] == 0
    assert set(s["status_counts"]) == {st.value for st in Status}
    assert s["hack_counts"]["result_cache"] == 1
    assert sum(s["hack_counts"].values()) == 1
    assert s["label_counts"] == {"custom_kernel": 2, "pytorch_only": 1}


def test_speedup_statistics_over_correct_only(results):
    s = summarize(results)
    # correct speedups: 2.0, 0.5, 4.0, 1.5
    assert s["speedup_mean"] == pytest.approx((2.0 + 0.5 + 4.0 + 1.5) / 4)  # 2.0
    assert s["speedup_median"] == pytest.approx((1.5 + 2.0) / 2)  # 1.75
    assert s["speedup_geomean"] == pytest.approx((2.0 * 0.5 * 4.0 * 1.5) ** 0.25)  # 6**0.25 ≈ 1.565


def test_fast_p_is_share_of_all_tasks(results):
    s = summarize(results, ps=(0.0, 1.0, 1.5, 2.0))
    assert s["fast_p"] == pytest.approx(
        {
            "fast_0": 4 / 6,  # fast_0 equals the pass rate
            "fast_1": 3 / 6,  # 2.0, 4.0, 1.5
            "fast_1.5": 2 / 6,  # 2.0, 4.0
            "fast_2": 1 / 6,  # 4.0
        }
    )


def test_empty_suite():
    s = summarize([])
    assert s["n"] == 0 and s["pass_rate"] == 0.0
    assert s["speedup_mean"] is None and s["speedup_median"] is None and s["speedup_geomean"] is None
    assert s["fast_p"] == {"fast_1": 0.0, "fast_1.5": 0.0, "fast_2": 0.0}
    assert "tasks evaluated" in format_summary(s)


def test_geometric_mean():
    assert geometric_mean([1.0, 4.0]) == pytest.approx(2.0)
    assert geometric_mean([8.0]) == pytest.approx(8.0)
    with pytest.raises(ValueError):
        geometric_mean([])
    with pytest.raises(ValueError):
        geometric_mean([1.0, 0.0])


def test_fast_p_key():
    assert [fast_p_key(p) for p in (1.0, 1.5, 2.0, 0.0)] == ["fast_1", "fast_1.5", "fast_2", "fast_0"]


def test_format_summary_is_aligned(results):
    text = format_summary(summarize(results))
    lines = [ln for ln in text.splitlines() if ln]
    by_key = {ln.split("  ", 1)[0].strip(): ln for ln in lines}
    assert "2.000×" in by_key["speedup mean"]
    assert "1.750×" in by_key["speedup median"]
    assert "33.3%  (2/6)" in by_key["fast_1.5"]
    assert by_key["hack result_cache"].endswith("1")
    assert "status timeout" not in text  # zero counts are left out
    # every value starts in the same column
    starts = {len(ln) - len(ln.split("  ", 1)[1].lstrip()) for ln in lines}
    assert len(starts) == 1
