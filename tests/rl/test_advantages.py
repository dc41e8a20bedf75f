import math
import statistics

import pytest

from cudal1.rl.advantages import ADVANTAGE_ESTIMATORS, advantage_estimator, group_advantages


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


def test_registry_and_errors():
    assert set(ADVANTAGE_ESTIMATORS) == {"grpo", "dr_grpo"}
    assert advantage_estimator("dr_grpo")([0.0, 2.0], [0, 0]) == pytest.approx([-1.0, 1.0])
    with pytest.raises(KeyError, match="grpo"):
        advantage_estimator("ppo")
    with pytest.raises(ValueError):
        group_advantages([1.0], [0], scale="max")
    with pytest.raises(ValueError):
        group_advantages([1.0, 2.0], [0])
    with pytest.raises(ValueError):
        group_advantages([1.0, float("inf")], [0, 0])
