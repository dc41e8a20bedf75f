"""One round of the candidate's journey: prompt → generator → parser → benchmark pool → reward.

Shared by self-training (plain prompts) and contrastive RL (prompts with exemplars). The result
is a list of `cudal1.records.Rollout`, one per response, with its parse outcome, evaluation,
reward (`cudal1.rl.rewards.price`) and, after `assign_advantages`, its advantage
(`cudal1.rl.advantages.rollout_advantages`).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Sequence

from cudal1.policy.model import chat_prompt_ids
from cudal1.policy.parsing import parse_response
from cudal1.records import Candidate, Exemplar, Rollout
from cudal1.rl.advantages import rollout_advantages
from cudal1.rl.rewards import Priced, RewardConfig, needs_second_opinion, price, second_opinion
from cudal1.tasks import Task

log = logging.getLogger(__name__)

def trainable(r: Rollout) -> bool:
    """False for rollouts that stay out of the update: truncated responses, and outcomes that say
    nothing about the response (a harness failure, an invalid task); set by `price`."""
    return r.trainable


def reward_config(cfg: Any) -> RewardConfig:
    """The run's `RewardConfig`, from its `reward` config group."""
    return RewardConfig.from_settings(cfg.reward)


def sample_rollouts(ctx: Any, tasks: Sequence[Task], prompts: Sequence[list[dict[str, str]]], n: int,
                    step: int, timings: dict[str, float] | None = None,
                    shown: Sequence[Sequence[str]] | None = None) -> list[Rollout]:
    """Generate `n` responses per prompt, parse them, evaluate the parsed candidates on the
    primary benchmark pool, and price them (`price`; no advantages yet).

    Generation and evaluation overlap: each prompt's group is parsed and its candidates handed to
    the pool as soon as the generator finishes that group (`generate_stream`, `pool.stream()`),
    while the other groups are still being sampled. Outlier verification (`verify_outliers`), the
    record on the other pools and pricing wait for every result, as before. A generator without
    `generate_stream`, or a pool without `stream`, gives the old order (all groups, then all
    candidates); the rollouts are the same either way.

    Args:
        ctx: the `RunContext` (tokenizer, generator, pools, cfg).
        tasks, prompts: one chat prompt per task (same length).
        n: responses per prompt (the group size).
        step: the global step recorded in each rollout.
        timings: filled with (seconds) "generate_s": generation start to the last group's
            arrival; "evaluate_s": the first candidate's submission (or, with none, the end of
            generation) to the end of evaluation, outlier verification included; "overlap_s": how
            long both ran at once; so the round's wall time is generate_s + evaluate_s - overlap_s.
            Also "tokens" and "evaluations" (counts).
        shown: per prompt, the code of the exemplars it showed (a copy of one earns no gain).
    Returns:
        len(tasks) × n rollouts, ordered by group (= prompt index among the kept prompts) then
        sample, whatever order the groups finished in; prompts too long for the model are skipped
        with a warning.

    Raises:
        Whatever the generator raises (e.g. `cudal1.actors.generator_group.EngineStreamError`);
        the evaluation of the groups already handed over is cancelled first.
    """
    cfg = ctx.cfg
    max_prompt = cfg.rollout.max_model_len - cfg.rollout.max_tokens
    kept: list[tuple[Task, list[dict[str, str]], list[int], Sequence[str]]] = []
    for i, (task, messages) in enumerate(zip(tasks, prompts)):
        ids = chat_prompt_ids(ctx.tokenizer, messages)
        if len(ids) > max_prompt:
            log.warning("%s: prompt of %d tokens exceeds max_model_len - max_tokens = %d; skipped",
                        task.task_id, len(ids), max_prompt)
            continue
        kept.append((task, messages, ids, shown[i] if shown is not None else ()))
    if not kept:
        return []
    pool = ctx.pools.primary
    groups: dict[int, list[Rollout]] = {}
    candidate_of: dict[int, Candidate] = {}  # id(rollout) -> its candidate
    position: dict[int, int] = {}  # id(candidate) -> its index in the evaluation (submission order)
    t0 = time.perf_counter()
    with _evaluation(pool) as evaluation:
        for g, gens in _groups(ctx.generator, [ids for _, _, ids, _ in kept], n, cfg.rollout):
            task, messages = kept[g][0], kept[g][1]
            groups[g] = [_parsed(task.task_id, step, g, s, messages[-1]["content"], gen) for s, gen in enumerate(gens)]
            batch = []
            for r in groups[g]:
                if _evaluable(r):
                    candidate_of[id(r)] = _candidate(r)
                    batch.append(candidate_of[id(r)])
            for c, k in zip(batch, evaluation.submit(batch)):
                position[id(c)] = k
        t1 = time.perf_counter()
        by_submission = evaluation.results()
    rollouts = [r for g in sorted(groups) for r in groups[g]]
    evaluable = [r for r in rollouts if _evaluable(r)]
    candidates = [candidate_of[id(r)] for r in evaluable]  # rollout order, as the batch path had them
    results = [by_submission[position[id(c)]] for c in candidates]
    reward_cfg = reward_config(cfg)
    verify_outliers(pool, candidates, results, _best_known(ctx, candidates, results), reward_cfg)
    if getattr(ctx, "recorder", None) is not None:  # the other architectures, for the record
        ctx.recorder.submit(step, candidates, results)
    t2 = time.perf_counter()
    for r, res in zip(evaluable, results):
        r.result = res
    price_rollouts(rollouts, reward_cfg, [shown_codes for _, _, _, shown_codes in kept])
    if timings is not None:
        eval_start = evaluation.started if evaluation.started is not None else t1
        timings.update(generate_s=t1 - t0, evaluate_s=t2 - eval_start, overlap_s=max(0.0, t1 - eval_start),
                       evaluations=float(len(candidates)),
                       tokens=float(sum(len(r.generation.response_ids) for r in rollouts)))
    return rollouts


