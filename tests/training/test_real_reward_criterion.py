"""The real-reward learning test's criterion and response classifier (fast; the experiment itself
is `test_real_reward_learning.py`, gated): `learned` (the fast variant is at least 0.8 of all
responses over the last two steps) gives the verdicts below on the runs measured in
docs/training.md, fails every measured control, and `classify` recognizes each variant as the
parser extracts it from a response in the trained format."""

from __future__ import annotations

import pytest

from cudal1.policy.parsing import parse_response
from cudal1.policy.prompts import sft_response
from cudal1.rl.rewards import price

from .test_real_reward_learning import load_script


def _sixteenths(*counts: int) -> list[float]:
    return [c / 16 for c in counts]


# Per-step fast and slow shares of all responses, and the criterion's verdict (docs/training.md).
RUNS = {
    # The gated pytest of 2026-12-02 04:00-04:20 UTC, after the SFT to 0.95 (counts of 16 responses
    # per step): the real run passes (0.69 and 0.94 over the last two steps, 0.81), the controls fail.
    "pytest real 1e-4": (
        _sixteenths(6, 9, 12, 13, 15, 15, 16, 10, 15, 16, 11, 15),
        _sixteenths(9, 7, 4, 1, 1, 0, 0, 2, 0, 0, 2, 0),
        True,
    ),
    "pytest lr0": (
        _sixteenths(9, 6, 10, 7, 10, 6, 11, 9, 7, 9, 7, 7),
        _sixteenths(6, 9, 5, 9, 5, 7, 5, 6, 8, 7, 9, 8),
        False,
    ),
    "pytest negated 1e-4": (
        _sixteenths(9, 5, 4, 1, 1, 1, 3, 0, 0, 0, 0, 0),
        _sixteenths(6, 10, 12, 15, 13, 15, 11, 14, 16, 16, 15, 15),
        False,
    ),
    # The same SFT checkpoint, `benchmarks/real_reward_learning.py --reuse-sft --seed N`, 2026-12-02
    # 04:29-04:40 UTC: the real runs pass (0.94, 0.94, 0.97), the controls fail (0.50, 0, 0.34, 0).
    "script real 1e-4 seed 1": (
        _sixteenths(6, 11, 14, 14, 14, 16, 14, 16, 16, 15, 14, 16),
        _sixteenths(10, 5, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0),
        True,
    ),
    "script real 1e-4 seed 2": (
        _sixteenths(6, 11, 14, 12, 15, 14, 16, 13, 16, 15, 16, 14),
        _sixteenths(9, 5, 2, 3, 0, 2, 0, 1, 0, 0, 0, 1),
        True,
    ),
    "script real 1e-4 seed 3": (
        _sixteenths(5, 10, 13, 12, 15, 14, 13, 14, 14, 14, 15, 16),
        _sixteenths(9, 6, 3, 2, 1, 0, 1, 2, 1, 1, 0, 0),
        True,
    ),
    "script lr0 seed 1": (
        _sixteenths(8, 8, 9, 10, 7, 11, 7, 9, 8, 10, 8, 8),
        _sixteenths(8, 8, 6, 6, 9, 5, 9, 7, 6, 6, 8, 7),
        False,
    ),
    "script negated 1e-4 seed 1": (
        _sixteenths(6, 1, 5, 5, 3, 2, 1, 1, 0, 0, 0, 0),
        _sixteenths(10, 11, 10, 11, 11, 14, 15, 14, 15, 14, 15, 14),
        False,
    ),
    "script lr0 seed 2": (
        _sixteenths(6, 10, 7, 6, 10, 8, 10, 9, 9, 7, 7, 4),
        _sixteenths(9, 6, 8, 10, 6, 8, 4, 7, 7, 9, 7, 11),
        False,
    ),
    "script negated 1e-4 seed 2": (
        _sixteenths(9, 5, 0, 5, 0, 1, 0, 0, 1, 1, 0, 0),
        _sixteenths(7, 11, 16, 11, 15, 15, 15, 15, 15, 13, 16, 15),
        False,
    ),
    # 2026-12-02 00:48-01:12 UTC, from the earlier SFT (P(slow) + P(fast) = 0.87 per task): the real
    # runs kept 6-44% garbled responses; only seed 2 meets the criterion (last two steps: 0.78, 0.75,
    # 0.88 and 0.69 of all).
    "real 1e-4": (
        [0.44, 0.56, 0.44, 0.75, 0.81, 0.69, 0.81, 0.81, 0.94, 0.75, 0.88, 0.69],
        [0.38, 0.38, 0.19, 0.19, 0.06, 0.19, 0.06, 0, 0, 0, 0, 0],
        False,
    ),
    "real 1e-4 seed 1": (
        [0.31, 0.75, 0.75, 0.81, 0.81, 0.56, 0.81, 1, 0.94, 0.88, 0.75, 0.75],
        [0.62, 0.12, 0.06, 0.06, 0, 0.12, 0.06, 0, 0, 0, 0.12, 0.06],
        False,
    ),
    "real 1e-4 seed 2": (
        [0.56, 0.75, 0.75, 0.88, 0.69, 0.81, 0.75, 0.81, 0.75, 0.88, 0.88, 0.88],
        [0.38, 0.12, 0.06, 0, 0.12, 0.12, 0, 0, 0.06, 0, 0, 0],
        True,
    ),
    "lr0 seed 2": (
        [0.62, 0.75, 0.56, 0.25, 0.44, 0.31, 0.81, 0.50, 0.56, 0.50, 0.62, 0.50],
        [0.31, 0.19, 0.44, 0.62, 0.56, 0.62, 0.12, 0.50, 0.38, 0.50, 0.19, 0.50],
        False,
    ),
    "real 3e-4": (
        [0.44, 0.88, 0.69, 0.81, 0.88, 0.88, 0.62, 0.62, 0.75, 0.69, 0.56, 0.81],
        [0.50, 0.06, 0.12, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        False,
    ),
    "lr0": (
        [0.62, 0.44, 0.50, 0.69, 0.50, 0.50, 0.50, 0.56, 0.50, 0.38, 0.50, 0.38],
        [0.38, 0.50, 0.38, 0.25, 0.25, 0.44, 0.38, 0.25, 0.50, 0.44, 0.50, 0.44],
        False,
    ),
    "negated 3e-4": (
        [0.19, 0.12, 0.06, 0, 0, 0, 0.06, 0, 0, 0, 0, 0],
        [0.69, 0.75, 0.56, 0.44, 0.38, 0, 0.12, 0, 0, 0, 0, 0],
        False,
    ),
    "negated 1e-4": (
        [0.12, 0.44, 0.31, 0.38, 0.19, 0.12, 0.12, 0, 0.12, 0.06, 0, 0],
        [0.69, 0.56, 0.44, 0.38, 0.50, 0.56, 0.69, 0.44, 0.12, 0.25, 0.12, 0.06],
        False,
    ),
}


@pytest.mark.parametrize("name", list(RUNS))
def test_the_criterion_on_the_measured_runs(name):
    rrl = load_script()
    fast, slow, expected = RUNS[name]
    assert rrl.learned({"fast": fast, "slow": slow}) is expected


def test_the_criterion_counts_garbled_responses_against_the_fast_variant():
    rrl = load_script()
    # Only fast among the variants, but 70% garbled: the choice share is 1.0, the criterion fails.
    assert not rrl.learned({"fast": [0.3] * 4, "slow": [0.0] * 4})
    # The mean of the last two steps, at the 0.8 boundary; earlier steps do not count.
    assert rrl.learned({"fast": [0.0, 0.0, 0.75, 0.85], "slow": [1.0, 1.0, 0.0, 0.0]})
    assert not rrl.learned({"fast": [1.0, 1.0, 0.81, 0.75], "slow": [0.0, 0.0, 0.0, 0.0]})
    assert rrl.choice_shares({"fast": [0.0, 0.5], "slow": [0.0, 0.5]}) == [0.0, 0.5]


@pytest.mark.parametrize("kind", ["slow", "fast"])
def test_classify_recognizes_each_variant_through_the_parser(kind):
    rrl = load_script()
    for task_id in rrl.VARIANTS:
        analysis, design = rrl.SLOW_TEXT if kind == "slow" else rrl.FAST_TEXT
        parsed = parse_response(sft_response(rrl.variant_code(task_id, kind), analysis, design))
        assert parsed.error is None and rrl.classify(parsed.code, task_id) == kind
        other = next(t for t in rrl.VARIANTS if t != task_id)
        assert rrl.classify(parsed.code, other) == "other"  # the other task's variant is not this one
    assert rrl.classify(None, "level1/17") == "other"
    assert rrl.classify("import torch\nclass ModelNew: pass\n", "level1/17") == "other"


@pytest.mark.parametrize("kind", ["slow", "fast"])
def test_the_sft_targets_pass_the_rewards_format_check(kind):
    rrl = load_script()
    analysis, design = rrl.SLOW_TEXT if kind == "slow" else rrl.FAST_TEXT
    for task_id in rrl.VARIANTS:
        parsed = parse_response(sft_response(rrl.variant_code(task_id, kind), analysis, design))
        # Past the format check (every required section long enough), the next rule is the missing result.
        assert price(None, sections=parsed.sections, code=parsed.code).reason == "not_evaluated"
