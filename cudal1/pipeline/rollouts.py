"""One round of the candidate's journey: prompt → generator → parser → benchmark pool → reward.

Shared by self-training (plain prompts) and contrastive RL (prompts with exemplars). The result
is a list of `cudal1.records.Rollout`, one per response, with its parse outcome, evaluation,
reward (`cudal1.rl.rewards.price`) and, after `assign_advantages`, its advantage
(`cudal1.rl.advantages.rollout_advantages`).
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any, Sequence

from cudal1.bench.result import EvalResult, Status
from cudal1.pipeline.verify import verify_outliers
from cudal1.policy.model import chat_prompt_ids
from cudal1.policy.parsing import parse_response
from cudal1.records import Candidate, Exemplar, Generation, PolicyExample, Rollout
from cudal1.rl.advantages import rollout_advantages
from cudal1.rl.noise import TieNoise, program_id
from cudal1.rl.rewards import FALLBACK_LABEL, Priced, RewardConfig, format_failure, price, share_identical
from cudal1.rl.similarity import normalized_code
from cudal1.tasks import Task

if TYPE_CHECKING:
    from cudal1.pipeline.context import RunContext

log = logging.getLogger(__name__)


def trainable(r: Rollout) -> bool:
    """False for rollouts that stay out of the update: truncated responses, and outcomes that say
    nothing about the response (a harness failure, an invalid task); set by `price`."""
    return r.trainable


def reward_config(cfg: Any) -> RewardConfig:
    """The run's `RewardConfig`, from its `reward` config group."""
    return RewardConfig.from_config(cfg.reward)


