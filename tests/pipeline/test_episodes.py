"""Multi-turn episodes (`cudal1.pipeline.episodes`), Ray-free: the bookkeeping between turns (stops,
next prompts, feedback, copies), the credit per turn, the per-turn metrics, and whole steps of
`sample_episodes` with a scripted generator and a scripted pool (no evaluator: each program's
result is fixed, so prices, returns and advantages are exact)."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import pytest

from cudal1.bench.result import EvalResult, Status
from cudal1.pipeline.episodes import (
    Episode,
    assign_episode_advantages,
    continue_episodes,
    feedback_of,
    price_episode_copies,
    sample_episodes,
    turn_metrics,
    within_evaluations,
)
from cudal1.pipeline.rollouts import assign_advantages, sample_rollouts
from cudal1.policy.prompts import Feedback, contrastive_prompt, refinement_turn
from cudal1.records import Exemplar, Generation, Rollout
from cudal1.rl.rewards import Priced, RewardConfig, price
from cudal1.rl.turns import episode_rewards, turn_advantages, turn_returns
from cudal1.tasks.task import Task

from .stream_pool import StreamPool


def modelnew(tag: str, body: str = "torch.relu(x)") -> str:
    return (
        f"import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        f"        return {body}  # {tag}\n"
    )


FAST, SLOW, BROKEN = modelnew("fast", "x.clamp_min(0)"), modelnew("slow"), modelnew("broken", "x.nope()")
SHOWN = modelnew("shown", "torch.nn.functional.relu(x)")
SPEEDUPS = {FAST: 2.0, SLOW: 1.2, SHOWN: 1.5}  # anything else: a runtime error


def response(code: str) -> str:
    return (
        "## Performance analysis\nThe relu is memory bound, one pass.\n\n## Algorithm design\n"
        f"Fuse it into one pass over the data.\n\n## Code\n```python\n{code.rstrip()}\n```"
    )


class Tokenizer:
    """One token per character (so a prompt's ids decode back to its text), a chat template that joins
    the messages with their roles."""

    chat_template = "plain"
    eos_token_id = 0
    all_special_ids = [0]

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids if i not in self.all_special_ids)


class Script:
    """Generate call k answers prompt i with `calls[k][i]` (a list of n texts, or one text for n 1);
    every call is recorded as (n, the prompts' texts)."""

    def __init__(self, calls):
        self.calls, self.seen = calls, []

    def generate(self, prompt_ids, n, max_tokens, temperature, top_p):
        k = len(self.seen)
        self.seen.append((n, ["".join(map(chr, p)) for p in prompt_ids]))
        out = []
        for p, texts in zip(prompt_ids, self.calls[k]):
            texts = [texts] if isinstance(texts, str) else texts
            assert len(texts) == n
            out.append(
                [Generation(list(p), [ord(c) for c in t] + [0], [-0.5] * (len(t) + 1), t, "stop", 3) for t in texts]
            )
        return out


def result_of(c) -> EvalResult:
    s = SPEEDUPS.get(c.source)
    if s is None:
        return EvalResult(c.task_id, Status.RUNTIME_ERROR, message=f"AttributeError in {c.origin}")
    return EvalResult(c.task_id, Status.OK, speedup=s, speedup_spread=0.01)


def Pool():
    """A stream pool whose results are fixed per program (`SPEEDUPS`)."""
    return StreamPool(result_of)


TASK = Task(1, 19, "relu", "import torch\n\nclass Model(torch.nn.Module):\n    pass\n")
REWARD = RewardConfig(verify_above=1e9, verify_over_best=1e9)


def context(generator, max_model_len=100_000):
    rollout = SimpleNamespace(max_model_len=max_model_len, max_tokens=1000, temperature=1.0, top_p=1.0)
    return SimpleNamespace(
        cfg=SimpleNamespace(rollout=rollout, reward=REWARD),
        tokenizer=Tokenizer(),
        generator=generator,
        pools=SimpleNamespace(primary=Pool()),
        buffer=None,
    )


def count(messages):
    return len(Tokenizer().encode(Tokenizer().apply_chat_template(messages)))


def turn(text, result=None, priced=None, group=0, sample=0, t=1, code=None):
    gen = Generation([1], [2], [-0.1], text, "stop")
    r = Rollout(TASK.task_id, 5, group, sample, "prompt", gen, turn=t)
    if code is not None:
        r.sections["code"] = code
    r.result, r.priced = result, priced
    return r


# ----- bookkeeping between turns


def test_continue_episodes_ends_done_episodes_and_builds_the_next_prompts():
    prompt = contrastive_prompt(TASK.source, [Exemplar(TASK.task_id, SHOWN, 1.5)])
    ok = EvalResult(TASK.task_id, Status.OK, speedup=2.0, speedup_spread=0.01)
    bad = EvalResult(TASK.task_id, Status.RUNTIME_ERROR, message="AttributeError: nope")
    eps = [
        Episode(TASK, 0, 0, prompt, [SHOWN], 1.5, [turn(response(BROKEN), bad, price(bad))]),  # goes on
        Episode(TASK, 0, 1, prompt, [SHOWN], 1.5, [turn(response(FAST), ok, Priced(0.69, "ok", speedup=2.0))]),
        Episode(TASK, 0, 2, prompt, [SHOWN], 1.5, [turn("", None, Priced(-2.3, "parse_error:empty_response"))]),
        Episode(TASK, 0, 3, prompt, [SHOWN], 1.5, [turn(response(SLOW), ok, Priced(0.18, "ok", speedup=1.2))]),
        Episode(TASK, 0, 4, prompt, [SHOWN], 1.5, [turn(response(SLOW))], ended="stop"),  # already over
    ]
    live = continue_episodes(eps, 3, 1.3, 100_000, count)
    # 2.0x >= 1.3 x 1.5x stops; 1.2x does not; an empty answer ends the episode; an ended one stays ended.
    assert [ep.sample for ep in live] == [0, 3]
    assert [ep.ended for ep in eps] == [None, "stop", "empty", None, "stop"]
    fb = Feedback.of(bad)
    assert eps[0].feedback == fb.report() and "AttributeError: nope" in eps[0].feedback
    assert eps[0].messages == refinement_turn(prompt, response(BROKEN), fb, 100_000, count)
    assert eps[0].messages[2] == {"role": "assistant", "content": response(BROKEN)}

    # The last turn ends every episode; no margin never stops early.
    eps[0].turns.append(turn(response(FAST), ok, Priced(0.69, "ok", speedup=2.0), t=2))
    assert continue_episodes(eps[:1], 2, None, 100_000, count) == [] and eps[0].ended == "turns"
    eps[3].turns.append(turn(response(FAST), ok, Priced(0.69, "ok", speedup=2.0), t=2))
    assert continue_episodes([eps[3]], 3, None, 100_000, count) == [eps[3]]
    # A budget the next prompt cannot fit ends the episode.
    ep = Episode(TASK, 1, 0, prompt, [], None, [turn(response(BROKEN), bad, price(bad))])
    assert continue_episodes([ep], 3, None, count(prompt), count) == [] and ep.ended == "budget"


def test_continue_episodes_without_the_report():
    prompt = contrastive_prompt(TASK.source, [Exemplar(TASK.task_id, SHOWN, 1.5)])
    bad = EvalResult(TASK.task_id, Status.RUNTIME_ERROR, message="AttributeError: nope")
    ep = Episode(TASK, 0, 0, prompt, [SHOWN], 1.5, [turn(response(BROKEN), bad, price(bad))])
    assert continue_episodes([ep], 2, None, 100_000, count, report=False) == [ep]
    assert ep.feedback is None
    assert ep.messages == refinement_turn(prompt, response(BROKEN), Feedback.of(bad), 100_000, count, report=False)
    assert "AttributeError" not in ep.messages[-1]["content"]


def test_the_evaluation_budget_keeps_one_episode_per_group_in_turn():
    prompt = contrastive_prompt(TASK.source, [])
    eps = [Episode(TASK, g, s, prompt) for s in range(3) for g in range(2)]  # g0s0 g1s0 g0s1 g1s1 g0s2 g1s2
    live = within_evaluations(eps[::-1], 3)  # any order in: the groups' first samples go on first
    assert [(ep.group, ep.sample) for ep in live] == [(0, 1), (1, 0), (0, 0)]  # input order kept
    assert [ep.ended for ep in eps] == [None, None, None, "evaluations", "evaluations", "evaluations"]
    fresh = [Episode(TASK, 0, s, prompt) for s in range(2)]
    assert within_evaluations(fresh, 5) == fresh and all(ep.ended is None for ep in fresh)
    assert within_evaluations(fresh, 0) == [] and {ep.ended for ep in fresh} == {"evaluations"}
    assert within_evaluations([Episode(TASK, 0, 0, prompt)], -2) == []


def test_feedback_of_a_turn_says_what_failed_or_that_it_copied():
    assert feedback_of(turn("x", None, Priced(-2.3, "parse_error:no_code_block"))) == Feedback(
        "parse_error:no_code_block", "the answer had no ```python code block"
    )
    assert feedback_of(turn("x", None, Priced(-2.3, "format:missing_design"))).status == "format:missing_design"
    assert "cut off" in feedback_of(turn("x", None, Priced(0.0, "truncated", trainable=False))).message
    ok = EvalResult(TASK.task_id, Status.OK, speedup=1.5, speedup_spread=0.01)
    assert feedback_of(turn("x", ok, Priced(0.4, "ok", speedup=1.5))) == Feedback.of(ok)
    copy = feedback_of(turn("x", ok, Priced(-2.3, "copy")))
    assert copy.status == "copy" and "earns nothing" in copy.message and copy.speedup == 1.5


def test_a_turn_that_copies_an_earlier_turn_or_a_shown_exemplar_earns_the_copy_price():
    ok = EvalResult(TASK.task_id, Status.OK, speedup=2.0, speedup_spread=0.01)
    paid = Priced(0.69, "ok", speedup=2.0)
    renamed = FAST.replace("x", "inp")  # one program up to renaming
    ep = Episode(TASK, 0, 0, [], [SHOWN], 1.5)
    ep.turns = [turn("a", ok, paid, code=FAST), turn("b", ok, paid, t=2, code=renamed), turn("c", None, paid, t=3)]
    ep.turns.append(turn("d", ok, paid, t=4, code=SHOWN))
    price_episode_copies(ep, REWARD)
    assert [r.reward_reason for r in ep.turns] == ["ok", "copy", "ok", "copy"]
    assert ep.turns[1].priced == Priced(REWARD.failure_value, "copy")
    assert ep.turns[0].priced is paid  # untouched


# ----- credit per turn


def test_episode_advantages_match_the_pure_functions_and_one_turn_is_assign_advantages():
    p = {
        "fail": Priced(-2.302585092994046, "runtime_error"),
        "fast": Priced(0.6931, "ok", speedup=2.0),
        "slow": Priced(0.1823, "ok", speedup=1.2),
        "cut": Priced(0.0, "truncated", trainable=False),
    }
    episodes = [["fail", "fast"], ["slow"], ["cut", "slow", "fast"], ["fast"]]
    rollouts = []
    for s, names in enumerate(episodes):
        for t, name in enumerate(names, 1):
            r = turn("x", priced=p[name], sample=s, t=t)
            r.episode = f"step5/g0/s{s}"
            rollouts.append(r)
    assign_episode_advantages(rollouts, REWARD, "none", gamma=0.5, form="best_later", baseline="loo")
    priced = [[p[n] for n in names] for names in episodes]
    returns = [turn_returns(r, 0.5, "best_later") for r in episode_rewards(priced, REWARD)]
    advantages = turn_advantages(returns, "loo", "none")
    assert [r.turn_return for r in rollouts] == [g for ep in returns for g in ep]
    assert [r.advantage for r in rollouts] == [a for ep in advantages for a in ep]
    assert rollouts[0].turn_return == pytest.approx(-2.302585092994046 + 0.5 * (0.6931 + 2.302585092994046))
    assert rollouts[3].turn_return is None and rollouts[3].advantage == 0.0  # truncated: left out

    # Single-turn rollouts (no episode): exactly assign_advantages.
    single = [
        turn("x", priced=p[n], group=g, sample=s)
        for g, names in enumerate([["fail", "fast"], ["slow", "cut"]])
        for s, n in enumerate(names)
    ]
    expected = [dataclasses.replace(r) for r in single]
    assign_advantages(expected, REWARD, "std")
    assign_episode_advantages(single, REWARD, "std", gamma=0.5, baseline="loo")
    assert [r.advantage for r in single] == [r.advantage for r in expected] and single[0].advantage != 0
    assert all(r.turn_return is None for r in single)


def test_turn_metrics_per_turn_and_per_episode():
    p = {
        "fail": Priced(-2.3, "runtime_error"),
        "fast": Priced(0.69, "ok", speedup=2.0),
        "slow": Priced(0.18, "ok", speedup=1.2),
    }
    rollouts = []
    for s, names in enumerate([["fail", "fast"], ["slow"], ["fail", "fail"]]):
        for t, name in enumerate(names, 1):
            r = turn("x", priced=p[name], sample=s, t=t)
            r.episode = f"e{s}"
            rollouts.append(r)
    assert turn_metrics(rollouts) == {
        "turn1/episodes": 3.0,
        "turn1/pass_rate": 1 / 3,
        "turn1/speedup": 1.2,
        "turn2/episodes": 2.0,
        "turn2/pass_rate": 0.5,
        "turn2/speedup": 2.0,
        "last_turn/pass_rate": 2 / 3,  # e0 ends on its fast turn 2, e1 on its slow turn 1, e2 fails
        "last_turn/speedup": 1.6,
        "episode/turns": 5 / 3,
        "episode/pass_rate": 2 / 3,
        "episode/best_speedup": 1.6,
    }
    assert turn_metrics([turn("x", priced=p["fast"])]) == {}


# ----- whole steps, scripted


def test_given_prompt_ids_are_sampled_from_and_over_budget_ones_rendered():
    """`sample_rollouts(prompt_ids=...)`: a refinement turn's ids as `continue_episodes` made them
    are what the generator gets; None, or ids over the prompt budget, render the messages."""
    prompts = [contrastive_prompt(TASK.source, [])] * 3
    rendered = Tokenizer().encode(Tokenizer().apply_chat_template(prompts[0]))
    given = [ord(c) for c in "<user>given ids"]
    script = Script([[response(FAST), response(FAST), response(FAST)]])
    ctx = context(script, max_model_len=1000 + len(rendered))
    too_long = given * (len(rendered) // len(given) + 2)
    sample_rollouts(ctx, [TASK] * 3, prompts, 1, 5, prompt_ids=[given, None, too_long])
    assert [ids for ids in script.seen[0][1]] == ["<user>given ids", *["".join(map(chr, rendered))] * 2]


def test_continue_episodes_hands_the_next_prompt_ids_from_the_callable():
    slow = EvalResult(TASK.task_id, Status.OK, speedup=1.2, speedup_spread=0.01)
    ep = Episode(TASK, 0, 0, contrastive_prompt(TASK.source, []), [], None, [turn(response(SLOW), slow, price(slow))])
    seen = []

    def continue_ids(prompt_ids, sampled_ids, previous, messages):
        seen.append((prompt_ids, sampled_ids, len(previous), len(messages)))
        return [7, 7]

    (live,) = continue_episodes([ep], 3, None, 100_000, count, continue_ids=continue_ids)
    assert live.prompt_ids == [7, 7] and seen == [([1], [2], 2, 4)]


def test_one_turn_is_sample_rollouts_exactly():
    prompts = [contrastive_prompt(TASK.source, [Exemplar(TASK.task_id, SHOWN, 1.5)])] * 2
    calls = [[[response(FAST), response(SHOWN)], [response(BROKEN), "no code"]]]
    a_ctx, b_ctx = context(Script(calls)), context(Script(calls))
    ta, tb = {}, {}
    a = sample_episodes(a_ctx, [TASK, TASK], prompts, 2, 5, ta, shown=[[SHOWN]] * 2, turns=1, margin=1.0)
    b = sample_rollouts(b_ctx, [TASK, TASK], prompts, 2, 5, tb, shown=[[SHOWN]] * 2)
    assign_episode_advantages(a, REWARD, "none", gamma=0.4, baseline="loo")
    assign_advantages(b, REWARD, "none")
    assert [r.to_dict() for r in a] == [r.to_dict() for r in b]
    assert "episode" not in a[0].to_dict() and a[1].reward_reason == "copy"
    assert set(ta) == set(tb) and ta["evaluations"] == tb["evaluations"] == 3


def test_a_three_turn_step_refines_failures_evaluates_each_program_once_and_prices_copies():
    prompts = [contrastive_prompt(TASK.source, [Exemplar(TASK.task_id, SHOWN, 1.5)])]
    script = Script(
        [
            [[response(BROKEN), response(SLOW), response(FAST), "no code"]],  # turn 1: one group of 4 episodes
            [response(FAST), response(SLOW.replace("x", "y")), response(FAST)],  # turn 2: s0, s1, s3
            [response(FAST)],  # turn 3: s1
        ]
    )
    ctx = context(script)
    timings = {}
    rollouts = sample_episodes(
        ctx, [TASK], prompts, 4, 5, timings, shown=[[SHOWN]], turns=3, best_shown=[1.5], margin=1.3
    )
    # 2.0x >= 1.3 x 1.5x stops an episode (s2 at turn 1, s0 and s3 at turn 2); s1's 1.2x and its copy
    # of itself do not, so it runs all three turns.
    assert [(r.sample, r.turn) for r in rollouts] == [(0, 1), (0, 2), (1, 1), (1, 2), (1, 3), (2, 1), (3, 1), (3, 2)]
    assert [r.reward_reason for r in rollouts] == [
        "runtime_error",
        "ok",
        "ok",
        "copy",
        "ok",
        "ok",
        "parse_error:no_code_block",
        "ok",
    ]
    assert [r.episode for r in rollouts] == [f"step5/g0/s{s}" for s in (0, 0, 1, 1, 1, 2, 3, 3)]
    assert rollouts[4].origin == rollouts[4].candidate.origin == "step5/g0/s1/t3"
    assert rollouts[0].feedback is None and "AttributeError in step5/g0/s0" in rollouts[1].feedback
    assert "earns nothing" in rollouts[4].feedback  # turn 3 was told that turn 2 copied turn 1
    assert (
        rollouts[7].feedback == Feedback("parse_error:no_code_block", "the answer had no ```python code block").report()
    )
    # Each program once: BROKEN, SLOW, FAST in turn 1; turns 2 and 3 reuse those results.
    assert [c.origin for c in ctx.pools.primary.submitted] == ["step5/g0/s0", "step5/g0/s1", "step5/g0/s2"]
    assert rollouts[1].result is rollouts[4].result is rollouts[5].result is rollouts[7].result
    assert rollouts[3].result is rollouts[2].result
    assert timings["evaluations"] == 3 and timings["evaluations_saved"] == 4
    # Turn t's prompt is the whole conversation so far: the answers as assistant messages, each report.
    assert [(n, len(texts)) for n, texts in script.seen] == [(4, 1), (1, 3), (1, 1)]
    assert all(text.count("<assistant>") == 2 for text in script.seen[1][1])
    assert script.seen[2][1][0].count("<assistant>") == 3 and response(SLOW) in script.seen[2][1][0]
    assert rollouts[4].generation.prompt_ids == Tokenizer().encode(script.seen[2][1][0])
    # A later turn's prompt continues the last one's ids: its prompt, then its answer as sampled.
    for before, after in ((rollouts[2], rollouts[3]), (rollouts[3], rollouts[4])):
        sampled = before.generation.prompt_ids + before.generation.response_ids[:-1]
        assert after.generation.prompt_ids[: len(sampled)] == sampled
    # Credit: exactly the pure functions on the priced turns.
    assign_episode_advantages(rollouts, REWARD, "none", gamma=0.4, form="best_later", baseline="loo")
    episodes = [rollouts[0:2], rollouts[2:5], rollouts[5:6], rollouts[6:8]]
    returns = [turn_returns(r, 0.4) for r in episode_rewards([[r.priced for r in ep] for ep in episodes], REWARD)]
    assert [r.turn_return for r in rollouts] == [g for ep in returns for g in ep]
    assert [r.advantage for r in rollouts] == [a for ep in turn_advantages(returns, "loo") for a in ep]
    assert [r.to_dict()["turn"] for r in rollouts] == [1, 2, 1, 2, 3, 1, 1, 2]
    assert turn_metrics(rollouts)["turn3/pass_rate"] == 1.0 and turn_metrics(rollouts)["episode/pass_rate"] == 1.0


def test_a_step_evaluates_no_more_programs_than_its_budget():
    """Turn 1 runs whole (3 programs evaluated, "no code" is not); with a budget of 4 one episode
    may take turn 2 (the group's first live sample, s0), the others end on the budget. Its turn 2
    repeats FAST (no new evaluation) and stops on the margin."""
    prompts = [contrastive_prompt(TASK.source, [Exemplar(TASK.task_id, SHOWN, 1.5)])]
    script = Script([[[response(BROKEN), response(SLOW), response(FAST), "no code"]], [response(FAST)]])
    ctx, timings = context(script), {}
    rollouts = sample_episodes(
        ctx, [TASK], prompts, 4, 5, timings, shown=[[SHOWN]], turns=3, best_shown=[1.5], margin=1.3, max_evaluations=4
    )
    assert [(r.sample, r.turn) for r in rollouts] == [(0, 1), (0, 2), (1, 1), (2, 1), (3, 1)]
    assert [(n, len(texts)) for n, texts in script.seen] == [(4, 1), (1, 1)]
    assert timings["evaluations"] == 3 and len(ctx.pools.primary.submitted) == 3
    # A budget turn 1 already spent: no later turn at all.
    script = Script([[[response(BROKEN), response(SLOW), response(FAST), "no code"]]])
    rollouts = sample_episodes(context(script), [TASK], prompts, 4, 5, shown=[[SHOWN]], turns=3, max_evaluations=2)
    assert [r.turn for r in rollouts] == [1, 1, 1, 1] and len(script.seen) == 1


def test_a_step_without_the_report_shows_the_answers_but_not_what_the_evaluator_said():
    prompts = [contrastive_prompt(TASK.source, [Exemplar(TASK.task_id, SHOWN, 1.5)])]
    script = Script([[[response(BROKEN), response(SLOW)]], [response(FAST), response(FAST)]])
    rollouts = sample_episodes(context(script), [TASK], prompts, 2, 5, shown=[[SHOWN]], turns=2, feedback="none")
    assert [(r.sample, r.turn) for r in rollouts] == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert [r.feedback for r in rollouts] == [None] * 4 and [r.episode for r in rollouts][1] == "step5/g0/s0"
    turn2 = script.seen[1][1]
    assert response(BROKEN) in turn2[0] and response(SLOW) in turn2[1]
    assert not any("report on your previous solution" in text or "AttributeError" in text for text in turn2)
    with pytest.raises(ValueError, match="feedback must be one of"):
        sample_episodes(context(script), [TASK], prompts, 2, 5, turns=2, feedback="summary")


def test_the_review_reads_episode_records_beside_single_turn_ones(tmp_path):
    import json

    from cudal1 import review

    prompts = [contrastive_prompt(TASK.source, [Exemplar(TASK.task_id, SHOWN, 1.5)])]
    script = Script([[[response(BROKEN), response(FAST)]], [response(SLOW)]])
    episodes = sample_episodes(
        context(script), [TASK], prompts, 2, 1, shown=[[SHOWN]], turns=2, best_shown=[1.5], margin=1.3
    )
    assign_episode_advantages(episodes, REWARD, "none", gamma=0.4, baseline="loo")
    single = sample_rollouts(context(Script([[[response(FAST), "no code"]]])), [TASK], prompts, 2, 0, shown=[[SHOWN]])
    assign_advantages(single, REWARD, "none")
    (tmp_path / "rollouts").mkdir()
    for name, rollouts in (("rl_step0", single), ("rl_step1", episodes)):
        (tmp_path / "rollouts" / f"{name}.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rollouts))
    run = review.load_run(tmp_path)
    assert list(run.rollouts["turn"]) == [1, 1, 1, 2, 1] and run.rollouts["episode"].isna().sum() == 2
    table = review.episode_table(run)
    assert list(table.index) == ["step1/g0/s0", "step1/g0/s1"]
    assert table.loc["step1/g0/s0", "statuses"] == ["runtime_error", "ok"]
    assert table.loc["step1/g0/s0", "returns"] == [episodes[0].turn_return, episodes[1].turn_return]
    assert list(table["turns"]) == [2, 1] and list(table["first_passed"]) == [False, True]
    assert list(table["passed"]) == [True, True] and list(table["best_speedup"]) == [1.2, 2.0]
    assert review.episode_table(review.load_run(tmp_path / "rollouts")).empty  # no records at all


def test_the_stop_rule_compares_with_the_best_exemplar_the_prompt_showed(tmp_path):
    from cudal1.pipeline.stages import _best_shown
    from cudal1.rl.buffer import ExemplarBuffer

    buf = ExemplarBuffer(tmp_path, seed=0)
    buf.add([Exemplar(TASK.task_id, SLOW, 1.2), Exemplar(TASK.task_id, SHOWN, 1.5), Exemplar(TASK.task_id, FAST, 2.0)])
    bests = set()
    for _ in range(30):
        _, shown = buf.draw(TASK, k=2)
        bests.add(_best_shown(shown))
        assert _best_shown(shown) == max(e.speedup for e in shown)
    assert bests == {1.5, 2.0}  # the best drawn, not the best stored (2.0 is left out of some draws)
    assert _best_shown([]) is None


# ----- the tie floor calibrated from the run's repeated measurements (issue 23)


def test_repeated_measurements_calibrate_the_step_floors_and_survive_a_resume(tmp_path):
    from cudal1.bench.result import SecondOpinion, Timing
    from cudal1.pipeline.rollouts import observe_noise, tie_floors
    from cudal1.pipeline.state import RunState
    from cudal1.records import Candidate
    from cudal1.rl.noise import tie_noise

    cfg = RewardConfig(verify_above=1e9, verify_over_best=1e9, tie_min_pairs=2)
    ref = Timing(0.05, 0.05, 0.05, 0.05, [0.05], 0.0, 10)  # a sub-0.1 ms task

    def measured(code, speedup, sample, opinion=None, result=None):
        r = turn("x", group=0, sample=sample, code=code)
        r.candidate = Candidate(TASK.task_id, code)
        r.result = result or EvalResult(
            TASK.task_id,
            Status.OK,
            arch="sm_90",
            speedup=speedup,
            speedup_spread=0.01,
            reference=ref,
            second_opinion=opinion,
        )
        r.priced = price(r.result, None, cfg)
        return r

    noise = tie_noise(cfg)
    first = measured(FAST, 2.0, 0)
    copy = measured(
        modelnew("fast", "x.clamp_min(0)").replace("# fast", "# same program"), None, 1, result=first.result
    )
    assert observe_noise(noise, [first, copy]) == 0  # one evaluation shared by two copies: no pair
    # The next step: FAST measured again 10% apart, SLOW with a second opinion 10% apart.
    again = measured(FAST, 2.2, 0)
    mid = measured(modelnew("mid", "x.relu()"), 2.33, 1)  # ln(2.33 / 2.2) = 0.057 above FAST
    checked = measured(SLOW, 1.2, 2, opinion=SecondOpinion(1.32, Status.OK, 1, 0.1, 0.1, True))
    failed_turn = measured(BROKEN, None, 3, result=EvalResult(TASK.task_id, Status.RUNTIME_ERROR))
    step = [again, mid, checked, failed_turn]
    assert observe_noise(noise, step) == 2
    floors = tie_floors(step, noise)
    assert floors[:3] == pytest.approx([math.log(1.1)] * 3) and floors[3] == cfg.tie_floor

    default = [dataclasses.replace(r) for r in step]
    assign_episode_advantages(default, cfg, "none")
    assert default[1].advantage > default[0].advantage  # 5.7% apart: a ranking under the 4% floor
    assign_episode_advantages(step, cfg, "none", floors=floors)
    assert step[0].advantage == step[1].advantage > step[3].advantage  # one tie under the 9.5% floor
    with pytest.raises(ValueError):
        assign_episode_advantages(step, cfg, "none", floors=floors[:2])

    # The run state carries it across a resume.
    RunState(tie_noise=noise.to_dict()).save(tmp_path)
    resumed = tie_noise(cfg, RunState.load(tmp_path).tie_noise)
    assert tie_floors(step, resumed) == floors
    assert tie_noise(dataclasses.replace(cfg, tie_calibration=False)) is None
