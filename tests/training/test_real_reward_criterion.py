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
    # The equal-pay control (`equal_pay`: both variants paid as a correct 1.00x), 2026-12-03
    # 18:22-18:34 UTC, a fresh SFT: it passes the criterion in two of four seeds (docs/training.md).
    "equal pay 1e-4 seed 0": (
        _sixteenths(6, 9, 11, 10, 11, 10, 8, 10, 10, 15, 13, 12),
        _sixteenths(10, 7, 5, 5, 5, 6, 6, 6, 4, 1, 3, 4),
        False,
    ),
    "equal pay 1e-4 seed 1": (
        _sixteenths(11, 8, 8, 3, 6, 11, 10, 9, 15, 12, 13, 9),
        _sixteenths(4, 8, 8, 12, 9, 3, 6, 6, 1, 4, 3, 7),
        False,
    ),
    "equal pay 1e-4 seed 2": (
        _sixteenths(6, 7, 13, 10, 13, 12, 10, 10, 11, 14, 13, 14),
        _sixteenths(9, 8, 3, 5, 3, 3, 5, 6, 4, 2, 3, 2),
        True,
    ),
    "equal pay 1e-4 seed 3": (
        _sixteenths(8, 9, 12, 8, 11, 9, 9, 15, 12, 11, 14, 14),
        _sixteenths(7, 7, 3, 7, 4, 7, 6, 1, 4, 4, 2, 2),
        True,
    ),
    # The same SFT, `--loss-agg dr_grpo` (2026-12-03 18:46-18:55 UTC): the real runs pass; equal pay
    # passes in one seed of four.
    "equal 1e-4 dr_grpo seed 0": (
        _sixteenths(7, 8, 14, 9, 14, 12, 10, 12, 14, 11, 11, 13),
        _sixteenths(7, 6, 2, 4, 2, 4, 4, 3, 2, 3, 3, 3),
        False,
    ),
    "real 1e-4 dr_grpo seed 0": (
        _sixteenths(5, 11, 15, 13, 15, 15, 16, 14, 16, 15, 14, 15),
        _sixteenths(10, 3, 1, 2, 0, 0, 0, 1, 0, 1, 0, 0),
        True,
    ),
    "equal 1e-4 dr_grpo seed 1": (
        _sixteenths(10, 8, 13, 12, 9, 10, 8, 9, 11, 12, 9, 11),
        _sixteenths(6, 7, 3, 4, 6, 6, 7, 7, 3, 3, 7, 4),
        False,
    ),
    "real 1e-4 dr_grpo seed 1": (
        _sixteenths(8, 10, 12, 13, 15, 15, 15, 16, 16, 16, 15, 13),
        _sixteenths(7, 6, 3, 1, 1, 1, 0, 0, 0, 0, 0, 2),
        True,
    ),
    "equal 1e-4 dr_grpo seed 2": (
        _sixteenths(7, 7, 12, 10, 11, 10, 11, 10, 13, 13, 15, 13),
        _sixteenths(7, 8, 3, 4, 5, 6, 4, 4, 1, 1, 1, 0),
        True,
    ),
    "real 1e-4 dr_grpo seed 2": (
        _sixteenths(7, 13, 13, 14, 14, 14, 11, 16, 13, 15, 15, 16),
        _sixteenths(7, 2, 2, 0, 0, 1, 1, 0, 3, 1, 1, 0),
        True,
    ),
    "equal 1e-4 dr_grpo seed 3": (
        _sixteenths(7, 8, 10, 9, 8, 12, 8, 8, 7, 8, 13, 7),
        _sixteenths(9, 6, 6, 7, 8, 3, 7, 8, 8, 7, 3, 8),
        False,
    ),
    "real 1e-4 dr_grpo seed 3": (
        _sixteenths(10, 15, 12, 16, 16, 14, 15, 14, 16, 16, 16, 16),
        _sixteenths(6, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0),
        True,
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


# ----- the five-variant experiment (`--variants five`)


def _five(fast, copy, renamed, fallback, failing):
    """A five-variant trace from per-step shares (the rest of each step is "other")."""
    other = [1 - sum(x) for x in zip(fast, copy, renamed, fallback, failing)]
    return {"fast": fast, "copy": copy, "renamed": renamed, "fallback": fallback, "failing": failing, "other": other}


def test_the_five_variant_criterion_needs_the_fast_share_and_few_copies_and_fallbacks():
    rrl = load_script()
    # 0.8 fast and 0.05 copies plus fallbacks over the last two steps: learned.
    assert rrl.learned(_five([0.2, 0.85, 0.8], [0.2, 0, 0], [0.2, 0.05, 0], [0.2, 0, 0.05], [0.2, 0.1, 0.15]))
    # Fast at 0.8, but copies + renamed + fallback at 0.1 (each under it alone): not learned.
    assert not rrl.learned(_five([0.2, 0.8, 0.8], [0.2, 0.05, 0], [0.2, 0, 0.05], [0.2, 0.05, 0.05], [0.2, 0.1, 0.1]))
    # Few copies, but the fast share at 0.75: not learned.
    assert not rrl.learned(_five([0.2, 0.75, 0.75], [0.2, 0, 0], [0.2, 0, 0], [0.2, 0, 0], [0.2, 0.25, 0.25]))
    # What equal pay should leave: the failing variant gone, the four correct ones about even.
    assert not rrl.learned(_five([0.2, 0.25, 0.3], [0.2, 0.25, 0.2], [0.2, 0.25, 0.25], [0.2, 0.25, 0.25], [0.2, 0, 0]))
    # A two-variant trace has no copies: only the fast share counts, as before.
    assert rrl.learned({"fast": [0.8, 0.8], "slow": [0.2, 0.2]})


# The five-variant runs of docs/training.md (2026-12-03 18:13-18:22 UTC, counts of 16 responses per
# step: fast, copy, renamed, fallback, failing): the real run passes (fast 14 and 15 of 16 over the
# last two steps, copies plus fallbacks 1 and 0), the three controls fail (seed 0).
FIVE_RUNS = {
    "five real 1e-4": (
        [(4, 1, 3, 3, 1), (2, 7, 3, 2, 2), (4, 6, 1, 2, 3), (8, 3, 1, 1, 1), (7, 3, 1, 2, 2), (11, 0, 1, 2, 1)]
        + [(11, 2, 0, 0, 1), (13, 0, 0, 2, 1), (13, 1, 0, 1, 0), (14, 1, 0, 0, 0), (14, 0, 0, 1, 0), (15, 0, 0, 0, 0)],
        True,
    ),
    "five equal pay 1e-4": (
        [(3, 4, 1, 6, 1), (2, 1, 4, 4, 3), (1, 4, 3, 7, 1), (3, 3, 3, 5, 1), (2, 1, 3, 8, 0), (1, 3, 6, 6, 0)]
        + [(2, 2, 6, 6, 0), (2, 3, 1, 9, 0), (5, 3, 2, 6, 0), (2, 3, 4, 5, 2), (3, 6, 1, 6, 0), (4, 3, 5, 3, 0)],
        False,
    ),
    "five negated 1e-4": (
        [(2, 1, 5, 3, 4), (2, 7, 2, 3, 1), (0, 4, 5, 5, 0), (3, 1, 5, 5, 1), (1, 2, 5, 2, 4), (2, 4, 3, 6, 1)]
        + [(1, 4, 3, 4, 4), (1, 5, 5, 4, 0), (3, 3, 3, 6, 0), (0, 2, 6, 4, 2), (1, 3, 3, 7, 2), (0, 2, 2, 10, 1)],
        False,
    ),
    "five lr0": (
        [(2, 5, 3, 1, 3), (4, 2, 5, 4, 1), (2, 7, 1, 2, 2), (2, 2, 2, 8, 0), (1, 2, 5, 4, 3), (5, 2, 4, 1, 3)]
        + [(5, 1, 3, 4, 2), (5, 2, 3, 2, 4), (1, 5, 1, 5, 3), (6, 6, 1, 0, 1), (2, 2, 2, 4, 4), (2, 2, 2, 6, 3)],
        False,
    ),
    # The same SFT checkpoint, `--reuse-sft --seed N` for N = 1, 2 (2026-12-03 18:35-18:46 UTC): the real
    # runs pass, the six controls fail.
    "five real seed 1": (
        [(4, 2, 3, 1, 3), (8, 3, 1, 2, 1), (8, 5, 1, 0, 1), (7, 2, 2, 3, 1), (9, 2, 2, 2, 1), (12, 0, 0, 1, 2)]
        + [(11, 2, 2, 1, 0), (12, 2, 1, 1, 0), (13, 0, 2, 0, 0), (15, 0, 0, 0, 0), (14, 0, 0, 0, 0), (14, 0, 1, 0, 1)],
        True,
    ),
    "five equal seed 1": (
        [(3, 4, 4, 2, 1), (7, 2, 4, 1, 1), (1, 7, 4, 2, 0), (2, 2, 5, 6, 0), (3, 3, 4, 5, 1), (2, 3, 4, 5, 0)]
        + [(1, 2, 3, 5, 2), (4, 2, 6, 3, 0), (4, 4, 3, 4, 0), (4, 1, 5, 5, 0), (5, 1, 4, 4, 1), (4, 2, 2, 5, 1)],
        False,
    ),
    "five negated seed 1": (
        [(4, 4, 3, 3, 1), (1, 2, 3, 4, 4), (0, 2, 4, 2, 4), (3, 4, 2, 2, 4), (2, 7, 4, 2, 0), (0, 5, 1, 5, 3)]
        + [(2, 3, 4, 5, 1), (1, 5, 1, 3, 4), (2, 4, 3, 3, 1), (2, 5, 6, 2, 1), (0, 2, 5, 4, 5), (1, 2, 3, 5, 2)],
        False,
    ),
    "five lr0 seed 1": (
        [(1, 1, 6, 4, 2), (2, 5, 2, 3, 3), (7, 1, 4, 2, 1), (4, 6, 3, 1, 2), (5, 2, 3, 3, 0), (2, 4, 3, 4, 3)]
        + [(2, 6, 5, 1, 2), (2, 2, 2, 4, 4), (7, 1, 0, 3, 3), (2, 3, 4, 4, 2), (2, 3, 4, 3, 3), (2, 3, 4, 1, 5)],
        False,
    ),
    "five real seed 2": (
        [(5, 3, 1, 3, 2), (7, 4, 2, 0, 1), (3, 3, 5, 2, 3), (7, 2, 5, 0, 2), (11, 0, 2, 2, 1), (12, 1, 2, 1, 0)]
        + [(16, 0, 0, 0, 0), (13, 0, 0, 1, 0), (13, 0, 0, 1, 0), (14, 0, 1, 0, 0), (13, 1, 0, 0, 2), (15, 0, 0, 0, 0)],
        True,
    ),
    "five equal seed 2": (
        [(4, 4, 2, 3, 2), (4, 3, 5, 2, 1), (2, 4, 6, 2, 1), (4, 5, 2, 3, 0), (6, 2, 2, 5, 1), (1, 8, 2, 3, 1)]
        + [(4, 4, 5, 3, 0), (3, 7, 1, 4, 0), (5, 4, 0, 6, 1), (7, 3, 2, 4, 0), (3, 4, 5, 4, 0), (5, 3, 4, 2, 0)],
        False,
    ),
    "five negated seed 2": (
        [(3, 2, 5, 4, 2), (0, 3, 5, 5, 3), (4, 5, 3, 2, 1), (2, 5, 2, 6, 0), (3, 3, 5, 3, 1), (1, 3, 3, 7, 1)]
        + [(0, 4, 4, 4, 2), (0, 5, 3, 6, 0), (0, 1, 3, 5, 4), (1, 5, 2, 6, 1), (0, 2, 11, 1, 2), (0, 3, 1, 8, 1)],
        False,
    ),
    "five lr0 seed 2": (
        [(2, 5, 0, 5, 3), (5, 3, 5, 0, 3), (3, 4, 3, 4, 1), (4, 3, 4, 2, 2), (4, 4, 3, 3, 0), (5, 4, 3, 2, 1)]
        + [(3, 3, 3, 3, 3), (1, 3, 2, 2, 5), (3, 3, 0, 3, 5), (3, 4, 3, 3, 1), (2, 6, 3, 1, 2), (4, 2, 2, 4, 4)],
        False,
    ),
}


@pytest.mark.parametrize("name", list(FIVE_RUNS))
def test_the_five_variant_criterion_on_the_measured_runs(name):
    rrl = load_script()
    steps, expected = FIVE_RUNS[name]
    shares = [[c / 16 for c in kinds] for kinds in zip(*steps)]
    assert rrl.learned(_five(*shares)) is expected


@pytest.mark.parametrize("kind", ["copy", "renamed", "fallback", "fast", "failing"])
def test_classify_recognizes_each_of_the_five_variants_through_the_parser(kind):
    rrl = load_script()
    for task_id in rrl.FIVE:
        parsed = parse_response(sft_response(rrl.target_code(task_id, kind, "five"), *rrl.target_text(kind, "five")))
        assert parsed.error is None and rrl.classify(parsed.code, task_id, "five") == kind
        other = next(t for t in rrl.FIVE if t != task_id)
        assert rrl.classify(parsed.code, other, "five") == "other"
    assert rrl.classify(None, "level1/3", "five") == "other"


def test_the_five_variants_are_five_programs_but_the_renamed_copy():
    rrl = load_script()
    from cudal1.rl.similarity import normalized_code

    for task_id in rrl.FIVE:
        codes = {k: normalized_code(rrl.target_code(task_id, k, "five")) for k in rrl.FIVE_KINDS}
        assert codes["renamed"] == codes["copy"]  # one program: the reward's copy check must see it
        assert rrl.target_code(task_id, "renamed", "five") != rrl.target_code(task_id, "copy", "five")
        assert len({codes[k] for k in ("copy", "fallback", "fast", "failing")}) == 4
    # The SFT targets' analysis lines start with five different words (that token carries the choice).
    assert len({rrl.target_text(k, "five")[0].split()[0] for k in rrl.FIVE_KINDS}) == 5


@pytest.mark.parametrize("kind", ["copy", "renamed", "fallback", "fast", "failing"])
def test_the_five_sft_targets_pass_the_rewards_format_check(kind):
    rrl = load_script()
    for task_id in rrl.FIVE:
        parsed = parse_response(sft_response(rrl.target_code(task_id, kind, "five"), *rrl.target_text(kind, "five")))
        assert price(None, sections=parsed.sections, code=parsed.code).reason == "not_evaluated"


def _result(task_id, kind):
    """What the evaluator measured for each variant (the CPU figures of docs/training.md, rounded):
    the exemplar 0.08x, the fallback 0.9x with the reference's operators, the fast one 2x, the
    failing one wrong."""
    from cudal1.bench.result import EvalResult, Status

    if kind == "failing":
        return EvalResult(task_id, Status.INCORRECT)
    speedup, labels = {"copy": (0.08, []), "fallback": (0.9, ["pytorch_only", "calls_reference_ops"])}.get(
        kind, (2.0, ["pytorch_only"])
    )
    return EvalResult(task_id, Status.OK, labels=list(labels), speedup=speedup, speedup_spread=0.1)


def test_sample_rollouts_prices_the_copies_and_the_fallback_against_the_shown_exemplar(small_model_dir):
    """Through the training job's own path: the five SFT targets as one group's responses to the
    exemplar prompt, `sample_rollouts` with the prompt's shown code, `assign_advantages`. The copy
    and the renamed copy are one program (one evaluation) priced "copy", the fallback "fallback",
    both at the failure reward like the failing variant; only the fast variant gets a positive
    advantage. Without `shown` the copies are paid as the correct 0.08x they measured."""
    from types import SimpleNamespace

    from cudal1.pipeline.rollouts import assign_advantages, sample_rollouts
    from cudal1.policy.model import load_tokenizer
    from cudal1.records import Generation
    from cudal1.rl.rewards import RewardConfig
    from cudal1.tasks import find_task, load_tasks

    from ..pipeline.stream_pool import StreamPool

    rrl = load_script()
    task_id = "level1/17"
    task = find_task(load_tasks("builtin"), task_id)
    messages, shown = rrl.exemplar_prompt(task, 0.08)
    assert shown == [rrl.target_code(task_id, "copy", "five")] and "0.08x" in messages[-1]["content"]
    tokenizer = load_tokenizer(small_model_dir)
    texts = [sft_response(rrl.target_code(task_id, k, "five"), *rrl.target_text(k, "five")) for k in rrl.FIVE_KINDS]

    class Replay:
        def generate(self, prompts, n, max_tokens, temperature, top_p):
            gens = []
            for text in texts:
                ids = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
                gens.append(Generation(list(prompts[0]), ids, [-1.0] * len(ids), text, "stop", 0))
            return [gens]

    def kind_of(candidate):
        return rrl.classify(candidate.source, task_id, "five")

    cfg = RewardConfig()
    pool = StreamPool(lambda c: _result(task_id, kind_of(c)))
    ctx = SimpleNamespace(
        cfg=SimpleNamespace(
            rollout=SimpleNamespace(max_model_len=4096, max_tokens=160, temperature=1.0, top_p=1.0), reward=cfg
        ),
        tokenizer=tokenizer,
        generator=Replay(),
        pools=SimpleNamespace(primary=pool),
        buffer=None,
    )
    rollouts = sample_rollouts(ctx, [task], [messages], len(texts), step=0, shown=[shown])
    assert len(pool.submitted) == 4  # the renamed copy shares the copy's evaluation
    assign_advantages(rollouts, cfg, "std")
    got = {k: (r.reward_reason, r.reward) for k, r in zip(rrl.FIVE_KINDS, rollouts)}
    fail = cfg.failure_value
    assert got["copy"] == ("copy", fail) and got["renamed"] == ("copy", fail)
    assert got["fallback"] == ("fallback", fail)
    assert got["failing"] == ("incorrect", fail)
    assert got["fast"][0] == "ok" and got["fast"][1] > 0
    advantages = {k: r.advantage for k, r in zip(rrl.FIVE_KINDS, rollouts)}
    assert advantages["fast"] > 0 and all(advantages[k] < 0 for k in ("copy", "renamed", "fallback", "failing"))

    # The same group with nothing shown: the copies are the correct 0.08x they measured, above a failure.
    unshown = sample_rollouts(ctx, [task], [messages], len(texts), step=1, shown=[[]])
    assert [r.reward_reason for r in unshown[:2]] == ["ok", "ok"] and unshown[0].reward > fail

    # The equal-pay control: every correct response at one reward, the failing one below.
    rrl.equal_pay(rollouts)
    assign_advantages(rollouts, cfg, "std")
    paid = {k: (r.reward_reason, r.advantage) for k, r in zip(rrl.FIVE_KINDS, rollouts)}
    assert {paid[k][0] for k in ("copy", "renamed", "fallback", "fast")} == {"equal_pay"}
    assert len({paid[k][1] for k in ("copy", "renamed", "fallback", "fast")}) == 1
    assert paid["failing"][0] == "incorrect" and paid["failing"][1] < paid["fast"][1]


def test_the_measured_pool_measures_each_program_at_most_measures_times(monkeypatch):
    """`MeasuredPool(measures=2)`: a code and its renamed copy are one program; it is measured in
    the first two steps it is asked for, then those two measurements alternate; within a step it
    gets one result; a second opinion (`avoid`) is a program of its own."""
    import itertools

    from cudal1.actors import bench_pool
    from cudal1.bench.result import EvalResult, Status
    from cudal1.records import Candidate

    counter = itertools.count(1)

    class Worker:
        def __init__(self, *args):
            pass

        def evaluate(self, c):
            return EvalResult(c.task_id, Status.OK, speedup=float(next(counter)), speedup_spread=0.0)

    monkeypatch.setattr(bench_pool, "BenchWorker", Worker)
    rrl = load_script()
    pool = rrl.MeasuredPool(measures=2)
    copy = Candidate("level1/3", rrl.target_code("level1/3", "copy", "five"))
    renamed = Candidate("level1/3", rrl.target_code("level1/3", "renamed", "five"))
    seen = []
    for _ in range(5):
        pool.new_step()
        seen.append([r.speedup for r in pool.evaluate_many([copy, renamed, copy])])
    assert seen == [[1.0] * 3, [2.0] * 3, [1.0] * 3, [2.0] * 3, [1.0] * 3]
    assert pool.evaluations == 2
    assert pool.evaluate_many([copy], avoid=[])[0].speedup == 3.0  # a second opinion: measured apart
    # `first` (what measure_variants reads): the program's first measurement, not a new one.
    assert pool.first(renamed).speedup == 1.0 and pool.evaluations == 3


def _fast_and_copies(fast: list[int], copies: list[int]) -> dict[str, list[float]]:
    """A five-variant trace from per-step counts of 16 responses: the fast variant, and copies,
    renamed copies and fallbacks together (all under "copy": the criterion sums the three)."""
    zeros = [0.0] * len(fast)
    return _five(_sixteenths(*fast), _sixteenths(*copies), zeros, zeros, zeros)


# The five-variant case at 16 steps, each run after its own fresh SFT (docs/training.md, eighteenth
# session): the gated pytest (seed 0; 0.78 fast over the last two steps, one run short of 0.8) and
# the script's seeds 1 and 2 (0.91, 0.97); copies plus fallbacks 0.03 in each.
FIVE_REAL = [
    _fast_and_copies(
        [6, 7, 8, 8, 8, 11, 12, 13, 11, 15, 15, 11, 13, 14, 12, 13], [5, 9, 6, 5, 4, 4, 3, 1, 2, 1, 0, 2, 0, 0, 0, 1]
    ),
    _fast_and_copies(
        [2, 4, 13, 11, 6, 13, 15, 14, 15, 10, 14, 16, 11, 16, 13, 16], [7, 10, 2, 5, 5, 1, 0, 1, 1, 3, 1, 0, 3, 0, 1, 0]
    ),
    _fast_and_copies(
        [4, 4, 5, 9, 11, 12, 14, 13, 14, 15, 16, 14, 15, 15, 16, 15], [9, 10, 8, 7, 2, 3, 1, 0, 1, 1, 0, 1, 0, 0, 0, 1]
    ),
]
# The equal-pay control at 12 steps, seeds 0-2 from one SFT checkpoint (docs/training.md, 2026-12-03).
FIVE_EQUAL = [
    _fast_and_copies([3, 2, 1, 3, 2, 1, 2, 2, 5, 2, 3, 4], [11, 9, 14, 11, 12, 15, 14, 13, 11, 12, 13, 11]),
    _fast_and_copies([3, 7, 1, 2, 3, 2, 1, 4, 4, 4, 5, 4], [10, 7, 13, 13, 12, 12, 10, 11, 11, 11, 9, 9]),
    _fast_and_copies([4, 4, 2, 4, 6, 1, 4, 3, 5, 7, 3, 5], [9, 10, 12, 10, 9, 13, 12, 12, 10, 9, 13, 9]),
]


def test_the_five_variant_criterion_is_taken_on_the_mean_of_three_runs():
    """`learned_on_average`: one of the three real runs misses 0.8 on its own (`learned`), their
    mean (0.885 fast, 0.03 copies) meets it; the equal-pay control's mean (0.23 fast) does not;
    three runs at 0.9 fast whose copies average 0.125 do not either; no runs is an error."""
    rrl = load_script()
    assert [rrl.learned(t) for t in FIVE_REAL] == [False, True, True]
    assert rrl.learned_on_average(FIVE_REAL)
    assert not rrl.learned_on_average(FIVE_EQUAL)
    copying = [_fast_and_copies([14, 15], [2, 2])] * 3  # fast 0.91, copies 0.125 in every run
    assert not rrl.learned_on_average(copying)
    assert rrl.learned_on_average([_fast_and_copies([14, 15], [1, 1])] * 3)  # copies 0.0625
    with pytest.raises(ValueError, match="no runs"):
        rrl.learned_on_average([])
