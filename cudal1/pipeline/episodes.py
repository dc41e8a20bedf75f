"""Multi-turn refinement episodes in the contrastive RL stage (issue 26).

An episode answers one contrastive prompt in up to T turns (`stage.contrastive_rl.turns`). Turn 1
is single-turn RL's sampling itself (`sample_rollouts` on the step's prompts, `group_size`
responses each: the group's episodes). After every turn, each episode either ends (T turns done;
`cudal1.rl.turns.stops`: a correct turn at least `stop_margin` × the best speedup its prompt
showed; or the next prompt would not fit) or continues: its next prompt is the conversation so
far, its answer as an assistant message and the evaluator's report on it
(`cudal1.policy.prompts.refinement_turn`, `Feedback`), within `feedback_tokens` tokens. Each
live episode then gets one response, and the turn's responses are evaluated and priced together
(`sample_rollouts` with `slots`, so every turn keeps its episode's group and sample).

What holds per turn:
- Each turn is a `Rollout` of its own (episode id, turn index, the feedback its prompt showed),
  so the learner sees each turn as its own example: the turn's whole conversation is its prompt
  (masked out of the loss), only the model's answer of that turn is trained on.
- A program is evaluated once per step: `sample_rollouts`' cache (`evaluated`) carries the
  results of earlier turns, so a program seen in any earlier turn or episode shares its result.
- The copy rule: a turn whose code equals code its first prompt showed or an earlier turn of its
  episode earns the copy price (`cudal1.rl.turns.copied_turns`, `price_copies`), after the
  turn's responses shared one price per program within their group (`share_identical`).
- Credit: `assign_episode_advantages` (`cudal1.rl.turns`: per-turn returns with `gamma` and
  `turn_return`, advantages with `turn_baseline` over the group's episodes at the same turn:
  leave-one-out by default once turns > 1, `cudal1.rl.turns.pick_baseline`).

Limits: the turns of a step run one after another (turn t+1's generation starts once every
episode's turn t is evaluated and priced: the stop rule needs the price), so a step's wall time
grows with T; within a turn, groups still stream to the pool as `sample_rollouts` does. A later
turn's prompt is sent as the continuation of the last turn's token ids, the answer as sampled
(`cudal1.policy.model.continued_prompt_ids`; the rendered conversation where the chat template
does not allow it), so a vLLM engine with prefix caching finds the earlier turn in its cache
(`benchmarks/prefix_cache_turns.py`, docs/training.md). With
turns = 1 nothing here runs: `sample_episodes` is `sample_rollouts`, and
`assign_episode_advantages` is `assign_advantages`.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import statistics
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING

from cudal1.bench.result import EvalResult
from cudal1.pipeline.metrics import PASSING
from cudal1.pipeline.rollouts import assign_advantages, reward_config, sample_rollouts
from cudal1.policy.model import chat_token_counter, continued_prompt_ids
from cudal1.policy.prompts import REFINEMENT_FEEDBACK, Feedback, refinement_turn
from cudal1.records import Rollout
from cudal1.rl.rewards import Priced, RewardConfig
from cudal1.rl.similarity import normalized_code
from cudal1.rl.turns import copied_turns, episode_rewards, price_copies, stops, turn_advantages, turn_returns
from cudal1.tasks import Task

if TYPE_CHECKING:
    from cudal1.pipeline.context import RunContext

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Episode:
    """One episode's state between turns.

    Attributes:
        task: its task.
        group, sample: its group (the prompt's index among the step's kept prompts) and its index
            in the group; every turn's rollout carries both.
        messages: the prompt of its latest turn (turn 1: the contrastive prompt).
        shown: the code of the exemplars its first prompt showed.
        best_shown: the best speedup (×) its first prompt showed, None for none (`stops`).
        turns: its rollouts, turn 1 first.
        feedback: the evaluator's report its next turn's prompt shows (`continue_episodes`).
        ended: why it ended ("turns", "stop", "empty", "budget", "evaluations"), None while it
            runs.
        prompt_ids: its next turn's prompt ids as a continuation of its latest turn's, with the
            answer's ids as sampled (`cudal1.policy.model.continued_prompt_ids`), or None to
            render `messages`.
    """

    task: Task
    group: int
    sample: int
    messages: list[dict[str, str]]
    shown: Sequence[str] = ()
    best_shown: float | None = None
    turns: list[Rollout] = dataclasses.field(default_factory=list)
    feedback: str | None = None
    ended: str | None = None
    prompt_ids: list[int] | None = None


def feedback_of(r: Rollout) -> Feedback:
    """What the evaluator (or the parser, or the copy rule) said about a priced turn: for an
    evaluated turn `Feedback.of(result)`, with status "copy" and a note when its price was the
    copy price; for one never evaluated its reward reason ("parse_error:<label>", "truncated",
    "format:missing_<section>") with a one-line explanation."""
    reason = r.reward_reason
    if r.result is not None:
        fb = Feedback.of(r.result)
        if reason == "copy":
            fb = dataclasses.replace(
                fb,
                status="copy",
                message="the same program as a solution shown to you or one of your earlier attempts: it earns "
                "nothing; write a different, faster one",
            )
        return fb
    status = reason or (f"parse_error:{r.parse_error}" if r.parse_error else "not_evaluated")
    if status.startswith("format:missing_"):
        section = status.removeprefix("format:missing_")
        return Feedback(status, f"the {section} section is missing or too short; nothing was evaluated")
    return Feedback.unevaluated(status)


def within_evaluations(live: Sequence[Episode], left: int) -> list[Episode]:
    """The episodes of `live` that take their next turn when the step may evaluate at most `left`
    more programs (`stage.contrastive_rl.max_evaluations` less the step's distinct programs so
    far): each next turn is at most one more evaluation, so at most `left` go on, taken one per
    group in turn (every group's first sample, then every group's second, ...) so that no group's
    episodes all stop while another's all go on. The others end ("evaluations"). Returns the
    episodes that go on, in input order. Pure."""
    order = sorted(range(len(live)), key=lambda i: (live[i].sample, live[i].group))
    keep = set(order[: max(left, 0)])
    for i, ep in enumerate(live):
        if i not in keep:
            ep.ended = "evaluations"
    return [ep for i, ep in enumerate(live) if i in keep]


def code_keys(turns: Sequence[Rollout]) -> list[Hashable | None]:
    """Per turn, the `normalized_code` of its parsed code, None for a turn without (`copied_turns`)."""
    return [normalized_code(r.sections["code"]) if r.sections.get("code") else None for r in turns]


def price_episode_copies(ep: Episode, reward_cfg: RewardConfig) -> None:
    """Price in place every turn of `ep` that copies code its first prompt showed or an earlier
    turn (`copied_turns`, `price_copies`: the copy price); other turns keep theirs."""
    shown = [normalized_code(c) for c in ep.shown]
    copied = copied_turns(code_keys(ep.turns), shown)
    priced = [r.priced if r.priced is not None else Priced(0.0, "") for r in ep.turns]
    for r, before, p in zip(ep.turns, priced, price_copies(priced, copied, reward_cfg)):
        if p is not before:
            r.priced = p


def continue_episodes(
    episodes: Sequence[Episode],
    max_turns: int,
    margin: float | None,
    token_budget: int,
    count_tokens: Callable[[list[dict[str, str]]], int],
    max_chars: int = 300,
    report: bool = True,
    continue_ids: Callable[[list[int], list[int], list[dict[str, str]], list[dict[str, str]]], list[int] | None]
    | None = None,
) -> list[Episode]:
    """After a turn: end the episodes that are done, and give each of the others its next prompt.

    An episode that runs (`ended` None) ends after its latest turn (priced) when it has
    `max_turns` turns ("turns"), when that turn `stops` it against `best_shown` with `margin`
    ("stop"), when the turn's response is empty ("empty"), or when even the shortest refinement
    prompt exceeds `token_budget` ("budget", logged). Otherwise its `messages` become
    `refinement_turn(messages, its response, feedback_of(turn), token_budget, count_tokens)` and
    `feedback` the report shown (`Feedback.report`). `report` False: the prompt leaves the report
    out (`refinement_turn(report=False)`) and `feedback` stays None. `continue_ids` (e.g.
    `continued_prompt_ids` bound to the tokenizer), given the latest turn's prompt ids, its
    sampled ids, its messages and the next ones, sets `prompt_ids` to the next prompt as a
    continuation of the last (None: rendered from `messages`).

    Returns the episodes that go on, in input order. Pure: no I/O but a log line."""
    live = []
    for ep in episodes:
        if ep.ended is not None:
            continue
        last = ep.turns[-1]
        if len(ep.turns) >= max_turns:
            ep.ended = "turns"
        elif last.priced is not None and stops(last.priced, ep.best_shown, margin):
            ep.ended = "stop"
        elif not last.generation.text.strip():
            ep.ended = "empty"
        else:
            fb = feedback_of(last)
            previous = ep.messages
            try:
                ep.messages = refinement_turn(
                    ep.messages, last.generation.text, fb, token_budget, count_tokens, max_chars, report
                )
            except ValueError as exc:
                log.warning("%s: episode %s ends after turn %d: %s", ep.task.task_id, last.origin, len(ep.turns), exc)
                ep.ended = "budget"
                continue
            ep.prompt_ids = (
                continue_ids(last.generation.prompt_ids, last.generation.response_ids, previous, ep.messages)
                if continue_ids is not None
                else None
            )
            ep.feedback = fb.report(max_chars) if report else None
            live.append(ep)
    return live


def _add(total: dict[str, float], timings: dict[str, float]) -> None:
    for k, v in timings.items():
        total[k] = total.get(k, 0.0) + v


def sample_episodes(
    ctx: RunContext,
    tasks: Sequence[Task],
    prompts: Sequence[list[dict[str, str]]],
    n: int,
    step: int,
    timings: dict[str, float] | None = None,
    shown: Sequence[Sequence[str]] | None = None,
    *,
    turns: int = 1,
    best_shown: Sequence[float | None] | None = None,
    margin: float | None = None,
    feedback_tokens: int | None = None,
    feedback: str = "report",
    max_evaluations: int | None = None,
) -> list[Rollout]:
    """A step's episodes (see the module docstring): `n` per prompt, up to `turns` turns each.

    Args:
        ctx, tasks, prompts, n, step, shown: as `sample_rollouts` (the first turn's call).
        timings: as `sample_rollouts`', summed over the turns.
        turns: the most turns per episode; 1: exactly `sample_rollouts`.
        best_shown: per prompt, the best speedup (×) it showed, or None (`stops`).
        margin: `stage.contrastive_rl.stop_margin` (None: no early stop).
        feedback_tokens: the token budget of turns 2..; None: max_model_len - max_tokens.
        feedback: "report" (turns 2.. show the evaluator's report) or "none" (they show the
            previous answer and the closing instruction only: `stage.contrastive_rl.feedback`).
        max_evaluations: the most distinct programs the step evaluates over all its turns
            (`stage.contrastive_rl.max_evaluations`); turn 1 always runs whole, a later turn only
            for as many episodes as the budget has left (`within_evaluations`). None: no cap.

    Returns:
        Every turn's rollout, ordered by group, sample, turn; with turns > 1 each carries its
        `episode` (the first turn's origin), `turn` and, after turn 1, `feedback` (None with
        feedback "none").

    Raises:
        ValueError: `feedback` is not one of `REFINEMENT_FEEDBACK`.
    """
    if feedback not in REFINEMENT_FEEDBACK:
        raise ValueError(f"feedback must be one of {REFINEMENT_FEEDBACK}, got {feedback!r}")
    if turns == 1:
        return sample_rollouts(ctx, tasks, prompts, n, step, timings, shown=shown)
    cfg = ctx.cfg
    room = cfg.rollout.max_model_len - cfg.rollout.max_tokens
    budget = feedback_tokens if feedback_tokens is not None else room
    count = chat_token_counter(ctx.tokenizer)
    # The prompts that fit, so that group g is kept prompt g (sample_rollouts skips the others alike).
    fit = []
    for i, (task, messages) in enumerate(zip(tasks, prompts)):
        size = count(messages)
        if size <= room:
            fit.append(i)
        else:
            log.warning(
                "%s: prompt of %d tokens exceeds max_model_len - max_tokens = %d; skipped", task.task_id, size, room
            )
    if not fit:
        return []
    shown = [list(shown[i]) if shown is not None else [] for i in fit]
    best = [best_shown[i] if best_shown is not None else None for i in fit]
    kept_tasks, kept_prompts = [tasks[i] for i in fit], [prompts[i] for i in fit]
    evaluated: dict[tuple[str, str], EvalResult] = {}
    total: dict[str, float] = {}
    part: dict[str, float] = {}
    first = sample_rollouts(ctx, kept_tasks, kept_prompts, n, step, part, shown=shown, evaluated=evaluated)
    _add(total, part)
    reward_cfg = reward_config(cfg)
    episodes = {}
    for r in first:
        ep = episodes[(r.group, r.sample)] = Episode(
            kept_tasks[r.group], r.group, r.sample, kept_prompts[r.group], shown[r.group], best[r.group]
        )
        r.episode = r.origin
        ep.turns.append(r)
        price_episode_copies(ep, reward_cfg)

    continue_ids = functools.partial(continued_prompt_ids, ctx.tokenizer)
    for turn in range(2, turns + 1):
        live = continue_episodes(
            list(episodes.values()),
            turns,
            margin,
            budget,
            count,
            report=feedback == "report",
            continue_ids=continue_ids,
        )
        if max_evaluations is not None:
            live = within_evaluations(live, max_evaluations - len(evaluated))
        if not live:
            break
        part = {}
        rollouts = sample_rollouts(
            ctx,
            [ep.task for ep in live],
            [ep.messages for ep in live],
            1,
            step,
            part,
            shown=[ep.shown for ep in live],
            evaluated=evaluated,
            slots=[(ep.group, ep.sample) for ep in live],
            turn=turn,
            prompt_ids=[ep.prompt_ids for ep in live],
        )
        _add(total, part)
        for r in rollouts:
            ep = episodes[(r.group, r.sample)]
            r.episode, r.feedback = ep.turns[0].episode, ep.feedback
            ep.turns.append(r)
            price_episode_copies(ep, reward_cfg)
        for ep in live:  # a prompt the generator skipped (it cannot happen within the budget): the episode ends
            if ep.turns[-1].turn != turn:
                ep.ended = "budget"
    if timings is not None:
        timings.update(total)
    return [r for key in sorted(episodes) for r in episodes[key].turns]


def assign_episode_advantages(
    rollouts: list[Rollout],
    reward_cfg: RewardConfig,
    scale: str,
    *,
    gamma: float = 0.4,
    form: str = "best_later",
    baseline: str = "group",
    floors: Sequence[float] | None = None,
) -> None:
    """Set each rollout's advantage in place. Single-turn rollouts (no `episode`): exactly
    `assign_advantages`. Turns of episodes: per group, the episodes' per-turn rewards
    (`episode_rewards`: ties merged across the group's turns, untrainable turns left out), their
    `turn_returns` (`gamma`, `form`), set as `turn_return`, then `turn_advantages` (`baseline`,
    `scale`); a turn left out gets advantage 0 and no return. `floors`: each rollout's tie floor
    (ln units, `cudal1.pipeline.rollouts.tie_floors`); None: `reward_cfg.tie_floor`. Raises
    ValueError when `floors` does not match `rollouts`."""
    if floors is not None and len(floors) != len(rollouts):
        raise ValueError(f"{len(rollouts)} rollouts but {len(floors)} tie floors")
    if all(r.episode is None for r in rollouts):
        assign_advantages(rollouts, reward_cfg, scale, floors)
        return
    floor_of = {id(r): f for r, f in zip(rollouts, floors)} if floors is not None else None
    groups: dict[int, dict[str, list[Rollout]]] = {}
    for r in rollouts:
        groups.setdefault(r.group, {}).setdefault(r.episode or r.origin, []).append(r)
    for by_episode in groups.values():
        episodes = [sorted(turns, key=lambda r: r.turn) for turns in by_episode.values()]
        priced = [[r.priced if r.priced is not None else Priced(0.0, "") for r in ep] for ep in episodes]
        ep_floors = None if floor_of is None else [[floor_of[id(r)] for r in ep] for ep in episodes]
        returns = [turn_returns(rewards, gamma, form) for rewards in episode_rewards(priced, reward_cfg, ep_floors)]
        for ep, ep_returns, ep_advantages in zip(episodes, returns, turn_advantages(returns, baseline, scale)):
            for r, g, a in zip(ep, ep_returns, ep_advantages):
                r.turn_return, r.advantage = g, a


def turn_metrics(rollouts: Sequence[Rollout]) -> dict[str, float]:
    """Per turn t (1 first) of a step's episodes: "turn<t>/episodes" (how many reached it),
    "turn<t>/pass_rate" (share of them paid as correct, `PASSING`), "turn<t>/speedup" (mean paid
    speedup, ×, of those; absent with none); "last_turn/pass_rate" and "last_turn/speedup", the
    same over each episode's last turn (turn T, or the turn it stopped at: what refinement ends
    with, against "turn1/..."); per episode: "episode/turns" (mean turns), "episode/pass_rate"
    (share with a passing turn), "episode/best_speedup" (mean over those of their best paid
    speedup, ×). {} for rollouts without episodes."""
    turns: dict[int, list[Rollout]] = {}
    episodes: dict[str, list[Rollout]] = {}
    for r in rollouts:
        if r.episode is None:
            continue
        turns.setdefault(r.turn, []).append(r)
        episodes.setdefault(r.episode, []).append(r)
    if not episodes:
        return {}

    def paid(rs: Sequence[Rollout]) -> list[float]:
        return [float(r.paid_speedup) for r in rs if r.reward_reason in PASSING and r.paid_speedup is not None]

    out: dict[str, float] = {}
    for t in sorted(turns):
        speedups = paid(turns[t])
        out[f"turn{t}/episodes"] = float(len(turns[t]))
        out[f"turn{t}/pass_rate"] = len(speedups) / len(turns[t])
        if speedups:
            out[f"turn{t}/speedup"] = statistics.fmean(speedups)
    last = [max(ep, key=lambda r: r.turn) for ep in episodes.values()]
    last_paid = paid(last)
    out["last_turn/pass_rate"] = len(last_paid) / len(last)
    if last_paid:
        out["last_turn/speedup"] = statistics.fmean(last_paid)
    best = [max(s) for s in (paid(ep) for ep in episodes.values()) if s]
    out["episode/turns"] = statistics.fmean(len(ep) for ep in episodes.values())
    out["episode/pass_rate"] = len(best) / len(episodes)
    if best:
        out["episode/best_speedup"] = statistics.fmean(best)
    return out
