"""Checks on a run's health that decide whether it may go on: the weight sync, step by step, and
how stale a trained rollout may be (`too_stale`).

`SyncWatch` reads the learner's measured gap between the rollout engines' log-probabilities and
its own on the tokens it trains (`learner/engine_abs_log_ratio`, nats per token: the mean of
|log p_learner − log p_engine|, `cudal1.training.learner.GRPOLearner._engine_mismatch`). On an
on-policy step (the rollouts were sampled with the version the learner then held) that gap is
only numerical: the two engines' precisions and kernels (3e-7 with the transformers engine on the
CPU, docs/training.md). A broken or partial weight sync shows as a gap far above that: a step
over the limit asks for one re-sync; the next on-policy step over the limit again stops the run
(`cudal1.actors.health.WeightSyncBroken`). Off-policy steps (async mode) carry the policy's own
drift in the gap and are not judged.
"""

from __future__ import annotations

import dataclasses
import logging
import math

from cudal1.actors.health import WeightSyncBroken

log = logging.getLogger(__name__)

GAP_METRIC = "learner/engine_abs_log_ratio"


@dataclasses.dataclass
class SyncWatch:
    """The weight-sync check of one RL stage.

    Attributes:
        limit: the largest mean absolute gap (nats per token) an on-policy step may show; None
            turns the check off.
        resynced_at: the step whose gap asked for the re-sync that is now being tested (None: none).
    """

    limit: float | None
    resynced_at: int | None = None
    last_gap: float | None = None

    def __post_init__(self) -> None:
        if self.limit is not None and not (math.isfinite(self.limit) and self.limit > 0):
            raise ValueError(f"the weight-sync gap limit must be a positive number of nats, got {self.limit}")

    def check(self, step: int, gap: float | None, staleness: float) -> bool:
        """Judge one step's gap. Returns True when the weights must be synced again now.

        Args:
            step: the step's number (for messages).
            gap: its `GAP_METRIC` (None: no update was made, or no engine log-probabilities).
            staleness: learner version minus the rollouts' oldest version (0: on-policy).

        Raises:
            WeightSyncBroken: an on-policy gap above `limit` right after a re-sync, or a gap that
                is not a finite number.
        """
        if self.limit is None or gap is None or staleness != 0:
            return False
        if not math.isfinite(gap):
            raise WeightSyncBroken(f"step {step}: the engine-vs-learner log-probability gap is {gap}")
        previous, self.last_gap = self.last_gap, gap
        if gap <= self.limit:
            if self.resynced_at is not None:
                log.info("step %d: weight sync checked again after the re-sync: gap %.3g nats/token", step, gap)
            self.resynced_at = None
            return False
        if self.resynced_at is None:
            log.warning(
                "step %d: the engines' log-probabilities are %.3g nats/token from the learner's (limit %.3g): "
                "syncing the weights again",
                step,
                gap,
                self.limit,
            )
            self.resynced_at = step
            return True
        raise WeightSyncBroken(
            f"step {step}: the engines sample from other weights than the learner's: the mean absolute "
            f"log-probability gap is {gap:.3g} nats/token (limit {self.limit:.3g}; {previous:.3g} at step "
            f"{self.resynced_at}, which asked for a re-sync): a broken weight sync (check rollout.weight_sync "
            "and the engines' logs)"
        )


def too_stale(versions: list[int], learner_version: int, max_staleness: int) -> list[bool]:
    """For each rollout's policy version, whether it is older than `max_staleness` learner
    versions (optimizer steps) behind `learner_version`: such a rollout is recorded but never
    trained on. Raises ValueError for max_staleness < 0."""
    if max_staleness < 0:
        raise ValueError(f"max_staleness must be >= 0, got {max_staleness}")
    return [learner_version - v > max_staleness for v in versions]
