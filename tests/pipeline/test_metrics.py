"""rollout_metrics on hand-built rollouts with hand-computed expectations."""

import math

import pytest

from cudal1.bench.result import EvalResult, HackKind, Status
from cudal1.pipeline.metrics import OVERVIEW_ORDER, overview_key, overview_metrics, rollout_metrics
from cudal1.tracking import metric_key
from cudal1.records import Generation, Rollout
from cudal1.rl.rewards import Priced


def _rollout(sample, reward, result=None, parse_error=None, tokens=4, finish="stop", priced=None):
    gen = Generation(
        prompt_ids=[1, 2], response_ids=list(range(tokens)), logprobs=[-0.1] * tokens, text="x", finish_reason=finish
    )
    if priced is None:  # paid as measured when correct, else a failure
        correct = result is not None and result.status is Status.OK
        priced = Priced(reward, "ok" if correct else "failed", speedup=result.speedup if correct else None)
    return Rollout(
        task_id="level1/1",
        step=3,
        group=0,
        sample=sample,
        prompt="p",
        generation=gen,
        parse_error=parse_error,
        result=result,
        priced=priced,
    )


def _ok(speedup):
    return EvalResult(task_id="level1/1", status=Status.OK, speedup=speedup)


@pytest.fixture
def rollouts():
    return [
        _rollout(0, 1.0, _ok(2.0)),
        _rollout(1, 0.5, _ok(0.5)),
        _rollout(2, 1.2, _ok(4.0), tokens=8),
        _rollout(3, 0.0, EvalResult(task_id="level1/1", status=Status.INCORRECT)),
        # A hack with a recorded speedup must not count as fast.
        _rollout(
            4, 0.0, EvalResult(task_id="level1/1", status=Status.HACK, hack_kind=HackKind.RESULT_CACHE, speedup=10.0)
        ),
        _rollout(5, 0.0, parse_error="no_code_block", tokens=0, finish="length"),
        _rollout(6, 0.0, parse_error="no_code_block"),
        _rollout(7, 0.0, parse_error="syntax_error"),
    ]


def test_rates_are_over_all_rollouts(rollouts):
    m = rollout_metrics(rollouts)
    assert m["rollouts"] == 8
    assert m["evaluated"] == 5
    assert m["pass_rate"] == pytest.approx(3 / 8)
    assert m["parse_failure_rate"] == pytest.approx(3 / 8)
    assert m["truncated_rate"] == pytest.approx(1 / 8)
    assert m["fast_1"] == pytest.approx(2 / 8)  # 2.0 and 4.0; the hack's 10.0 does not count
    assert m["fast_1.5"] == pytest.approx(2 / 8)
    assert m["fast_2"] == pytest.approx(1 / 8)  # strict >: 2.0 is not > 2


def test_reward_and_speedup_statistics(rollouts):
    m = rollout_metrics(rollouts)
    rewards = [1.0, 0.5, 1.2, 0, 0, 0, 0, 0]
    mean = sum(rewards) / 8
    assert m["reward/mean"] == pytest.approx(mean)
    assert m["reward/std"] == pytest.approx(math.sqrt(sum((r - mean) ** 2 for r in rewards) / 8))
    assert m["reward/max"] == 1.2
    assert m["speedup/mean"] == pytest.approx((2.0 + 0.5 + 4.0) / 3)
    assert m["speedup/median"] == pytest.approx(2.0)
    assert m["speedup/geomean"] == pytest.approx((2.0 * 0.5 * 4.0) ** (1 / 3))
    assert m["response_tokens/mean"] == pytest.approx((4 * 6 + 8 + 0) / 8)


def test_counts_by_status_hack_and_parse_label(rollouts):
    m = rollout_metrics(rollouts)
    assert m["status/ok"] == 3
    assert m["status/incorrect"] == 1
    assert m["status/hack"] == 1
    assert m["status/timeout"] == 0  # every status present, zeros included
    assert {f"status/{s.value}" for s in Status} <= set(m)
    assert m["hack/result_cache"] == 1
    assert sum(v for k, v in m.items() if k.startswith("hack/")) == 1
    assert m["parse/no_code_block"] == 2
    assert m["parse/syntax_error"] == 1


def test_no_correct_rollout_leaves_speedups_out():
    m = rollout_metrics([_rollout(0, 0.0, parse_error="empty_response")])
    assert "speedup/mean" not in m and "speedup/geomean" not in m
    assert m["pass_rate"] == 0.0 and m["fast_1"] == 0.0 and m["reward/std"] == 0.0


