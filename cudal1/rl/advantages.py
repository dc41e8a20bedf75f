"""Group-relative advantages: every response's reward compared with the other responses to its prompt.

GRPO (Shao et al. 2024, "DeepSeekMath", section 4.1.2, outcome supervision) samples G responses
per prompt and gives response i the advantage (r_i - mean(r)) / std(r) over its group, broadcast
to all its tokens; no value network. Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like
Training: A Critical Perspective", its "GRPO done right" section) drops the division by std,
which otherwise up-weights prompts whose rewards barely differ (too easy or too hard ones).
`scale` picks between them.

In the CUDA-L1 pipeline the rewards passed here are usually already normalized and clipped
(`cudal1.rl.rewards.normalize_rewards`); re-centering them within the group is then nearly a
no-op for "none" and a rescaling for "std".

Pure functions: no I/O, no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cudal1.rl.rewards import _standardize

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


def grpo_advantages(rewards: Sequence[float], groups: Sequence[int]) -> list[float]:
    """GRPO: `group_advantages(..., scale="std")`."""
    return group_advantages(rewards, groups, scale="std")


def dr_grpo_advantages(rewards: Sequence[float], groups: Sequence[int]) -> list[float]:
    """Dr. GRPO: `group_advantages(..., scale="none")`."""
    return group_advantages(rewards, groups, scale="none")


ADVANTAGE_ESTIMATORS: dict[str, Callable[[Sequence[float], Sequence[int]], list[float]]] = {
    "grpo": grpo_advantages,
    "dr_grpo": dr_grpo_advantages,
}
"""Estimators by config name, so `learner.advantage=dr_grpo` selects one."""


def advantage_estimator(name: str) -> Callable[[Sequence[float], Sequence[int]], list[float]]:
    """The estimator registered as `name`. Raises KeyError naming the known ones."""
    try:
        return ADVANTAGE_ESTIMATORS[name]
    except KeyError:
        known = sorted(ADVANTAGE_ESTIMATORS)
        raise KeyError(f"unknown advantage estimator {name!r}: expected one of {known}") from None
