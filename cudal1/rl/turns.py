"""Credit per turn for multi-turn refinement episodes: returns, baselines and the copy rule.

An episode answers one prompt in up to T turns: turn 1 is the contrastive prompt, turn t+1 adds
the model's turn-t answer and what the evaluator said about it (`cudal1.policy.prompts.
refinement_turn`). Each turn is priced on its own (`cudal1.rl.rewards.price`); an episode may
stop early (`stops`), so the episodes of one group have different lengths. Shapes below: an
episode is a sequence of per-turn values, index 0 = turn 1; a group is a sequence of episodes
answering the same prompt. Rewards and returns are the reward's unitless scalars.

**Returns** (`turn_returns`), with r_t the reward of turn t and gamma in [0, 1]:

- "best_later" (the default): G_t = r_t + max(0, max_{k>t} gamma^(k-t) (r_k - r_t)). Turn t
  keeps its own reward and gains a discounted share of the largest improvement a later turn made
  over it; a later turn that did worse takes nothing away. gamma 1: the best reward from turn t
  on; gamma 0: r_t alone. Kevin's paper (Baronio et al. 2025, "Kevin: Multi-Turn RL for
  Generating CUDA Kernels", arXiv 2507.11948, reward attribution) compares its discounted sum with
  a max over gamma^(k-t) r_k; that max discounts the later *reward*, which with our signed rewards
  (a failure earns -ln 10 under "log_speedup") lifts a later failure toward 0, above a failure now.
  Discounting the later *improvement* instead is our form: adding a constant c to every reward
  adds c to every return, so where the failure reward sits does not matter.
- "discounted" (Kevin's form): G_t = r_t + sum_{k>t} gamma^(k-t) r_k. Kevin measured it (gamma
  0.4) as its best formulation, on fixed-length episodes with non-negative scores.

Why "best_later" is the default: (1) episodes here stop early, and a sum has one term per turn
left, so with the sum an episode that stopped at a good turn 1 is compared at turn 1 with
episodes that went on collecting (positive) rewards or (negative) failures: its length, not its
answers, would decide; the max form is on the scale of one reward whatever the length, and
shift-invariant as said above. (2) What refinement is for is the best program of the episode
(inference keeps the best attempt; Dr. Kernel reports "best over turns"), which is what the max
credits; the sum also pays a turn again for every later turn that merely stays good.

A turn left out of the update (untrainable, e.g. truncated or a harness failure; None in
`rewards`) has no return and adds no term to the returns of earlier turns: its reward says
nothing about the response, or the response was cut off.

**Advantages** (`turn_advantages`), per turn t over the group's episodes that have a return at
turn t (n_t of them; episodes that ended before t, or whose turn t is left out, do not count):

- "loo" (Dr. Kernel's turn-level REINFORCE leave-one-out, TRLOO: Liu et al. 2026, "Dr. Kernel:
  Reinforcement Learning Done Right for Triton Kernel Generations", arXiv 2602.05885):
  A_i,t = G_i,t - mean_{j != i} G_j,t. GRPO's baseline includes the episode itself, which shrinks
  its advantage by (n_t - 1) / n_t; with early stops n_t differs per turn, so later turns (fewer
  episodes) would be shrunk more. A turn with no other episode gets 0.
- "group" (GRPO, as `cudal1.rl.advantages.group_advantages`): A_i,t = G_i,t - mean_j G_j,t.
  With one turn this is exactly today's single-turn advantage (`rollout_advantages`).

`scale` as `cudal1.rl.advantages.SCALES`: "none" (Dr. GRPO, reward units) or "std" (divided by
the population std of the n_t returns at turn t, + eps). Turns whose returns are all equal (up to
rounding) get 0, as in `group_advantages`.

**The copy rule per turn** (issue 16's rules hold per turn): a turn whose normalized code
(`cudal1.rl.similarity.normalized_code`) equals code its prompt showed or an earlier turn of the
same episode is a copy and earns what `price` gives a copy of a shown exemplar: the failure
reward, reason "copy", still trainable. Price each turn with `turn_shown`'s list as `price`'s
`shown`, or mark already-priced turns with `copied_turns` and `price_copies`.

Pure functions: no I/O, no torch.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Iterable, Sequence

from cudal1.rl.advantages import SCALES, group_advantages, tied_rewards
from cudal1.rl.rewards import Priced, RewardConfig

RETURN_FORMS = ("best_later", "discounted")
BASELINES = ("loo", "group")
BASELINE_CHOICES = ("auto", *BASELINES)


def pick_baseline(choice: str, turns: int) -> str:
    """The turn-level baseline a run uses: `choice` ("loo" or "group"), or for "auto" the
    leave-one-out one when episodes have more than one turn (free of GRPO's self-inclusion
    shrinkage, which differs per turn once episodes stop early) and GRPO's group mean for single
    turns (today's advantage exactly). Raises ValueError for any other choice."""
    if choice == "auto":
        return "loo" if turns > 1 else "group"
    if choice not in BASELINES:
        raise ValueError(f"turn baseline must be one of {BASELINE_CHOICES}, got {choice!r}")
    return choice


def _check_gamma(gamma: float) -> float:
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0 <= gamma <= 1:
        raise ValueError(f"gamma must be a number in [0, 1], got {gamma!r}")
    return float(gamma)


def turn_returns(rewards: Sequence[float | None], gamma: float, form: str = "best_later") -> list[float | None]:
    """The return of each turn of one episode (see the module docstring for both forms).

    Args:
        rewards: the episode's per-turn rewards (unitless floats), turn 1 first; None for a turn
            left out of the update. May be empty.
        gamma: the discount per turn, in [0, 1] (0^0 = 1: a turn's own reward is never
            discounted).
        form: "best_later" or "discounted".

    Returns:
        One value per turn, in order: the return, or None where `rewards` holds None.

    Raises:
        ValueError: unknown form, gamma outside [0, 1], or a non-finite reward.
    """
    if form not in RETURN_FORMS:
        raise ValueError(f"form must be one of {RETURN_FORMS}, got {form!r}")
    gamma = _check_gamma(gamma)
    if any(r is not None and not math.isfinite(r) for r in rewards):
        raise ValueError("rewards must be finite (or None for a turn left out)")
    out: list[float | None] = []
    for t, r in enumerate(rewards):
        if r is None:
            out.append(None)
            continue
        later = [(k - t, float(rk)) for k, rk in enumerate(rewards) if k > t and rk is not None]
        if form == "discounted":
            out.append(math.fsum([float(r), *(gamma**d * rk for d, rk in later)]))
        else:
            gain = max((gamma**d * (rk - r) for d, rk in later), default=0.0)
            out.append(float(r) + max(0.0, gain))
    return out


def turn_advantages(
    returns: Sequence[Sequence[float | None]],
    baseline: str = "loo",
    scale: str = "none",
    eps: float = 1e-6,
) -> list[list[float]]:
    """The advantage of each turn of each episode of one group (see the module docstring).

    Args:
        returns: per episode, its per-turn returns (`turn_returns`), None for a turn left out.
            Episodes may have different lengths, or none at all.
        baseline: "loo" (Dr. Kernel's TRLOO) or "group" (GRPO's mean over all episodes).
        scale: "none" or "std" (`cudal1.rl.advantages.SCALES`).
        eps: guards the division for "std".

    Returns:
        Per episode, one float per turn, same shape as `returns`: 0.0 for a turn left out, for a
        turn no other episode reached, and for a turn whose returns are all equal.

    Raises:
        ValueError: unknown baseline or scale, or a non-finite return.
    """
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, got {baseline!r}")
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    if any(g is not None and not math.isfinite(g) for ep in returns for g in ep):
        raise ValueError("returns must be finite (or None for a turn left out)")
    out = [[0.0] * len(ep) for ep in returns]
    for t in range(max((len(ep) for ep in returns), default=0)):
        at = [(i, float(ep[t])) for i, ep in enumerate(returns) if t < len(ep) and ep[t] is not None]
        if baseline == "group":
            # The single-turn computation itself, so one turn is today's advantage exactly.
            values = group_advantages([g for _, g in at], [0] * len(at), scale=scale, eps=eps)
        else:
            values = _leave_one_out([g for _, g in at], scale == "std", eps)
        for (i, _), a in zip(at, values):
            out[i][t] = a
    return out


def _leave_one_out(values: list[float], scale: bool, eps: float) -> list[float]:
    """v_i - mean_{j != i} v_j [/ (population std + eps)]; all 0 for fewer than two values or
    values that are all equal (up to rounding, as `group_advantages` decides it)."""
    n = len(values)
    if n < 2:
        return [0.0] * n
    total = math.fsum(values)
    mean = total / n
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / n)
    if std <= 1e-12 * max(1.0, abs(mean)):
        return [0.0] * n
    denom = std + eps if scale else 1.0
    return [(v - (total - v) / (n - 1)) / denom for v in values]


