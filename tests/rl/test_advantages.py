import math
import statistics

import pytest

from cudal1.rl.advantages import group_advantages


def test_grpo_matches_the_formula_per_group():
    rewards = [1.0, 2.0, 4.0, 0.0, 0.5, 3.0]
    groups = [7, 7, 7, 2, 2, 2]
    out = group_advantages(rewards, groups)
    for g in (7, 2):
        idx = [i for i, x in enumerate(groups) if x == g]
        vals = [rewards[i] for i in idx]
        mean, std = statistics.fmean(vals), statistics.pstdev(vals)
        for i in idx:
            assert out[i] == pytest.approx((rewards[i] - mean) / (std + 1e-6))
    # Each group is centred and has unit (population) std.
    assert math.fsum(out[:3]) == pytest.approx(0.0, abs=1e-9)
    assert statistics.pstdev(out[:3]) == pytest.approx(1.0, rel=1e-5)


def test_dr_grpo_only_centres():
    out = group_advantages([1.0, 2.0, 6.0], [0, 0, 0], scale="none")
    assert out == pytest.approx([-2.0, -1.0, 3.0])


def test_interleaved_group_ids_keep_input_order():
    out = group_advantages([0.0, 10.0, 1.0, 20.0], [0, 1, 0, 1], scale="none")
    assert out == pytest.approx([-0.5, -5.0, 0.5, 5.0])


def test_flat_and_singleton_groups_carry_no_signal():
    assert group_advantages([3.0, 3.0, 3.0], [0, 0, 0]) == [0.0, 0.0, 0.0]
    assert group_advantages([3.0, 3.0], [0, 0], scale="none") == [0.0, 0.0]
    assert group_advantages([1.0, 9.0], [0, 1]) == [0.0, 0.0]


def test_errors():
    with pytest.raises(ValueError):
        group_advantages([1.0], [0], scale="max")
    with pytest.raises(ValueError):
        group_advantages([1.0, 2.0], [0])
    with pytest.raises(ValueError):
        group_advantages([1.0, float("inf")], [0, 0])


# ----- ties and the composition used in training (issue 9, items 4, 5, 7, 8)

from cudal1.rl.advantages import rollout_advantages, tie_clusters  # noqa: E402
from cudal1.bench.result import EvalResult, Status  # noqa: E402
from cudal1.rl.rewards import Priced, RewardConfig, price  # noqa: E402


def correct(speedup, spread=0.02):
    return price(EvalResult("level1/1", Status.OK, speedup=speedup, speedup_spread=spread), None)


FAILED = price(EvalResult("level1/1", Status.INCORRECT), None)


def test_speedups_within_their_spread_are_one_tie_and_a_chain_is_not():
    assert tie_clusters([2.01, 1.97, 2.05, 1.99], [0.05] * 4) == [0, 0, 0, 0]
    assert tie_clusters([1.0, 2.0, 1.01, 2.02], [0.0] * 4, floor=0.02) == [0, 1, 0, 1]
    # Measured from each cluster's first member: 1.00 ... 1.10 in steps of 2% is not one tie.
    chain = [1.0 + 0.02 * i for i in range(6)]
    assert len(set(tie_clusters(chain, [0.0] * 6, floor=0.03))) == 3
    assert tie_clusters([], []) == []
    with pytest.raises(ValueError):
        tie_clusters([1.0], [0.1, 0.2])
    with pytest.raises(ValueError):
        tie_clusters([0.0], [0.1])


def test_a_group_that_differs_only_by_noise_carries_no_signal():
    group = [correct(s, spread=0.05) for s in (2.01, 1.97, 2.05, 1.99)]
    assert rollout_advantages(group, [0] * 4) == [0.0] * 4
    # The same speedups measured precisely are a real ranking.
    precise = [correct(s, spread=0.0) for s in (2.01, 1.97, 2.05, 1.99)]
    adv = rollout_advantages(precise, [0] * 4, RewardConfig(tie_floor=0.0))
    assert adv[2] > adv[0] > adv[3] > adv[1]