def _groups(generator: Any, prompt_ids: list[list[int]], n: int, rollout_cfg: Any) -> Any:
    """(prompt index, its n generations) as the generator finishes each group, or, for a generator
    without `generate_stream`, all of them in prompt order once `generate` returns."""
    sampling = dict(n=n, max_tokens=rollout_cfg.max_tokens, temperature=rollout_cfg.temperature, top_p=rollout_cfg.top_p)
    if hasattr(generator, "generate_stream"):
        return generator.generate_stream(prompt_ids, **sampling)
    return enumerate(generator.generate(prompt_ids, **sampling))


def _parsed(task_id: str, step: int, group: int, sample: int, prompt: str, gen: Any) -> Rollout:
    """The rollout of one response, with its parsed sections (the code under "code" when it parsed)."""
    parsed = parse_response(gen.text)
    r = Rollout(task_id, step, group, sample, prompt, gen, sections=dict(parsed.sections), parse_error=parsed.error)
    if parsed.code is not None and parsed.error is None:
        r.sections["code"] = parsed.code
    return r


def _evaluable(r: Rollout) -> bool:
    """A parsed, finished response. A truncated one is not evaluated: it earns nothing whatever its code would do."""
    return r.parse_error is None and r.generation.finish_reason != "length"


def _candidate(r: Rollout) -> Candidate:
    return Candidate(r.task_id, r.sections["code"], origin=r.origin, model_version=r.generation.model_version)


def _evaluation(pool: Any) -> Any:
    """`pool.stream()` (candidates evaluated as they are submitted), or, for a pool without it,
    `_BatchEvaluation` (all of them at the end, with `evaluate_many`)."""
    return pool.stream(progress=True) if hasattr(pool, "stream") else _BatchEvaluation(pool)


class _BatchEvaluation:
    """`PoolStream`'s interface over a pool that only has `evaluate_many`: collects the submitted
    candidates and evaluates them when `results()` is called (which is then `started`)."""

    def __init__(self, pool: Any) -> None:
        self.pool, self.candidates, self.started = pool, [], None

    def submit(self, candidates: Sequence[Candidate]) -> range:
        first = len(self.candidates)
        self.candidates += list(candidates)
        return range(first, len(self.candidates))

    def results(self) -> list[dict[str, Any]]:
        if not self.candidates:
            return []
        self.started = time.perf_counter()
        return self.pool.evaluate_many(self.candidates, progress=True)

    def __enter__(self) -> "_BatchEvaluation":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


def _best_known(ctx: Any, candidates: Sequence[Candidate], results: Sequence[dict[str, Any]]) -> dict[str, float]:
    """{task_id: the task's best stored speedup (×)} from the exemplar buffer, where it has one,
    for the tasks with a correct result (only those can need a second opinion)."""
    buffer = getattr(ctx, "buffer", None)
    if buffer is None:
        return {}
    best = {}
    for task_id in sorted({c.task_id for c, res in zip(candidates, results) if res.get("status") == "ok"}):
        e = buffer.best(task_id)
        if e is not None:
            best[task_id] = float(e.speedup)
    return best