def sample_rollouts(
    ctx: RunContext,
    tasks: Sequence[Task],
    prompts: Sequence[list[dict[str, str]]],
    n: int,
    step: int,
    timings: dict[str, float] | None = None,
    shown: Sequence[Sequence[str]] | None = None,
    evaluated: dict[tuple[str, str], EvalResult] | None = None,
    slots: Sequence[tuple[int, int]] | None = None,
    turn: int = 1,
    prompt_ids: Sequence[list[int] | None] | None = None,
) -> list[Rollout]:
    """Generate `n` responses per prompt, parse them, evaluate the parsed candidates on the
    primary benchmark pool, and price them (`price`; no advantages yet).

    Only a finished, parsed response with its required sections is evaluated: one without usable
    code (a parse error), cut at `max_tokens`, or with its analysis or design section missing or
    too short (`format_failure`) earns the failure reward whatever its code would do, so it gets
    no candidate, its result stays None and its reward reason says why ("parse_error:<label>",
    "truncated", "format:missing_<section>"); the pool never sees it.

    Each distinct program of the step is evaluated once: a candidate whose task and
    `normalized_code` equal those of a candidate already submitted in this step (in any group, or
    by an earlier call, found in `evaluated`) is not submitted again, and its rollout shares that
    candidate's `EvalResult` (the same object, so a second opinion on it is measured once and
    holds for every copy; `program_key`).

    Generation and evaluation overlap: each prompt's group is parsed and its candidates handed to
    the pool as soon as the generator finishes that group (`generate_stream`, `pool.stream()`),
    while the other groups are still being sampled. Outlier verification
    (`cudal1.pipeline.verify.verify_outliers`), the record on the other pools and pricing wait for
    every result. A generator without `generate_stream` hands over all groups at once, when
    `generate` returns; the rollouts are the same either way.

    Args:
        ctx: the `RunContext` (tokenizer, generator, pools, cfg).
        tasks, prompts: one chat prompt per task (same length).
        n: responses per prompt (the group size).
        step: the global step recorded in each rollout.
        timings: filled with (seconds) "generate_s": generation start to the last group's
            arrival; "evaluate_s": the first candidate's submission (or, with none, the end of
            generation) to the end of evaluation, outlier verification included; "overlap_s": how
            long both ran at once; so the round's wall time is generate_s + evaluate_s - overlap_s.
            Also "tokens", "evaluations" (candidates submitted to the pool) and
            "evaluations_saved" (candidates that shared an earlier copy's result instead), counts;
            with a generator that recovers lost engines (`GeneratorGroup.recovery`),
            "engine_restarts", "resampled_groups" (counts) and "recovery_s" (seconds).
        shown: per prompt, the code of the exemplars it showed (a copy of one earns no gain).
        evaluated: results of earlier calls of the same step (a refinement episode's earlier
            turns, `cudal1.pipeline.episodes`), by `program_key`: a candidate found there is not
            submitted and shares that result (counted in "evaluations_saved"); the results of
            this call's new programs are added to it. None: no cache.
        slots: per prompt, the (group, first sample) its responses are recorded as; None: (the
            prompt's index among the kept prompts, 0). With slots, two prompts may share a group
            (the turns t > 1 of a group's episodes, n = 1); `shown` must then agree per group.
        turn: the turn recorded in each rollout (1: a single-turn rollout).
        prompt_ids: per prompt, the token ids to sample from instead of its messages rendered
            by the chat template (a refinement turn continued from the last one's ids,
            `cudal1.pipeline.episodes`), or None to render; ids over the prompt budget are
            rendered instead.
    Returns:
        len(tasks) × n rollouts, ordered by prompt (without `slots`: its group) then sample,
        whatever order the groups finished in; prompts too long for the model are skipped with a
        warning.

    Raises:
        Whatever the generator raises (e.g. `cudal1.actors.generator_group.EngineStreamError`);
        the evaluation of the groups already handed over is cancelled first.
    """
    cfg = ctx.cfg
    max_prompt = cfg.rollout.max_model_len - cfg.rollout.max_tokens
    kept: list[tuple[Task, list[dict[str, str]], list[int], Sequence[str], tuple[int, int] | None]] = []
    for i, (task, messages) in enumerate(zip(tasks, prompts)):
        given = prompt_ids[i] if prompt_ids is not None else None
        ids = given if given is not None and len(given) <= max_prompt else chat_prompt_ids(ctx.tokenizer, messages)
        if len(ids) > max_prompt:
            log.warning(
                "%s: prompt of %d tokens exceeds max_model_len - max_tokens = %d; skipped",
                task.task_id,
                len(ids),
                max_prompt,
            )
            continue
        kept.append((task, messages, ids, shown[i] if shown is not None else (), slots[i] if slots else None))
    if not kept:
        return []
    pool = ctx.pools.primary
    reward_cfg = reward_config(cfg)
    cached = evaluated if evaluated is not None else {}
    groups: dict[int, list[Rollout]] = {}
    submitted: dict[tuple[str, str], int] = {}  # program_key -> index in the evaluation (submission order)
    keys: dict[tuple[int, int], tuple[str, str]] = {}  # (group, sample) -> its candidate's program_key
    t0 = time.perf_counter()
    with pool.stream(progress=True) as evaluation:
        for g, gens in _groups(ctx.generator, [ids for _, _, ids, _, _ in kept], n, cfg.rollout):
            task, messages, slot = kept[g][0], kept[g][1], kept[g][4]
            group, first = slot if slot is not None else (g, 0)
            groups[g] = [
                _parsed(task.task_id, step, group, first + s, messages[-1]["content"], gen, reward_cfg, turn)
                for s, gen in enumerate(gens)
            ]
            batch: dict[tuple[str, str], Candidate] = {}
            for r in groups[g]:
                if r.candidate is not None:
                    key = keys[(r.group, r.sample)] = program_key(r.candidate)
                    if key not in submitted and key not in batch and key not in cached:
                        batch[key] = r.candidate
            for key, k in zip(batch, evaluation.submit(list(batch.values()))):
                submitted[key] = k
        t1 = time.perf_counter()
        by_submission = evaluation.results()
    rollouts = [r for g in sorted(groups) for r in groups[g]]
    evaluable = [r for r in rollouts if r.candidate is not None]
    for r in evaluable:  # copies of one program get the same EvalResult object
        key = keys[(r.group, r.sample)]
        r.result = by_submission[submitted[key]] if key in submitted else cached[key]
    firsts: dict[tuple[str, str], Rollout] = {}  # one rollout per program new to this call, its first, in rollout order
    for r in evaluable:
        if keys[(r.group, r.sample)] in submitted:
            firsts.setdefault(keys[(r.group, r.sample)], r)
    candidates = [r.candidate for r in firsts.values()]
    results = [r.result for r in firsts.values()]
    verify_outliers(pool, candidates, results, _best_known(ctx, candidates, results), reward_cfg)
    if getattr(ctx, "recorder", None) is not None:  # the other architectures, for the record
        ctx.recorder.submit(step, candidates, results)
    if evaluated is not None:
        evaluated.update({key: r.result for key, r in firsts.items()})
    t2 = time.perf_counter()
    price_rollouts(rollouts, reward_cfg, _shown_by_group(kept))
    if timings is not None:
        eval_start = evaluation.started if evaluation.started is not None else t1
        timings.update(
            generate_s=t1 - t0,
            evaluate_s=t2 - eval_start,
            overlap_s=max(0.0, t1 - eval_start),
            evaluations=float(len(candidates)),
            evaluations_saved=float(len(evaluable) - len(candidates)),
            tokens=float(sum(len(r.generation.response_ids) for r in rollouts)),
            **getattr(ctx.generator, "recovery", {}),
        )
    return rollouts


