"""The repeat check's limit (`benchmarks/repeat_verdict.py`), with the H100 figures of
docs/results/h100-2026-12-07-thirty-eighth (judge: 1-cap-after-guards-self-repeat/repeat.json;
plain processes: 3-inprocess/inproc.txt)."""

import pytest

from tests.bench import evalkit

verdict = evalkit.benchmark("repeat_verdict")


def judged(task, speedups, spread, ref_ms, cand_ms):
    return {
        "task": task,
        "variant": "default",
        "ok": 3,
        "of": 3,
        "speedups": speedups,
        "spread_speedup": spread,
        "reference_ms": ref_ms,
        "candidate_ms": cand_ms,
    }


def plain(task, speedups, spread):
    return {"task": task, "variant": "plain", "ok": 3, "of": 3, "speedups": speedups, "spread_speedup": spread}


def test_the_limit_is_the_plain_processes_spread_where_that_is_larger():
    assert verdict.repeat_limit(2.0, 1.5) == 0.01
    assert verdict.repeat_limit(2.0, 0.9) == 0.03
    assert verdict.repeat_limit(5.45, 0.14, plain_spread=0.2909, n_plain=2) == 0.2909
    assert verdict.repeat_limit(1.78, 0.77, plain_spread=0.0236) == 0.03
    assert verdict.repeat_limit(3.18, 1.05, plain_spread=0.0282) == 0.0282  # a quiet seed: the plain spread itself
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            verdict.repeat_limit(1.0, 1.0, plain_spread=bad)


def test_h100_repeat_run_a_seed_a_plain_process_cannot_repeat_passes_and_the_capped_one_does_not():
    entries = [
        judged("level2/1", [39.6742, 40.2373, 49.0787], 0.2337, [5.44679, 5.4433, 5.4798], [0.13729, 0.13528, 0.11143]),
        judged("level1/12", [2.0473, 2.3922, 2.3978], 0.1465, [1.77228, 1.77075, 1.77088], [0.86568, 0.74022, 0.73854]),
        judged("level1/7", [3.0295, 3.0322, 2.9853], 0.0155, [3.20775, 3.20646, 3.20584], [1.05885, 1.05747, 1.07387]),
        judged("level2/5", [2.2585, 2.2633, 2.2621], 0.0021, [6.97303, 6.97147, 6.96495], [3.08742, 3.08021, 3.07901]),
        plain("level2/1", [38.9038, 30.0135, 41.2164], 0.2879),
        plain("level1/12", [2.3068, 2.2784, 2.3324], 0.0234),
    ]
    rows = verdict.verdicts(entries)
    assert [ok for ok, _ in rows] == [True, False, False, True]
    assert "limit 125.4%" in rows[0][1] and "plain processes" in rows[0][1]  # 28.8% x 4.36: a noisy seed
    assert "limit 3.0%" in rows[1][1]  # the plain spread (2.3%) is under the base limit
    assert "limit 1.0%" in rows[2][1] and "plain" not in rows[2][1]  # no yardstick: the base limit


def test_a_failed_evaluation_fails_the_check_whatever_the_spread():
    e = judged("level2/5", [2.26, 2.26], 0.0, [6.97, 6.97], [3.08, 3.08])
    e["ok"] = 2
    ((ok, line),) = verdict.verdicts([e])
    assert not ok and line.startswith("BAD level2/5")


def test_spread_ratio_quantile_is_the_sampling_spread_of_two_ranges():
    """Two samples of one normal distribution: the ratio of their ranges (max − min) exceeds 4.36
    one time in twenty for three against three (a seeded simulation); larger samples differ
    less; computed the same every time."""
    q = verdict.spread_ratio_quantile(3, 3)
    assert q == pytest.approx(4.36, abs=0.1) and verdict.spread_ratio_quantile(3, 3) == q
    assert verdict.spread_ratio_quantile(5, 5) < q and verdict.spread_ratio_quantile(3, 5) < q
    assert verdict.spread_ratio_quantile(3, 3, q=0.5) == pytest.approx(1.0, abs=0.05)
    with pytest.raises(ValueError):
        verdict.spread_ratio_quantile(1, 3)


def test_h100_fortieth_a_noisy_seed_is_held_to_its_plain_spread_with_the_sampling_factor():
    """docs/results/h100-2026-12-07-fortieth/3-plain-repeat: level1/1 (a 0.055 ms candidate)
    spread 11.6% over three judge evaluations and 3.6% over three plain processes (in the
    session before, 4.2% and 9.4%): sampling, within the factor 4.36, ok; three times as wide
    (34.7%) is BAD. A quiet seed (level1/7: plain 2.8%) keeps the plain spread as its limit."""
    entries = [
        judged("level1/1", [50.6606, 44.9826, 49.0363], 0.1158, [2.711, 2.72, 2.70], [0.0535, 0.0603, 0.0553]),
        judged("level1/1", [50.6606, 34.0, 49.0363], 0.3471, [2.711, 2.72, 2.70], [0.0535, 0.0797, 0.0553]),
        judged("level1/7", [3.0242, 3.0341, 2.9353], 0.0328, [3.18, 3.18, 3.18], [1.05, 1.05, 1.08]),
        plain("level1/1", [38.9998, 37.8504, 37.6437], 0.0358),
        plain("level1/7", [2.922, 3.0051, 2.9471], 0.0282),
    ]
    rows = verdict.verdicts(entries)
    assert [ok for ok, _ in rows] == [True, False, False]
    assert "limit 15.6%" in rows[0][1] and "limit 2.8%" in rows[2][1]
