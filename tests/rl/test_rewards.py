import math

import pytest

from cudal1.bench.result import EvalResult, HackKind, Status
from cudal1.rl.rewards import RewardConfig, normalize_rewards, reward_from_result


def ok(speedup, labels=()):
    return EvalResult(task_id="level1/1", status=Status.OK, speedup=speedup, labels=list(labels))


def test_correct_candidate_earns_its_speedup_from_record_or_dict():
    assert reward_from_result(ok(2.5), None) == (2.5, "ok")
    assert reward_from_result(ok(2.5).to_dict(), None) == (2.5, "ok")
    assert reward_from_result(ok(0.5), None) == (0.5, "ok")  # correct but slower still beats a failure


def test_a_result_on_a_degenerate_task_is_not_paid_as_a_speedup():
    cfg = RewardConfig(failure_reward=-0.5)
    assert reward_from_result(ok(63.8, ["custom_kernel", "degenerate_task"]), None, cfg) == (-0.5, "degenerate_task")
    assert reward_from_result(ok(63.8, ["custom_kernel"]), None, cfg) == (63.8, "ok")


def test_log_speedup_transform():
    r, why = reward_from_result(ok(4.0), None, RewardConfig(transform="log_speedup"))
    assert why == "ok" and r == pytest.approx(math.log(4.0))


@pytest.mark.parametrize(
    "status", ["compile_error", "runtime_error", "timeout", "resource_exceeded", "incorrect", "invalid_task"]
)
def test_failures_earn_failure_reward_with_their_status(status):
    result = EvalResult(task_id="level1/1", status=Status(status)).to_dict()
    assert reward_from_result(result, None) == (0.0, status)
    assert reward_from_result(result, None, RewardConfig(failure_reward=-0.5)) == (-0.5, status)


def test_parse_error_wins_over_any_result():
    assert reward_from_result(ok(3.0), "no_modelnew") == (0.0, "parse_error:no_modelnew")
    assert reward_from_result(None, "syntax_error") == (0.0, "parse_error:syntax_error")


def test_hack_is_labelled_with_its_kind_and_priced_by_config():
    hack = EvalResult(task_id="level1/1", status=Status.HACK, hack_kind=HackKind.RESULT_CACHE, speedup=50.0)
    assert reward_from_result(hack, None) == (0.0, "hack:result_cache")
    assert reward_from_result(hack.to_dict(), None, RewardConfig(hack_reward=-1.0)) == (-1.0, "hack:result_cache")


def test_missing_or_bad_results():
    assert reward_from_result(None, None) == (0.0, "not_evaluated")
    for bad in (None, float("nan"), float("inf"), 0.0, -1.0):
        assert reward_from_result({"status": "ok", "speedup": bad}, None) == (0.0, "bad_speedup")
    assert reward_from_result({"status": "weird"}, None) == (0.0, "unknown_status:weird")


def test_label_factors_price_labels():
    cfg = RewardConfig(label_factors={"reduced_precision": 0.0, "pytorch_only": 0.5})
    assert reward_from_result(ok(2.0, ["reduced_precision"]), None, cfg) == (0.0, "ok")
    assert reward_from_result(ok(2.0, ["pytorch_only"]), None, cfg) == (1.0, "ok")
    assert reward_from_result(ok(2.0, ["custom_kernel"]), None, cfg) == (2.0, "ok")
    hash(cfg)  # still hashable: stored as sorted pairs
    assert cfg.label_factors == (("pytorch_only", 0.5), ("reduced_precision", 0.0))


def test_config_is_validated():
    with pytest.raises(ValueError, match="transform"):
        RewardConfig(transform="sqrt")
    with pytest.raises(ValueError, match="hack_reward"):
        RewardConfig(hack_reward=float("nan"))
    with pytest.raises(Exception):
        RewardConfig().transform = "log_speedup"  # frozen


def test_normalize_standardizes_and_clips():
    out = normalize_rewards([0.0, 0.0, 0.0, 1.0], clip=None)
    assert sum(out) == pytest.approx(0.0, abs=1e-9)
    assert out[3] == pytest.approx(0.75 / math.sqrt(0.1875), rel=1e-5)  # (1 - .25) / std, std = sqrt(3/16)
    clipped = normalize_rewards([0.0, 0.0, 0.0, 1.0], clip=1.5)
    assert clipped[3] == 1.5 and clipped[0] == pytest.approx(out[0])
    # One huge (suspicious) speedup cannot dominate: it is capped at +1.5.
    assert max(normalize_rewards([1.0] * 9 + [120.0])) == 1.5


def test_normalize_all_equal_gives_zeros_not_nan():
    assert normalize_rewards([2.0, 2.0, 2.0]) == [0.0, 0.0, 0.0]
    assert normalize_rewards([0.1 + 0.2, 0.3, 0.30000000000000004]) == [0.0, 0.0, 0.0]
    assert normalize_rewards([5.0]) == [0.0]
    assert normalize_rewards([]) == []


def test_normalize_per_group():
    out = normalize_rewards([1.0, 3.0, 10.0, 10.0], groups=[0, 0, 1, 1])
    assert out[:2] == pytest.approx([-1.0, 1.0], abs=1e-5)
    assert out[2:] == [0.0, 0.0]


def test_normalize_rejects_bad_input():
    with pytest.raises(ValueError):
        normalize_rewards([1.0, float("nan")])
    with pytest.raises(ValueError):
        normalize_rewards([1.0], clip=0)
    with pytest.raises(ValueError):
        normalize_rewards([1.0, 2.0], groups=[0])
