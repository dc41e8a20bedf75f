"""Exemplar sampling for the contrastive prompt (CUDA-L1, arXiv 2507.14111, contrastive-RL section,
exemplar selection).

CUDA-L1 shows the policy a few earlier correct solutions with their measured speedups and asks it
to explain why the faster one is faster. Which solutions it sees matters: they should be good,
but differ enough in speed to be worth comparing. The paper's recipe, implemented here:

1. bucket the successful codes of a task by score: here ln(speedup) by default (`scale="log"`),
   the plain speedup in × with `scale="linear"`. Before bucketing, scores outside Tukey's fences
   [Q1 − f·IQR, Q3 + f·IQR] of the task's scores (`fence`, f = 1.5; quartiles of 4 or more
   codes) are capped at the fence. The log scale alone does not stop one outlier from squeezing
   every other code into one bucket: with codes at 1.0-1.5× and one at 120×, equal-width bins
   over [0, ln 120] put the five in the lowest bin and the outlier alone in the top one, so a
   draw of two buckets out of those two shows the outlier in every prompt (issue 23). Capped,
   the bins span the regular codes, and the outlier's bucket enters the softmax below at the
   fence's score, not its own: it is still the likeliest bucket, but no longer a certainty;
2. draw k distinct buckets (k = 2) without replacement, bucket b with probability
   p(b) ∝ exp((mean_b − mean_all) / τ), where mean_b is the mean score of the bucket's codes and
   mean_all the mean over all codes (a softmax over bucket means; the global mean only shifts
   the logits and keeps them in a numerically calm range). Small τ favours the best buckets,
   large τ approaches uniform. τ is in the score's unit (ln × on the log scale, where τ = 1
   makes a bucket's weight proportional to its geometric-mean speedup);
3. pick one code uniformly from each drawn bucket.

"Without replacement" means successive draws: after a bucket is drawn the others are
renormalized. Degenerate cases: with fewer non-empty buckets than k, one code comes from each
bucket and the rest are drawn uniformly from the remaining codes (so two codes of one bucket can
still be contrasted); with fewer codes than k, all codes are returned.

Pure functions; randomness only through the `random.Random` passed in.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from collections.abc import Sequence

from cudal1.bench.result import Status
from cudal1.records import Exemplar
from cudal1.rl.rewards import MIN_GAIN
from cudal1.rl.similarity import normalized_code

SCALES = ("log", "linear")


def score(speedup: float, scale: str = "log") -> float:
    """A speedup (×) on the bucketing scale: ln(speedup) for "log", the speedup for "linear".
    Raises ValueError for an unknown scale, or a speedup <= 0 on the log scale."""
    if scale == "linear":
        return float(speedup)
    if scale != "log":
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    if not speedup > 0:
        raise ValueError(f"a log-scale score needs a speedup > 0, got {speedup}")
    return math.log(speedup)


@dataclasses.dataclass
class Bucket:
    """Codes whose score falls in [lo, hi) (the last bucket also holds hi); lo and hi are on the
    bucketing scale (`score`).

    `scores` are the members' scores as bucketed (capped at the fences, `capped_scores`; None:
    their plain `score`); `mean` is their mean on that scale. Buckets are never empty.
    """

    lo: float
    hi: float
    members: list[Exemplar]
    scale: str = "log"
    scores: list[float] | None = None

    def member_scores(self) -> list[float]:
        """The members' scores as bucketed, in member order."""
        return list(self.scores) if self.scores is not None else [score(e.speedup, self.scale) for e in self.members]

    @property
    def mean(self) -> float:
        return math.fsum(self.member_scores()) / len(self.members)


def capped_scores(scores: Sequence[float], fence: float | None = 1.5) -> list[float]:
    """`scores` with each one outside Tukey's fences [Q1 − fence·IQR, Q3 + fence·IQR] set to the
    fence it crossed (quartiles by `statistics.quantiles`, inclusive method). Fewer than 4 scores,
    or fence None, leave them as they are. Order is kept, so is the order of any two scores
    (capping only merges those beyond a fence). Raises ValueError for fence < 0."""
    if fence is None or len(scores) < 4:
        return list(scores)
    if not fence >= 0:
        raise ValueError(f"fence must be >= 0, got {fence}")
    q1, _, q3 = statistics.quantiles(scores, n=4, method="inclusive")
    lo, hi = q1 - fence * (q3 - q1), q3 + fence * (q3 - q1)
    return [min(max(x, lo), hi) for x in scores]


