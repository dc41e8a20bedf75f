"""Group-relative advantages: every response's reward compared with the other responses to its prompt.

GRPO (Shao et al. 2024, "DeepSeekMath", section 4.1.2, outcome supervision) samples G responses
per prompt and gives response i the advantage (r_i - mean(r)) / std(r) over its group, broadcast
to all its tokens; no value network. Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like
Training: A Critical Perspective", its "GRPO done right" section) drops the division by std,
which otherwise up-weights prompts whose rewards barely differ (too easy or too hard ones).
`scale` picks between them.

`rollout_advantages` is what training uses: the rewards of `cudal1.rl.rewards.price` (already
bounded, so no batch-wide normalization or clipping is needed), with correct results that the
measurement cannot tell apart merged into ties (`tie_clusters`: within the pool's
between-evaluation noise, `RewardConfig.tie_floor` or its calibration per pool and task size
from repeated measurements, `cudal1.rl.noise`, or the faster one's spread; below-resolution
results together, per label factor) before the group statistics, and responses that must stay out of the
update (truncated ones, harness failures) left out of their group's statistics with advantage 0.

Its default scale is Dr. GRPO's "none": advantages stay in reward units, so two results just
outside the tie window differ by about the window (0.04 for two correct results 4% apart), not
by one group std. Measured in tests/rl/test_advantages.py
(`test_the_std_scaling_turns_noise_into_unit_advantages_and_none_does_not`): four distinct codes
at [1.97, 2.00, 2.05, 2.08]× (within 5.5% of each other, noise for separate evaluations) get
advantages of at most 0.03 in size with "none" and up to 1.73 with "std", as large as those of
[2.0×, failure]. A std floor at the noise level would not help: the std of such a group *is* the
noise level, so dividing by it still makes unit-size advantages.

Pure functions: no I/O, no torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from cudal1.rl.rewards import Priced, RewardConfig

SCALES = ("std", "none")


def group_advantages(
    rewards: Sequence[float],
    groups: Sequence[int],
    *,
    scale: str = "std",
    eps: float = 1e-6,
) -> list[float]:
    """Group-normalized advantage of each response.

    Args:
        rewards: N scalar rewards (float), one per response.
        groups: N group ids (ints; any values, need not be contiguous or sorted): responses to
            the same prompt share an id.
        scale: "std" (GRPO): (r - mean_g) / (std_g + eps); "none" (Dr. GRPO): r - mean_g.
            std_g is the population std (ddof 0).
        eps: guards the division for "std".

    Returns:
        N floats in input order. A group whose rewards are all equal (including a group of one)
        gets 0.0 for each member: it carries no learning signal.

    Raises:
        ValueError: unknown scale, length mismatch, or a non-finite reward.
    """
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    return _standardize(rewards, groups, scale=scale == "std", eps=eps)


def _standardize(rewards: Sequence[float], groups: Sequence[Any], *, scale: bool, eps: float) -> list[float]:
    """Per-group (r - mean_g) [/ (std_g + eps)]."""
    if len(rewards) != len(groups):
        raise ValueError(f"{len(rewards)} rewards but {len(groups)} group ids")
    values = [float(r) for r in rewards]
    if any(not math.isfinite(v) for v in values):
        raise ValueError("rewards must be finite")
    members: dict[Any, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    out = [0.0] * len(values)
    for idx in members.values():
        group = [values[i] for i in idx]
        mean = math.fsum(group) / len(group)
        centered = [v - mean for v in group]
        std = math.sqrt(math.fsum(c * c for c in centered) / len(group))
        if std <= 1e-12 * max(1.0, abs(mean)):
            continue  # all equal (up to rounding): no signal, advantage 0
        denom = std + eps if scale else 1.0
        for i, c in zip(idx, centered):
            out[i] = c / denom
    return out


def tie_clusters(
    speedups: Sequence[float],
    spreads: Sequence[float],
    floor: float | Sequence[float] = 0.04,
    factor: float = 1.0,
    bounds: Sequence[bool | float | None] | None = None,
) -> list[int]:
    """Cluster id of each speedup: results the measurement cannot tell apart share one.

    A slower result j and a faster one i (s_j <= s_i) tie when
    |ln s_i - ln s_j| <= max(floor_i, floor_j, factor × spread_i)
    (`floor`: the between-evaluation noise in ln-speedup units, one value for all or one per
    result: `cudal1.rl.rewards.RewardConfig.tie_floor`, or its calibration per pool and task size,
    `cudal1.rl.noise.TieNoise`; `spreads`: the evaluator's (max - min) / median of per-round
    speedups). Only the faster one's spread widens the window: a candidate controls its own
    spread, so noise may cost a result its lead over slower ones but never ties it up to a
    faster one (with the larger of the two spreads, a 1.0× whose rounds ran 0.8-1.25× tied a
    clean 1.5× and took half its advantage). Speedups (× > 0) are taken in
    increasing order and each joins the current cluster only when it ties with every member
    already in it, else starts the next one: a chain of small steps (1.00, 1.02, 1.04, ...) is
    not one tie, and one noisy result that ties with a clean 1.2× and a clean 2.0× does not tie
    those two together. Results whose `bounds` entry is neither None nor False (below the timer's
    resolution: each speedup is only a lower bound) tie whatever their speedups, one cluster per
    distinct entry (True for all alike, or a key such as the label factor their price carries, so that
    a discounted result below resolution is not averaged with an undiscounted one). Returns ids
    0, 1, ... (the bounds' clusters last, in order of first appearance), in input order. Raises
    ValueError for lengths that differ, a speedup <= 0, or a floor that is not finite and >= 0.
    """
    bounds = [None] * len(speedups) if bounds is None else [None if b is False else b for b in bounds]
    floors = [float(floor)] * len(speedups) if isinstance(floor, (int, float)) else [float(f) for f in floor]
    if not len(speedups) == len(spreads) == len(bounds) == len(floors):
        raise ValueError(
            f"{len(speedups)} speedups, {len(spreads)} spreads, {len(bounds)} bound flags, {len(floors)} floors"
        )
    if any(not s > 0 for s in speedups):
        raise ValueError("speedups must be > 0")
    if any(not (math.isfinite(f) and f >= 0) for f in floors):
        raise ValueError("floors must be finite and >= 0")

    def tie(i: int, j: int) -> bool:
        faster = i if speedups[i] >= speedups[j] else j
        window = max(floors[i], floors[j], factor * spreads[faster])
        return abs(math.log(speedups[i] / speedups[j])) <= window

    order = sorted((i for i in range(len(speedups)) if bounds[i] is None), key=lambda i: speedups[i])
    ids = [0] * len(speedups)
    cluster, members = -1, []
    for i in order:
        if not members or not all(tie(i, j) for j in members):
            cluster, members = cluster + 1, []
        members.append(i)
        ids[i] = cluster
    keys: dict[bool | float, int] = {}
    for i, b in enumerate(bounds):
        if b is not None:
            ids[i] = keys.setdefault(b, cluster + 1 + len(keys))
    return ids


def tied_rewards(
    priced: Sequence[Priced],
    groups: Sequence[Any],
    cfg: RewardConfig | None = None,
    floors: Sequence[float] | None = None,
) -> list[float | None]:
    """The reward of each response as the group statistics see it: None for an untrainable one
    (left out of its group), and within a group, correct results in one `tie_clusters` cluster
    (below-resolution results in one of their own per label factor, `Priced.factor`) all at the
    cluster's mean reward, so noise between them is no signal. `floors`: N tie floors (ln-speedup units), one per response (the
    calibrated floor of its pool and task size, `cudal1.rl.noise.TieNoise.floor_for`); None:
    `cfg.tie_floor` for every one. Returns N values in input order. Raises ValueError for lengths
    that differ or a floor that is not finite and >= 0."""
    cfg = cfg or RewardConfig()
    if len(priced) != len(groups):
        raise ValueError(f"{len(priced)} rewards but {len(groups)} group ids")
    if floors is not None and len(floors) != len(priced):
        raise ValueError(f"{len(priced)} rewards but {len(floors)} tie floors")
    use = [i for i, p in enumerate(priced) if p.trainable]
    rewards: list[float | None] = [None] * len(priced)
    for i in use:
        rewards[i] = priced[i].reward
    members: dict[Any, list[int]] = {}
    for i in use:
        if priced[i].correct:
            members.setdefault(groups[i], []).append(i)
    for idx in members.values():
        ids = tie_clusters(
            [priced[i].speedup for i in idx],
            [priced[i].spread for i in idx],
            cfg.tie_floor if floors is None else [floors[i] for i in idx],
            cfg.tie_factor,
            [priced[i].factor if priced[i].bound else None for i in idx],
        )
        for cluster in set(ids):
            tied = [i for i, c in zip(idx, ids) if c == cluster]
            mean = math.fsum(priced[i].reward for i in tied) / len(tied)
            for i in tied:
                rewards[i] = mean
    return rewards


def rollout_advantages(
    priced: Sequence[Priced],
    groups: Sequence[Any],
    cfg: RewardConfig | None = None,
    scale: str = "none",
    floors: Sequence[float] | None = None,
) -> list[float]:
    """The advantage of each response, from its `Priced` reward and its group id (responses to one
    prompt share one).

    Untrainable responses get 0 and are left out of their group's mean and std; ties are merged
    (`tied_rewards`, with `floors`: one tie floor per response, ln units; None: `cfg.tie_floor`).
    Then `group_advantages` with `scale`: "none" (Dr. GRPO, the default) or "std" (GRPO).
    Returns N floats in input order. Raises ValueError for lengths that differ.
    """
    rewards = tied_rewards(priced, groups, cfg, floors)
    use = [i for i, r in enumerate(rewards) if r is not None]
    out = [0.0] * len(priced)
    for i, a in zip(use, group_advantages([rewards[i] for i in use], [groups[i] for i in use], scale=scale)):
        out[i] = a
    return out
