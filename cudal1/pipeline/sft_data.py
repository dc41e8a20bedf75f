"""What stage 1 trains on, as plain data: `stage1_solutions` (the builtin seeds and an augmented
dataset's variants of the selected tasks), `sft_pairs` (one task's prompt/response pairs) and
`refinement_pairs` (one task's second-turn pairs, for multi-turn refinement).

Kept apart from `stages.py` so that the data path — dataset → variants → SFT examples — is
tested without actors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cudal1.policy.prompts import Feedback, contrastive_prompt, plain_prompt, refinement_turn, sft_response
from cudal1.records import Exemplar
from cudal1.rl.exemplars import contrastive_target


def stage1_solutions(
    tasks: Sequence[Any], seeds: dict[str, str], augmented: str | None, variants: str | None = None
) -> list[Exemplar]:
    """Stage 1's solutions before validation: each seed of `seeds` ({task_id: code}, origin
    "seed", speedup NaN: not measured yet), then the hand-written variants of set `variants`
    (`cudal1.pipeline.variants`, None: none) that belong to `tasks` (origin "variant:<kind>",
    speedup NaN), then the kept correct variants of the dataset in directory `augmented` (None:
    none) that belong to `tasks` (by task id and source hash), with their recorded speedups (×),
    analyses and origins "augmented:<endpoint>/<attempt>". Raises FileNotFoundError / ValueError
    as `cudal1.augment.dataset.load_dataset`, KeyError for an unknown variant set."""
    out = [Exemplar(t.task_id, seeds[t.task_id], math.nan, origin="seed") for t in tasks if t.task_id in seeds]
    if variants:
        from cudal1.pipeline.variants import variant_exemplars

        out += variant_exemplars(variants, [t.task_id for t in tasks])
    if augmented:
        from cudal1.augment.dataset import augmented_variants, load_dataset

        found = augmented_variants(load_dataset(augmented), tasks)
        out += [e for t in tasks for e in found.get(t.task_id, [])]
    return out


def sft_pairs(
    task_source: str,
    answers: Sequence[Exemplar],
    variants: Sequence[Exemplar],
    k: int,
    min_gain: float,
    contrastive: bool = True,
) -> list[tuple[str, list[dict[str, str]], str]]:
    """Stage 1's (kind, chat messages, response text) triples for one task; kind is "plain" or
    "contrastive".

    Each distinct code of `answers` (the task's correct seeds and augmented variants; the first
    of equal codes, by `cudal1.rl.buffer.code_hash`) is the response to the plain prompt (`sft_response` of its code, with its recorded analysis, else its docstring).
    With `contrastive` and k >= 1, where `variants` (every correct variant measured, the
    reference's 1.00× one included) hold one strictly faster than others
    (`cudal1.rl.exemplars.contrastive_target`: faster by more than `min_gain` ×), the fastest is
    also the response to the contrastive prompt showing up to k slower ones — never a prompt
    that shows the target itself. The plain pairs come first, the contrastive one (if any) last.
    """
    from cudal1.rl.buffer import code_hash

    distinct = {code_hash(e.code): e for e in reversed(answers)}  # the first of equal codes wins
    pairs = [
        ("plain", plain_prompt(task_source), sft_response(e.code, e.analysis))
        for e in answers
        if distinct[code_hash(e.code)] is e
    ]
    found = contrastive_target(list(variants), k, min_gain) if contrastive and k > 0 else None
    if found is not None:
        shown, target = found
        pairs.append(
            ("contrastive", contrastive_prompt(task_source, shown), sft_response(target.code, target.analysis))
        )
    return pairs


def refinement_pairs(
    task_source: str,
    variants: Sequence[Exemplar],
    reports: Mapping[str, Feedback],
    min_gain: float,
    token_budget: int,
    count_tokens: Callable[[list[dict[str, str]]], int],
    report: bool = True,
) -> list[tuple[str, list[dict[str, str]], str]]:
    """Stage 1's ("refinement", chat messages, response text) triples for one task: the prompt of
    a refinement episode's second turn, answered by the task's fastest correct variant.

    Where `variants` (every correct variant measured, as `sft_pairs` takes them) hold a target
    (`cudal1.rl.exemplars.contrastive_target` with room for all: the fastest, and each other
    program slower than it by more than `min_gain` ×), each slower program gives one pair: the
    plain prompt, that program as the model's first answer (`sft_response` of its code and
    analysis), the evaluator's report on it (`reports[code_hash(code)]`, the `Feedback` of its
    validation; without one, status ok at its recorded speedup) and the closing instruction
    (`cudal1.policy.prompts.refinement_turn`, within `token_budget` tokens as `count_tokens`
    counts them; `report` False leaves the report out, as `stage.contrastive_rl.feedback=none`
    does), answered by the target. So a policy that starts multi-turn RL has seen the prompt of
    turn 2 and what a faster answer to it looks like. Pairs whose prompt cannot fit are left out.
    Slowest first. Raises ValueError for min_gain < 1.
    """
    from cudal1.rl.buffer import code_hash

    found = contrastive_target(list(variants), max(len(variants), 1), min_gain)
    if found is None:
        return []
    shown, target = found
    answer = sft_response(target.code, target.analysis)
    pairs = []
    for e in shown:
        feedback = reports.get(code_hash(e.code)) or Feedback("ok", speedup=e.speedup)
        try:
            messages = refinement_turn(
                plain_prompt(task_source),
                sft_response(e.code, e.analysis),
                feedback,
                token_budget,
                count_tokens,
                report=report,
            )
        except ValueError:  # even the shortest form is over the budget
            continue
        pairs.append(("refinement", messages, answer))
    return pairs