def _shown_by_group(kept: Sequence[tuple[Any, Any, Any, Sequence[str], tuple[int, int] | None]]) -> list[Sequence[str]]:
    """Per group, the exemplar code its prompt showed (`price_rollouts`' `shown`): without slots,
    group g is kept prompt g."""
    if all(slot is None for *_, slot in kept):
        return [shown_codes for _, _, _, shown_codes, _ in kept]
    out: list[Sequence[str]] = [()] * (1 + max(slot[0] for *_, slot in kept if slot is not None))
    for _, _, _, shown_codes, slot in kept:
        out[slot[0]] = shown_codes  # type: ignore[index]
    return out


def program_key(candidate: Candidate) -> tuple[str, str]:
    """(task id, `normalized_code` of the source): equal for two candidates that are one program
    of one task up to formatting, comments, docstrings, no-op statements and identifier renaming."""
    return candidate.task_id, normalized_code(candidate.source)


def _groups(generator: Any, prompt_ids: list[list[int]], n: int, rollout_cfg: Any) -> Any:
    """(prompt index, its n generations) as the generator finishes each group, or, for a generator
    without `generate_stream`, all of them in prompt order once `generate` returns."""
    sampling = dict(
        n=n, max_tokens=rollout_cfg.max_tokens, temperature=rollout_cfg.temperature, top_p=rollout_cfg.top_p
    )
    if hasattr(generator, "generate_stream"):
        return generator.generate_stream(prompt_ids, **sampling)
    return enumerate(generator.generate(prompt_ids, **sampling))


def _parsed(
    task_id: str,
    step: int,
    group: int,
    sample: int,
    prompt: str,
    gen: Generation,
    reward_cfg: RewardConfig | None = None,
    turn: int = 1,
) -> Rollout:
    """The rollout of one response, with its parsed sections (the code under "code" when it
    parsed) and, for a parsed and finished response with the sections `reward_cfg` requires
    (`format_failure`; None: `RewardConfig()`), its candidate. A truncated or badly formatted
    response gets no candidate: it earns the failure reward whatever its code would do."""
    parsed = parse_response(gen.text)
    r = Rollout(
        task_id, step, group, sample, prompt, gen, sections=dict(parsed.sections), parse_error=parsed.error, turn=turn
    )
    if parsed.code is not None and parsed.error is None:
        r.sections["code"] = parsed.code
        if gen.finish_reason != "length" and format_failure(r.sections, reward_cfg or RewardConfig()) is None:
            r.candidate = Candidate(task_id, parsed.code, origin=r.origin, model_version=gen.model_version)
    return r