def test_empty_batch():
    assert rollout_metrics([]) == {"rollouts": 0.0}


def test_keys_are_mlflow_safe(rollouts):
    rollouts[5].parse_error = "weird label (é)!"
    m = rollout_metrics(rollouts)
    assert "parse/weird label ____" in m
    assert all(metric_key(k) == k for k in m)
    assert all(isinstance(v, float) for v in m.values())


def test_below_resolution_rate_is_over_correct_rollouts_only():
    fine = EvalResult(task_id="level1/1", status=Status.OK, speedup=2.0)
    coarse = EvalResult(task_id="level1/1", status=Status.OK, speedup=9.0, labels=["below_resolution"])
    rs = [
        _rollout(0, 1.0, fine),
        _rollout(1, 1.0, coarse),
        _rollout(2, 1.0, coarse),
        _rollout(3, 0.0, EvalResult(task_id="level1/1", status=Status.INCORRECT)),
    ]
    assert rollout_metrics(rs)["below_resolution_rate"] == pytest.approx(2 / 3)
    assert "below_resolution_rate" not in rollout_metrics(rs[3:])


def test_step_breakdown_shares_and_actor_seconds():
    from cudal1.pipeline.metrics import step_breakdown

    results = [
        EvalResult(
            "level1/1", Status.OK, eval_seconds=6.0, build_seconds=4.0, phases_s={"timing": 2.0, "processes": 1.0}
        ),
        EvalResult("level1/1", Status.OK, eval_seconds=3.0, build_seconds=None, phases_s={"timing": 1.5}),
        None,
    ]  # a rollout that was never evaluated
    out = step_breakdown({"generate": 10.0, "evaluate": 8.0, "train": 1.5, "sync": 0.5}, results, pool_actors=2)
    assert out["time/step_s"] == 20.0
    assert out["time/build_actor_s"] == 4.0 and out["time/timing_actor_s"] == 3.5
    assert out["idle/generator"] == 0.5  # busy 10 of 20 s
    assert out["idle/learner"] == 0.9  # train + sync: 2 of 20 s
    assert out["idle/pool"] == 1.0 - 10.0 / 40.0  # 6 + 1 + 3 actor-s of 2 actors × 20 s
    assert step_breakdown({}, [], pool_actors=1) == {
        "time/step_s": 0.0,
        "time/build_actor_s": 0.0,
        "time/timing_actor_s": 0.0,
        "idle/generator": 0.0,
        "idle/learner": 0.0,
        "idle/pool": 0.0,
    }


def test_headline_metrics_count_only_paid_results():
    """A copying, falling-back, hacking or unconfirmed policy shows no pass rate, fast_p or speedup;
    reduced precision passes at its paid 1.00x; the paid speedup, not the measured one, is averaged."""
    fast = _ok(3.0)
    rs = [
        _rollout(0, -2.3, fast, priced=Priced(-2.3, "copy")),
        _rollout(1, -2.3, _ok(1.0), priced=Priced(-2.3, "fallback")),
        _rollout(2, 0.0, fast, priced=Priced(0.0, "suspect:unverified", speedup=1.0)),
        _rollout(3, -3.0, fast, priced=Priced(-3.0, "second_opinion:hack")),
        _rollout(4, 0.0, _ok(1.8), priced=Priced(0.0, "ok", speedup=1.0)),  # reduced precision
        _rollout(5, 0.5, _ok(2.0), priced=Priced(0.5, "ok", speedup=1.5)),  # confirmed at 1.5x
        _rollout(6, 0.0, _ok(4.0), priced=Priced(0.0, "ok:noisy", speedup=1.0)),
        _rollout(7, 0.0, _ok(2.5)),
    ]
    rs[7].priced = None  # not priced: not counted
    m = rollout_metrics(rs)
    assert m["status/ok"] == 8  # the evaluator's facts stay as measured
    assert m["pass_rate"] == pytest.approx(3 / 8)  # 4, 5 and 6
    assert m["fast_1"] == pytest.approx(1 / 8) and m["fast_1.5"] == 0.0  # only the 1.5x, and 1.5 is not > 1.5
    assert m["speedup/mean"] == pytest.approx((1.0 + 1.5 + 1.0) / 3)
    assert m["speedup/median"] == pytest.approx(1.0)
    assert m["speedup/geomean"] == pytest.approx(1.5 ** (1 / 3))
    copies = rollout_metrics(rs[:4])
    assert copies["pass_rate"] == 0.0 and copies["fast_1"] == 0.0 and "speedup/mean" not in copies


