"""The reward policy: what one evaluated response is worth, and reward normalization with clipping.

`reward_from_result` turns the evaluator's verdict (an `EvalResult` or its dict) plus the
response parser's verdict into a scalar raw reward and a short reason label. Only a correct
candidate (status "ok") earns a speedup-based reward; every failure earns `failure_reward`, a
caught reward hack earns `hack_reward`. The evaluator's labels ("reduced_precision",
"calls_reference_ops", ...) never change the status; this module is where a label is priced,
through `RewardConfig.label_factors`.

`normalize_rewards` follows CUDA-L1 (Li et al., arXiv 2507.14111; its discussion of reward
hacking, reward normalization and clipping): raw speedup rewards are standardized and then
clipped to ±k (k = 1.5 there), because the largest measured gains are more often loopholes than
skill, and one huge speedup should not swamp everything else. Which population the mean and std
are taken over is a choice here: the whole batch, or each group when `groups` is given (GRPO's
group of responses to one prompt, as the project's issue asks).

Pure functions: no I/O, no torch.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from cudal1.bench.result import EvalResult

TRANSFORMS = ("speedup", "log_speedup")


@dataclasses.dataclass(frozen=True)
class RewardConfig:
    """How a verdict is priced. All rewards are unitless scalars.

    Attributes:
        transform: raw reward of a correct candidate. "speedup": the speedup itself (×, so 1.0
            means as fast as the reference). "log_speedup": ln(speedup) (0 at 1×, negative when
            slower). Note that with "log_speedup" a correct but slower candidate scores below a
            failure unless `failure_reward` is set below ln of the slowest speedup you expect.
        failure_reward: reward of a parse failure, compile/runtime error, timeout, resource limit,
            wrong output, or a result that is missing or malformed.
        hack_reward: reward of a candidate a guard caught cheating (status "hack"); set it below
            `failure_reward` to penalize hacks more than honest failures.
        label_factors: multiplier per evaluator label applied to a correct candidate's reward,
            e.g. {"reduced_precision": 0.0} to pay nothing for lowered precision. Several matching
            labels multiply. A mapping is accepted and stored as a sorted tuple of pairs so the
            config stays hashable.
    """

    transform: str = "speedup"
    failure_reward: float = 0.0
    hack_reward: float = 0.0
    label_factors: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if self.transform not in TRANSFORMS:
            raise ValueError(f"RewardConfig.transform: {self.transform!r} is not one of {TRANSFORMS}")
        for name in ("failure_reward", "hack_reward"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"RewardConfig.{name} must be finite")
        factors = self.label_factors
        if isinstance(factors, Mapping):
            factors = factors.items()
        factors = tuple(sorted((str(k), float(v)) for k, v in factors))
        if any(not math.isfinite(v) for _, v in factors):
            raise ValueError("RewardConfig.label_factors must be finite")
        object.__setattr__(self, "label_factors", factors)


def _as_dict(result: Mapping[str, Any] | EvalResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    if isinstance(result, EvalResult):
        return result.to_dict()
    return dict(result)


def reward_from_result(
    result: Mapping[str, Any] | EvalResult | None,
    parse_error: str | None = None,
    cfg: RewardConfig | None = None,
) -> tuple[float, str]:
    """The raw reward of one response and why.

    Args:
        result: the evaluation of the response's candidate (an `EvalResult` or its `to_dict()`),
            or None when it was never evaluated.
        parse_error: the parser's error label (see `cudal1.policy.parsing`), or None if the
            response parsed. A parse error wins over any result.
        cfg: pricing; the default `RewardConfig()` when None.

    Returns:
        (reward, reason). reason is "ok" for a paid correct candidate, else a short label:
        "parse_error:<label>", the evaluator status ("compile_error", "runtime_error", "timeout",
        "resource_exceeded", "incorrect", "invalid_task"), "hack:<kind>", "not_evaluated",
        "bad_speedup" (status ok but the speedup is missing, non-finite or <= 0),
        "degenerate_task" (status ok on a task whose output wrong code reproduces: not paid), or
        "unknown_status:<s>". "invalid_task" means the reference itself failed: the driver
        should drop that group rather than train on it.
    """
    cfg = cfg or RewardConfig()
    if parse_error is not None:
        return cfg.failure_reward, f"parse_error:{parse_error}"
    d = _as_dict(result)
    if d is None:
        return cfg.failure_reward, "not_evaluated"
    status = d.get("status")
    status = getattr(status, "value", status)  # a Status enum in a hand-built dict
    if status == "hack":
        kind = d.get("hack_kind")
        kind = getattr(kind, "value", kind) or "unknown"
        return cfg.hack_reward, f"hack:{kind}"
    if status in ("compile_error", "runtime_error", "timeout", "resource_exceeded", "incorrect", "invalid_task"):
        return cfg.failure_reward, status
    if status != "ok":
        return cfg.failure_reward, f"unknown_status:{status}"
    if "degenerate_task" in (d.get("labels") or ()):
        # Wrong code passes on a degenerate task: a "correct" result there says nothing.
        return cfg.failure_reward, "degenerate_task"
    speedup = d.get("speedup")
    if not isinstance(speedup, (int, float)) or not math.isfinite(speedup) or speedup <= 0:
        return cfg.failure_reward, "bad_speedup"
    reward = float(speedup) if cfg.transform == "speedup" else math.log(speedup)
    labels = set(d.get("labels") or ())
    for label, factor in cfg.label_factors:
        if label in labels:
            reward *= factor
    return reward, "ok"


def normalize_rewards(
    rewards: Sequence[float],
    clip: float | None = 1.5,
    *,
    groups: Sequence[int] | None = None,
    eps: float = 1e-6,
) -> list[float]:
    """Standardize rewards and clip them to [-clip, clip] (CUDA-L1's reward normalization).

    Args:
        rewards: N raw rewards.
        clip: bound k of the clipped range (1.5 in CUDA-L1); None to skip clipping.
        groups: optional N group ids (any hashable ints); when given each reward is standardized
            with its own group's mean and std, else with the whole batch's.
        eps: added to the std so a near-constant set does not blow up.

    Returns:
        N floats (r - mean) / (std + eps), clipped. std is the population std (ddof 0). A set
        whose rewards are all equal (std 0, including a single reward) maps to 0.0 each, never
        NaN.

    Raises:
        ValueError: non-finite rewards, clip <= 0, or `groups` of a different length.
    """
    if clip is not None and not clip > 0:
        raise ValueError(f"clip must be > 0, got {clip}")
    if groups is None:
        groups = [0] * len(rewards)
    out = _standardize(rewards, groups, scale=True, eps=eps)
    if clip is not None:
        out = [min(clip, max(-clip, v)) for v in out]
    return out


def _standardize(rewards: Sequence[float], groups: Sequence[int], *, scale: bool, eps: float) -> list[float]:
    """Per-group (r - mean_g) [/ (std_g + eps)]; shared with `cudal1.rl.advantages`."""
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