def verify_outliers(pool: Any, candidates: Sequence[Candidate], results: list[dict[str, Any]],
                    best_known: dict[str, float], reward_cfg: RewardConfig) -> int:
    """Measure the outliers again on another actor of `pool` (issue 9, item 9).

    A correct result above `reward_cfg.verify_above` (×), or above `verify_over_best` × its
    task's best known speedup, is evaluated again, avoiding the actor that measured it (the same
    actor only when the pool has no other); `second_opinion` is stored in the result as
    "second_opinion", and a disagreement beyond `verify_tolerance` is logged with both figures
    (`price` then pays no gain). Returns how many results were measured again."""
    picks = [i for i, (c, res) in enumerate(zip(candidates, results))
             if needs_second_opinion(res, best_known.get(c.task_id), reward_cfg)]
    if not picks:
        return 0
    seconds = pool.evaluate_many([candidates[i] for i in picks], progress=False,
                                 avoid=[results[i].get("actor") for i in picks])
    for i, second in zip(picks, seconds):
        opinion = second_opinion(results[i], second, reward_cfg)
        results[i]["second_opinion"] = opinion
        if not opinion["agrees"]:
            log.warning("%s: not confirmed on another actor, not paid (a hack, or noise): %.3fx on actor %s, "
                        "%s on actor %s (%s)",
                        candidates[i].task_id, results[i]["speedup"], results[i].get("actor"),
                        f"{opinion['speedup']:.3f}x" if opinion["speedup"] is not None else opinion["status"],
                        opinion["actor"], candidates[i].origin)
    return len(picks)


def price_rollouts(rollouts: Sequence[Rollout], reward_cfg: RewardConfig, shown: Sequence[Sequence[str]] = ()) -> None:
    """Set each rollout's reward, reward_reason, paid_speedup and trainable in place (`price`);
    `shown[g]`: the code of the exemplars group g's prompt showed."""
    for r in rollouts:
        priced = price(r.result, r.parse_error, reward_cfg, finish_reason=r.generation.finish_reason,
                       sections=r.sections, code=r.sections.get("code"),
                       shown=shown[r.group] if r.group < len(shown) else ())
        r.reward, r.reward_reason, r.paid_speedup, r.trainable = priced.reward, priced.reason, priced.speedup, priced.trainable


def update_examples(rollouts: Sequence[Rollout]) -> list[Any]:
    """What reaches the learner from a step's rollouts: the `PolicyExample` of each trainable
    rollout with a non-zero advantage (a zero advantage contributes no policy gradient, and a
    truncated or harness-failed response must not enter the loss at all)."""
    return [r.to_example() for r in rollouts if trainable(r) and r.advantage != 0.0]


def assign_advantages(rollouts: list[Rollout], reward_cfg: RewardConfig, scale: str) -> None:
    """Set each rollout's advantage in place (`rollout_advantages`: ties merged within each
    prompt's group, then GRPO's group normalization; scale="none" is Dr. GRPO). Untrainable
    rollouts get 0 and stay out of their group's statistics."""
    priced = [Priced(r.reward, r.reward_reason, r.paid_speedup, float((r.result or {}).get("speedup_spread") or 0.0),
                     r.trainable) for r in rollouts]
    for r, a in zip(rollouts, rollout_advantages(priced, [r.group for r in rollouts], reward_cfg, scale)):
        r.advantage = a


def is_success(r: Rollout, min_speedup: float = 0.0) -> bool:
    """A correct, finished, paid candidate at least `min_speedup` (×) fast (measured speedup)."""
    res = r.result or {}
    speedup = res.get("speedup")
    return bool(r.trainable and r.reward_reason.startswith("ok") and res.get("status") == "ok" and speedup
                and speedup >= min_speedup)


def successes(rollouts: Sequence[Rollout], min_speedup: float = 0.0) -> list[Exemplar]:
    """The successful rollouts (`is_success`) as exemplars for the buffer."""
    return [Exemplar(r.task_id, r.sections["code"], float(r.result["speedup"]), analysis=r.sections.get("analysis", ""),
                     step=r.step, model_version=r.generation.model_version, origin=r.origin)
            for r in rollouts if is_success(r, min_speedup)]
