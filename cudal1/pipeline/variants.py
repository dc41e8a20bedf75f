"""Hand-written stage-1 variants (`data.variants`): named sets of correct `ModelNew` programs per
task that join (or, with `stage.sft.seeds=false`, replace) the builtin seeds in stage 1, and the
per-step shares of responses that reproduce a task's fastest or a slower stage-1 solution.

The set "slow_fast" is what the embedded default trains on (conf/config.yaml,
docs/training.md "What the embedded default's RL stage shows"): two builtin tasks with small
outputs, level1/17 (MSE loss) and level1/3 (diagonal of a matmul), each with a slow variant (a
Python loop over small chunks of the inputs: 0.06-0.13x of the reference on a shared 2-core CPU)
and a fast one (one or two vectorized calls: 0.39-1.69x), told apart by far more than the
reward's tie floor (docs/benchmarks.md, 2026-12-03: the measured ranges and spreads). Small
outputs keep the judge's fixed cost per call small, so the fast variant stays above the timer's
resolution on a loaded machine (elementwise tasks with large outputs did not: docs/training.md,
"A learning test on the real reward"). The programs are those of that test
(benchmarks/real_reward_learning.py). The two variants' analyses differ from their first token
on, so after SFT that token carries the choice, and they are short: every target token keeps a
small chance of going astray after SFT.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cudal1.records import Exemplar, Rollout

_HEADER = "import torch\nimport torch.nn.functional as F\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, {args}):\n        {body}\n"


@dataclasses.dataclass(frozen=True)
class Variant:
    """One hand-written solution: `task_id` ("level1/17"), `kind` (its name within the set,
    "slow" / "fast"; the exemplar's origin is "variant:<kind>"), `analysis` (the SFT target's
    analysis section, at least the reward's `min_section_chars`), `code` (a complete `ModelNew`
    module)."""

    task_id: str
    kind: str
    analysis: str
    code: str


def _module(args: str, body: str) -> str:
    return _HEADER.format(args=args, body=body)


SLOW_FAST: tuple[Variant, ...] = (
    Variant(
        "level1/17",
        "slow",
        "A Python loop over chunks.",
        _module(
            "p, t",
            "return torch.stack([((a - b) ** 2).sum() for a, b in zip(p.view(-1, 1024), t.view(-1, 1024))]).sum()"
            " / p.numel()",
        ),
    ),
    Variant("level1/17", "fast", "One vectorized torch call.", _module("p, t", "return F.mse_loss(p, t)")),
    Variant(
        "level1/3",
        "slow",
        "A Python loop over chunks.",
        _module(
            "A, B",
            "return torch.stack([a @ b for a, b in zip(A.view(-1, 16), B.view(-1, 16))]).view(len(A), -1).sum(1)",
        ),
    ),
    Variant("level1/3", "fast", "One vectorized torch call.", _module("A, B", "return (A @ B.T).diagonal()")),
)

VARIANT_SETS: dict[str, tuple[Variant, ...]] = {"slow_fast": SLOW_FAST}
"""`data.variants` names one of these."""


def variant_exemplars(name: str, task_ids: Iterable[str]) -> list[Exemplar]:
    """The variants of set `name` that belong to `task_ids`, as stage-1 solutions before
    validation (speedup NaN: not measured yet; origin "variant:<kind>"). Raises KeyError for an
    unknown set name (the config validates it first)."""
    wanted = set(task_ids)
    return [
        Exemplar(v.task_id, v.code, math.nan, analysis=v.analysis, origin=f"variant:{v.kind}")
        for v in VARIANT_SETS[name]
        if v.task_id in wanted
    ]


def is_stage1(origin: str) -> bool:
    """Whether an exemplar origin is a stage-1 answer the policy was fine-tuned on: a seed, a
    dataset record or a hand-written variant; not a rollout ("step<k>/...") and not the task's
    reference as a candidate ("reference", never a target)."""
    from cudal1.pipeline.report import written_by_policy

    return origin != "reference" and not written_by_policy(origin)


def stage1_ranks(exemplars: Mapping[str, Sequence[Exemplar]]) -> dict[str, dict[str, str]]:
    """{task_id: {normalized code: "fast" | "slow"}} from the buffer's exemplars per task: the
    task's fastest stage-1 solution (`is_stage1`, by its measured speedup ×; the earliest on
    ties) is "fast", every other stage-1 solution "slow". A task without one is left out."""
    from cudal1.rl.similarity import normalized_code

    out: dict[str, dict[str, str]] = {}
    for task_id, found in exemplars.items():
        mine = [e for e in found if is_stage1(e.origin)]
        if not mine:
            continue
        fastest = max(mine, key=lambda e: e.speedup)
        ranks = {normalized_code(e.code): "slow" for e in mine}
        ranks[normalized_code(fastest.code)] = "fast"
        out[task_id] = ranks
    return out


def stage1_shares(rollouts: Sequence[Rollout], ranks: Mapping[str, Mapping[str, str]]) -> dict[str, float]:
    """{"fast_share", "slow_share"}: the share of ALL `rollouts` whose parsed code is, after
    `normalized_code`, their task's fastest stage-1 solution / a slower one (`stage1_ranks`).
    A response that did not parse counts in neither, so garbled responses count against both.
    Empty for no rollouts."""
    from cudal1.rl.similarity import normalized_code

    if not rollouts:
        return {}
    counts = {"fast": 0, "slow": 0}
    for r in rollouts:
        code = r.sections.get("code") if r.parse_error is None else None
        if code is None or r.task_id not in ranks:
            continue
        kind = ranks[r.task_id].get(normalized_code(code))
        if kind is not None:
            counts[kind] += 1
    return {f"{k}_share": v / len(rollouts) for k, v in counts.items()}


SHARES_MEANING = (
    "fast/slow share: responses that repeat the faster / a slower program SFT taught for their task, "
    "faster than each other, not necessarily than PyTorch"
)
"""What the RL outcome line's fast and slow shares count (`stage1_shares`), in its own words."""


