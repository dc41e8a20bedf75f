"""One round of the candidate's journey: prompt → generator → parser → benchmark pool → reward.

Shared by self-training (plain prompts) and contrastive RL (prompts with exemplars). The result
is a list of `cudal1.records.Rollout`, one per response, with its parse outcome, evaluation,
reward and (after `assign_advantages`) its group-normalized advantage.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Sequence

from cudal1.policy.model import chat_prompt_ids
from cudal1.policy.parsing import parse_response
from cudal1.records import Candidate, Exemplar, Rollout
from cudal1.rl.advantages import group_advantages
from cudal1.rl.rewards import RewardConfig, normalize_rewards, reward_from_result
from cudal1.tasks import Task

log = logging.getLogger(__name__)

HARNESS_LABELS = {"actor_died", "harness_error", "actor_timeout"}
"""Results that say the harness failed, not the candidate: such rollouts carry no training signal."""


def trainable(r: Rollout) -> bool:
    """False for rollouts whose outcome says nothing about the response: a harness failure
    (benchmark actor died or timed out) or an invalid task (the reference itself failed)."""
    res = r.result or {}
    if res.get("status") == "invalid_task":
        return False
    return not HARNESS_LABELS.intersection(res.get("labels") or [])


def sample_rollouts(ctx: Any, tasks: Sequence[Task], prompts: Sequence[list[dict[str, str]]], n: int,
                    step: int, timings: dict[str, float] | None = None) -> list[Rollout]:
    """Generate `n` responses per prompt, parse them, evaluate the parsed candidates on the
    primary benchmark pool, and price them (raw reward; no advantages yet).

    Args:
        ctx: the `RunContext` (tokenizer, generator, pools, cfg).
        tasks, prompts: one chat prompt per task (same length).
        n: responses per prompt (the group size).
        step: the global step recorded in each rollout.
        timings: filled with "generate_s", "evaluate_s", "tokens", "evaluations".
    Returns:
        len(tasks) × n rollouts, grouped by prompt (group = prompt index).
    """
    cfg = ctx.cfg
    max_prompt = cfg.rollout.max_model_len - cfg.rollout.max_tokens
    kept: list[tuple[Task, list[dict[str, str]], list[int]]] = []
    for task, messages in zip(tasks, prompts):
        ids = chat_prompt_ids(ctx.tokenizer, messages)
        if len(ids) > max_prompt:
            log.warning("%s: prompt of %d tokens exceeds max_model_len - max_tokens = %d; skipped",
                        task.task_id, len(ids), max_prompt)
            continue
        kept.append((task, messages, ids))
    if not kept:
        return []
    t0 = time.perf_counter()
    groups = ctx.generator.generate([ids for _, _, ids in kept], n=n, max_tokens=cfg.rollout.max_tokens,
                                    temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p)
    t1 = time.perf_counter()
    rollouts: list[Rollout] = []
    for g, ((task, messages, _), gens) in enumerate(zip(kept, groups)):
        for s, gen in enumerate(gens):
            parsed = parse_response(gen.text)
            rollouts.append(Rollout(task.task_id, step, g, s, messages[-1]["content"], gen,
                                    sections=dict(parsed.sections), parse_error=parsed.error))
            if parsed.code is not None and parsed.error is None:
                rollouts[-1].sections["code"] = parsed.code
    evaluable = [r for r in rollouts if r.parse_error is None]
    candidates = [Candidate(r.task_id, r.sections["code"], origin=r.origin, model_version=r.generation.model_version)
                  for r in evaluable]
    results = ctx.pools.primary.evaluate_many(candidates, progress=True) if candidates else []
    t2 = time.perf_counter()
    for r, res in zip(evaluable, results):
        r.result = res
    reward_cfg = RewardConfig(transform=cfg.stage.contrastive_rl.reward_transform)
    for r in rollouts:
        r.reward, _ = reward_from_result(r.result, r.parse_error, reward_cfg)
    if timings is not None:
        timings.update(generate_s=t1 - t0, evaluate_s=t2 - t1, evaluations=float(len(candidates)),
                       tokens=float(sum(len(r.generation.response_ids) for r in rollouts)))
    return rollouts


def assign_advantages(rollouts: list[Rollout], clip: float, scale: str) -> None:
    """Set each rollout's advantage in place: raw rewards standardized over the batch and clipped
    to ±clip (CUDA-L1's reward normalization), then normalized within each prompt's group (GRPO,
    Shao et al. 2024; scale="none" is Dr. GRPO). Untrainable rollouts get 0 and stay out of both."""
    use = [r for r in rollouts if trainable(r)]
    for r in rollouts:
        r.advantage = 0.0
    if not use:
        return
    normed = normalize_rewards([r.reward for r in use], clip)
    for r, a in zip(use, group_advantages(normed, [r.group for r in use], scale=scale)):
        r.advantage = a


def is_success(r: Rollout, min_speedup: float = 0.0) -> bool:
    """A correct candidate at least `min_speedup` (×) fast."""
    res = r.result or {}
    speedup = res.get("speedup")
    return bool(res.get("status") == "ok" and speedup and speedup >= min_speedup)


def successes(rollouts: Sequence[Rollout], min_speedup: float = 0.0) -> list[Exemplar]:
    """The successful rollouts (`is_success`) as exemplars for the buffer."""
    return [Exemplar(r.task_id, r.sections["code"], float(r.result["speedup"]), analysis=r.sections.get("analysis", ""),
                     step=r.step, model_version=r.generation.model_version, origin=r.origin)
            for r in rollouts if is_success(r, min_speedup)]
