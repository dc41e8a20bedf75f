import dataclasses
import math

import pytest

from cudal1.bench.result import EvalResult, HackKind, Status, Timing
from cudal1.rl.rewards import (
    RewardConfig,
    conservative_speedup,
    consistent_speedup,
    credit,
    label_factor,
    needs_second_opinion,
    normalized_code,
    paid_speedup,
    price,
    round_speedups,
    second_opinion,
)

B = math.log(10.0)  # the default bound of log-speedup credit


def softsign_credit(speedup):
    v = math.log(speedup) / B
    return B * v / (1 + abs(v))


SECTIONS = {"analysis": "The reference reads its input twice from memory.", "design": "Fuse both passes into one."}


def ok(speedup, labels=(), spread=0.0):
    return EvalResult(task_id="level1/1", status=Status.OK, speedup=speedup, speedup_spread=spread, labels=list(labels))


def test_a_correct_candidate_earns_bounded_log_speedup_credit():
    p = price(ok(2.5), None)
    assert p.reason == "ok" and p.speedup == 2.5 and p.trainable
    assert p.reward == pytest.approx(softsign_credit(2.5))
    assert price(ok(1.0), None).reward == 0.0
    slow = price(ok(0.5), None)
    assert slow.reward == pytest.approx(softsign_credit(0.5)) and slow.reward < 0


def test_credit_keeps_the_ranking_and_bounds_outliers():
    speedups = [1e-12, 1e-6, 0.1, 0.5, 1.0, 2.0, 20.0, 25.0, 30.0, 40.0, 120.0, 1e6, 1e12]
    for transform, low, high in (("log_speedup", -B, B), ("speedup", 0.0, 10.0)):
        cfg = RewardConfig(transform=transform)
        values = [credit(s, cfg) for s in speedups]
        assert all(a < b for a, b in zip(values, values[1:])), transform
        assert all(low < v < high for v in values), transform
    assert credit(0.5, RewardConfig(transform="speedup")) == 0.5  # slowdowns keep their value
    with pytest.raises(ValueError):
        credit(0.0, RewardConfig())


@pytest.mark.parametrize("transform", ["log_speedup", "speedup"])
def test_every_failure_earns_less_than_every_correct_candidate(transform):
    cfg = RewardConfig(transform=transform)
    failures = [
        price(EvalResult("t", status=s), None, cfg).reward
        for s in (Status.INCORRECT, Status.RUNTIME_ERROR, Status.COMPILE_ERROR, Status.TIMEOUT)
    ]
    failures += [price(None, "syntax_error", cfg).reward, price(None, None, cfg).reward]
    slowest_correct = price(ok(0.011), None, cfg).reward  # 0.011 rounds up to 0.02
    assert max(failures) < slowest_correct
    assert cfg.failure_value == cfg.lower_bound


def test_a_failure_or_hack_reward_that_pays_more_than_correct_code_is_refused():
    with pytest.raises(ValueError, match="failure_reward"):
        RewardConfig(transform="log_speedup", failure_reward=0.0)  # ln 0.5 < 0: it would pay failures more
    with pytest.raises(ValueError, match="failure_reward"):
        RewardConfig(transform="speedup", failure_reward=0.5)
    with pytest.raises(ValueError, match="hack_reward"):
        RewardConfig(transform="speedup", failure_reward=-1.0, hack_reward=0.0)
    assert RewardConfig(transform="speedup", failure_reward=-1.0, hack_reward=-2.0).hack_value == -2.0
    for bad in (
        dict(max_credit=1.0),
        dict(min_gain=0.9),
        dict(transform="exp"),
        dict(round_step=float("nan")),
        dict(label_factors={"pytorch_only": -1.0}),
    ):
        with pytest.raises(ValueError):
            RewardConfig(**bad)
    for key, bad in (
        ("tie_calibration", dict(tie_calibration="yes")),
        ("tie_quantile", dict(tie_quantile=0.0)),
        ("tie_quantile", dict(tie_quantile=1.5)),
        ("tie_min_pairs", dict(tie_min_pairs=0)),
        ("tie_min_pairs", dict(tie_min_pairs=2.5)),
        ("tie_max_floor", dict(tie_max_floor=0.01)),  # below tie_floor (0.04)
        ("tie_max_floor", dict(tie_max_floor=float("inf"))),
    ):
        with pytest.raises(ValueError, match=key):
            RewardConfig(**bad)


