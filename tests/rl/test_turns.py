"""Per-turn returns, baselines and the copy rule of multi-turn episodes (cudal1.rl.turns): exact
values worked by hand, and the one-turn case against today's single-turn advantages."""

import math
import random

import pytest

from cudal1.bench.result import EvalResult, Status
from cudal1.rl.advantages import group_advantages, rollout_advantages
from cudal1.rl.rewards import Priced, RewardConfig, credit, price, share_identical
from cudal1.rl.similarity import normalized_code
from cudal1.rl.turns import (
    copied_turns,
    episode_advantages,
    episode_rewards,
    price_copies,
    pick_baseline,
    stops,
    turn_advantages,
    turn_returns,
    turn_shown,
)

FAIL = RewardConfig().failure_value  # -ln 10


def ok(speedup, spread=0.0):
    return Priced(credit(speedup, RewardConfig()), "ok", speedup=speedup, spread=spread)


def failed(reason="incorrect"):
    return Priced(FAIL, reason)


def left_out(reason="truncated"):
    return Priced(FAIL, reason, trainable=False)


# Returns


def test_discounted_is_the_own_reward_plus_discounted_later_rewards():
    # G3 = 4; G2 = 2 + .5*4 = 4; G1 = 1 + .5*2 + .25*4 = 3
    assert turn_returns([1.0, 2.0, 4.0], 0.5, "discounted") == [3.0, 4.0, 4.0]


def test_best_later_adds_the_discounted_best_improvement_over_the_turn():
    # G3 = 4; G2 = 2 + .5*(4-2) = 3; G1 = 1 + max(.5*(2-1), .25*(4-1)) = 1.75
    assert turn_returns([1.0, 2.0, 4.0], 0.5, "best_later") == [1.75, 3.0, 4.0]
    # A later turn that did worse takes nothing away.
    assert turn_returns([3.0, 1.0], 0.5) == [3.0, 1.0]
    # The best improvement, not the nearest: .25*(9-1) = 2 beats .5*(2-1) = .5.
    assert turn_returns([1.0, 2.0, 9.0], 0.5) == [3.0, 5.5, 9.0]


def test_failures_at_every_turn():
    assert turn_returns([FAIL, FAIL, FAIL], 0.5, "best_later") == [FAIL, FAIL, FAIL]
    # Kevin's sum keeps adding the failures: -2 -1 -.5 = -3.5 for rewards of -2.
    assert turn_returns([-2.0, -2.0, -2.0], 0.5, "discounted") == [-3.5, -3.0, -2.0]


def test_a_failed_turn_followed_by_a_success_shares_in_it():
    assert turn_returns([-2.0, 1.0], 0.5) == [-0.5, 1.0]  # -2 + .5*3
    assert turn_returns([-2.0, 1.0], 0.5, "discounted") == [-1.5, 1.0]


def test_a_turn_left_out_has_no_return_and_adds_no_term():
    assert turn_returns([1.0, None, 4.0], 0.5, "discounted") == [2.0, None, 4.0]  # 1 + .25*4
    assert turn_returns([1.0, None, 4.0], 0.5, "best_later") == [1.75, None, 4.0]  # 1 + .25*3
    assert turn_returns([None], 0.5) == [None]


def test_gamma_0_and_1():
    rewards = [1.0, -2.0, 3.0, 0.5]
    for form in ("best_later", "discounted"):
        assert turn_returns(rewards, 0.0, form) == rewards
    assert turn_returns(rewards, 1.0, "best_later") == [3.0, 3.0, 3.0, 0.5]  # the best from t on
    assert turn_returns(rewards, 1.0, "discounted") == [2.5, 1.5, 3.5, 0.5]  # the sum from t on


def test_an_empty_episode_and_one_turn():
    assert turn_returns([], 0.4) == []
    for form in ("best_later", "discounted"):
        assert turn_returns([0.7], 0.4, form) == [0.7]


