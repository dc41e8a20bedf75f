"""The composition that drives training: evaluated rollouts -> rewards -> advantages -> what reaches
the learner, on hand-built rollouts with the values issue 9 names."""

import math
from types import SimpleNamespace

import pytest

from cudal1.bench.result import EvalResult, SecondOpinion, Status
from cudal1.pipeline.metrics import rollout_metrics
from cudal1.pipeline.rollouts import (
    assign_advantages,
    fallbacks_within_noise,
    is_success,
    price_rollouts,
    successes,
    update_examples,
)
from cudal1.records import Generation, Rollout
from cudal1.rl.buffer import ExemplarBuffer
from cudal1.rl.rewards import RewardConfig

ANALYSIS = "The reference launches three kernels and reads its input three times."
DESIGN = "One fused kernel reads each element once and writes the result."
CODE = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
SHOWN = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x + x\n"


def rollout(group, sample, result=None, *, finish="stop", sections=None, parse_error=None, code=None):
    """A rollout whose code is its own program (CODE with the sample's factor) unless given:
    responses of one group with the same program share one price."""
    if code is None:
        code = CODE.replace("x * 2", f"x * {sample + 2}")
    gen = Generation(
        prompt_ids=[1, 2, 3], response_ids=[4, 5, 6], logprobs=[-0.5] * 3, text="...", finish_reason=finish
    )
    if sections is None:
        sections = {"analysis": ANALYSIS, "design": DESIGN}
    if parse_error is None:
        sections = {**sections, "code": code}
    return Rollout("level1/1", 7, group, sample, "prompt", gen, sections, parse_error, result)


def ok(speedup, spread=0.02, labels=()):
    return EvalResult("level1/1", Status.OK, speedup=speedup, speedup_spread=spread, labels=list(labels))


def failed(status, labels=()):
    return EvalResult("level1/1", Status(status), labels=list(labels))


def run(rollouts, shown=(), cfg=None, scale="std"):
    cfg = cfg or RewardConfig()
    price_rollouts(rollouts, cfg, shown)
    assign_advantages(rollouts, cfg, scale)
    return update_examples(rollouts)


def test_a_truncated_response_after_a_complete_code_block_is_paid_nothing_and_not_trained_on():
    # Issue 9, item 7: this response got reward 2.0 and advantage +1.73 before.
    rs = [rollout(0, 0, ok(2.0), finish="length"), rollout(0, 1, ok(1.5)), rollout(0, 2, failed("incorrect"))]
    examples = run(rs)
    assert rs[0].reward_reason == "truncated" and rs[0].advantage == 0.0 and not rs[0].trainable
    assert len(examples) == 2 and all(e.advantage != 0 for e in examples)
    assert rs[1].advantage > 0 > rs[2].advantage
    assert rollout_metrics(rs)["truncated_rate"] == pytest.approx(1 / 3)
    assert rollout_metrics(rs)["trainable_rate"] == pytest.approx(2 / 3)


def test_missing_sections_earn_the_failure_reward_and_lower_format_ok_rate():
    rs = [rollout(0, 0, ok(3.0), sections={"design": DESIGN}), rollout(0, 1, ok(1.5))]
    run(rs)
    assert rs[0].reward_reason == "format:missing_analysis" and rs[0].reward == RewardConfig().failure_value
    assert rs[1].advantage > 0 > rs[0].advantage
    metrics = rollout_metrics(rs)
    assert metrics["format_ok_rate"] == 0.5 and metrics["reason/format:missing_analysis"] == 1.0
    assert not is_success(rs[0]) and is_success(rs[1])


def test_a_noise_only_group_sends_nothing_to_the_learner_and_a_real_one_does():
    noise = [rollout(0, i, ok(s, spread=0.05)) for i, s in enumerate((2.01, 1.97, 2.05, 1.99))]
    real = [rollout(1, i, ok(s, spread=0.02)) for i, s in enumerate((1.0, 2.0, 4.0, 8.0))]
    examples = run(noise + real)
    assert [r.advantage for r in noise] == [0.0] * 4
    assert len(examples) == 4
    assert [r.advantage for r in real] == sorted(r.advantage for r in real)
    # GRPO's group statistics: centred, unit population std.
    assert math.fsum(r.advantage for r in real) == pytest.approx(0.0, abs=1e-9)


def test_large_wins_keep_their_gradient_beside_ordinary_groups():
    big = [rollout(0, i, ok(s)) for i, s in enumerate((20.0, 25.0, 30.0, 40.0))]
    ordinary = [rollout(1, i, r) for i, r in enumerate((ok(1.2), failed("incorrect"), ok(0.9), failed("timeout")))]
    run(big + ordinary)
    adv = [r.advantage for r in big]
    assert adv == sorted(adv) and min(abs(a) for a in adv) > 0.3


def test_log_speedup_pays_a_slow_correct_candidate_more_than_a_failure():
    # Issue 9, item 4: advantages were [-1, +1] for [correct 0.5x, incorrect].
    rs = [rollout(0, 0, ok(0.5)), rollout(0, 1, failed("incorrect"))]
    run(rs, cfg=RewardConfig(transform="log_speedup"))
    assert rs[0].advantage > 0 > rs[1].advantage


