"""A two-turn step of `sample_episodes` on a real benchmark pool (Ray actors, the CPU evaluator,
builtin task level1/4): turn 1 is a failing variant, turn 2 the seed solution after the
evaluator's report. The generator replays fixed texts (`ReplayGenerator` of
test_streaming_rollouts, whose pool, tokenizer and task fixtures this module reuses). The
bookkeeping itself is tested without Ray in test_episodes.py."""

from __future__ import annotations

from types import SimpleNamespace

from cudal1.bench.result import Status
from cudal1.pipeline.episodes import assign_episode_advantages, sample_episodes, turn_metrics
from cudal1.policy.prompts import Feedback, plain_prompt
from cudal1.rl.rewards import RewardConfig
from cudal1.rl.turns import episode_rewards, turn_advantages, turn_returns

from . import test_streaming_rollouts as streaming
from .test_streaming_rollouts import BROKEN, RENAMED, SEED, ReplayGenerator, context, response

pool, task, tokenizer = streaming.pool, streaming.task, streaming.tokenizer  # its fixtures
REWARD = RewardConfig(verify_above=1e9)  # no second opinion: a speedup over 3x stays paid


class Turns:
    """Generate call k replays `calls[k]` ({prompt index: its n texts}) through `ReplayGenerator`."""

    def __init__(self, tok, calls):
        self.tokenizer, self.calls, self.prompts = tok, calls, []

    def generate(self, prompts, n, max_tokens, temperature, top_p):
        texts = self.calls[len(self.prompts)]
        self.prompts.append(prompts)
        assert all(len(t) == n for t in texts.values())
        return ReplayGenerator(self.tokenizer, [], texts=texts).generate(prompts, n, max_tokens, temperature, top_p)


def test_a_failing_first_turn_is_refined_by_the_report_and_each_program_is_evaluated_once(tokenizer, pool, task):
    # Episode 0: BROKEN, then SEED. Episode 1: SEED, then SEED renamed (a copy of its own turn 1).
    generator = Turns(
        tokenizer, [{0: [response(BROKEN), response(SEED)]}, {0: [response(SEED)], 1: [response(RENAMED)]}]
    )
    ctx = context(tokenizer, SimpleNamespace(generate=generator.generate), pool)
    ctx.cfg.reward = REWARD
    timings: dict[str, float] = {}
    rollouts = sample_episodes(ctx, [task], [plain_prompt(task.source)], 2, 4, timings, turns=2)

    assert [(r.sample, r.turn) for r in rollouts] == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert [r.episode for r in rollouts] == ["step4/g0/s0"] * 2 + ["step4/g0/s1"] * 2
    assert [r.result.status for r in rollouts] == ["runtime_error", "ok", "ok", "ok"]
    assert rollouts[0].reward_reason == "runtime_error" and rollouts[3].reward_reason == "copy"
    assert rollouts[1].reward_reason == rollouts[2].reward_reason and rollouts[1].priced == rollouts[2].priced
    assert rollouts[1].candidate.origin == "step4/g0/s0/t2"
    # Turn 2's prompts carry the previous answer and the evaluator's report on it.
    assert rollouts[1].feedback == Feedback.of(rollouts[0].result).report()
    assert "runtime_error" in rollouts[1].feedback and rollouts[1].prompt.startswith(
        "The evaluator's report on your previous solution:"
    )
    assert rollouts[1].generation.prompt_ids != rollouts[0].generation.prompt_ids
    # BROKEN and SEED once each: turn 2 reuses SEED's result (episode 1's turn 1) for both its answers.
    assert timings["evaluations"] == 2 and timings["evaluations_saved"] == 2
    assert rollouts[1].result is rollouts[2].result is rollouts[3].result

    assign_episode_advantages(rollouts, REWARD, "none", gamma=0.4, form="best_later", baseline="loo")
    priced = [[rollouts[0].priced, rollouts[1].priced], [rollouts[2].priced, rollouts[3].priced]]
    returns = [turn_returns(r, 0.4, "best_later") for r in episode_rewards(priced, REWARD)]
    assert [r.turn_return for r in rollouts] == [g for ep in returns for g in ep]
    assert [r.advantage for r in rollouts] == [a for ep in turn_advantages(returns, "loo") for a in ep]
    assert rollouts[0].advantage < 0 < rollouts[1].advantage  # the refined turn beats the copy
    record = rollouts[1].to_dict()
    assert (record["episode"], record["turn"], record["return"]) == ("step4/g0/s0", 2, rollouts[1].turn_return)
    metrics = turn_metrics(rollouts)
    assert (metrics["turn1/pass_rate"], metrics["turn2/pass_rate"], metrics["episode/pass_rate"]) == (0.5, 0.5, 1.0)
    assert rollouts[0].result.status is Status.RUNTIME_ERROR