def rl_outcome(history: Sequence[Mapping[str, Any]], window: int = 2) -> str | None:
    """The RL stage's outcome in one line, from `RunState.history` rows of stage
    "contrastive_rl": the fast and slow shares (`stage1_shares`), the mean paid speedup (× over the
    passing rollouts) and the pass rate, each averaged over the first `window` and the last
    `window` steps (1 each for fewer than 2 * `window` steps; one step's group is too small to
    read alone). None when no RL step was sampled.

    e.g. "RL outcome: fast share 0.44 -> 0.91, slow share 0.50 -> 0.03, mean paid speedup 0.41x ->
    0.88x, pass rate 0.94 -> 0.94 (first 2 vs last 2 of 8 steps; fast/slow share: ...)", ending
    with `SHARES_MEANING`."""
    rows = [h for h in history if h.get("stage") == "contrastive_rl"]
    if not rows:
        return None
    k = window if len(rows) >= 2 * window else 1
    head, tail = rows[:k], rows[-k:]

    def mean(part: Sequence[Mapping[str, Any]], key: str) -> float | None:
        values = [float(h[key]) for h in part if h.get(key) is not None and math.isfinite(float(h[key]))]
        return sum(values) / len(values) if values else None

    def pair(key: str, unit: str = "") -> str:
        a, b = mean(head, key), mean(tail, key)
        return f"{'-' if a is None else f'{a:.2f}{unit}'} -> {'-' if b is None else f'{b:.2f}{unit}'}"

    return (
        f"RL outcome: fast share {pair('fast_share')}, slow share {pair('slow_share')}, "
        f"mean paid speedup {pair('speedup/mean', 'x')}, pass rate {pair('pass_rate')} "
        f"(first {k} vs last {k} of {len(rows)} steps; {SHARES_MEANING})"
    )