def test_what_the_harness_failed_to_measure_is_counted_apart_from_what_the_policy_wrote():
    """A candidate's own runtime error and one whose benchmark actor died are both runtime
    errors by status; only the second carries a harness label and counts as lost to
    infrastructure."""
    own = EvalResult(task_id="level1/1", status=Status.RUNTIME_ERROR)
    died = EvalResult(task_id="level1/1", status=Status.RUNTIME_ERROR, labels=["actor_died"])
    raised = EvalResult(task_id="level1/1", status=Status.RUNTIME_ERROR, labels=["harness_error"])
    m = rollout_metrics(
        [_rollout(0, 0.0, own), _rollout(1, 0.0, died), _rollout(2, 0.0, raised), _rollout(3, 1.0, _ok(2.0))]
    )
    assert m["harness_failures"] == 2
    assert m["harness/actor_died"] == 1 and m["harness/harness_error"] == 1 and m["harness/actor_timeout"] == 0
    assert m["status/runtime_error"] == 3
    clean = rollout_metrics([_rollout(0, 0.0, own)])
    assert clean["harness_failures"] == 0 and clean["harness/actor_died"] == 0


def test_a_step_that_lost_rollouts_to_the_harness_says_so(caplog):
    """The step's log line names how many rollouts the harness failed to measure, and why."""
    import logging

    from cudal1.pipeline.stages import _rollout_log

    died = EvalResult(task_id="level1/1", status=Status.RUNTIME_ERROR, labels=["actor_died"])
    with caplog.at_level(logging.WARNING, logger="cudal1.pipeline.stages"):
        metrics = _rollout_log(None, [_rollout(0, 0.0, died), _rollout(1, 1.0, _ok(2.0))], {}, "rl")
    assert metrics["rl/harness_failures"] == 1
    assert any("1 of 2 rollouts were not measured" in r.message and "actor_died 1" in r.message for r in caplog.records)


def test_overview_names_each_stages_headline_figures_alike():
    sft = overview_metrics("sft", {"sft/epoch": 3.0}, {"sft_loss": 1.25})
    assert sft == {overview_key("stage"): 1.0, overview_key("sft_loss"): 1.25}
    self_train = overview_metrics(
        "self_train",
        {"self_train/reward/mean": 0.5, "self_train/pass_rate": 0.25, "self_train/loss": 0.75, "time/step_s": 9.0},
        {"reward/mean": 0.5},
    )
    assert self_train == {
        overview_key("stage"): 2.0,
        overview_key("reward"): 0.5,
        overview_key("pass_rate"): 0.25,
        overview_key("sft_loss"): 0.75,
    }
    rl = {
        "rl/reward/mean": 0.1,
        "rl/pass_rate": 0.5,
        "rl/speedup/mean": 1.2,
        "rl/fast_1": 0.25,
        "rl/fast_share": 0.75,
        "learner/kl": 0.01,
        "learner/entropy": 2.5,
        "learner/loss": -0.3,  # the GRPO objective: not an overview loss
    }
    assert overview_metrics("contrastive_rl", rl, {"pass_rate": 0.5}) == {
        overview_key("stage"): 3.0,
        overview_key("reward"): 0.1,
        overview_key("pass_rate"): 0.5,
        overview_key("paid_speedup"): 1.2,
        overview_key("fast_1"): 0.25,
        overview_key("fast_share"): 0.75,
        overview_key("kl"): 0.01,
        overview_key("entropy"): 2.5,
    }
    with pytest.raises(KeyError):
        overview_metrics("warmup", {})


def test_overview_keys_sort_in_the_reading_order():
    """MLflow orders a section's charts by key: the keys' ranks put reward, pass rate and paid
    speedup first, and every headline figure has its own key."""
    keys = [overview_key(name) for name in OVERVIEW_ORDER]
    assert keys[:3] == ["_overview/1_reward", "_overview/2_pass_rate", "_overview/3_paid_speedup"]
    assert sorted(keys) == keys and len(set(keys)) == len(OVERVIEW_ORDER) == 9
    with pytest.raises(ValueError):
        overview_key("loss")
