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