def is_sampleable(e: Exemplar) -> bool:
    """True for a correct exemplar (status "ok") with a finite positive speedup."""
    return e.status == Status.OK and isinstance(e.speedup, (int, float)) and math.isfinite(e.speedup) and e.speedup > 0


def bucketize(
    exemplars: Sequence[Exemplar],
    n_buckets: int | None = 4,
    *,
    width: float | None = None,
    scale: str = "log",
    fence: float | None = 1.5,
) -> list[Bucket]:
    """Group exemplars into equal-width buckets of score (`score(speedup, scale)`, capped at Tukey's
    fences: `capped_scores`), dropping empty ones.

    Args:
        exemplars: the codes to bucket. Not filtered here.
        n_buckets: split [min score, max score] into this many equal bins. Ignored when
            `width` is given.
        width: fixed bin width on the scale (bins [j*width, (j+1)*width)), so bucket edges do not
            move as the buffer grows.
        scale: "log" (ln ×, the default) or "linear" (×).
        fence: Tukey's factor f of `capped_scores` (1.5); None buckets the plain scores.

    Returns:
        Non-empty buckets, lowest speedup first; members keep their input order. All-equal
        speedups give one bucket; no exemplars give [].

    Raises:
        ValueError: n_buckets < 1 (without width), width <= 0, fence < 0, a non-finite speedup,
            an unknown scale, or a speedup <= 0 on the log scale.
    """
    if width is not None:
        if not width > 0:
            raise ValueError(f"width must be > 0, got {width}")
    elif n_buckets is None or n_buckets < 1:
        raise ValueError(f"n_buckets must be >= 1, got {n_buckets}")
    if not exemplars:
        return []
    if any(not math.isfinite(float(e.speedup)) for e in exemplars):
        raise ValueError("speedups must be finite")
    scores = capped_scores([score(e.speedup, scale) for e in exemplars], fence)
    if width is not None:
        keys = [math.floor(s / width) for s in scores]
        edges = {k: (k * width, (k + 1) * width) for k in keys}
    else:
        lo, hi = min(scores), max(scores)
        step = (hi - lo) / n_buckets
        if step <= 0:
            keys = [0] * len(scores)
        else:  # the maximum lands in the last bin, not in an extra one
            keys = [min(int((s - lo) / step), n_buckets - 1) for s in scores]
        edges = {k: (lo + k * step, lo + (k + 1) * step if step > 0 else hi) for k in keys}
    groups: dict[int, list[Exemplar]] = {}
    bucket_scores: dict[int, list[float]] = {}
    for k, e, x in zip(keys, exemplars, scores):
        groups.setdefault(k, []).append(e)
        bucket_scores.setdefault(k, []).append(x)
    return [Bucket(edges[k][0], edges[k][1], groups[k], scale, bucket_scores[k]) for k in sorted(groups)]


def bucket_probabilities(buckets: Sequence[Bucket], tau: float, global_mean: float | None = None) -> list[float]:
    """p(b) ∝ exp((mean_b − global_mean) / τ) over `buckets` (softmax, computed stably).

    Means are on the buckets' scale, of the scores as bucketed (`Bucket.mean`: capped at the
    fences); `global_mean` defaults to the mean of those scores over all members of all buckets. Returns one probability per bucket, summing to 1 ([] for no
    buckets). Raises ValueError if tau <= 0.
    """
    if not tau > 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    if not buckets:
        return []
    if global_mean is None:
        everyone = [x for b in buckets for x in b.member_scores()]
        global_mean = math.fsum(everyone) / len(everyone)
    logits = [(b.mean - global_mean) / tau for b in buckets]
    top = max(logits)  # subtracting the max changes nothing but keeps exp() from overflowing
    weights = [math.exp(x - top) for x in logits]
    total = math.fsum(weights)
    return [w / total for w in weights]