def _best_known(ctx: RunContext, candidates: Sequence[Candidate], results: Sequence[EvalResult]) -> dict[str, float]:
    """{task_id: the task's best stored speedup (×)} from the exemplar buffer, where it has one,
    for the tasks with a correct result (only those can need a second opinion)."""
    buffer = getattr(ctx, "buffer", None)
    if buffer is None:
        return {}
    best = {}
    for task_id in sorted({c.task_id for c, res in zip(candidates, results) if res.status is Status.OK}):
        e = buffer.best(task_id)
        if e is not None:
            best[task_id] = float(e.speedup)
    return best


def price_rollouts(rollouts: Sequence[Rollout], reward_cfg: RewardConfig, shown: Sequence[Sequence[str]] = ()) -> None:
    """Set each rollout's `priced` in place (`price`; a copy of a shown exemplar earns the failure
    reward), then give the responses of one group with the same normalized code one shared price
    (`share_identical`); `shown[g]`: the code of the exemplars group g's prompt showed."""
    priced = [
        price(
            r.result,
            r.parse_error,
            reward_cfg,
            finish_reason=r.generation.finish_reason,
            sections=r.sections,
            code=r.sections.get("code"),
            shown=shown[r.group] if r.group < len(shown) else (),
        )
        for r in rollouts
    ]
    codes = [r.sections.get("code") if r.result is not None else None for r in rollouts]
    for r, p in zip(rollouts, share_identical(priced, [r.group for r in rollouts], codes)):
        r.priced = p


def usable_logprobs(r: Rollout) -> bool:
    """False when the engine reported a NaN or infinite log-probability for one of the response's
    tokens: in the loss (the PPO ratio, or the truncated importance weight against the learner's
    own) it would make the whole batch's loss NaN. None (no log-probabilities) is usable: the
    learner computes its own."""
    lp = r.generation.logprobs
    return lp is None or all(math.isfinite(x) for x in lp)


def update_examples(rollouts: Sequence[Rollout]) -> list[PolicyExample]:
    """What reaches the learner from a step's rollouts: the `PolicyExample` of each trainable
    rollout with a non-zero advantage (a zero advantage contributes no policy gradient, and a
    truncated or harness-failed response must not enter the loss at all) and usable engine
    log-probabilities (`usable_logprobs`; `unusable_logprob_count` counts those left out)."""
    return [r.to_example() for r in rollouts if trainable(r) and r.advantage != 0.0 and usable_logprobs(r)]


def unusable_logprob_count(rollouts: Sequence[Rollout]) -> int:
    """How many trainable rollouts with a non-zero advantage `update_examples` leaves out for a
    NaN or infinite engine log-probability."""
    return sum(1 for r in rollouts if trainable(r) and r.advantage != 0.0 and not usable_logprobs(r))


def assign_advantages(
    rollouts: list[Rollout], reward_cfg: RewardConfig, scale: str, floors: Sequence[float] | None = None
) -> None:
    """Set each rollout's advantage in place (`rollout_advantages`: ties merged within each
    prompt's group, then GRPO's group normalization; scale="none" is Dr. GRPO). Untrainable
    rollouts get 0 and stay out of their group's statistics. `floors`: each rollout's tie floor
    (`tie_floors`); None: `reward_cfg.tie_floor`."""
    priced = [r.priced if r.priced is not None else Priced(0.0, "") for r in rollouts]
    groups = [r.group for r in rollouts]
    for r, a in zip(rollouts, rollout_advantages(priced, groups, reward_cfg, scale, floors)):
        r.advantage = a


def observe_noise(noise: TieNoise, rollouts: Sequence[Rollout]) -> int:
    """Teach `noise` the between-evaluation noise of a step's rollouts: each distinct evaluation
    once (copies of one program share one result object and make no pair), with its program's id
    (`program_key`), so a second opinion or a program measured in an earlier step makes a pair
    (`TieNoise.observe`). Returns the pairs added."""
    seen: set[int] = set()
    added = 0
    for r in rollouts:
        if r.result is None or r.candidate is None or id(r.result) in seen:
            continue
        seen.add(id(r.result))
        added += noise.observe(r.result, program_id(*program_key(r.candidate)))
    return added


