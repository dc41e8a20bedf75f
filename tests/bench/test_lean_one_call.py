"""benchmarks/lean_one_call.py (GPU diagnosis of what a host gains in the one-call floor by
skipping the stock host's habits): its variants load in a real host and its figures and verdict
are computed as its docstring says."""

import math

import evalkit
import pytest
from cudal1.bench.evaluator import evaluate
from cudal1.bench.result import Status
from cudal1.bench.settings import EvalSettings

lean = evalkit.benchmark("lean_one_call")


@pytest.mark.parametrize("variant", ["spin", "lean_direct_spin", "noevents"])
def test_each_variant_finds_its_host_and_is_judged(variant, tmp_path) -> None:
    """On the CPU the changed handlers step aside: each variant is sin_chain computed call by
    call, so it is judged correct; a variant whose frame walk no longer found the host would
    fail to import (a KeyError or AttributeError at load)."""
    settings = EvalSettings.for_backend("cpu", cache_dir=str(tmp_path), rounds=2, calibration_calls=3)
    r = evaluate(evalkit.SIN_CHAIN, lean.source(variant), "cpu", settings=settings)
    assert r.status is Status.OK, (r.status, r.message, r.log[-800:])


def test_gaps_are_medians_of_pairwise_differences() -> None:
    def trips(*ms):
        return [{"wall_ms": m} for m in ms]

    g = lean.one_call_gaps(
        {
            "calibration one-call candidate": trips(1.0, 1.2, 1.1),
            "calibration one-call reference": trips(1.1, 1.1, 1.1),  # gaps -0.1, 0.1, 0.0
            "one-call candidate": trips(0.9, 0.8, 1.0),
            "one-call reference": trips(1.1, 1.1, 1.1),  # gaps -0.2, -0.3, -0.1
        }
    )
    assert g["cal"] == pytest.approx(0.0) and g["pass"] == pytest.approx(-0.2) and g["gain"] == pytest.approx(-0.2)
    assert math.isnan(lean.one_call_gaps({})["gain"])


def test_the_verdict_compares_each_variant_with_the_honest_control() -> None:
    ok, line = lean.verdict({"honest": [-0.02, -0.01], "lean": [-0.05, -0.04]}, 0.035)
    assert ok and "PASS" in line  # 0.045 - 0.015 = 0.03 below the control
    ok, line = lean.verdict({"honest": [-0.02, -0.01], "lean_spin": [-0.2, -0.15], "spin": [0.0]}, 0.035)
    assert not ok and "lean_spin" in line and "0.1600" in line
