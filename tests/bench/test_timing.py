"""Unit tests of the timing statistics and the CPU clock."""

import time

import pytest

from cudal1.bench.timing import DeviceClock, speedup_stats, summarize_rounds


def test_summarize_rounds_statistics():
    t = summarize_rounds([[1.0, 2.0, 3.0], [2.0, 2.0, 2.0], [4.0, 4.0, 5.0]])
    assert t.median_ms == 2.0
    assert t.min_ms == 1.0 and t.max_ms == 5.0
    assert t.round_medians_ms == [2.0, 2.0, 4.0]
    assert t.spread == pytest.approx((4.0 - 2.0) / 2.0)
    assert t.calls == 9
    assert t.mean_ms == pytest.approx(25 / 9)


def test_speedup_is_ratio_of_medians_and_spread_of_round_ratios():
    ref = [[10.0, 10.0], [12.0, 12.0], [11.0, 11.0]]
    cand = [[5.0, 5.0], [5.0, 5.0], [5.5, 5.5]]
    speedup, spread = speedup_stats(ref, cand)
    assert speedup == pytest.approx(11.0 / 5.0)
    per_round = [2.0, 2.4, 2.0]
    assert spread == pytest.approx((2.4 - 2.0) / 2.0)
    assert max(per_round) == 2.4


def test_cpu_clock_measures_a_sleep():
    clock = DeviceClock("cpu")
    ms, out = clock.time_call(lambda s: (time.sleep(s), "done")[1], [0.02])
    assert out == "done"
    assert 19.0 <= ms < 200.0


def test_cpu_clock_is_bound_before_patching(monkeypatch):
    clock = DeviceClock("cpu")
    # A candidate replacing the clock after the timing module was imported changes nothing.
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)
    ms, _ = clock.time_call(time.sleep, [0.01])
    assert ms >= 9.0