def episode_rewards(
    episodes: Sequence[Sequence[Priced]],
    cfg: RewardConfig | None = None,
    floors: Sequence[Sequence[float]] | None = None,
) -> list[list[float | None]]:
    """The per-turn rewards of one group's episodes as the statistics see them: None for a turn
    left out of the update (`Priced.trainable` false), and correct results that the measurement
    cannot tell apart, across all turns and episodes of the group, at their cluster's mean
    reward (`cudal1.rl.advantages.tied_rewards`, as single-turn training merges them; `floors`:
    each turn's tie floor, ln units, the same shape as `episodes`; None: `cfg.tie_floor`). Same
    shape as `episodes`. Raises ValueError as `tied_rewards` does."""
    flat = [p for ep in episodes for p in ep]
    flat_floors = None if floors is None else [float(f) for ep in floors for f in ep]
    rewards = tied_rewards(flat, [0] * len(flat), cfg, flat_floors)
    out, at = [], 0
    for ep in episodes:
        out.append(rewards[at : at + len(ep)])
        at += len(ep)
    return out


def episode_advantages(
    episodes: Sequence[Sequence[Priced]],
    cfg: RewardConfig | None = None,
    *,
    gamma: float = 0.4,
    form: str = "best_later",
    baseline: str = "loo",
    scale: str = "none",
) -> list[list[float]]:
    """Per turn, the advantage of one group's episodes from their `Priced` turns:
    `episode_rewards`, then `turn_returns` per episode, then `turn_advantages`. Copies must be
    priced already (`price_copies`, after `share_identical`). With one turn per episode and
    baseline "group" this equals `rollout_advantages` of the same responses in one group.
    Returns the same shape as `episodes`. Raises ValueError as those functions do."""
    rewards = episode_rewards(episodes, cfg)
    return turn_advantages([turn_returns(r, gamma, form) for r in rewards], baseline, scale)