def tie_floors(rollouts: Sequence[Rollout], noise: TieNoise) -> list[float]:
    """The tie floor (ln-speedup units) of each rollout: `noise`'s for its result's pool and task
    size (`TieNoise.floor_for`; the configured floor for a rollout without a result)."""
    return [noise.floor_for(r.result) for r in rollouts]


def fallbacks_within_noise(rollouts: Sequence[Rollout], reward_cfg: RewardConfig, floors: Sequence[float]) -> int:
    """Price again, with each rollout's own tie floor (`floors`, ln-speedup units, `tie_floors`),
    the correct rollouts whose candidate calls the reference's operators (label
    `calls_reference_ops`), and make those whose gain lies within that floor fallbacks (`price`'s
    fallback rule). Sampling prices with the configured `reward.tie_floor`, before the step's
    measurements have taught the pool's noise (`observe_noise`); this applies what they taught.
    Only ever lowers a price to the failure reward; copies of one program share one result and
    so one floor, and stay priced alike. Returns how many rollouts became fallbacks."""
    if len(floors) != len(rollouts):
        raise ValueError(f"{len(floors)} floors for {len(rollouts)} rollouts")
    changed = 0
    for r, floor in zip(rollouts, floors):
        p, res = r.priced, r.result
        if p is None or not p.correct or res is None or FALLBACK_LABEL not in res.labels:
            continue
        again = price(
            res,
            r.parse_error,
            reward_cfg,
            finish_reason=r.generation.finish_reason,
            sections=r.sections,
            tie_floor=floor,
        )
        if again.reason == "fallback":
            r.priced = again
            changed += 1
    return changed


def learn_noise(
    noise: TieNoise | None, rollouts: Sequence[Rollout], reward_cfg: RewardConfig
) -> tuple[list[float] | None, int]:
    """A step's rollouts through the run's noise model, in the order the RL stage needs: teach
    `noise` the step's pairs (`observe_noise`), read each rollout's tie floor (`tie_floors`), and
    make the fallbacks within it fallbacks (`fallbacks_within_noise`). Returns (the floors, for
    `assign_advantages`; None with `noise` None: calibration off, `reward.tie_floor` everywhere)
    and how many rollouts became fallbacks."""
    if noise is None:
        return None, 0
    observe_noise(noise, rollouts)
    floors = tie_floors(rollouts, noise)
    return floors, fallbacks_within_noise(rollouts, reward_cfg, floors)


def is_success(r: Rollout, min_speedup: float = 0.0) -> bool:
    """A correct, finished candidate whose price stands: reason "ok" (not noisy, not an
    unconfirmed second opinion, not a copy or fallback), no unpaid label (`Priced.unpaid`), and a
    paid speedup (`Rollout.paid_speedup`: rounded, second opinion and label factors applied) of at
    least `min_speedup` (×)."""
    res, p = r.result, r.priced
    return bool(
        r.trainable
        and p is not None
        and p.reason == "ok"
        and not p.unpaid
        and res is not None
        and res.status is Status.OK
        and p.speedup is not None
        and p.speedup >= min_speedup
    )


def successes(rollouts: Sequence[Rollout], min_speedup: float = 0.0) -> list[Exemplar]:
    """The successful rollouts (`is_success`) as exemplars for the buffer, each with its paid
    speedup (what the prompts will show and the buffer ranks by), never the raw measured one."""
    return [
        Exemplar(
            r.task_id,
            r.sections["code"],
            float(r.paid_speedup),
            analysis=r.sections.get("analysis", ""),
            step=r.step,
            model_version=r.generation.model_version,
            origin=r.origin,
        )
        for r in rollouts
        if is_success(r, min_speedup)
    ]