def test_best_later_moves_with_a_shift_of_every_reward_and_discounted_does_not():
    rng = random.Random(0)
    for _ in range(50):
        rewards = [rng.uniform(-3, 3) for _ in range(rng.randint(1, 5))]
        c, gamma = rng.uniform(-5, 5), rng.random()
        shifted = turn_returns([r + c for r in rewards], gamma)
        assert shifted == pytest.approx([g + c for g in turn_returns(rewards, gamma)], abs=1e-12)
    # The sum adds c once per turn left: its returns depend on the episode's length.
    assert turn_returns([1.0, 1.0], 1.0, "discounted")[0] == 2.0
    assert turn_returns([2.0, 2.0], 1.0, "discounted")[0] == 4.0


def test_return_errors():
    with pytest.raises(ValueError, match="form"):
        turn_returns([1.0], 0.5, "sum")
    for gamma in (-0.1, 1.1, float("nan"), True, "0.5"):
        with pytest.raises(ValueError, match="gamma"):
            turn_returns([1.0], gamma)
    with pytest.raises(ValueError, match="finite"):
        turn_returns([1.0, float("inf")], 0.5)


# Advantages

EPISODES = [[1.0, 3.0], [2.0], [3.0, 5.0, 7.0]]
"""Three episodes of different lengths (the second stopped after turn 1, the first after turn 2)."""


def test_leave_one_out_compares_each_turn_with_the_other_episodes_at_that_turn():
    # Turn 1: 1 - (2+3)/2, 2 - (1+3)/2, 3 - (1+2)/2; turn 2: 3 - 5, 5 - 3; turn 3: no other episode.
    assert turn_advantages(EPISODES) == [[-1.5, -2.0], [0.0], [1.5, 2.0, 0.0]]


def test_the_group_baseline_includes_the_episode_itself():
    # Turn 1: mean 2; turn 2: mean 4; turn 3: a group of one.
    assert turn_advantages(EPISODES, "group") == [[-1.0, -1.0], [0.0], [1.0, 1.0, 0.0]]


def test_std_scale_divides_by_the_population_std_at_the_turn():
    std1 = math.sqrt(2 / 3)  # of [1, 2, 3]
    out = turn_advantages(EPISODES, "loo", "std")
    assert out[0][0] == pytest.approx(-1.5 / (std1 + 1e-6), rel=1e-12)
    assert out[2][1] == pytest.approx(2.0 / (1.0 + 1e-6), rel=1e-12)  # [3, 5]: std 1
    assert out[1] == [0.0] and out[2][2] == 0.0
    assert turn_advantages(EPISODES, "group", "std")[0][0] == pytest.approx(-1.0 / (std1 + 1e-6), rel=1e-12)


def test_turns_left_out_get_zero_and_stay_out_of_the_baselines():
    returns = [[1.0, None], [3.0, 4.0], [5.0, 6.0]]
    # Turn 1: 1 - 4, 3 - 3, 5 - 2; turn 2 between the two that have one: 4 - 6, 6 - 4.
    assert turn_advantages(returns) == [[-3.0, 0.0], [0.0, -2.0], [3.0, 2.0]]
    assert turn_advantages([[None, 2.0], [None, 1.0]]) == [[0.0, 1.0], [0.0, -1.0]]


def test_ties_at_a_turn_carry_no_signal():
    for baseline in ("loo", "group"):
        out = turn_advantages([[0.1, 5.0], [0.1, 1.0], [0.1]], baseline)
        assert [a[0] for a in out] == [0.0, 0.0, 0.0]
    assert turn_advantages([[0.1, 5.0], [0.1, 1.0]])[0][1] == 4.0


def test_failures_at_every_turn_of_every_episode_carry_no_signal():
    returns = [turn_returns([FAIL] * n, 0.4) for n in (3, 1, 2)]
    assert turn_advantages(returns) == [[0.0] * 3, [0.0], [0.0] * 2]


def test_a_group_of_one_and_empty_groups():
    assert turn_advantages([[1.0, 2.0, 3.0]]) == [[0.0, 0.0, 0.0]]
    assert turn_advantages([]) == []
    assert turn_advantages([[], [1.0], []], "group") == [[], [0.0], []]


def test_advantage_errors():
    with pytest.raises(ValueError, match="baseline"):
        turn_advantages([[1.0]], "mean")
    with pytest.raises(ValueError, match="scale"):
        turn_advantages([[1.0]], "loo", "max")
    with pytest.raises(ValueError, match="finite"):
        turn_advantages([[1.0], [float("nan")]])