def test_speedups_are_rounded_toward_one_and_count_only_above_the_min_gain():
    cfg = RewardConfig()
    assert conservative_speedup(1.237, cfg) == pytest.approx(1.23)
    assert conservative_speedup(1.23, cfg) == pytest.approx(1.23)
    assert conservative_speedup(0.873, cfg) == pytest.approx(0.88)
    assert conservative_speedup(1.009, cfg) == 1.0
    assert conservative_speedup(1.01, cfg) == 1.0  # "above 1.01×" is strict
    assert conservative_speedup(1.02, cfg) == pytest.approx(1.02)
    assert conservative_speedup(0.004, cfg) == pytest.approx(0.01)
    assert price(ok(1.009), None).reward == 0.0


def test_a_result_noisier_than_the_bar_earns_no_gain():
    noisy = price(ok(3.0, spread=0.6), None)
    assert noisy.reason == "ok:noisy" and noisy.reward == 0.0 and noisy.speedup == 1.0 and noisy.spread == 0.6
    quiet = price(ok(3.0, spread=0.1), None)
    assert quiet.reason == "ok" and quiet.reward > 0
    slow_noisy = price(ok(0.5, spread=0.9), None)  # a slowdown is not forgiven for being noisy
    assert slow_noisy.reason == "ok" and slow_noisy.reward < 0