def test_a_group_of_large_wins_keeps_its_ranking_beside_ordinary_groups():
    big = [correct(s) for s in (20.0, 25.0, 30.0, 40.0)]
    ordinary = [correct(1.5), FAILED, correct(0.8), FAILED]
    adv = rollout_advantages(big + ordinary, [0] * 4 + [1] * 4, scale="std")
    assert adv[0] < adv[1] < adv[2] < adv[3]
    assert all(abs(a) > 0.3 for a in adv[:4])  # the old batch-wide clip made these [0, 0, 0, 0]
    assert adv[4] > adv[6] > adv[5] == adv[7]


def test_a_slow_correct_candidate_beats_a_failure_under_every_transform():
    for transform in ("log_speedup", "speedup"):
        cfg = RewardConfig(transform=transform)
        group = [
            price(EvalResult("level1/1", Status.OK, speedup=0.5), None, cfg),
            price(EvalResult("level1/1", Status.INCORRECT), None, cfg),
        ]
        slow, fail = rollout_advantages(group, [0, 0], cfg)
        assert slow > 0 > fail, transform


def test_untrainable_responses_get_zero_and_stay_out_of_their_group():
    truncated = price(EvalResult("level1/1", Status.OK, speedup=9.0), None, finish_reason="length")
    died = price(EvalResult("level1/1", Status.RUNTIME_ERROR, labels=["actor_died"]), None)
    adv = rollout_advantages([truncated, correct(2.0), FAILED, died], [0, 0, 0, 0], scale="std")
    assert adv[0] == 0.0 and adv[3] == 0.0
    assert adv[1] == pytest.approx(1.0, rel=1e-4) and adv[2] == pytest.approx(-1.0, rel=1e-4)
    assert rollout_advantages([truncated, died], [0, 0]) == [0.0, 0.0]
    assert rollout_advantages([], []) == []
    with pytest.raises(ValueError):
        rollout_advantages([FAILED], [0, 1])


def test_a_lone_response_or_an_all_failed_group_has_no_signal():
    assert rollout_advantages([correct(3.0)], [0]) == [0.0]
    assert rollout_advantages([FAILED, FAILED, FAILED], [0, 0, 0]) == [0.0, 0.0, 0.0]
    assert rollout_advantages([Priced(0.5, "ok", 2.0), Priced(0.5, "ok", 2.0)], [0, 0], scale="none") == [0.0, 0.0]


# ----- the tie floor calibrated per pool and task size (issue 23)

from cudal1.bench.result import Timing  # noqa: E402
from cudal1.rl.noise import TieNoise  # noqa: E402


def timed(speedup, ref_ms=0.05, spread=0.02):
    """A correct result of a sub-0.1 ms task on an sm_90 pool."""
    ref = Timing(ref_ms, ref_ms, ref_ms, ref_ms, [ref_ms], 0.0, 10)
    return EvalResult("level1/1", Status.OK, arch="sm_90", speedup=speedup, speedup_spread=spread, reference=ref)


def test_results_6_percent_apart_tie_under_a_calibrated_10_percent_floor_and_not_under_the_default():
    results = [timed(2.00), timed(2.12), EvalResult("level1/1", Status.INCORRECT)]  # ln(2.12 / 2.00) = 0.058
    priced = [price(r, None) for r in results]
    noise = TieNoise(tie_floor=0.04, min_pairs=20)
    for _ in range(20):  # the pool's sub-0.1 ms programs measured twice, 10% apart (in ln units)
        noise.add_pair("sm_90", "0.01-0.1ms", 1.0, math.exp(0.10))
    floors = [noise.floor_for(r) for r in results]
    assert floors == pytest.approx([0.10, 0.10, 0.04])

    default = rollout_advantages(priced, [0, 0, 0])
    assert default[1] > default[0] > 0 > default[2]  # 4%: the 6% gap is a ranking
    calibrated = rollout_advantages(priced, [0, 0, 0], floors=floors)
    assert calibrated[0] == calibrated[1] > 0 > calibrated[2]  # 10%: one tie, still above the failure
    # A 1-10 ms task of the same pool learned nothing of its own, and its pool's pairs are all
    # small ones: it takes the pool's floor (coarser key), not the default.
    assert noise.floor_for(timed(2.0, ref_ms=3.0)) == pytest.approx(0.10)
    # Per-result floors must match the responses.
    with pytest.raises(ValueError):
        rollout_advantages(priced, [0, 0, 0], floors=[0.1, 0.1])
    with pytest.raises(ValueError):
        tie_clusters([1.0, 1.1], [0.0, 0.0], floor=[0.1, -0.1])