# One turn is today's single-turn advantage


def test_one_turn_with_the_group_baseline_is_group_advantages_exactly():
    rng = random.Random(1)
    for _ in range(200):
        n = rng.randint(1, 9)
        rewards = [rng.choice([FAIL, rng.uniform(-2, 2)]) for _ in range(n)]
        for scale in ("none", "std"):
            out = turn_advantages([[r] for r in rewards], "group", scale)
            assert [a for (a,) in out] == group_advantages(rewards, [0] * n, scale=scale)
            for form in ("best_later", "discounted"):
                returns = [turn_returns([r], rng.random(), form) for r in rewards]
                assert turn_advantages(returns, "group", scale) == out


def test_one_turn_leave_one_out_is_grpo_scaled_by_n_over_n_minus_1():
    # r_i - mean_{j != i} r_j = n/(n-1) (r_i - mean_j r_j): the self-inclusion shrinkage TRLOO removes.
    rng = random.Random(2)
    for _ in range(200):
        n = rng.randint(2, 9)
        rewards = [rng.uniform(-2, 2) for _ in range(n)]
        loo = [a for (a,) in turn_advantages([[r] for r in rewards], "loo")]
        grpo = group_advantages(rewards, [0] * n, scale="none")
        assert loo == pytest.approx([n / (n - 1) * a for a in grpo], rel=1e-9, abs=1e-12)


def test_one_turn_episodes_from_priced_turns_are_rollout_advantages_exactly():
    rng = random.Random(3)
    kinds = [
        lambda: ok(rng.choice([0.5, 1.0, 1.5, 2.0, 2.02, 3.0]), rng.choice([0.0, 0.1])),
        lambda: failed(),
        lambda: left_out(),
        lambda: Priced(RewardConfig().lower_bound + 0.3, "ok", speedup=1.3, bound=True),
    ]
    for _ in range(200):
        priced = [rng.choice(kinds)() for _ in range(rng.randint(1, 8))]
        for scale in ("none", "std"):
            out = episode_advantages([[p] for p in priced], gamma=rng.random(), baseline="group", scale=scale)
            assert [a for (a,) in out] == rollout_advantages(priced, [0] * len(priced), scale=scale)


# From priced turns


def test_results_within_noise_tie_across_turns_and_episodes():
    # 2.00x and 2.02x are within the 4% tie floor: one reward, so turn 2's gain over turn 1 is none.
    episodes = [[ok(2.0), ok(2.02)], [failed(), ok(3.0)]]
    rewards = episode_rewards(episodes)
    assert rewards[0][0] == rewards[0][1]
    assert rewards[0][0] == pytest.approx((credit(2.0, RewardConfig()) + credit(2.02, RewardConfig())) / 2)
    assert rewards[1] == [FAIL, credit(3.0, RewardConfig())]
    assert episode_rewards([[left_out(), ok(2.0)]]) == [[None, credit(2.0, RewardConfig())]]


def test_calibrated_floors_reach_the_turns_of_an_episode():
    # 2.00x then 2.12x (ln gap 0.058): a gain under the 4% default, a tie under a 10% floor per turn.
    episodes = [[ok(2.0), ok(2.12)], [failed()]]
    default = episode_rewards(episodes)
    assert default[0][1] > default[0][0]
    wide = episode_rewards(episodes, floors=[[0.10, 0.10], [0.04]])
    assert wide[0][0] == wide[0][1] == pytest.approx((credit(2.0, RewardConfig()) + credit(2.12, RewardConfig())) / 2)
    assert wide[1] == [FAIL]


