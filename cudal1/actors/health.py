"""What ends a run because its infrastructure, not its config or a bug, is gone. Ray-free, so the
jobs' start-up (`cudal1.launch.infrastructure_errors`) can name it without importing Ray."""


class RewardSourceLost(RuntimeError):
    """The pool that computes the run's rewards cannot produce them any more: no alive node can
    hold one of its actors, or its last `PoolSpec.lost_after_results()` results were all the harness's
    failures. Every later result would be masked out of training, so a run that went on would
    train on nothing and report success; the job stops instead (and exports nothing more)."""


class WeightSyncBroken(RuntimeError):
    """The rollout engines sample from other weights than the learner trains: on on-policy steps
    the mean absolute engine-vs-learner log-probability gap stayed above its limit after a
    re-sync (`cudal1.pipeline.health.SyncWatch`). Training on would fit samples from a policy the
    learner does not hold; the job stops with the figures."""


class ActorLost(RuntimeError):
    """An actor of the run died during a call (its process killed, its node gone).

    Attributes:
        label: the role and the actor ("rollout engine 1 (actor 3f2a9c01)", "learner rank 1 (...)").
        what: the call it was in ("generate_stream", "grpo_step", "weight sync").
    """

    def __init__(self, label: str, what: str, detail: str = "") -> None:
        super().__init__(f"{label} died during {what}{': ' + detail if detail else ''}")
        self.label, self.what = label, what


class ActorStalled(TimeoutError):
    """Actors of the run gave no answer to a call within its timeout (a hung collective, a hung
    engine). Attributes: labels (the role and actor of each one still silent), what, timeout_s."""

    def __init__(self, labels: list[str], what: str, timeout_s: float) -> None:
        super().__init__(f"{', '.join(labels)}: no answer to {what} within {timeout_s:.0f} s")
        self.labels, self.what, self.timeout_s = list(labels), what, timeout_s


class LearnerRankLost(ActorLost):
    """A rank of the learner group died. The group's other ranks may be waiting in a collective for
    it: the group cannot go on, and the run stops (its last checkpoint is kept: `resume=true`
    continues from it once the rank's node is back)."""
