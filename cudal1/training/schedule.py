"""Learning-rate schedules over a stage's units (pure: no torch).

SFT on the embedded default memorizes four answers at a constant 5e-3 with Adam, and the loss
spikes now and then (0.012 -> 0.17 -> 0.014 within 50 epochs): where the last spike lands decides
whether the stage ends with a policy that reproduces its answers at temperature 1 or one whose
samples derail after a few dozen tokens. A schedule that decays the rate to a small share of
itself by the end makes the last epochs settle instead.
"""

from __future__ import annotations

import math

LR_SCHEDULES = ("constant", "cosine")
"""The schedules `lr_at` knows."""


def lr_at(base: float, unit: int, total: int, schedule: str = "cosine", min_ratio: float = 0.05) -> float:
    """The learning rate for unit `unit` (0-based: an epoch) of `total`.

    "constant": `base`. "cosine" (Loshchilov and Hutter, SGDR, ICLR 2017, without restarts):
    base × (m + (1 - m) × (1 + cos(pi × unit / total)) / 2) with m = `min_ratio`, so unit 0 runs at
    `base` and the rate falls smoothly toward m × base (the last unit runs just above it). A
    unit at or past `total` gets m × base.

    Raises ValueError for an unknown schedule, `total` < 1, `unit` < 0, `base` <= 0 or
    `min_ratio` outside [0, 1]."""
    if schedule not in LR_SCHEDULES:
        raise ValueError(f"schedule {schedule!r} is not one of {', '.join(LR_SCHEDULES)}")
    if total < 1 or unit < 0:
        raise ValueError(f"unit {unit} of {total}: need total >= 1 and unit >= 0")
    if not base > 0 or not 0 <= min_ratio <= 1:
        raise ValueError(f"base {base} must be > 0 and min_ratio {min_ratio} in [0, 1]")
    if schedule == "constant":
        return base
    progress = min(unit, total) / total
    return base * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))
