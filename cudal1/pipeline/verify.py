"""Second opinions: a correct result measured again on another actor of its pool before it counts.

One speedup far above the rest is more often a loophole or noise than skill. Training re-measures
the results that `cudal1.rl.rewards.needs_second_opinion` picks (`verify_outliers`, before they
are priced); the optimize loop re-measures its fastest candidates until one holds up
(`cudal1.pipeline.optimize.Optimizer`). Both go through `second_opinions`: the same
re-measurement, the same comparison (`cudal1.rl.rewards.second_opinion`), the same log line for
two measurements that disagree. What a disagreement costs differs: training pays the slower of
the two (`cudal1.rl.rewards.price`, "ok:disputed"); the optimize job delivers only a candidate
whose two measurements agree.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Protocol

from cudal1.bench.result import EvalResult, SecondOpinion
from cudal1.records import Candidate
from cudal1.rl.rewards import RewardConfig, needs_second_opinion, second_opinion

log = logging.getLogger(__name__)


class Pool(Protocol):
    """What a second opinion needs of a benchmark pool (`cudal1.actors.bench_pool.BenchmarkPool`)."""

    def evaluate_many(
        self, candidates: Sequence[Candidate], progress: bool = True, avoid: Sequence[int | None] | None = None
    ) -> list[EvalResult]: ...


def second_opinions(
    pool: Pool, candidates: Sequence[Candidate], firsts: Sequence[EvalResult], cfg: RewardConfig
) -> list[tuple[SecondOpinion, EvalResult]]:
    """Evaluate each candidate again on `pool`, avoiding the actor that measured its first result
    (`EvalResult.actor`; the same actor only when the pool has no other), and compare the two
    (`second_opinion`, within `cfg.verify_tolerance`). Each first result must be correct (status
    ok, speedup set). A disagreement is logged with both figures and the candidate's origin.
    Returns (the comparison, the re-measurement) per candidate, in order; the results in `firsts`
    are not changed."""
    if not candidates:
        return []
    seconds = pool.evaluate_many(list(candidates), progress=False, avoid=[r.actor for r in firsts])
    opinions = []
    for c, first, second in zip(candidates, firsts, seconds):
        opinion = second_opinion(first, second, cfg)
        if not opinion.agrees:
            log.warning(
                "%s: not confirmed on another actor (noise, or a hack): %.3fx on actor %s, %s on actor %s (%s); "
                "training pays the slower, the optimize job delivers neither",
                c.task_id,
                first.speedup,
                first.actor,
                f"{opinion.speedup:.3f}x" if opinion.speedup is not None else opinion.status.value,
                opinion.actor,
                c.origin,
            )
        opinions.append((opinion, second))
    return opinions


def verify_outliers(
    pool: Pool,
    candidates: Sequence[Candidate],
    results: Sequence[EvalResult],
    best_known: Mapping[str, float],
    cfg: RewardConfig,
) -> int:
    """Measure the outliers among `results` (one per candidate) again on another actor of `pool`:
    those that `needs_second_opinion` picks (a correct result above `cfg.verify_above` ×, or above
    `cfg.verify_over_best` × its task's best known speedup in `best_known`, task id → ×). Each
    picked result gets its `second_opinion` set in place (`price` pays no gain for one that does
    not agree). Returns how many results were measured again."""
    picks = [
        i
        for i, (c, r) in enumerate(zip(candidates, results))
        if needs_second_opinion(r, best_known.get(c.task_id), cfg)
    ]
    opinions = second_opinions(pool, [candidates[i] for i in picks], [results[i] for i in picks], cfg)
    for i, (opinion, _) in zip(picks, opinions):
        results[i].second_opinion = opinion
    return len(picks)