def copied_turns(keys: Sequence[Hashable | None], shown: Collection[Hashable] = ()) -> list[bool]:
    """Which turns of one episode are copies: True where a turn's code key equals one in `shown`
    (the code its prompt showed) or an earlier turn's key.

    Args:
        keys: per turn, a key of its code that is equal exactly for the same program
            (`normalized_code(code)` or a hash of it), None for a turn without code (a parse
            failure: never a copy, and nothing to copy).
        shown: the keys of the code shown in the episode's first prompt (its exemplars).

    Returns:
        One bool per turn.
    """
    seen = set(shown)
    out = []
    for key in keys:
        out.append(key is not None and key in seen)
        if key is not None:
            seen.add(key)
    return out


def turn_shown(codes: Sequence[str | None], shown: Iterable[str] = ()) -> list[list[str]]:
    """Per turn of one episode, the code it must not copy: the exemplars' code `shown` in the
    first prompt, then every earlier turn's code (None: no code). Pass it to `price` as `shown`."""
    before = list(shown)
    out = []
    for code in codes:
        out.append(list(before))
        if code is not None:
            before.append(code)
    return out


def price_copies(priced: Sequence[Priced], copied: Sequence[bool], cfg: RewardConfig | None = None) -> list[Priced]:
    """`priced` with every copied turn (`copied_turns`) that `price` would have paid as correct
    (a speedup set, or a bad speedup) priced as `price` prices a copy of a shown exemplar:
    Priced(cfg.failure_value, "copy"), trainable. Other turns keep their price (a failure stays
    the failure it is). Apply it after `share_identical`, which would otherwise give a copy the
    price of the same program in another episode. Raises ValueError for lengths that differ."""
    if len(priced) != len(copied):
        raise ValueError(f"{len(priced)} prices but {len(copied)} copy flags")
    cfg = cfg or RewardConfig()
    fail = cfg.failure_value
    return [
        Priced(fail, "copy") if c and (p.correct or p.reason == "bad_speedup") else p for p, c in zip(priced, copied)
    ]


def stops(priced: Priced, best_shown: float | None, margin: float | None) -> bool:
    """Whether an episode ends after this turn, before its last: the turn is correct and its paid
    speedup (`Priced.speedup`, ×) is at least `margin` × `best_shown` (the best speedup its
    first prompt showed, ×; None or no exemplars: the reference, 1.0×). `margin` None: never
    stop early. Raises ValueError for a margin that is not a finite number > 0."""
    if margin is None:
        return False
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin > 0):
        raise ValueError(f"margin must be a finite number > 0 or None, got {margin!r}")
    if not priced.correct:
        return False
    return priced.speedup >= margin * (best_shown if best_shown is not None else 1.0)  # type: ignore[operator]