def test_episode_advantages_by_hand():
    cfg = RewardConfig()
    c15, c3 = credit(1.5, cfg), credit(3.0, cfg)
    # A: fails, then 1.5x, then stops; B: 1.5x at once, stops; C: fails, truncated, 3x.
    episodes = [[failed(), ok(1.5)], [ok(1.5)], [failed(), left_out(), ok(3.0)]]
    out = episode_advantages(episodes, gamma=0.5, form="best_later", baseline="loo")
    g_a1 = FAIL + 0.5 * (c15 - FAIL)
    g_c1 = FAIL + 0.25 * (c3 - FAIL)
    assert out[0][0] == pytest.approx(g_a1 - (c15 + g_c1) / 2)
    assert out[1][0] == pytest.approx(c15 - (g_a1 + g_c1) / 2)
    assert out[2][0] == pytest.approx(g_c1 - (g_a1 + c15) / 2)
    assert out[0][1] == 0.0  # turn 2: A's is the only return (C's is left out)
    assert out[2][1:] == [0.0, 0.0]  # left out; turn 3 alone


# The copy rule


def test_copied_turns_against_the_prompt_and_earlier_turns():
    assert copied_turns(["a", "b", "a", None, "c", None], shown={"c"}) == [False, False, True, False, True, False]
    assert copied_turns([]) == []
    assert copied_turns(["a", "a"]) == [False, True]


def test_turn_shown_is_the_exemplars_then_every_earlier_turn():
    assert turn_shown(["x", None, "y"], ["e"]) == [["e"], ["e", "x"], ["e", "x"]]


A = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
A_RENAMED = (
    "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, y):  # same\n        return y * 2\n"
)
B = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x + x\n"


def test_a_turn_repeating_an_earlier_turn_earns_what_a_copy_earns():
    result = EvalResult(task_id="level1/1", status=Status.OK, speedup=1.5, speedup_spread=0.0)
    codes = [A, A_RENAMED, B]
    priced = [price(result, code=c, shown=s) for c, s in zip(codes, turn_shown(codes))]
    assert [p.reason for p in priced] == ["ok", "copy", "ok"]
    assert priced[1].reward == FAIL and priced[1].trainable
    # The same from already-priced turns and their code keys.
    plain = [price(result) for _ in codes]
    copied = copied_turns([normalized_code(c) for c in codes])
    assert price_copies(plain, copied) == priced


def test_price_copies_leaves_failures_as_they_are():
    turns = [failed("compile_error"), ok(2.0), Priced(FAIL, "bad_speedup", trainable=False), left_out()]
    out = price_copies(turns, [True] * 4)
    assert [p.reason for p in out] == ["compile_error", "copy", "copy", "truncated"]
    assert out[1] == Priced(FAIL, "copy")
    with pytest.raises(ValueError, match="copy flags"):
        price_copies(turns, [True])


def test_copies_are_priced_after_shared_prices():
    # The same program in another episode shares its price; its repeat within an episode is a copy.
    episodes = [[ok(2.0), ok(2.0)], [ok(2.1)]]
    codes = [[A, A_RENAMED], [A]]
    flat = share_identical([p for ep in episodes for p in ep], [0, 0, 0], [c for ep in codes for c in ep])
    first = price_copies(flat[:2], copied_turns([normalized_code(c) for c in codes[0]]))
    assert [p.reason for p in first] == ["ok", "copy"]
    assert first[0].speedup == 2.0 and flat[2].speedup == 2.0  # the lower median of 2.0, 2.0, 2.1


# Early stop


def test_an_episode_stops_once_a_turn_beats_the_best_shown_by_the_margin():
    assert stops(ok(1.5), 1.2, 1.25)  # 1.5 >= 1.25 * 1.2
    assert not stops(ok(1.5), 1.2, 1.3)  # 1.5 < 1.56
    assert stops(ok(1.1), None, 1.1)  # no exemplar: the reference, 1.0x
    assert not stops(failed(), 1.2, 1.0)
    assert not stops(ok(9.0), 1.2, None)
    for margin in (0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="margin"):
            stops(ok(1.5), 1.2, margin)


def test_the_default_baseline_is_leave_one_out_for_episodes_and_the_group_mean_for_single_turns():
    assert pick_baseline("auto", 1) == "group"
    assert pick_baseline("auto", 2) == "loo" and pick_baseline("auto", 5) == "loo"
    assert pick_baseline("group", 3) == "group" and pick_baseline("loo", 1) == "loo"
    with pytest.raises(ValueError, match="turn baseline"):
        pick_baseline("mean", 2)