def timed(speedup, round_x, ref_ms=2.0, spread=None, **fields):
    """A correct result whose rounds ran at `round_x` (× each: the reference `ref_ms` a call, the
    candidate ref_ms / x), with the whole pass at `speedup`."""

    def timing(rounds):
        return Timing(
            median_ms=sorted(rounds)[len(rounds) // 2], mean_ms=sum(rounds) / len(rounds), min_ms=min(rounds),
            max_ms=max(rounds), round_medians_ms=list(rounds), spread=0.0, calls=len(rounds),
        )  # fmt: skip

    if spread is None:
        spread = (max(round_x) - min(round_x)) / sorted(round_x)[len(round_x) // 2]
    return dataclasses.replace(
        ok(speedup, spread=spread),
        reference=timing([ref_ms] * len(round_x)),
        candidate=timing([ref_ms / x for x in round_x]),
        **fields,
    )


def test_a_noisy_result_is_paid_the_gain_three_rounds_in_four_agree_on():
    # A 2x kernel on a loaded machine: every round faster, the rounds 1.2-3.4x (spread 1.05).
    steady = timed(2.1, [1.2, 1.5, 1.8, 2.0, 2.2, 2.6, 3.0, 3.4])
    assert round_speedups(steady) == pytest.approx([1.2, 1.5, 1.8, 2.0, 2.2, 2.6, 3.0, 3.4])
    p = price(steady, None)
    assert (p.reason, p.speedup) == ("ok:noisy", pytest.approx(1.5))  # the 2nd smallest of 8
    assert p.reward == pytest.approx(softsign_credit(1.5))
    # Fast in two rounds of eight and not in the rest: what the pass's median says is not what
    # most rounds agree on, so no gain.
    lucky = timed(2.0, [0.9, 0.95, 1.0, 1.0, 1.0, 1.05, 3.0, 3.5])
    assert price(lucky, None).speedup == 1.0 and price(lucky, None).reward == 0.0
    # Never above the pass's own figure, rounded toward 1.00 as every speedup is.
    assert consistent_speedup(timed(2.0, [3.0] * 4 + [9.0]), 0.25, 2.0) == 2.0
    assert price(timed(1.5, [1.237] * 6 + [5.0]), None).speedup == pytest.approx(1.23)
    # Unknown noise is still no gain, whatever the rounds; quantile 0 restores "no gain".
    assert price(timed(2.1, [1.5, 1.8, 2.0, 2.2, 3.4], spread=math.inf), None).speedup == 1.0
    assert price(steady, None, RewardConfig(noisy_quantile=0.0)).speedup == 1.0
    # Within max_spread nothing changes: the pass's figure is paid.
    assert price(timed(2.0, [1.9, 2.0, 2.1]), None).speedup == 2.0
    with pytest.raises(ValueError):
        RewardConfig(noisy_quantile=0.6)


def test_round_speedups_cap_and_floor_as_the_evaluator_does():
    capped = timed(1.0, [2.0, 2.0], ref_ms=4.0, baseline_ms=2.0)  # the reference at most its clean baseline
    assert round_speedups(capped) == pytest.approx([1.0, 1.0])
    floored = timed(1.0, [4000.0, 4000.0], ref_ms=4.0, resolution_ms=0.5)  # both sides at least the resolution
    assert round_speedups(floored) == pytest.approx([8.0, 8.0])
    # Rounds the result cannot pair, or times that are not finite and > 0: none.
    assert round_speedups(ok(2.0)) == []
    uneven = timed(2.0, [2.0, 2.0])
    uneven.candidate.round_medians_ms.append(1.0)
    assert round_speedups(uneven) == []
    assert round_speedups(timed(2.0, [2.0, math.inf])) == []


def test_labels_price_the_gain_and_never_forgive_a_slowdown():
    cfg = RewardConfig()
    assert price(ok(2.0, ["reduced_precision"]), None, cfg).reward == 0.0
    assert price(ok(2.0, ["pytorch_only"]), None, cfg).speedup == pytest.approx(2.0**0.75)
    assert price(ok(2.0, ["pytorch_only", "calls_reference_ops"]), None, cfg).speedup == pytest.approx(
        2.0 ** (0.75 * 0.25)
    )
    assert price(ok(2.0, ["global_flags:cudnn.benchmark"]), None, cfg).speedup == pytest.approx(2.0**0.5)
    assert price(ok(2.0, ["custom_kernel"]), None, cfg).speedup == 2.0
    assert price(ok(0.5, ["reduced_precision"]), None, cfg).speedup == 0.5
    assert label_factor(["global_flagsX"], cfg) == 1.0  # a key matches itself or "<key>:..."
    full = RewardConfig(label_factors={"pytorch_only": 1.0})
    assert price(ok(2.0, ["pytorch_only", "reduced_precision"]), None, full).speedup == 2.0


def test_a_copy_of_a_shown_exemplar_earns_no_gain():
    shown = [
        '"""Fast."""\nimport torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.relu()\n'
    ]
    copy = "import torch\nclass ModelNew(torch.nn.Module):  # mine!\n    def forward(self, x):\n\n        return x.relu()\n"
    other = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    assert normalized_code(copy) == normalized_code(shown[0]) != normalized_code(other)
    p = price(ok(2.0), None, code=copy, shown=shown)
    assert p.reason == "copy" and p.reward == RewardConfig().failure_value and p.trainable
    assert price(ok(2.0), None, code=other, shown=shown).reason == "ok"


def test_a_truncated_response_earns_nothing_and_stays_out_of_the_update():
    p = price(ok(5.0), None, finish_reason="length")
    assert p.reason == "truncated" and not p.trainable and p.reward == RewardConfig().failure_value


def test_the_required_sections_are_required():
    assert price(ok(2.0), None, sections=SECTIONS).reason == "ok"
    short = {**SECTIONS, "design": "Fuse."}
    assert price(ok(2.0), None, sections=short).reason == "format:missing_design"
    assert price(ok(2.0), None, sections={"design": SECTIONS["design"]}).reason == "format:missing_analysis"
    assert price(ok(2.0), None, RewardConfig(required_sections=()), sections={}).reason == "ok"


def test_failures_hacks_and_malformed_results():
    fail = RewardConfig().failure_value
    assert price(ok(3.0), "no_modelnew").reason == "parse_error:no_modelnew"  # a parse error wins
    assert price(None, None) == price(None, None, sections=SECTIONS)
    assert price(None, None).reason == "not_evaluated"
    hack = EvalResult("t", status=Status.HACK, hack_kind=HackKind.RESULT_CACHE)
    assert (price(hack, None).reward, price(hack, None).reason) == (fail, "hack:result_cache")
    assert price(hack, None, RewardConfig(hack_reward=-5.0)).reward == -5.0
    for bad in (None, float("nan"), float("inf"), 0.0, -2.0, True, "fast"):
        p = price(EvalResult("t", Status.OK, speedup=bad), None)
        # the judge floors both times at its resolution: only a broken harness record gets here
        assert (p.reason, p.reward, p.trainable) == ("bad_speedup", fail, False)
    degenerate = price(ok(63.8, ["custom_kernel", "degenerate_task"]), None)
    assert degenerate.reason == "degenerate_task" and degenerate.reward == fail
    # A failed degenerate-task check fails closed: no speedup credit, and no signal for the update.
    unchecked = price(ok(63.8, ["custom_kernel", "degenerate_check_failed"]), None)
    assert (unchecked.reason, unchecked.reward, unchecked.speedup, unchecked.trainable) == (
        "degenerate_check_failed",
        fail,
        None,
        False,
    )


def test_harness_failures_and_invalid_tasks_carry_no_signal():
    died = EvalResult("t", status=Status.RUNTIME_ERROR, labels=["actor_died"])
    assert not price(died, None).trainable
    assert not price(EvalResult("t", status=Status.INVALID_TASK), None).trainable
    assert price(EvalResult("t", status=Status.RUNTIME_ERROR), None).trainable  # the candidate's own crash


def test_outliers_need_a_second_opinion():
    cfg = RewardConfig()  # verify above 3x, or above 2x the task's best known
    assert needs_second_opinion(ok(3.5), None, cfg)
    assert not needs_second_opinion(ok(2.9), None, cfg)
    assert needs_second_opinion(ok(2.9), 1.4, cfg)  # 2.9 > 2 x 1.4
    assert not needs_second_opinion(ok(2.7), 1.4, cfg)
    assert not needs_second_opinion(EvalResult("t", Status.INCORRECT, speedup=50.0), None, cfg)
    assert not needs_second_opinion(None, None, cfg)


def test_two_measurements_pay_the_slower_and_a_disagreement_is_marked_disputed():
    cfg = RewardConfig()
    first = dataclasses.replace(ok(6.0), actor=0)
    agree = second_opinion(first, dataclasses.replace(ok(5.7), actor=1), cfg)
    assert agree.agrees and agree.disagreement == pytest.approx(0.3 / 5.7) and agree.actor == 1
    paid = price(dataclasses.replace(first, second_opinion=agree), None)
    assert paid.reason == "ok" and paid.speedup == pytest.approx(5.7)
    apart = second_opinion(first, dataclasses.replace(ok(4.0), actor=1), cfg)  # 50% apart
    assert not apart.agrees and apart.disagreement == pytest.approx(0.5)
    disputed = price(dataclasses.replace(first, second_opinion=apart), None)
    assert disputed.reason == "ok:disputed" and disputed.speedup == pytest.approx(4.0) and disputed.trainable
    assert disputed.reward == pytest.approx(credit(4.0, cfg))
    # the faster re-measurement never raises the pay: 6x first, 9x on the other actor pays 6x
    higher = second_opinion(first, dataclasses.replace(ok(9.0), actor=1), cfg)
    assert price(dataclasses.replace(first, second_opinion=higher), None).speedup == pytest.approx(6.0)
    # a re-measurement below 1x makes a 6x a slowdown: what the other actor saw is paid
    slower = second_opinion(first, dataclasses.replace(ok(0.8), actor=1), cfg)
    assert price(dataclasses.replace(first, second_opinion=slower), None).speedup == pytest.approx(0.8)
    failed = second_opinion(first, EvalResult("level1/1", Status.INCORRECT, actor=1), cfg)
    assert not failed.agrees and failed.disagreement is None and failed.speedup is None
    assert failed.status is Status.INCORRECT
    # the tolerance is verify_tolerance and nothing else: a result's own spread does not widen it
    noisy = second_opinion(ok(6.0, spread=0.3), ok(4.8, spread=0.1), cfg)
    assert noisy.tolerance == pytest.approx(0.1) and noisy.disagreement == pytest.approx(0.25) and not noisy.agrees
    # nor do two lower bounds (both below the resolution): 8x and 5x are 60% apart
    bounds = second_opinion(ok(8.0, labels=["below_resolution"]), ok(5.0, labels=["below_resolution"]), cfg)
    assert not bounds.agrees and bounds.speedup == 5.0
    one_bound = second_opinion(ok(8.0, labels=["below_resolution"]), ok(5.0), cfg)
    assert not one_bound.agrees
    # the case: 1.01x, then 0.61x on another actor (spread 0.358, both below the resolution)
    case = second_opinion(
        ok(1.01, spread=0.358, labels=["below_resolution"]), ok(0.61, spread=0.2, labels=["below_resolution"]), cfg
    )
    assert case.disagreement == pytest.approx(0.40 / 0.61) and case.tolerance == 0.1 and not case.agrees
    close = second_opinion(ok(1.05), ok(1.0), cfg)
    assert close.disagreement == pytest.approx(0.05) and close.agrees
    # the second opinion travels with its result into files and back
    record = dataclasses.replace(first, second_opinion=agree).to_dict()
    assert record["actor"] == 0 and record["second_opinion"] == {
        "speedup": 5.7,
        "status": "ok",
        "actor": 1,
        "disagreement": agree.disagreement,
        "tolerance": 0.1,
        "agrees": True,
    }
    assert EvalResult.from_dict(record).second_opinion == agree
    with pytest.raises(ValueError):
        RewardConfig(verify_tolerance=0.0)
    with pytest.raises(ValueError):
        RewardConfig(verify_above=0.5)


def test_an_exemplar_shows_the_speedup_the_reward_pays_not_the_raw_measurement():
    cfg = RewardConfig()
    assert paid_speedup(ok(2.5), cfg) == 2.5
    assert paid_speedup(ok(2.5, spread=0.9), cfg) == 1.0  # rounds that disagree, none to agree on: no gain
    assert paid_speedup(timed(2.5, [1.2, 1.6, 2.5, 2.9]), cfg) == 1.2  # the gain the rounds agree on
    assert paid_speedup(ok(1.006), cfg) == 1.0  # at or below min_gain
    first = dataclasses.replace(ok(6.0), actor=0)
    agree = second_opinion(first, dataclasses.replace(ok(5.7), actor=1), cfg)
    assert paid_speedup(dataclasses.replace(first, second_opinion=agree), cfg) == pytest.approx(5.7)
    apart = second_opinion(first, dataclasses.replace(ok(4.0), actor=1), cfg)
    assert paid_speedup(dataclasses.replace(first, second_opinion=apart), cfg) == pytest.approx(4.0)  # the slower
    crashed = second_opinion(first, EvalResult("level1/1", Status.RUNTIME_ERROR, actor=1), cfg)
    assert paid_speedup(dataclasses.replace(first, second_opinion=crashed), cfg) == 1.0  # unconfirmed
    wrong = second_opinion(first, EvalResult("level1/1", Status.INCORRECT, actor=1), cfg)
    assert paid_speedup(dataclasses.replace(first, second_opinion=wrong), cfg) is None
    # A correct program that calls the reference's operators with no gain: the reward prices the
    # response as a fallback, the exemplar still shows what it runs at.
    assert price(ok(0.987, labels=["calls_reference_ops"]), None, cfg).reason == "fallback"
    assert paid_speedup(ok(0.987, labels=["calls_reference_ops"]), cfg) == pytest.approx(0.99)
    # ...and a gain within the noise (tie_floor 0.04 ln: up to 1.04x) is shown as no gain
    assert price(ok(1.03, labels=["calls_reference_ops"]), None, cfg).reason == "fallback"
    assert paid_speedup(ok(1.03, labels=["calls_reference_ops"]), cfg) == 1.0
    assert paid_speedup(EvalResult("level1/1", Status.INCORRECT, speedup=3.0), cfg) is None
    assert paid_speedup(ok(2.0, labels=["degenerate_task"]), cfg) is None
    assert paid_speedup(ok(float("nan")), cfg) is None
    assert paid_speedup(None, cfg) is None