def test_a_copy_of_a_shown_exemplar_earns_the_failure_reward():
    rs = [
        rollout(0, 0, ok(2.0), code=SHOWN),
        rollout(0, 1, ok(2.0)),
        rollout(0, 2, ok(1.0)),
        rollout(0, 3, failed("incorrect")),
    ]
    run(rs, shown=[[SHOWN]])
    assert rs[0].reward_reason == "copy" and rs[0].paid_speedup is None and not is_success(rs[0])
    assert rs[1].advantage > rs[2].advantage > 0 > rs[0].advantage == pytest.approx(rs[3].advantage)


def test_labels_are_priced_in_the_update():
    rs = [rollout(0, 0, ok(2.0, labels=["reduced_precision"])), rollout(0, 1, ok(2.0, labels=["custom_kernel"]))]
    run(rs)
    assert rs[0].reward == 0.0 and rs[1].advantage > 0 > rs[0].advantage


def test_harness_failures_stay_out_and_an_all_failed_step_sends_nothing():
    rs = [rollout(0, 0, failed("runtime_error", ["actor_died"])), rollout(0, 1, ok(2.0)), rollout(0, 2, ok(2.0))]
    assert run(rs) == []  # the two evaluated ones tie; the harness failure is left out
    assert run([rollout(0, i, failed("incorrect")) for i in range(3)]) == []
    assert run([]) == []


def verified(speedup, second, agrees):
    """A correct result re-measured on another actor at `second` (×)."""
    res = ok(speedup)
    res.second_opinion = SecondOpinion(
        speedup=second,
        status=Status.OK,
        actor=1,
        disagreement=abs(speedup - second) / min(speedup, second),
        tolerance=0.1,
        agrees=agrees,
    )
    return res


def test_only_paid_results_become_exemplars_and_the_prompt_shows_the_paid_speedup(tmp_path):
    rs = [
        rollout(0, 0, verified(9.0, 1.1, agrees=False)),  # a noisy 9x another actor measured at 1.1x
        rollout(0, 1, ok(1.5)),
        rollout(0, 2, ok(3.0, labels=["reduced_precision"])),  # unpaid label: its gain is worth 0
        rollout(0, 3, ok(2.0, spread=0.9)),  # rounds disagree: "ok:noisy"
        rollout(0, 4, verified(6.0, 5.5, agrees=True)),  # confirmed: the slower of the two
        rollout(0, 5, ok(2.0, labels=["pytorch_only"])),
    ]  # paid 2^0.75
    run(rs)
    assert [r.reward_reason for r in rs] == ["ok:disputed", "ok", "ok", "ok:noisy", "ok", "ok"]
    assert rs[0].paid_speedup == pytest.approx(1.1)  # the slower of 9x and 1.1x: passes, never shown
    assert [is_success(r) for r in rs] == [False, True, False, False, True, True]
    kept = successes(rs)
    assert [(e.code, e.speedup) for e in kept] == [
        (rs[1].sections["code"], 1.5),
        (rs[4].sections["code"], 5.5),
        (rs[5].sections["code"], pytest.approx(2.0**0.75)),
    ]
    buffer = ExemplarBuffer(tmp_path, k=3)
    assert buffer.add(kept) == 3 and buffer.best("level1/1").speedup == 5.5
    prompt = buffer.build_prompt(SimpleNamespace(task_id="level1/1", source="reference"))[-1]["content"]
    assert "5.50x speedup" in prompt and "1.68x speedup" in prompt and "9.00x" not in prompt and "6.00x" not in prompt

    # Alone, the noisy 9x is still nobody's best: nothing is stored.
    alone = [rollout(0, 0, verified(9.0, 1.1, agrees=False))]
    run(alone)
    assert successes(alone) == []


def test_stage_two_selects_by_the_paid_speedup():
    # 1.2x measured with the reference's own operators: paid 1.2^0.25 = 1.047x, below a 1.1x bar.
    rs = [rollout(0, 0, ok(1.2, labels=["calls_reference_ops"])), rollout(0, 1, ok(1.2))]
    run(rs)
    assert rs[0].paid_speedup == pytest.approx(1.2**0.25)
    assert [is_success(r, 1.1) for r in rs] == [False, True]
    assert [e.speedup for e in successes(rs, 1.1)] == [1.2]


def test_a_fallback_within_the_pools_learned_noise_is_repriced_as_a_fallback():
    labels = ["pytorch_only", "calls_reference_ops"]
    shared = ok(1.12, labels=labels)  # two responses, one program: one result object
    rs = [
        rollout(0, 0, shared, code=CODE),
        rollout(0, 1, shared, code=CODE),
        rollout(0, 2, ok(1.12, labels=["custom_kernel"])),
        rollout(0, 3, failed("incorrect")),
    ]
    cfg = RewardConfig()
    price_rollouts(rs, cfg)
    assert [r.reward_reason for r in rs] == ["ok", "ok", "ok", "incorrect"]  # 1.12x > the configured 4%
    assert fallbacks_within_noise(rs, cfg, [0.15, 0.15, 0.15, 0.15]) == 2  # the pool's noise: 16%
    assert [r.reward_reason for r in rs] == ["fallback", "fallback", "ok", "incorrect"]
    assert rs[0].reward == rs[3].reward == cfg.failure_value
    assert fallbacks_within_noise(rs, cfg, [0.15] * 4) == 0  # only ever lowers, once
    # within a narrower floor the gain stands
    again = [rollout(0, 0, ok(1.12, labels=labels))]
    price_rollouts(again, cfg)
    assert fallbacks_within_noise(again, cfg, [0.05]) == 0 and again[0].reward_reason == "ok"
    with pytest.raises(ValueError):
        fallbacks_within_noise(rs, cfg, [0.1])