def sample_buckets(probabilities: Sequence[float], k: int, rng: random.Random) -> list[int]:
    """Draw min(k, len) distinct bucket indices, successively, each ∝ its probability among the
    ones not yet drawn. Returns indices in draw order."""
    left = list(range(len(probabilities)))
    drawn: list[int] = []
    while left and len(drawn) < k:
        weights = [probabilities[i] for i in left]
        total = math.fsum(weights)
        if total <= 0:  # all remaining underflowed to 0: fall back to uniform
            pick = rng.randrange(len(left))
        else:
            x = rng.random() * total
            pick, acc = len(left) - 1, 0.0
            for j, w in enumerate(weights):
                acc += w
                if x < acc:
                    pick = j
                    break
        drawn.append(left.pop(pick))
    return drawn


def sample_exemplars(
    exemplars: Sequence[Exemplar],
    k: int = 2,
    tau: float = 1.0,
    rng: random.Random | None = None,
    *,
    n_buckets: int | None = 4,
    width: float | None = None,
    scale: str = "log",
    fence: float | None = 1.5,
) -> list[Exemplar]:
    """CUDA-L1 exemplar sampling for one task.

    Args:
        exemplars: the task's stored solutions; only correct ones with a finite positive speedup
            (`is_sampleable`) are considered.
        k: how many exemplars to return (2 in CUDA-L1).
        tau: softmax temperature over bucket means, on the bucketing scale (ln × for "log").
        rng: source of randomness (a fresh unseeded `random.Random` when None).
        n_buckets, width, scale, fence: bucketing, see `bucketize`.

    Returns:
        min(k, number of eligible codes) distinct exemplars, sorted by speedup ascending (slowest
        first, so a prompt reads from worse to better).

    Raises:
        ValueError: k < 0, tau <= 0, or bad bucketing arguments (an unknown scale among them).
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if not tau > 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    rng = rng or random.Random()
    pool = [e for e in exemplars if is_sampleable(e)]
    if k == 0 or not pool:
        return []
    if len(pool) <= k:
        return sorted(pool, key=lambda e: e.speedup)
    buckets = bucketize(pool, n_buckets, width=width, scale=scale, fence=fence)
    probs = bucket_probabilities(buckets, tau)
    chosen_ids: set[int] = set()
    chosen: list[Exemplar] = []
    for b in sample_buckets(probs, k, rng):
        members = buckets[b].members
        e = members[rng.randrange(len(members))]
        chosen.append(e)
        chosen_ids.add(id(e))
    # Fewer buckets than k: fill uniformly from the codes not yet chosen.
    rest = [e for e in pool if id(e) not in chosen_ids]
    while len(chosen) < k and rest:
        chosen.append(rest.pop(rng.randrange(len(rest))))
    return sorted(chosen, key=lambda e: e.speedup)


def contrastive_target(
    exemplars: Sequence[Exemplar], k: int = 2, min_gain: float = MIN_GAIN
) -> tuple[list[Exemplar], Exemplar] | None:
    """A stage-1 contrastive example for one task: (shown, target), or None.

    The target is the task's fastest correct solution; shown are up to `k` correct solutions
    strictly slower than it (each at least `min_gain` × slower) and other programs than it and
    than each other (`normalized_code`: a variant that differs from the target only by comments,
    formatting, no-op statements or names is the same program measured again, so the "gain" is
    noise), the fastest of those (the fastest measurement of each program), slowest first. With
    no such slower solution there is no contrastive example: training a prompt that shows the
    target itself would teach the model to copy the exemplar (issue 9, item 1). Speedups are
    compared as recorded (stage 1 records the raw measured ones: docs/training.md).
    Raises ValueError for k < 1 or min_gain < 1.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if min_gain < 1:
        raise ValueError(f"min_gain must be >= 1, got {min_gain}")
    usable = sorted((e for e in exemplars if is_sampleable(e)), key=lambda e: e.speedup)
    if not usable:
        return None
    target = usable[-1]
    programs = {normalized_code(target.code)}
    slower: list[Exemplar] = []
    for e in reversed(usable):  # fastest first, so the fastest measurement of a program is the one kept
        program = normalized_code(e.code)
        if e.speedup * min_gain < target.speedup and program not in programs:
            programs.add(program)
            slower.append(e)
    if not slower:
        return None
    return slower[:k][::-1], target
