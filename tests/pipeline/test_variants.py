"""The embedded default's hand-written variants (`data.variants`), the per-step fast/slow shares the
RL stage logs, and the run's last line (`rl_outcome`)."""

import math

import pytest

from cudal1.bench.result import EvalResult, Status
from cudal1.pipeline.sft_data import sft_pairs, stage1_solutions
from cudal1.pipeline.variants import SLOW_FAST, rl_outcome, stage1_ranks, stage1_shares, variant_exemplars
from cudal1.policy.parsing import parse_response
from cudal1.policy.prompts import sft_response
from cudal1.records import Exemplar, Generation, Rollout
from cudal1.rl.rewards import RewardConfig, price
from cudal1.rl.similarity import normalized_code

pytestmark = pytest.mark.fast


class _Task:
    def __init__(self, task_id):
        self.task_id, self.source = task_id, "class Model: pass\n"


@pytest.mark.parametrize("variant", SLOW_FAST, ids=lambda v: f"{v.task_id}:{v.kind}")
def test_each_sft_target_parses_and_passes_the_format_check(variant):
    # A target the reward prices "format:missing_analysis" would give RL no signal at all.
    parsed = parse_response(sft_response(variant.code, variant.analysis))
    assert parsed.error is None and normalized_code(parsed.code) == normalized_code(variant.code)
    ok = EvalResult(variant.task_id, Status.OK, speedup=0.5, speedup_spread=0.1)
    assert price(ok, None, RewardConfig(), sections=parsed.sections, code=parsed.code).reason == "ok"


def test_the_slow_and_fast_variant_of_a_task_are_different_programs_with_different_first_words():
    for task_id in {v.task_id for v in SLOW_FAST}:
        slow, fast = (next(v for v in SLOW_FAST if v.task_id == task_id and v.kind == k) for k in ("slow", "fast"))
        assert normalized_code(slow.code) != normalized_code(fast.code)
        assert slow.analysis.split()[0] != fast.analysis.split()[0]  # the first analysis token carries the choice


def test_variants_join_stage1_for_the_selected_tasks_only_and_become_plain_sft_pairs():
    tasks = [_Task("level1/3"), _Task("level1/9")]
    solutions = stage1_solutions(tasks, {"level1/9": "seed code"}, None, "slow_fast")
    assert [(e.task_id, e.origin) for e in solutions] == [
        ("level1/9", "seed"),
        ("level1/3", "variant:slow"),
        ("level1/3", "variant:fast"),
    ]
    assert all(math.isnan(e.speedup) for e in solutions)  # measured in stage 1, not before
    answers = [e for e in solutions if e.task_id == "level1/3"]
    # exemplars: 0 (the default) -> k = 0: no contrastive pair, only the prompt RL sends
    pairs = sft_pairs(tasks[0].source, answers, [], k=0, min_gain=1.01)
    assert [kind for kind, _, _ in pairs] == ["plain", "plain"]
    assert pairs[0][1] == pairs[1][1]  # one prompt, two answers: SFT leaves the choice to RL
    with pytest.raises(KeyError):
        variant_exemplars("no_such_set", ["level1/3"])


def _rollout(task_id, code, parse_error=None):
    text = "" if code is None else sft_response(code, "One vectorized torch call.")
    sections = {} if code is None else {"code": code}
    gen = Generation([1], [2], [0.0], text)
    return Rollout(task_id, 0, 0, 0, "prompt", gen, sections=sections, parse_error=parse_error)


def test_shares_count_the_fastest_stage1_solution_and_the_slower_ones_over_all_responses():
    fast, slow = (next(v.code for v in SLOW_FAST if v.task_id == "level1/3" and v.kind == k) for k in ("fast", "slow"))
    buffer = {
        "level1/3": [
            Exemplar("level1/3", slow, 0.05, origin="variant:slow"),
            Exemplar("level1/3", fast, 0.9, origin="variant:fast"),
            Exemplar("level1/3", "class ModelNew: pass\n", 3.0, origin="reference"),  # never a target
            Exemplar("level1/3", "class ModelNew:\n    x = 1\n", 5.0, origin="step2/g0/s1"),  # the policy's own
        ]
    }
    ranks = stage1_ranks(buffer)
    assert sorted(ranks["level1/3"].values()) == ["fast", "slow"]
    renamed = fast.replace("A, B", "X, Y").replace("(A @ B.T)", "(X @ Y.T)")  # still the fast program
    rollouts = [
        _rollout("level1/3", fast),
        _rollout("level1/3", renamed),
        _rollout("level1/3", slow),
        _rollout("level1/3", None, parse_error="no_code_block"),  # garbled: in neither share
        _rollout("level1/17", fast),  # a task without stage-1 solutions: in neither
    ]
    assert stage1_shares(rollouts, ranks) == {"fast_share": 2 / 5, "slow_share": 1 / 5}
    assert stage1_shares([], ranks) == {}


def test_outcome_line_averages_the_first_and_last_steps():
    history = [{"stage": "sft", "sft_loss": 0.1}] + [
        {"stage": "contrastive_rl", "fast_share": f, "slow_share": 1 - f, "speedup/mean": s, "pass_rate": 1.0}
        for f, s in [(0.25, 0.2), (0.5, 0.4), (0.5, 0.5), (0.75, 0.6), (1.0, 0.8), (0.75, 1.0)]
    ]
    line = rl_outcome(history)
    assert line == (
        "RL outcome: fast share 0.38 -> 0.88, slow share 0.62 -> 0.12, mean paid speedup 0.30x -> 0.90x, "
        "pass rate 1.00 -> 1.00 (first 2 vs last 2 of 6 steps; fast/slow share: responses that repeat the faster / "
        "a slower program SFT taught for their task, faster than each other, not necessarily than PyTorch)"
    )
    short = rl_outcome(history[:3])  # 2 steps: one each
    assert "fast share 0.25 -> 0.50" in short and "first 1 vs last 1 of 2 steps" in short
    # a step with no passing rollout has no mean speedup: left out, "-" when none at all
    bare = [{"stage": "contrastive_rl", "fast_share": 0.0, "slow_share": 0.0, "pass_rate": 0.0}]
    assert "mean paid speedup - -> -" in rl_outcome(bare)
    assert rl_outcome([{"stage": "sft"}]) is None
